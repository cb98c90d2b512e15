// What retiring a claim owes outside its status write, for both families: the realm release a claim staged as
// status.pendingLockRelease (performed after the write, retried at the top of every pass until it succeeds), and
// the cleanup TTL of the Job the claim recorded.
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation, PendingLockRelease } from '../shared/api/shapes.js';
import { CLEANUP_TTL_SECONDS, type JobClaim } from '../shared/jobclaim.js';
import { claimFixedVerdict } from './claim-job.js';
import { leaseTaken } from './claim-values.js';
import type { OwnerPass, OwnerResource } from './pass.js';

type AnyPass = OwnerPass<OwnerResource & { status?: { pendingLockRelease?: PendingLockRelease } }>;

/** The release a retiring claim owes, when it recorded everything a release needs. */
export function owedRelease(claim: ActiveOperation): PendingLockRelease | undefined {
  const { coordinationDigest, leaseDurationSeconds, leaseEpoch } = claim;
  if (!coordinationDigest || !leaseDurationSeconds || !leaseEpoch || !leaseTaken(claim)) return undefined;
  return { coordinationDigest, operationID: claim.id, leaseDurationSeconds, leaseEpoch };
}

/** A retiring write owes a release while an earlier one is still owed: a defect, never a state to write. */
export class SecondReleaseError extends Error {
  override name = 'SecondReleaseError';
}

/** Stages `owed` in the status about to be written (`next`), refusing a second release while `current` is owed. */
export function stageRelease(current: PendingLockRelease | undefined, next: { pendingLockRelease?: PendingLockRelease }, owed: PendingLockRelease | undefined): void {
  if (!owed) return;
  if (current) throw new SecondReleaseError(`a release for ${owed.operationID} is owed while the release of ${current.operationID} is still owed`);
  next.pendingLockRelease = owed;
}

/** A release that failed: it stays recorded, and the pass ends in this error so its key is retried with backoff. */
export class ReleaseOwedError extends Error {
  override name = 'ReleaseOwedError';
}

/**
 * Performs the release status.pendingLockRelease records, then clears the record. Returns whether a release was
 * owed. A failed release stays recorded and throws ReleaseOwedError: the work queue then retries the key with its
 * per-key exponential backoff, so an API server that keeps refusing is not asked (and no Event written) on every
 * millisecond, and the top of the next pass tries again.
 */
export async function completePendingLockRelease(pass: AnyPass, clearRecord: () => Promise<void>): Promise<boolean> {
  const owed = pass.obj.status?.pendingLockRelease;
  if (!owed) return false;
  try {
    await pass.lock.release({
      coordinationDigest: owed.coordinationDigest,
      holder: { resourceUid: pass.uid, operationId: owed.operationID },
      epoch: owed.leaseEpoch,
    });
  } catch (err) {
    const why = `the realm Lease held for operation ${owed.operationID} could not be released yet: ${(err as Error).message}`;
    pass.event('Warning', 'TargetLockReleaseOwed', why);
    throw new ReleaseOwedError(`${why}; it stays recorded in status.pendingLockRelease and is retried with backoff`, { cause: err });
  }
  await clearRecord();
  return true;
}

/**
 * The one change the manager makes to a Job it created: ttlSecondsAfterFinished, on the Job the claim recorded,
 * and only when the Job passes the claim's fixed match (the match the controller-write webhook applies).
 * `retiredEpoch`: the claim belongs to an epoch a rotation retired (a schema's pendingBindingRetirement).
 */
export async function giveJobCleanupTtl(pass: AnyPass, claim: JobClaim, known?: V1Job, options: { retiredEpoch?: boolean } = {}): Promise<void> {
  if (!claim.jobUID || !claim.admissionSnapshot) return;
  const job = known ?? (await pass.readJob(claim.jobName));
  if (!job || job.metadata?.uid !== claim.jobUID || job.spec?.ttlSecondsAfterFinished !== undefined) return;
  // A Job of an epoch a rotation retired is held to that epoch alone (as the webhook holds it, naming the record).
  const verdict = claimFixedVerdict(pass, claim, job, options);
  if (!verdict.ok) {
    pass.event('Warning', 'JobCleanupDeferred', `Job ${claim.jobName} is not given its cleanup TTL: ${verdict.reason}`);
    return;
  }
  await pass.deps.client.patch(pass.jobRef(claim.jobName), [
    { op: 'test', path: '/metadata/uid', value: claim.jobUID },
    { op: 'add', path: '/spec/ttlSecondsAfterFinished', value: CLEANUP_TTL_SECONDS },
  ], 'json');
}
