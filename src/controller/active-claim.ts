// The claim in flight, as both families drive it (the seed's reconcileActive and reconcileActiveMigration): a
// dispatched Apply's Lease is renewed on every pass; a claim whose Job does not exist yet goes through the shared
// dispatch sequence; a Job found under the reserved name with no UID recorded is adopted once jobclaim.match holds
// it to the claim; a dispatched claim is supervised on every pass (rebound by UID, its Job held to the claim) and
// harvested when its Job is terminal. A mutating claim's missing, replaced or foreign Job is an unknown outcome and
// is never created again; a reading's is read again. Each family supplies only what differs (ActiveClaimFamily).
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation } from '../shared/api/shapes.js';
import { DispatchRefused, mayHaveDispatched } from '../shared/lifecycle/dispatch.js';
import type { OperationAnswers } from '../shared/lifecycle/operations.js';
import { superviseEveryMs } from '../shared/lifecycle/supervision.js';
import { renewDispatchedApplyLock } from './dispatch-family.js';
import { isJobTerminal } from './evidence.js';
import { endPass, type OwnerPass, type OwnerResource, type PassEnd } from './pass.js';
import type { Report } from './status.js';

/** A claim's Job held to its claim: to its rebuild while the inputs hold, to what the claim fixes once they moved. */
export type HeldJob<Plan> = { ok: true; inputsHold: true; plan?: Plan } | { ok: true; inputsHold: false; why: string } | { ok: false; why: string };

/** A claim the driver refused is a defect no retry can mend: looked at again this often, in case a person or a newer manager repairs it. */
export const REFUSED_CLAIM_RETRY_MS = 60_000;

export interface ActiveClaimFamily<P extends string, Plan> {
  operation: OperationAnswers;
  publish(report: Report<P>): Promise<unknown>;
  writeClaimFields(fields: Partial<ActiveOperation>): Promise<void>;
  /** Ahead of everything else (a schema's proof reading renews the proof's Lease and waits out the Apply's Pods). */
  first?(): Promise<PassEnd | undefined>;
  /** No Job was found and the next step may create one: the last point at which the claim may end another way. */
  beforeCreate?(): Promise<PassEnd | undefined>;
  /** The shared dispatch sequence, run for this family's claim; DispatchRefused reports the claim Blocked. */
  dispatch(): Promise<PassEnd>;
  /** A refusal the family settles itself (a schema being deleted ends its proof unread); undefined: Blocked. */
  refused?(e: Error): Promise<PassEnd | undefined>;
  holdJob(job: V1Job): Promise<HeldJob<Plan>>;
  /** Each supervision pass, once the Job is held (an ordinary schema Plan renews the realm it reads under). */
  supervising?(): Promise<PassEnd | undefined>;
  running: Report<P>;
  /** Records an Apply's outcome unknown: it is never run again. */
  finishUncertain(uncertain: { reason: string; message: string; job?: V1Job }): Promise<void>;
  /** What the family owes after an unknown outcome, for the pass's log (a migration's unresolved run, a schema's proof). */
  uncertainOwes: string;
  retryReading(why: string): Promise<PassEnd>;
  /** Retires a terminal reading whose inputs moved: its result is stale and not read. */
  discardStaleReading(job: V1Job, why: string): Promise<void>;
  harvest(job: V1Job, plan: Plan | undefined): Promise<PassEnd>;
}

export async function reconcileActiveClaim<P extends string, Plan>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, family: ActiveClaimFamily<P, Plan>): Promise<PassEnd> {
  const { operation } = family;
  if (!operation.known) {
    // A type a newer operator wrote: not mutating and not read-only, so nothing here may act on it.
    await family.publish({ phase: 'Blocked' as P, reason: 'UnknownOperation', message: `the claim in flight is a ${JSON.stringify(claim.type)} operation, which this manager does not know; a newer manager must finish it` });
    return endPass('unknown operation type left alone', REFUSED_CLAIM_RETRY_MS);
  }
  const first = await family.first?.();
  if (first) return first;
  if (operation.mutating && mayHaveDispatched(claim)) {
    const lost = await renewDispatchedApplyLock(pass, claim, (fields) => family.writeClaimFields(fields));
    if (lost) return endPass(lost);
  }
  if (claim.jobUID) return superviseJob(pass, claim, family);
  const found = await pass.readJob(claim.jobName);
  if (found) return adoptJob(pass, claim, found, family);
  const other = await family.beforeCreate?.();
  if (other) return other;
  if (operation.mutating && claim.dispatchStarted === true) {
    // Marked, with no Job: the create may have reached the API server and its Job been collected since.
    await family.finishUncertain({ reason: 'JobMissing', message: `Job ${claim.jobName} may have been created (the dispatch marker is written) but does not exist; it is never created again` });
    return endPass(`dispatched Job missing: ${family.uncertainOwes}`);
  }
  const wait = claim.retryNotBefore ? Date.parse(claim.retryNotBefore) - pass.now().getTime() : 0;
  if (wait > 0) return endPass('waiting to retry the reading', wait);
  return dispatchClaim(pass, claim, family);
}

