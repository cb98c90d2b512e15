// Retiring a migration claim, through one function: the Job's cleanup TTL first (when the Job passes the claim's
// fixed match), then ONE status patch that clears the claim, writes the record it leaves and stages the release it
// owes (the shared retirement rule decides which), then the release, then clearing the staged release.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import { retirement, type Disposition } from '../../shared/lifecycle/retirement.js';
import type { MigrationPass } from './context.js';
import { leaseTaken } from '../claim-values.js';
import { releaseRunEvidence } from '../evidence.js';
import { countJobOutcome } from '../operator-metrics.js';
import { completePendingLockRelease, giveJobCleanupTtl, owedRelease, stageRelease } from '../release.js';
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
  stageRelease(pass.status.pendingLockRelease, next, owed);
  await writeMigrationStatus(pass, next, retire.report);
  countJobOutcome(pass.kind, claim, retire.why);
  pass.deps.log.info({ operationID: claim.id, type: claim.type, disposition: retire.disposition, why: retire.why, release: owed ? 'staged' : 'none' }, 'claim retired');
  if (owed) await completeMigrationPendingLockRelease(pass);
  await releaseRunEvidence(pass);
}

/** Performs the owed release, then clears its record (the seed's completeMigrationPendingLockRelease). */
export function completeMigrationPendingLockRelease(pass: MigrationPass): Promise<boolean> {
  return completePendingLockRelease(pass, () => writeMigrationStatus(pass, { ...pass.status, pendingLockRelease: undefined }));
}
