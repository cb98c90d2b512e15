// Taking a schema claim: two writes, in order: the finalizer through a metadata patch, then the claim through a
// status patch (the seed's claimAt). The claim carries its Job's deterministic name before the Job exists; it is
// not evidence that anything ran, and the pass that writes it ends there. A claim that holds the realm persists the
// Lease epoch it expects before any acquisition: a placeholder for an ordinary claim, the Apply's own epoch for a
// proof reading, which runs under the Lease its Apply took.
import { FINALIZERS } from '../../shared/api/names.js';
import type { PtahSchemaApproval, PtahSchemaPlan } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { parseDuration } from '../../shared/api/duration.js';
import { DEFAULT_TERMINATION_GRACE_SECONDS } from '../../shared/job/build.js';
import { schemaOperation, type SchemaOperationType } from '../../shared/lifecycle/operations.js';
import { claimJobName } from '../../shared/naming.js';
import { applyDeadlines, applyLeaseDuration, applyWindowSeconds, newOperationId, placeholderLeaseEpoch, resolveClaim } from '../claim-values.js';
import { addFinalizer } from '../finalizer.js';
import { countJobOutcome } from '../operator-metrics.js';
import { giveJobCleanupTtl } from '../release.js';
import { endPass, type PassEnd, type SchemaPass } from './context.js';
import { schemaInputFingerprint } from './fingerprint.js';
import { completeSchemaPendingLockRelease, releaseOwedBy } from './retire.js';
import { writeSchemaStatus, type Report } from './status.js';
import type { PolicyPin } from '../artifact.js';
import { resolveRetryReport } from '../resolution.js';
import { statusWithCondition } from '../status.js';
import { discardProofUnread, readingKeepsFailing } from './unreadable.js';

export class ClaimRefused extends Error {
  override name = 'ClaimRefused';
}

const jobNameOf = (pass: SchemaPass, claim: Omit<ActiveOperation, 'jobName'>): string => claimJobName('schema', pass, claim);

async function writeClaim(pass: SchemaPass, body: Omit<ActiveOperation, 'jobName'>, report: Report): Promise<PassEnd> {
  if (pass.claim) throw new ClaimRefused(`claim ${pass.claim.id} is still in flight`);
  pass.s = await addFinalizer(pass.deps.client, pass.s, FINALIZERS.schema);
  const claim: ActiveOperation = { ...body, jobName: jobNameOf(pass, body) };
  await writeSchemaStatus(pass, { ...pass.status, activeOperation: claim, nextReconciliationTime: undefined }, report);
  return endPass(`${claim.type} claimed`);
}

function baseClaim(pass: SchemaPass, type: SchemaOperationType, planRef?: ActiveOperation['planRef']): Omit<ActiveOperation, 'jobName'> {
  const binding = pass.status.executionBinding;
  const artifact = pass.status.artifact;
  if (!binding || !artifact) throw new ClaimRefused('a claim needs an execution binding and a pinned artifact');
  const id = newOperationId();
  const realm = pass.realm();
  const claim: Omit<ActiveOperation, 'jobName'> = {
    type,
    id,
    inputFingerprint: schemaInputFingerprint(pass.s, { type, artifact, executionBindingID: binding.epoch, coordinationDigest: realm, planRef }),
    startedAt: pass.nowIso(),
    attempt: 1,
    executionBindingID: binding.epoch,
    artifact,
  };
  if (!schemaOperation(type).holdsRealm) return claim;
  return { ...claim, coordinationDigest: realm, leaseDurationSeconds: applyLeaseDuration(applyWindowSeconds(pass.s)), leaseEpoch: placeholderLeaseEpoch(id) };
}

/** A Resolve of spec.desired.oci (claim-values.ts). */
export async function claimSchemaResolve(pass: SchemaPass, policy: PolicyPin, why: string): Promise<PassEnd> {
  const binding = pass.status.executionBinding;
  if (!binding) throw new ClaimRefused('a claim needs an execution binding');
  const fingerprint = schemaInputFingerprint(pass.s, { type: 'Resolve', artifact: undefined, executionBindingID: binding.epoch, coordinationDigest: pass.realm() });
  return writeClaim(pass, resolveClaim(pass.nowIso(), binding.epoch, policy, fingerprint), { phase: 'Resolving', reason: 'Resolving', message: why });
}

/** An ordinary reading: an Observe (holds nothing) or a Plan (holds the realm while it reads). */
export async function claimSchemaReading(pass: SchemaPass, type: 'Observe' | 'Plan', why: string): Promise<PassEnd> {
  const report: Report = type === 'Observe'
    ? { phase: 'Observing', reason: 'Observing', message: `reading the database: ${why}` }
    : { phase: 'Planning', reason: 'Planning', message: `computing a plan: ${why}` };
  return writeClaim(pass, baseClaim(pass, type), report);
}

/**
 * A reading that carries out the proof an Apply owes: under the Apply's Lease epoch and holder, against what the
 * Apply ran with (its artifact and target as the pending observation snapshotted them).
 */
