// Writing a resource's status, for both families. Every status write is a PUT of the status subresource with the
// resourceVersion the pass last saw, so a write made on a stale reading fails (409) instead of clobbering, and the
// pass is retried from a fresh read. Phase and conditions are a summary a person reads; no decision reads them.
import type { ActiveOperation, Condition } from '../shared/api/shapes.js';
import { withCondition } from './conditions.js';
import type { OwnerPass, OwnerResource } from './pass.js';

/** What a pass tells a person: the phase, and the reason and message every summary condition is derived from. */
export interface Report<P extends string = string> {
  phase: P;
  reason: string;
  message: string;
}

/** A family's phases as the summary conditions read them. */
export interface PhaseSummary<P extends string> {
  /** Phases in which work is under way (Progressing=True). */
  progressing: ReadonlySet<P>;
}

type StatusOf<R extends OwnerResource> = NonNullable<R['status']> & { phase?: string; conditions?: Condition[] };

/** The conditions a report implies: Ready, Progressing, Blocked and ApprovalRequired all follow the phase. */
function conditionsFor<P extends string>(list: readonly Condition[] | undefined, report: Report<P>, summary: PhaseSummary<P>, generation: number, now: string): Condition[] {
  const { phase, reason, message } = report;
  let next = withCondition(list, 'Ready', phase === 'InSync' ? 'True' : 'False', reason, message, generation, now);
  next = withCondition(next, 'Progressing', summary.progressing.has(phase) ? 'True' : 'False', reason, message, generation, now);
  next = withCondition(next, 'Blocked', phase === 'Blocked' ? 'True' : 'False', reason, message, generation, now);
  return withCondition(next, 'ApprovalRequired', phase === 'AwaitingApproval' ? 'True' : 'False', reason, message, generation, now);
}

/** Whether writing `report` would change what the status says. */
export function reportChanges(status: { phase?: string; conditions?: Condition[] }, report: Report, generation: number): boolean {
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  return status.phase !== report.phase || ready?.reason !== report.reason || ready?.message !== report.message || ready?.observedGeneration !== generation;
}

/**
 * Writes `next` as the status (with `report`'s phase and conditions when given). Returns once the API server
 * stored it; the pass continues from the stored object. status.observedGeneration is whatever `next` says.
 */
export async function writeStatus<R extends OwnerResource, P extends string>(pass: OwnerPass<R>, next: StatusOf<R>, summary: PhaseSummary<P>, report?: Report<P>): Promise<void> {
  const status: StatusOf<R> = { ...next };
  if (report) {
    status.phase = report.phase;
    status.conditions = conditionsFor(next.conditions, report, summary, pass.generation, pass.nowIso());
  }
  pass.obj = await pass.deps.client.update<R>({ ...pass.obj, status }, { subresource: 'status' });
}

/** One condition set in `status` (a condition a step owns, such as ArtifactVerified). */
export function statusWithCondition<S extends { conditions?: Condition[] }>(pass: OwnerPass<OwnerResource>, status: S, type: string, value: Condition['status'], reason: string, message: string): S {
  return { ...status, conditions: withCondition(status.conditions, type, value, reason, message, pass.generation, pass.nowIso()) };
}

export class ClaimMovedError extends Error {
  override name = 'ClaimMovedError';
}

/** The claim in flight with `fields` written over it; refused when the status no longer holds that claim. */
export function claimWith(pass: OwnerPass<OwnerResource>, claimId: string, fields: Partial<ActiveOperation>): ActiveOperation {
  const claim = pass.claim;
  if (!claim || claim.id !== claimId) throw new ClaimMovedError(`the claim ${claimId} is no longer in status.activeOperation`);
  return { ...claim, ...fields };
}
