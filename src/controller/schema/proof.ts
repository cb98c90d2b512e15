// The proof a schema Apply owes (status.pendingObservation). Every Apply, read or uncertain, leaves it, written by
// one function (pendingObservationFor) in the same patch that retires the Apply claim, so a stop on either side
// leaves a live claim or a retained record, never both and never neither. The record keeps the realm: its Lease is
// renewed under the Apply's epoch on every pass, no proof starts until no Apply Pod can still run, and the Observe
// and Plan that settle it run under that same Lease. Only the write that settles the proof hands it back.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { PendingObservation, PendingObservationOutcome, PtahSchemaStatus } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { EXECUTION_DEFAULTS } from '../../shared/api/shapes.js';
import { canonicalJson } from '../../shared/canonical.js';
import { renewHolding } from '../../shared/lifecycle/leases.js';
import { applyMayStillRun, applyPodsOf, dispatchedBy } from '../evidence.js';
import { leaseTaken } from '../claim-values.js';
import { claimProofReading } from './claim.js';
import { endPass, type PassEnd, type SchemaPass } from './context.js';
import { retiredApplyJobObligation } from './binding.js';
import { retireSchemaClaim } from './retire.js';
import { publishSchemaReport, writeSchemaStatus } from './status.js';
import { discardProofUnread, proofArtifactGone } from './unreadable.js';
import { settleProofByAcknowledgment } from './acknowledgment.js';

/** How often a pending proof is looked at while it waits: well inside the shortest Lease. */
const PROOF_POLL_MS = 5_000;
/** At most this many Pod UIDs are kept; the count goes on. */
const MAX_POD_UIDS = 8;

export class ProofRecordError extends Error {
  override name = 'ProofRecordError';
}

export interface ApplyAccount {
  outcome: PendingObservationOutcome;
  /** The Job the claim recorded, when it was read. */
  job?: V1Job;
  /** No proof before the Apply's window and its Pod's grace have passed (the outcome is unknown, its Pod may run). */
  waitForWindow: boolean;
  /** The Apply Pods seen, by UID. */
  podUIDs?: string[];
}

/**
 * The proof the Apply claim owes (the seed's pendingObservationFor, the only writer of the record): what the Apply
 * ran against, snapshotted from the claim and the plan it ran, under the Apply's own Lease epoch.
 */
export function pendingObservationFor(pass: SchemaPass, claim: ActiveOperation, account: ApplyAccount): PendingObservation {
  const plan = pass.status.plan;
  const missing = (what: string) => new ProofRecordError(`Apply ${claim.id} cannot record the proof it owes: ${what}`);
  if (claim.type !== 'Apply') throw missing(`the claim is a ${claim.type}`);
  const { coordinationDigest, targetIdentityDigest, leaseDurationSeconds, leaseEpoch, artifact, planRef } = claim;
  if (!coordinationDigest || !targetIdentityDigest || !leaseDurationSeconds || !leaseEpoch || !leaseTaken(claim)) throw missing('the claim records no realm, database, Lease duration or Lease epoch');
  if (!artifact) throw missing('the claim pins no artifact');
  if (!plan || !planRef || plan.name !== planRef.name || plan.uid !== planRef.uid) throw missing('status.plan is not the plan the claim ran');
  const pods = [...new Set(account.podUIDs ?? [])].sort();
  const graceMs = (claim.terminationGracePeriodSeconds ?? 0) * 1000;
  const observeAfter = account.waitForWindow && claim.executionNotAfter ? new Date(Date.parse(claim.executionNotAfter) + graceMs).toISOString() : undefined;
  const spec = pass.s.spec;
  return {
    outcome: pods.length > 1 ? 'OutcomeUnknown' : account.outcome,
    applyOperationID: claim.id,
    applyJobName: claim.jobName,
    ...(claim.jobUID ? { applyJobUID: claim.jobUID } : {}),
    applyGeneration: Math.max(1, pass.status.observedGeneration ?? pass.generation),
    ...(pods.length > 0 ? { applyPodUIDs: pods.slice(0, MAX_POD_UIDS), applyPodCount: pods.length } : {}),
    ...(claim.admissionSnapshot ? { admissionSnapshot: claim.admissionSnapshot } : {}),
    ...(observeAfter ? { observeAfter } : {}),
    plan,
    ...(claim.approvalRef ? { approvalRef: claim.approvalRef } : {}),
    artifact,
    target: spec.target,
    ...(spec.dev ? { dev: spec.dev } : {}),
    connectTimeout: spec.execution.connectTimeout ?? EXECUTION_DEFAULTS.connectTimeout,
    lockTimeout: spec.policy.lockTimeout,
    coordinationDigest,
    targetIdentityDigest,
    // The claim's, which a started run must have reported too (harvestSchemaApply).
    ...(claim.physicalIdentityDigest ? { physicalIdentityDigest: claim.physicalIdentityDigest } : {}),
    executionBindingID: claim.executionBindingID,
    leaseDurationSeconds,
    leaseEpoch,
    ...dispatchedBy(account.job),
    recordedAt: pass.nowIso(),
  };
}

