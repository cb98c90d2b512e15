// Retiring a schema claim, through one function (the seed's retireClaim): the Job's cleanup TTL first (when the Job
// passes the claim's fixed match), then ONE status patch that clears the claim, writes the record it leaves and
// stages the release it owes, then the release. A schema holds the realm until its account is settled: an Apply's
// record (the pending observation) keeps it, and only the write that settles the proof hands the Apply's epoch back.
import type { V1Job } from '@kubernetes/client-node';
import type { PendingObservation, PtahSchemaStatus } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation, PendingLockRelease } from '../../shared/api/shapes.js';
import { retirement, type Disposition } from '../../shared/lifecycle/retirement.js';
import { leaseTaken } from '../claim-values.js';
import { countJobOutcome } from '../operator-metrics.js';
import { completePendingLockRelease, giveJobCleanupTtl, owedRelease, stageRelease } from '../release.js';
import { operationOf, type SchemaPass } from './context.js';
import { writeSchemaStatus, type Report } from './status.js';

export interface SchemaRetirement {
  /** Why the claim goes: discarded, accounted for by its own result, or a run nobody accounted for. */
  disposition: Disposition;
  /** A reason word for logs. */
  why: string;
  /** Writes the record the claim leaves into the status being written (the claim is already gone from it). */
  record?: (status: PtahSchemaStatus) => void;
  report?: Report;
  /** The Job under the claim's name, when the caller already read it. */
  job?: V1Job;
  /** The claim's Job belongs to an epoch a rotation retired. */
  retiredEpoch?: boolean;
}

/** The release the proof owes: the Apply's epoch, under the Apply's holder, which the proof readings ran under. */
export function proofRelease(pending: PendingObservation): PendingLockRelease {
  return {
    coordinationDigest: pending.coordinationDigest,
    operationID: pending.applyOperationID,
    leaseDurationSeconds: pending.leaseDurationSeconds,
    leaseEpoch: pending.leaseEpoch,
  };
}

/**
 * The release the write that takes `claim` out of status owes, as the one rule decides it
 * (mutationlifecycle.Retirement): `next` is the status that write stores. Used by the retirement, by a reading's
 * retry, which takes the claim's attempt out the same way, and with no claim by a write that ends a proof with none
 * claimed, where the proof's record alone holds the Apply's realm.
 */
export function releaseOwedBy(pass: SchemaPass, claim: ActiveOperation | undefined, disposition: Disposition, next: PtahSchemaStatus): PendingLockRelease | undefined {
  const pendingBefore = pass.status.pendingObservation;
  const operation = claim && operationOf(pass, claim);
  const release = retirement({
    // A Plan or Observe carries out proofs by its type; it holds the Apply's realm only while it serves one.
    claim: operation
      ? { mutating: operation.mutating, servesProof: operation.carriesProof, locked: operation.holdsRealm && leaseTaken(claim), proofOutstanding: pendingBefore !== undefined }
      : { mutating: false, servesProof: true, locked: false, proofOutstanding: pendingBefore !== undefined },
    disposition,
    recordHoldsRealm: true,
    mayStillWrite: false,
    endsProof: pendingBefore !== undefined && next.pendingObservation === undefined,
  });
  return release === 'claim' && claim ? owedRelease(claim) : release === 'proof' && pendingBefore ? proofRelease(pendingBefore) : undefined;
}

/** How a proof no reading finished ends: why, what else the ending write records, and the report it makes. */
export interface ProofEnd {
  why: string;
  record?: (status: PtahSchemaStatus) => void;
  report?: Report;
}

/**
 * Ends the proof unread (on deletion, or by a person's acknowledgment) in the write that drops the record and stages
 * the Apply's release: through the one retirement when a proof reading is claimed, else by the same rule with the
 * record alone holding the realm. Callers establish first that nothing of the Apply can still write.
 */
export async function endProofUnread(pass: SchemaPass, end: ProofEnd): Promise<void> {
  const record = (status: PtahSchemaStatus): void => {
    status.pendingObservation = undefined;
    end.record?.(status);
  };
  if (pass.claim) return retireSchemaClaim(pass, { disposition: 'discard', why: end.why, record, report: end.report });
  const next: PtahSchemaStatus = { ...pass.status };
  record(next);
  const owed = releaseOwedBy(pass, undefined, 'discard', next);
  stageRelease(pass.status.pendingLockRelease, next, owed);
  await writeSchemaStatus(pass, next, end.report);
  pass.deps.log.info({ why: end.why, release: owed ? owed.operationID : 'none' }, 'proof ended unread');
  if (owed) await completeSchemaPendingLockRelease(pass);
}

export async function retireSchemaClaim(pass: SchemaPass, retire: SchemaRetirement): Promise<void> {
  const claim = pass.claim;
  if (!claim) throw new Error('retireSchemaClaim: there is no claim to retire');
  await giveJobCleanupTtl(pass, claim, retire.job, { retiredEpoch: retire.retiredEpoch });

  const next: PtahSchemaStatus = { ...pass.status, activeOperation: undefined };
  retire.record?.(next);
  const owed = releaseOwedBy(pass, claim, retire.disposition, next);
  stageRelease(pass.status.pendingLockRelease, next, owed);
  await writeSchemaStatus(pass, next, retire.report);
  countJobOutcome(pass.kind, claim, retire.why);
  pass.deps.log.info({ operationID: claim.id, type: claim.type, disposition: retire.disposition, why: retire.why, release: owed ? owed.operationID : 'none' }, 'claim retired');
  if (owed) await completeSchemaPendingLockRelease(pass);
}

/** Performs the owed release, then clears its record (the seed's completePendingLockRelease). */
export function completeSchemaPendingLockRelease(pass: SchemaPass): Promise<boolean> {
  return completePendingLockRelease(pass, () => writeSchemaStatus(pass, { ...pass.status, pendingLockRelease: undefined }));
}