export async function claimProofReading(pass: SchemaPass, type: 'Observe' | 'Plan'): Promise<PassEnd> {
  const pending = pass.status.pendingObservation;
  const binding = pass.status.executionBinding;
  if (!pending || !binding) throw new ClaimRefused('a proof reading needs a pending observation and an execution binding');
  const id = newOperationId();
  const body: Omit<ActiveOperation, 'jobName'> = {
    type,
    id,
    inputFingerprint: schemaInputFingerprint(pass.s, { type, artifact: pending.artifact, executionBindingID: binding.epoch, coordinationDigest: pending.coordinationDigest, proofOf: pending.applyOperationID }),
    startedAt: pass.nowIso(),
    attempt: 1,
    executionBindingID: binding.epoch,
    artifact: pending.artifact,
    coordinationDigest: pending.coordinationDigest,
    targetIdentityDigest: pending.targetIdentityDigest,
    leaseDurationSeconds: pending.leaseDurationSeconds,
    leaseEpoch: pending.leaseEpoch,
    proofOf: pending.applyOperationID,
  };
  return writeClaim(pass, body, {
    phase: 'VerifyingConvergence',
    reason: 'VerifyingConvergence',
    message: `${type === 'Observe' ? 'reading' : 'planning against'} the database to prove what Apply ${pending.applyOperationID} did`,
  });
}

/**
 * An Apply of the current plan (the seed's claimAt(Apply)). Refused while a proof is owed: no Apply is claimed
 * beside a run nobody accounted for. The claim fixes its Lease duration and deadlines now.
 */
export async function claimSchemaApply(pass: SchemaPass, plan: PtahSchemaPlan, approval: PtahSchemaApproval | undefined): Promise<PassEnd> {
  if (pass.status.pendingObservation) throw new ClaimRefused(`Apply ${pass.status.pendingObservation.applyOperationID} still owes its proof`);
  const planRef = { name: plan.metadata.name!, uid: plan.metadata.uid! };
  const base = baseClaim(pass, 'Apply', planRef);
  const window = applyWindowSeconds(pass.s);
  const claim: Omit<ActiveOperation, 'jobName'> = {
    ...base,
    coordinationDigest: plan.spec.coordinationDigest,
    targetIdentityDigest: plan.spec.targetIdentityDigest,
    ...(pass.status.target?.physicalIdentityDigest ? { physicalIdentityDigest: pass.status.target.physicalIdentityDigest } : {}),
    ...applyDeadlines(new Date(base.startedAt), window),
    terminationGracePeriodSeconds: DEFAULT_TERMINATION_GRACE_SECONDS,
    planRef,
    ...(approval ? { approvalRef: { name: approval.metadata.name!, uid: approval.metadata.uid! } } : {}),
  };
  const by = approval ? ` approved by ${approval.spec.approver?.username ?? 'unknown'}` : ' (policy Always)';
  const what = `plan ${planRef.name} (${plan.spec.statementCount} statement(s))${by}`;
  const end = await writeClaim(pass, claim, { phase: 'Applying', reason: 'ApprovedPlan', message: `applying ${what}` });
  pass.event('Normal', 'ApplyClaimed', `claimed operation ${claim.id} to apply ${what}`, 'Claim');
  return end;
}

/**
 * A read-only claim runs again under a new attempt (a new Job name), after spec.execution.failureRetryInterval;
 * the old Job is left to its own deadline, with its cleanup TTL when it passes the claim's fixed match. An
 * ordinary Plan hands its realm back with the failed attempt (its epoch is staged for release in the same write);
 * a proof reading keeps the Apply's. A proof reading of a schema being deleted that keeps failing is not run again:
 * deletion ends the proof unread.
 */
export async function retrySchemaReading(pass: SchemaPass, why: string, refused?: { reason: string; message: string }): Promise<PassEnd> {
  const claim = pass.claim;
  if (!claim) throw new ClaimRefused('there is no reading to retry');
  if (readingKeepsFailing(pass, claim)) return discardProofUnread(pass, { reason: 'ReadingKeepsFailing', message: `${claim.type} attempt ${claim.attempt} failed too: ${why}` });
  await giveJobCleanupTtl(pass, claim);
  const retryMs = parseDuration(pass.s.spec.execution?.failureRetryInterval ?? '30s');
  // The retry takes this attempt out of status as a discarded claim would go: an ordinary Plan hands its realm back,
  // a proof reading keeps the Apply's (the one rule, releaseOwedBy).
  const owed = releaseOwedBy(pass, claim, 'discard', pass.status);
  const body: Omit<ActiveOperation, 'jobName'> = {
    ...claim,
    startedAt: pass.nowIso(),
    attempt: claim.attempt + 1,
    retryNotBefore: new Date(pass.now().getTime() + retryMs).toISOString(),
    jobUID: undefined,
    dispatchStarted: undefined,
    admissionSnapshot: undefined,
    ...(owed ? { leaseEpoch: placeholderLeaseEpoch(claim.id) } : {}),
  };
  const next: ActiveOperation = { ...body, jobName: jobNameOf(pass, body) };
  // A refused Resolve is Blocked with the registry's or the policy's reason until a retry pins the artifact.
  const status = refused ? statusWithCondition(pass, pass.status, 'ArtifactVerified', 'False', refused.reason, refused.message) : pass.status;
  const report: Report = claim.type === 'Resolve' ? resolveRetryReport(why, body.retryNotBefore, refused) : { phase: 'Failed', reason: 'OperationRetried', message: why };
  await writeSchemaStatus(pass, { ...status, activeOperation: next, ...(owed ? { pendingLockRelease: owed } : {}) }, report);
  countJobOutcome(pass.kind, claim, 'Retried');
  pass.event('Warning', 'OperationRetried', `${claim.type} attempt ${claim.attempt} (Job ${claim.jobName}) is run again as attempt ${next.attempt}: ${why}`);
  if (owed) await completeSchemaPendingLockRelease(pass);
  return endPass('reading retried', retryMs);
}