/**
 * Retires the Apply claim and writes the proof it owes, in one patch (the record keeps the realm, so nothing is
 * released). `alsoRecord` adds what the same write must carry (a binding rotation).
 */
export async function recordApplyAccount(pass: SchemaPass, account: ApplyAccount, why: string, message: string, alsoRecord?: (status: PtahSchemaStatus) => void): Promise<void> {
  const claim = pass.claim;
  if (!claim) throw new ProofRecordError('there is no Apply claim to account for');
  // The Pods are evidence the record keeps from its first write on: more than one forces an unknown outcome.
  const podUIDs = account.podUIDs ?? uidsOf(await applyPodsOf(pass, claim.id, [claim.jobUID]));
  const pending = pendingObservationFor(pass, claim, { ...account, podUIDs });
  const unknown = pending.outcome === 'OutcomeUnknown';
  await retireSchemaClaim(pass, {
    disposition: unknown ? 'unaccounted' : 'accounted',
    why,
    job: account.job,
    record: (status) => {
      status.pendingObservation = pending;
      alsoRecord?.(status);
    },
    report: { phase: 'VerifyingConvergence', reason: unknown ? 'ApplyOutcomeUnknown' : why, message: `${message}; a fresh reading under the same Lease proves what the database holds` },
  });
}

/**
 * A dispatched Apply whose outcome nobody can establish (the seed's finishUncertainApply): its proof is owed with
 * an unknown outcome and waits out the Apply's window, and it is never run again.
 */
export async function finishUncertainSchemaApply(pass: SchemaPass, uncertain: { reason: string; message: string; job?: V1Job }, alsoRecord?: (status: PtahSchemaStatus) => void): Promise<void> {
  const claim = pass.claim;
  if (!claim) throw new ProofRecordError('there is no Apply claim');
  const found = uncertain.job ?? (await pass.readJob(claim.jobName).catch(() => undefined));
  const job = claim.jobUID && found?.metadata?.uid === claim.jobUID ? found : undefined;
  await recordApplyAccount(pass, { outcome: 'OutcomeUnknown', job, waitForWindow: true }, uncertain.reason, `Apply ${claim.id} (Job ${claim.jobName}) ended with an unknown outcome: ${uncertain.message}`, alsoRecord);
  pass.event('Warning', 'ApplyOutcomeUnknown', `operation ${claim.id} (Job ${claim.jobName}): ${uncertain.message}. It is never run again; a fresh Observe and Plan under the same Lease prove what the database holds`);
}

/**
 * The Lease a pending proof holds, renewed under the Apply's epoch and holder (the seed's acquirePendingLock). An
 * epoch that moved, or a realm someone else holds, proves the database may have changed hands: the outcome becomes
 * Unknown and the raw observation starts over under the epoch now held. Returns the end of the pass when it wrote
 * or must wait.
 */
export async function acquirePendingLock(pass: SchemaPass): Promise<PassEnd | undefined> {
  const pending = pass.status.pendingObservation;
  if (!pending) return undefined;
  const renewal = await renewHolding(pass.lock, {
    coordinationDigest: pending.coordinationDigest,
    resourceUid: pass.uid,
    operationId: pending.applyOperationID,
    durationSeconds: pending.leaseDurationSeconds,
    epoch: pending.leaseEpoch,
  });
  if (renewal.kept) return undefined;
  const lost: PendingObservation = { ...pending, outcome: 'OutcomeUnknown', planRequired: false, ...(renewal.epoch ? { leaseEpoch: renewal.epoch } : {}) };
  const claim = pass.claim;
  const activeOperation = claim?.proofOf === pending.applyOperationID ? { ...claim, leaseContinuityLost: true } : claim;
  const requeue = renewal.requeueAfterMs;
  // Latched: a realm still held elsewhere is waited for without writing the same loss again.
  if (canonicalJson(lost) === canonicalJson(pending) && canonicalJson(activeOperation ?? null) === canonicalJson(claim ?? null)) {
    return endPass('the proof\'s realm is held elsewhere', requeue);
  }
  await writeSchemaStatus(pass, { ...pass.status, pendingObservation: lost, activeOperation },
    { phase: 'VerifyingConvergence', reason: 'LeaseContinuityLost', message: `the realm Lease of Apply ${pending.applyOperationID} changed hands before its proof; the outcome is unknown and the database is read again` });
  pass.event('Warning', 'LeaseContinuityLost', `the realm Lease held for the proof of Apply ${pending.applyOperationID} changed hands; what the Apply did is now unknown and is read again`);
  return endPass('proof Lease continuity lost', requeue);
}

