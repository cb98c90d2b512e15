// Taking a claim: two writes, in order: the finalizer through a metadata patch, then the claim through a status
// patch. The claim carries its Job's deterministic name before the Job exists; it is not evidence that anything
// ran, and the pass that writes it ends there.
import type { PtahMigrationApproval, PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { FINALIZERS } from '../../shared/api/names.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { parseDuration } from '../../shared/api/duration.js';
import { DEFAULT_TERMINATION_GRACE_SECONDS } from '../../shared/job/build.js';
import { jobNameFor } from '../../shared/naming.js';
import { addFinalizer } from '../finalizer.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { applyDeadlines, applyLeaseDuration, applyWindowSeconds, newOperationId, placeholderLeaseEpoch, resolveClaim } from '../claim-values.js';
import { migrationInputFingerprint } from './fingerprint.js';
import { countJobOutcome } from '../operator-metrics.js';
import { giveJobCleanupTtl } from '../release.js';
import { unresolvedMessage } from './unresolved.js';
import { planText } from './plan.js';
import { statusWithCondition, writeMigrationStatus, type Report } from './status.js';
import type { PolicyPin } from '../artifact.js';
import { resolveRetryReport } from '../resolution.js';

class ClaimRefused extends Error {
  override name = 'ClaimRefused';
}

function jobNameOf(pass: MigrationPass, claim: Omit<ActiveOperation, 'jobName'>): string {
  return jobNameFor({
    family: 'migration',
    ownerName: pass.name,
    ownerUid: pass.uid,
    operationType: claim.type,
    operationId: claim.id,
    executionBindingId: claim.executionBindingID,
    inputFingerprint: claim.inputFingerprint,
    attempt: claim.attempt,
  });
}

async function writeClaim(pass: MigrationPass, body: Omit<ActiveOperation, 'jobName'>, report: Report): Promise<PassEnd> {
  if (pass.claim) throw new ClaimRefused(`claim ${pass.claim.id} is still in flight`);
  pass.m = await addFinalizer(pass.deps.client, pass.m, FINALIZERS.migration);
  const claim: ActiveOperation = { ...body, jobName: jobNameOf(pass, body) };
  await writeMigrationStatus(pass, { ...pass.status, activeOperation: claim }, report);
  return endPass(`${claim.type} claimed`);
}

function baseClaim(pass: MigrationPass, type: 'History' | 'Apply', planRef?: ActiveOperation['planRef']): Omit<ActiveOperation, 'jobName'> {
  const binding = pass.status.executionBinding;
  const artifact = pass.status.artifact;
  if (!binding || !artifact) throw new ClaimRefused('a claim needs an execution binding and a pinned artifact');
  return {
    type,
    id: newOperationId(),
    inputFingerprint: migrationInputFingerprint(pass.m, { type, artifact, executionBindingID: binding.epoch, coordinationDigest: pass.realm(), planRef }),
    startedAt: pass.nowIso(),
    attempt: 1,
    executionBindingID: binding.epoch,
    artifact,
  };
}

/** A Resolve of spec.artifact.oci (claim-values.ts). */
export async function claimMigrationResolve(pass: MigrationPass, policy: PolicyPin, why: string): Promise<PassEnd> {
  const binding = pass.status.executionBinding;
  if (!binding) throw new ClaimRefused('a claim needs an execution binding');
  const fingerprint = migrationInputFingerprint(pass.m, { type: 'Resolve', artifact: undefined, executionBindingID: binding.epoch, coordinationDigest: pass.realm() });
  return writeClaim(pass, resolveClaim(pass.nowIso(), binding.epoch, policy, fingerprint), { phase: 'Resolving', reason: 'Resolving', message: why });
}

/** A History reading: read-only, takes no Lease, records no realm (its Job carries the resource's). */
export async function claimMigrationHistory(pass: MigrationPass): Promise<PassEnd> {
  return writeClaim(pass, baseClaim(pass, 'History'), { phase: 'Reading', reason: 'ReadingHistory', message: 'reading the database\'s migration history' });
}

/**
 * An Apply of the current plan (the seed's claimMigrationApply). Refused while an unresolved run stands: no Apply
 * is claimed beside a run nobody accounted for. The claim persists the Lease epoch it expects (a placeholder
 * until it takes the realm), its Lease duration and its deadlines, all fixed now.
 */
export async function claimMigrationApply(pass: MigrationPass, plan: PtahMigrationPlan, approval: PtahMigrationApproval | undefined): Promise<PassEnd> {
  const unresolved = pass.status.unresolvedRun;
  if (unresolved) throw new ClaimRefused(unresolvedMessage(unresolved));
  const planRef = { name: plan.metadata.name!, uid: plan.metadata.uid! };
  const base = baseClaim(pass, 'Apply', planRef);
  const window = applyWindowSeconds(pass.m);
  const claim: Omit<ActiveOperation, 'jobName'> = {
    ...base,
    coordinationDigest: plan.spec.coordinationDigest,
    targetIdentityDigest: plan.spec.targetIdentityDigest,
    ...(pass.status.history?.physicalIdentityDigest ? { physicalIdentityDigest: pass.status.history.physicalIdentityDigest } : {}),
    leaseDurationSeconds: applyLeaseDuration(window),
    leaseEpoch: placeholderLeaseEpoch(base.id),
    ...applyDeadlines(new Date(base.startedAt), window),
    terminationGracePeriodSeconds: DEFAULT_TERMINATION_GRACE_SECONDS,
    planRef,
    ...(approval ? { approvalRef: { name: approval.metadata.name!, uid: approval.metadata.uid! } } : {}),
  };
  const versions = planText(plan);
  const by = approval ? ` approved by ${approval.spec.approver?.username ?? 'unknown'}` : ' (policy Always)';
  const end = await writeClaim(pass, claim, { phase: 'Applying', reason: 'Applying', message: `applying plan ${planRef.name} (${versions})${by}` });
  pass.event('Normal', 'ApplyClaimed', `claimed operation ${claim.id} to apply plan ${planRef.name} (${versions})${by}`, 'Claim');
  return end;
}

/**
 * A read-only claim runs again under a new attempt (a new Job name), after spec.execution.failureRetryInterval;
 * the old Job is left to its own deadline, with its cleanup TTL when it passes the claim's fixed match.
 */
export async function retryMigrationReading(pass: MigrationPass, why: string, refused?: { reason: string; message: string }): Promise<PassEnd> {
  const claim = pass.claim;
  if (!claim) throw new ClaimRefused('there is no reading to retry');
  await giveJobCleanupTtl(pass, claim);
  const retryMs = parseDuration(pass.m.spec.execution?.failureRetryInterval ?? '30s');
  const body: Omit<ActiveOperation, 'jobName'> = {
    type: claim.type,
    id: claim.id,
    inputFingerprint: claim.inputFingerprint,
    startedAt: pass.nowIso(),
    attempt: claim.attempt + 1,
    executionBindingID: claim.executionBindingID,
    ...(claim.artifact ? { artifact: claim.artifact } : {}),
    ...(claim.verificationPolicy ? { verificationPolicy: claim.verificationPolicy } : {}),
    retryNotBefore: new Date(pass.now().getTime() + retryMs).toISOString(),
  };
  const next: ActiveOperation = { ...body, jobName: jobNameOf(pass, body) };
  // A refused Resolve is Blocked with the registry's or the policy's reason until a retry pins the artifact.
  const status = refused ? statusWithCondition(pass, pass.status, 'ArtifactVerified', 'False', refused.reason, refused.message) : pass.status;
  const report: Report = claim.type === 'Resolve' ? resolveRetryReport(why, body.retryNotBefore, refused) : { phase: 'Reading', reason: 'HistoryReadRetried', message: why };
  await writeMigrationStatus(pass, { ...status, activeOperation: next }, report);
  countJobOutcome(pass.kind, claim, 'Retried');
  pass.event('Warning', 'OperationRetried', `${claim.type} attempt ${claim.attempt} (Job ${claim.jobName}) is run again as attempt ${next.attempt}: ${why}`);
  return endPass('reading retried', retryMs);
}
