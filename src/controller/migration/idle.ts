// No claim in flight: settle acknowledgments (even while suspended), then the idle preamble both families share
// (src/controller/idle.ts: binding, generation, suspension, engine, realm), resolve and verify the artifact, take a
// History reading when there is no fresh one (and none refused this artifact under this spec), and from a fresh
// reading with a current plan claim the Apply the policy allows. An unresolved run stops everything but readings and
// acknowledgments.
import { parseDuration } from '../../shared/api/duration.js';
import { ADOPTION_REFUSED } from '../../shared/executor-report.js';
import { settleUnresolvedRunByAcknowledgment } from './acknowledgment.js';
import { findMigrationApproval } from './approval.js';
import { ociArtifactVerdict, pinText, resolveArtifact, samePin } from '../artifact.js';
import { claimMigrationApply, claimMigrationHistory, claimMigrationResolve } from './claim.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { currentMigrationPlan, planText } from './plan.js';
import { idlePreamble } from '../idle.js';
import { refusalMessage, refusalStands } from '../refused-reading.js';
import { holdForRealm, realmCensus } from '../realm-census.js';
import { publishReport, statusWithCondition, writeMigrationStatus, type Report } from './status.js';
import { unresolvedMessage } from './unresolved.js';

/** Waits until `at` (an instant in status), or `fallbackMs` when there is none; informer events wake the key earlier. */
function until(pass: MigrationPass, at: string | undefined, fallbackMs: number): number {
  const ms = at ? Date.parse(at) - pass.now().getTime() : NaN;
  return Number.isFinite(ms) && ms > 0 ? ms : fallbackMs;
}

async function report(pass: MigrationPass, r: Report, why: string, requeueAfterMs: number): Promise<PassEnd> {
  await publishReport(pass, r);
  return endPass(why, requeueAfterMs);
}

/** A fresh reading exists: one was taken, and nothing since made it due again (time, a spec or binding change, a run). */
function readingIsFresh(pass: MigrationPass): boolean {
  const { history, nextReconciliationTime } = pass.status;
  return history !== undefined && nextReconciliationTime !== undefined && pass.now().getTime() < Date.parse(nextReconciliationTime);
}