/**
 * Whether an Apply Pod may still run (the seed's possibleApplyPodActive). The Pods of the Apply (controlled by its
 * Job's UID, or carrying its operation ID) are merged into the record, which keeps their UIDs and count after the
 * Job is collected: more than one forces an unknown outcome. Returns the end of the pass when it wrote or must wait.
 */
export async function possibleApplyPodActive(pass: SchemaPass): Promise<PassEnd | undefined> {
  const pending = pass.status.pendingObservation!;
  const retired = await retiredApplyJobObligation(pass);
  if (retired) return retired;
  const job = await pass.readJob(pending.applyJobName);
  const ours = await applyPodsOf(pass, pending.applyOperationID, [pending.applyJobUID, job?.metadata?.uid]);
  const known = pending.applyPodUIDs ?? [];
  const merged = [...new Set([...known, ...uidsOf(ours)])].sort();
  const count = Math.max(pending.applyPodCount ?? 0, merged.length);
  // Only the first MAX_POD_UIDS are kept, so "changed" compares what would be kept: comparing every UID seen
  // would rewrite the same record on every pass once more Pods than that exist.
  const kept = merged.slice(0, MAX_POD_UIDS);
  if (count !== (pending.applyPodCount ?? 0) || canonicalJson(kept) !== canonicalJson(known)) {
    const outcome = count > 1 ? 'OutcomeUnknown' : pending.outcome;
    await writeSchemaStatus(pass, { ...pass.status, pendingObservation: { ...pending, applyPodUIDs: kept, applyPodCount: count, outcome } });
    if (count > 1 && pending.outcome !== 'OutcomeUnknown') {
      pass.event('Warning', 'ApplyOutcomeUnknown', `Apply ${pending.applyOperationID} ran ${count} executor Pods; its outcome is unknown`);
    }
    return endPass('Apply Pod evidence recorded');
  }
  if (applyMayStillRun(job, ours)) return endPass(`an Apply Pod of ${pending.applyJobName} may still run`, PROOF_POLL_MS);
  return undefined;
}

const uidsOf = (pods: V1Pod[]): string[] => pods.map((pod) => pod.metadata?.uid).filter((uid): uid is string => Boolean(uid));

/**
 * The outstanding proof, ahead of suspension, the generation gate and the realm census (the seed's
 * reconcilePendingObservation): renew its Lease, wait until no Apply Pod can run and the horizon has passed, then
 * claim the Observe, or the Plan once the raw observation is in, whether or not the schema is suspended, and
 * whether or not it is being deleted, unless deletion finds that no reading can finish it (unreadable.ts).
 */
export async function reconcilePendingObservation(pass: SchemaPass): Promise<PassEnd> {
  const renewed = await acquirePendingLock(pass);
  if (renewed) return renewed;
  const active = await possibleApplyPodActive(pass);
  if (active) return active;
  // Suspension does not hold the proof up: the proof runs first, so a schema owing one cannot be overtaken by anything
  // (the seed), and it hands the realm back; the schema rests suspended afterwards (reconcileIdleSchema).
  const pending = pass.status.pendingObservation!;
  const wait = pending.observeAfter ? Date.parse(pending.observeAfter) - pass.now().getTime() : 0;
  if (wait > 0) {
    await publishSchemaReport(pass, { phase: 'VerifyingConvergence', reason: 'AwaitingApplyWindow', message: `the outcome of Apply ${pending.applyOperationID} is unknown; its proof starts at ${pending.observeAfter}, once no Pod of it can run` });
    return endPass('waiting for the Apply window to pass', Math.min(wait, PROOF_POLL_MS));
  }
  // Nothing of the Apply can write by now, so a person's acknowledgment may end the proof here.
  const acknowledged = await settleProofByAcknowledgment(pass);
  if (acknowledged) return acknowledged;
  const unreadable = await proofArtifactGone(pass);
  if (unreadable) return discardProofUnread(pass, unreadable);
  return claimProofReading(pass, pending.planRequired ? 'Plan' : 'Observe');
}
