// No claim and no proof in flight: the idle preamble both families share (src/controller/idle.ts: binding,
// generation, suspension, engine, realm), then resolve and verify the desired schema's artifact, observe when a
// reading is due (a spec edit makes it due), plan when the database drifted, and from a current plan claim the Apply
// the policy allows.
import { parseDuration } from '../../shared/api/duration.js';
import { SCHEMA_ARTIFACT_KEY } from '../../shared/api/schema-kinds.js';
import { approvalCondition, listApprovals } from '../approval.js';
import { ociArtifactVerdict, pinText, resolveArtifact, samePin } from '../artifact.js';
import { statusWithCondition } from '../status.js';
import { settleProofByAcknowledgment } from './acknowledgment.js';
import { findSchemaApproval, markSchemaPlanApprovalsStale, SCHEMA_APPROVAL } from './approval.js';
import { claimSchemaApply, claimSchemaReading, claimSchemaResolve } from './claim.js';
import { endPass, type PassEnd, type SchemaPass } from './context.js';
import { currentSchemaPlan } from './plan.js';
import { idlePreamble } from '../idle.js';
import { refusalMessage, refusalStands } from '../refused-reading.js';
import { holdForRealm, realmCensus } from '../realm-census.js';
import { planPolicy } from './policy.js';
import { publishSchemaReport, writeSchemaStatus, type Report } from './status.js';

/** Waits until `at` (an instant in status), or `fallbackMs` when there is none; informer events wake the key earlier. */
function until(pass: SchemaPass, at: string | undefined, fallbackMs: number): number {
  const ms = at ? Date.parse(at) - pass.now().getTime() : NaN;
  return Number.isFinite(ms) && ms > 0 ? ms : fallbackMs;
}

async function report(pass: SchemaPass, r: Report, why: string, requeueAfterMs: number): Promise<PassEnd> {
  await publishSchemaReport(pass, r);
  return endPass(why, requeueAfterMs);
}

/** A reading is due: none was taken, or its time came, or something since made it due (a spec, pin or binding change). */
function readingDue(pass: SchemaPass): boolean {
  const { target, nextReconciliationTime } = pass.status;
  return !target?.lastObservedAt || nextReconciliationTime === undefined || pass.now().getTime() >= Date.parse(nextReconciliationTime);
}