export async function reconcileIdleMigration(pass: MigrationPass): Promise<PassEnd> {
  const acknowledged = await settleUnresolvedRunByAcknowledgment(pass);
  if (acknowledged) return acknowledged;

  const intervalMs = parseDuration(pass.m.spec.interval);
  const held = await idlePreamble(pass, {
    status: pass.status,
    intervalMs,
    suspendedMessage: 'spec.suspend is true: nothing is read or run; acknowledgments are still taken',
    write: (next, r) => writeMigrationStatus(pass, next, r),
    publish: (r) => publishReport(pass, r),
  });
  if (held) return held;

  const retryMs = parseDuration(pass.m.spec.execution?.failureRetryInterval ?? '30s');
  const source = pass.m.spec.artifact;
  const artifact = source.oci ? await ociArtifactVerdict(pass, { ...source, oci: source.oci }, pass.status.artifact, intervalMs) : await resolveArtifact(pass, source);
  if (artifact.ok === 'resolve') return claimMigrationResolve(pass, artifact.policy, artifact.why);
  if (!artifact.ok) {
    const status = statusWithCondition(pass, pass.status, 'ArtifactVerified', 'False', artifact.reason, artifact.message);
    const blocked: Report = { phase: 'Blocked', reason: artifact.reason, message: artifact.message };
    const verified = pass.status.conditions?.find((c) => c.type === 'ArtifactVerified');
    if (verified?.status !== 'False' || verified.reason !== artifact.reason || verified.message !== artifact.message) {
      await writeMigrationStatus(pass, status, blocked);
      pass.event('Warning', 'ArtifactVerificationRefused', artifact.message);
      return endPass('artifact refused', retryMs);
    }
    return report(pass, blocked, 'artifact refused', retryMs);
  }
  if (!samePin(pass.status.artifact, artifact.pin)) {
    // A new artifact or policy: the reading and the plan were of the old one.
    const status = statusWithCondition(pass, pass.status, 'ArtifactVerified', 'True', 'Verified',
      `${pinText(artifact.pin)} meets the verification policy`);
    await writeMigrationStatus(pass, { ...status, artifact: artifact.pin, plan: undefined, refusedReading: undefined, nextReconciliationTime: pass.nowIso() },
      { phase: 'Pending', reason: 'ArtifactResolved', message: `artifact ${pinText(artifact.pin)} pinned` });
    pass.event('Normal', 'ArtifactResolved', `artifact ${artifact.pin.configMapName} (uid ${artifact.pin.configMapUID}) pinned at ${artifact.pin.digest}`);
    return endPass('artifact pinned');
  }

  // A refused artifact is read again only once the artifact, the spec or the binding changed (refused-reading.ts); a
  // refused adoption also at its next reading time, since a person mends the other tool's history in the database.
  const refused = pass.status.refusedReading;
  if (refusalStands(refused, { artifactDigest: pass.status.artifact?.digest, generation: pass.generation, executionBindingID: pass.status.executionBinding?.epoch })) {
    if (refused.code !== ADOPTION_REFUSED) {
      return report(pass, { phase: 'Blocked', reason: 'ArtifactRefused', message: refusalMessage(refused) }, 'the artifact is refused', intervalMs);
    }
    const refusedUntil = until(pass, pass.status.nextReconciliationTime, 0);
    if (refusedUntil > 0) return report(pass, { phase: 'Blocked', reason: 'AdoptionRefused', message: refusalMessage(refused) }, 'the adoption is refused', refusedUntil);
  }
  if (!readingIsFresh(pass)) return claimMigrationHistory(pass);
  const nextReading = until(pass, pass.status.nextReconciliationTime, intervalMs);
  const unresolved = pass.status.unresolvedRun;
  if (unresolved) return report(pass, { phase: 'Blocked', reason: 'ApplyOutcomeUnknown', message: unresolvedMessage(unresolved) }, 'unresolved run stands', nextReading);
  const conflict = await realmCensus(pass, pass.status.history?.physicalIdentityDigest);
  if (conflict) return holdForRealm(pass, publishReport, conflict, nextReading);
  // A reading that published no plan left its own report (in sync, or blocked by the history); nothing to claim.
  if (!pass.status.plan) return endPass('no plan to carry out', nextReading);

  const current = await currentMigrationPlan(pass);
  if (!current.ok) {
    await writeMigrationStatus(pass, { ...pass.status, plan: undefined, nextReconciliationTime: pass.nowIso() },
      { phase: 'Pending', reason: 'PlanDiscarded', message: `the plan no longer holds: ${current.why}; the history is read again` });
    pass.event('Warning', 'PlanStale', `plan ${pass.status.plan.name} is discarded: ${current.why}`);
    return endPass('plan discarded');
  }
  const plan = current.plan;
  const versions = planText(plan);
  const policy = pass.m.spec.policy.apply;
  if (policy === 'Never') {
    return report(pass, { phase: 'Blocked', reason: 'ApplyDisabled', message: `plan ${plan.metadata.name} (${versions}) is published; spec.policy.apply is Never, so nothing runs` }, 'apply disabled', nextReading);
  }
  const lastRun = pass.status.lastRun;
  if (lastRun?.outcome === 'Failed' && lastRun.finishedAt) {
    const retryAt = Date.parse(lastRun.finishedAt) + retryMs;
    if (pass.now().getTime() < retryAt) {
      return report(pass, { phase: 'Failed', reason: 'ApplyFailed', message: `operation ${lastRun.operationID} changed nothing: ${lastRun.message ?? 'it failed'}` }, 'waiting to retry after a failed run', retryAt - pass.now().getTime());
    }
  }
  // A repair says what the database holds, which only a person can know: it always needs an approval.
  if (policy === 'OnApproval' || plan.spec.repair) {
    const approval = await findMigrationApproval(pass, plan);
    if (!approval) {
      return report(pass, {
        phase: 'AwaitingApproval',
        reason: 'AwaitingApproval',
        message: `plan ${plan.metadata.name} ${plan.spec.repair ? '' : 'applies '}${versions}; create a PtahMigrationApproval naming it (uid ${plan.metadata.uid}, fingerprint ${plan.spec.fingerprint})`,
      }, 'awaiting approval', nextReading);
    }
    return claimMigrationApply(pass, plan, approval);
  }
  return claimMigrationApply(pass, plan, undefined);
}