async function dispatchClaim<P extends string, Plan>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, family: ActiveClaimFamily<P, Plan>): Promise<PassEnd> {
  try {
    return await family.dispatch();
  } catch (e) {
    const settled = e instanceof Error ? await family.refused?.(e) : undefined;
    if (settled) return settled;
    if (!(e instanceof DispatchRefused)) throw e;
    const message = `operation ${claim.id} (${claim.type}) cannot be dispatched: ${e.message}`;
    await family.publish({ phase: 'Blocked' as P, reason: 'ClaimRefused', message });
    pass.event('Warning', 'ClaimRefused', message, 'Dispatch');
    return endPass(e.message, REFUSED_CLAIM_RETRY_MS);
  }
}

/** Lost Job, replaced Job, or a Job its claim does not recognise: Unknown for an Apply, a new attempt for a reading. */
async function settleLostJob<P extends string, Plan>(family: ActiveClaimFamily<P, Plan>, reason: string, message: string): Promise<PassEnd> {
  if (!family.operation.mutating) return family.retryReading(message);
  await family.finishUncertain({ reason, message });
  return endPass(`${reason}: ${family.uncertainOwes}`);
}

/**
 * A Job found under the reserved name with no UID recorded (a pass stopped between the create and the UID write):
 * held to the claim as supervision holds it, then adopted by UID. A suspension or spec edit landing in that window
 * does not retire a running Apply: its Lease keeps being renewed, and the terminal pass settles it without reading
 * its result.
 */
async function adoptJob<P extends string, Plan>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, job: V1Job, family: ActiveClaimFamily<P, Plan>): Promise<PassEnd> {
  const held = await family.holdJob(job);
  if (!held.ok) return settleLostJob(family, 'JobIntentMismatch', `Job ${claim.jobName} is not the claim's: ${held.why}`);
  await family.writeClaimFields({ jobUID: job.metadata!.uid!, ...(family.operation.mutating ? { dispatchStarted: true } : {}) });
  const moved = held.inputsHold ? '' : `; its inputs moved (${held.why}), so its result will not be read`;
  pass.event('Normal', 'OperationAdopted', `Job ${claim.jobName} (${claim.type}) was adopted by UID${moved}`, 'Dispatch');
  return endPass('Job adopted');
}

async function superviseJob<P extends string, Plan>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, family: ActiveClaimFamily<P, Plan>): Promise<PassEnd> {
  const job = await pass.readJob(claim.jobName);
  if (!job) return settleLostJob(family, 'JobMissing', `Job ${claim.jobName} (uid ${claim.jobUID}) no longer exists`);
  if (job.metadata?.uid !== claim.jobUID) return settleLostJob(family, 'JobReplaced', `Job ${claim.jobName} is not the Job the claim recorded (uid ${claim.jobUID})`);
  const held = await family.holdJob(job);
  if (!held.ok) return settleLostJob(family, 'JobIntentMismatch', `Job ${claim.jobName} is not the claim's: ${held.why}`);
  const supervising = await family.supervising?.();
  if (supervising) return supervising;
  if (!isJobTerminal(job)) {
    await family.publish(family.running);
    return endPass('Job running', superviseEveryMs(family.operation));
  }
  if (held.inputsHold) return family.harvest(job, held.plan);
  // The claim cannot rebuild its Job any more: its result is not read. An Apply is Unknown; a reading is stale.
  if (!family.operation.mutating) {
    await family.discardStaleReading(job, held.why);
    return endPass('stale reading discarded');
  }
  await family.finishUncertain({ reason: 'InputsChanged', message: `the run's result is not read: ${held.why}`, job });
  return endPass(`Apply under moved inputs: ${family.uncertainOwes}`);
}