export async function reconcileIdleSchema(pass: SchemaPass): Promise<PassEnd> {
  // No proof is owed here: an acknowledgment a pass settled with is marked Consumed, any other Stale.
  const acknowledged = await settleProofByAcknowledgment(pass);
  if (acknowledged) return acknowledged;

  const intervalMs = parseDuration(pass.s.spec.interval);
  const held = await idlePreamble(pass, {
    status: pass.status,
    intervalMs,
    suspendedMessage: 'spec.suspend is true: nothing is read or run',
    write: (next, r) => writeSchemaStatus(pass, next, r),
    publish: (r) => publishSchemaReport(pass, r),
  });
  if (held) return held;

  const retryMs = parseDuration(pass.s.spec.execution?.failureRetryInterval ?? '30s');
  const source = pass.s.spec.desired;
  const artifact = source.oci ? await ociArtifactVerdict(pass, { ...source, oci: source.oci }, pass.status.artifact, intervalMs) : await resolveArtifact(pass, source, SCHEMA_ARTIFACT_KEY);
  if (artifact.ok === 'resolve') return claimSchemaResolve(pass, artifact.policy, artifact.why);
  if (!artifact.ok) {
    const blocked: Report = { phase: 'Blocked', reason: artifact.reason, message: artifact.message };
    const verified = pass.status.conditions?.find((c) => c.type === 'ArtifactVerified');
    if (verified?.status !== 'False' || verified.reason !== artifact.reason || verified.message !== artifact.message) {
      await writeSchemaStatus(pass, statusWithCondition(pass, pass.status, 'ArtifactVerified', 'False', artifact.reason, artifact.message), blocked);
      pass.event('Warning', 'ArtifactVerificationRefused', artifact.message);
      return endPass('artifact refused', retryMs);
    }
    return report(pass, blocked, 'artifact refused', retryMs);
  }
  if (!samePin(pass.status.artifact, artifact.pin)) {
    // A new desired schema or policy: the reading and the plan were of the old one.
    const status = statusWithCondition(pass, pass.status, 'ArtifactVerified', 'True', 'Verified', `${pinText(artifact.pin)} meets the verification policy`);
    const previous = pass.status.plan;
    await writeSchemaStatus(pass, { ...status, artifact: artifact.pin, plan: undefined, refusedReading: undefined, nextReconciliationTime: pass.nowIso() },
      { phase: 'Pending', reason: 'ArtifactResolved', message: `desired schema ${pinText(artifact.pin)} pinned` });
    pass.event('Normal', 'ArtifactResolved', `desired schema ${artifact.pin.configMapName} (uid ${artifact.pin.configMapUID}) pinned at ${artifact.pin.digest}`);
    if (previous) await markSchemaPlanApprovalsStale(pass, previous, 'DesiredStateChanged', `the desired schema moved to ${artifact.pin.digest}`);
    return endPass('artifact pinned');
  }

  // A refused reading waits for its time (or a change of what it was given: refused-reading.ts) before it is read
  // again, even when the database was never read.
  const refused = pass.status.refusedReading;
  const refusedUntil = pass.status.nextReconciliationTime ? Date.parse(pass.status.nextReconciliationTime) - pass.now().getTime() : 0;
  if (refusedUntil > 0 && refusalStands(refused, { artifactDigest: pass.status.artifact?.digest, generation: pass.generation, executionBindingID: pass.status.executionBinding?.epoch })) {
    return report(pass, { phase: 'Blocked', reason: 'ReadingRefused', message: refusalMessage(refused) }, 'the reading was refused', refusedUntil);
  }
  if (readingDue(pass)) return claimSchemaReading(pass, 'Observe', pass.status.target?.lastObservedAt ? 'the reading is due' : 'first reading');
  const nextReading = until(pass, pass.status.nextReconciliationTime, intervalMs);
  const conflict = await realmCensus(pass, pass.status.target?.physicalIdentityDigest);
  if (conflict) return holdForRealm(pass, publishSchemaReport, conflict, nextReading);
  const planStatus = pass.status.plan;
  if (!planStatus) {
    if (pass.status.target?.drift) return claimSchemaReading(pass, 'Plan', 'the database differs from the desired schema');
    return endPass('in sync; waiting for the next reading', nextReading);
  }
  const current = await currentSchemaPlan(pass);
  if (!current.ok) {
    await writeSchemaStatus(pass, { ...pass.status, plan: undefined, nextReconciliationTime: pass.nowIso() },
      { phase: 'Pending', reason: 'StalePlan', message: `the plan no longer holds: ${current.why}; the database is read again` });
    pass.event('Warning', 'PlanStale', `plan ${planStatus.name} is discarded: ${current.why}`);
    await markSchemaPlanApprovalsStale(pass, planStatus, 'PlanNoLongerCurrent', current.why);
    return endPass('plan discarded');
  }
  const plan = current.plan;
  const policy = planPolicy(pass, planStatus);
  if (policy.kind === 'blocked') return report(pass, { phase: 'Blocked', reason: policy.reason, message: policy.message }, 'plan blocked by policy', nextReading);
  if (policy.kind === 'ready') return claimSchemaApply(pass, plan, undefined);
  await sweepSupersededApprovals(pass, planStatus.uid);
  const approval = await findSchemaApproval(pass, plan);
  if (!approval) return report(pass, { phase: 'AwaitingApproval', reason: policy.reason, message: policy.message }, 'awaiting approval', nextReading);
  return claimSchemaApply(pass, plan, approval);
}

/** Approvals of this schema naming a plan that is no longer current go Stale: they may never be reserved again. */
async function sweepSupersededApprovals(pass: SchemaPass, currentPlanUid: string): Promise<void> {
  const stale = new Map<string, { name: string; uid: string }>();
  for (const approval of await listApprovals(pass, SCHEMA_APPROVAL)) {
    const ref = approval.spec.schemaRef as { uid?: string } | undefined;
    if (ref?.uid !== pass.uid || approval.spec.planRef.uid === currentPlanUid) continue;
    if (approvalCondition(approval, 'Stale') || approvalCondition(approval, 'Consumed')) continue;
    stale.set(approval.spec.planRef.uid, approval.spec.planRef);
  }
  for (const plan of stale.values()) await markSchemaPlanApprovalsStale(pass, plan, 'PlanNoLongerCurrent', `plan ${plan.name} is no longer the schema's current plan`);
}
