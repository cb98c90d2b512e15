// Retiring a migration claim, through one function: the Job's cleanup TTL first (when the Job passes the claim's
// fixed match), then ONE status patch that clears the claim, writes the record it leaves and stages the release
// it owes (the shared retirement rule decides which), then the release, then clearing the staged release.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import type { ActiveOperation, PendingLockRelease } from '../../shared/api/shapes.js';
import { OWNER_KIND } from '../../shared/job/metadata.js';
import { CLEANUP_TTL_SECONDS, match } from '../../shared/jobclaim.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import { retirement, type Disposition } from '../../shared/lifecycle/retirement.js';
import type { MigrationPass } from './context.js';
import { leaseTaken } from './fingerprint.js';
import { writeMigrationStatus, type Report } from './status.js';

export interface ClaimRetirement {
  /** Why the claim goes: discarded, accounted for by its own result, or a run nobody accounted for. */
  disposition: Disposition;
  /** A reason word for logs and Events. */
  why: string;
  /** Writes the record the claim leaves into the status being written (the claim is already gone from it). */
  record?: (status: PtahMigrationStatus) => void;
  report?: Report;
  /** For a run nobody accounted for: dispatchedApplyMayStillWrite, asked before this write. */
  mayStillWrite?: boolean;
  /** The Job under the claim's name, when the caller already read it. */
  job?: V1Job;
}

export class SecondReleaseError extends Error {
  override name = 'SecondReleaseError';
}

/** The release a retiring claim owes, when it recorded everything a release needs. */
function owedRelease(claim: ActiveOperation): PendingLockRelease | undefined {
  const { coordinationDigest, leaseDurationSeconds, leaseEpoch } = claim;
  if (!coordinationDigest || !leaseDurationSeconds || !leaseEpoch || !leaseTaken(claim)) return undefined;
  return { coordinationDigest, operationID: claim.id, leaseDurationSeconds, leaseEpoch };
}

export async function retireMigrationClaim(pass: MigrationPass, retire: ClaimRetirement): Promise<void> {
  const claim = pass.claim;
  if (!claim) throw new Error('retireMigrationClaim: there is no claim to retire');
  const operation = migrationOperation(claim.type);

  await giveJobCleanupTtl(pass, claim, retire.job);

  const release = retirement({
    claim: { mutating: operation.mutating, servesProof: false, locked: operation.holdsRealm && leaseTaken(claim), proofOutstanding: false },
    disposition: retire.disposition,
    recordHoldsRealm: false,
    mayStillWrite: retire.mayStillWrite ?? false,
    endsProof: false,
  });
  const next: PtahMigrationStatus = { ...pass.status, activeOperation: undefined };
  retire.record?.(next);
  const owed = release === 'claim' ? owedRelease(claim) : undefined;
  if (owed) {
    if (pass.status.pendingLockRelease) {
      throw new SecondReleaseError(`claim ${claim.id} owes a release while the release of ${pass.status.pendingLockRelease.operationID} is still owed`);
    }
    next.pendingLockRelease = owed;
  }
  await writeMigrationStatus(pass, next, retire.report);
  pass.deps.log.info({ operationID: claim.id, type: claim.type, disposition: retire.disposition, why: retire.why, release: owed ? 'staged' : 'none' }, 'claim retired');
  if (owed) await completeMigrationPendingLockRelease(pass);
}

/**
 * Performs the release status.pendingLockRelease records, then clears the record. A failed release stays
 * recorded; the top of the next pass tries again. Returns whether a release was owed.
 */
export async function completeMigrationPendingLockRelease(pass: MigrationPass): Promise<boolean> {
  const owed = pass.status.pendingLockRelease;
  if (!owed) return false;
  try {
    await pass.lock.release({
      coordinationDigest: owed.coordinationDigest,
      holder: { resourceUid: pass.uid, operationId: owed.operationID },
      epoch: owed.leaseEpoch,
    });
  } catch (err) {
    pass.deps.log.warn({ err, operationID: owed.operationID }, 'the owed realm release failed; the next pass retries it');
    pass.event('Warning', 'TargetLockReleaseOwed', `the realm Lease held for operation ${owed.operationID} could not be released yet: ${(err as Error).message}`);
    return true;
  }
  await writeMigrationStatus(pass, { ...pass.status, pendingLockRelease: undefined });
  return true;
}

/**
 * The one change the manager makes to a Job it created: ttlSecondsAfterFinished, on the Job the claim recorded,
 * and only when the Job passes the claim's fixed match (the match the controller-write webhook applies).
 */
export async function giveJobCleanupTtl(pass: MigrationPass, claim: ActiveOperation, known?: V1Job): Promise<void> {
  if (!claim.jobUID || !claim.admissionSnapshot) return;
  const job = known ?? (await pass.readJob(claim.jobName));
  if (!job || job.metadata?.uid !== claim.jobUID || job.spec?.ttlSecondsAfterFinished !== undefined) return;
  const binding = pass.status.executionBinding;
  const verdict = match(job, claim, { kind: 'claim-fixed', owner: { kind: OWNER_KIND.migration, name: pass.name, namespace: pass.namespace, uid: pass.uid } },
    binding && { epoch: binding.epoch, controllerStateVersion: binding.controllerStateVersion });
  if (!verdict.ok) {
    pass.event('Warning', 'MigrationJobCleanupDeferred', `Job ${claim.jobName} is not given its cleanup TTL: ${verdict.reason}`);
    return;
  }
  await pass.deps.client.patch(pass.jobRef(claim.jobName), [
    { op: 'test', path: '/metadata/uid', value: claim.jobUID },
    { op: 'add', path: '/spec/ttlSecondsAfterFinished', value: CLEANUP_TTL_SECONDS },
  ], 'json');
}
