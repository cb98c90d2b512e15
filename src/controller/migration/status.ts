// Writing a PtahMigration's status and metadata. Every status write is a PUT of the status subresource with the
// resourceVersion the pass last saw, so a write made on a stale reading fails (409) instead of clobbering, and
// the pass is retried from a fresh read. Phase and conditions are a summary a person reads; no decision reads
// them back.
import type { MigrationPhase, PtahMigration, PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import type { ActiveOperation, Condition } from '../../shared/api/shapes.js';
import type { MigrationPass } from './context.js';

/** What a pass tells a person: the phase, and the reason and message every condition is derived from. */
export interface Report {
  phase: MigrationPhase;
  reason: string;
  message: string;
}

const PROGRESSING: ReadonlySet<MigrationPhase> = new Set(['Pending', 'Reading', 'Planning', 'Applying', 'VerifyingHistory']);

/** `list` with the condition of `type` set; its transition time moves only when its status does. */
export function withCondition(list: readonly Condition[] | undefined, type: string, status: Condition['status'], reason: string, message: string, generation: number, now: string): Condition[] {
  const previous = list?.find((c) => c.type === type);
  const next: Condition = {
    type,
    status,
    reason,
    message,
    lastTransitionTime: previous && previous.status === status ? previous.lastTransitionTime : now,
    observedGeneration: generation,
  };
  return [...(list ?? []).filter((c) => c.type !== type), next];
}

/** The conditions a report implies: Ready, Progressing, Blocked and ApprovalRequired all follow the phase. */
function conditionsFor(status: PtahMigrationStatus, report: Report, generation: number, now: string): Condition[] {
  const { phase, reason, message } = report;
  let list = withCondition(status.conditions, 'Ready', phase === 'InSync' ? 'True' : 'False', reason, message, generation, now);
  list = withCondition(list, 'Progressing', PROGRESSING.has(phase) ? 'True' : 'False', reason, message, generation, now);
  list = withCondition(list, 'Blocked', phase === 'Blocked' ? 'True' : 'False', reason, message, generation, now);
  return withCondition(list, 'ApprovalRequired', phase === 'AwaitingApproval' ? 'True' : 'False', reason, message, generation, now);
}

/** Whether writing `report` would change what the status says. */
function reportChanges(status: PtahMigrationStatus, report: Report, generation: number): boolean {
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  return status.phase !== report.phase || ready?.reason !== report.reason || ready?.message !== report.message || ready?.observedGeneration !== generation;
}

/**
 * Writes `next` as the status (with `report`'s phase and conditions when given). Returns once the API server
 * stored it; the pass continues from the stored object. status.observedGeneration is whatever `next` says: it
 * names the generation whose spec the status's reading reflects, and only the writes that establish that set it.
 */
export async function writeMigrationStatus(pass: MigrationPass, next: PtahMigrationStatus, report?: Report): Promise<void> {
  const now = pass.nowIso();
  const status: PtahMigrationStatus = { ...next };
  if (report) {
    status.phase = report.phase;
    status.conditions = conditionsFor(next, report, pass.generation, now);
  }
  pass.m = await pass.deps.client.update<PtahMigration>({ ...pass.m, status }, { subresource: 'status' });
}

/** Writes the report alone, only when it changes something. Returns whether it wrote. */
export async function publishReport(pass: MigrationPass, report: Report): Promise<boolean> {
  if (!reportChanges(pass.status, report, pass.generation)) return false;
  await writeMigrationStatus(pass, pass.status, report);
  return true;
}

/** Status with one condition set (ArtifactVerified, which the artifact step owns). */
export function statusWithCondition(pass: MigrationPass, status: PtahMigrationStatus, type: string, value: Condition['status'], reason: string, message: string): PtahMigrationStatus {
  return { ...status, conditions: withCondition(status.conditions, type, value, reason, message, pass.generation, pass.nowIso()) };
}

export class ClaimMovedError extends Error {
  override name = 'ClaimMovedError';
}

/** Writes fields of the claim in flight; refused when the status no longer holds that claim. */
export async function writeClaimFields(pass: MigrationPass, claimId: string, fields: Partial<ActiveOperation>, report?: Report): Promise<void> {
  const claim = pass.claim;
  if (!claim || claim.id !== claimId) throw new ClaimMovedError(`the claim ${claimId} is no longer in status.activeOperation`);
  await writeMigrationStatus(pass, { ...pass.status, activeOperation: { ...claim, ...fields } }, report);
}

/** A merge patch of one annotation (null removes it), guarded by the resourceVersion the pass last saw. */
export async function patchAnnotation(pass: MigrationPass, key: string, value: string | null): Promise<void> {
  pass.m = await pass.deps.client.patch<PtahMigration>(
    pass.ref(),
    { metadata: { resourceVersion: pass.m.metadata.resourceVersion, annotations: { [key]: value } } },
    'merge',
  );
}
