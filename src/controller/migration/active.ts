// The claim in flight (the seed's reconcileActiveMigration): a claim whose Job does not exist yet goes through the
// shared dispatch sequence; a Job found under the reserved name with no UID recorded is adopted once jobclaim.match
// holds it to the claim; a dispatched claim is supervised on every pass (rebound by UID, its Lease renewed, its Job
// held to the claim) and harvested when its Job is terminal. A mutating claim's missing Job is an unknown outcome
// and is never created again.
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { dispatch, DispatchRefused, mayHaveDispatched, type Authorization, type DispatchFamily } from '../../shared/lifecycle/dispatch.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import { superviseEveryMs } from '../../shared/lifecycle/supervision.js';
import type { MigrationPhase, PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { approvalStillAuthorizes, consumeMigrationApproval } from './approval.js';
import { familyDispatch, renewDispatchedApplyLock } from '../dispatch-family.js';
import { artifactStillPinned, verificationPolicyStillBinds } from '../artifact.js';
import { retryMigrationReading } from './claim.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { isJobTerminal } from '../evidence.js';
import { harvestMigrationApply, harvestMigrationHistory } from './harvest.js';
import { claimInputsHold, claimPlan, holdMigrationJobToItsClaim, rebuildMigrationJob } from './job.js';
import { currentMigrationPlan } from './plan.js';
import { retireMigrationClaim } from './retire.js';
import { publishReport, writeClaimFields, type Report } from './status.js';
import { finishUncertainMigrationApply } from './uncertain.js';

const runningReport = (claim: ActiveOperation): Report => claim.type === 'Apply'
  ? { phase: 'Applying', reason: 'Applying', message: `operation ${claim.id} is running in Job ${claim.jobName}` }
  : { phase: 'Reading', reason: 'ReadingHistory', message: `reading the migration history in Job ${claim.jobName}` };

export async function reconcileActiveMigration(pass: MigrationPass, claim: ActiveOperation): Promise<PassEnd> {
  const operation = migrationOperation(claim.type);
  if (!operation.known) {
    // A type a newer operator wrote: not mutating and not read-only, so nothing here may act on it.
    await publishReport(pass, { phase: 'Blocked', reason: 'UnknownOperation', message: `the claim in flight is a ${JSON.stringify(claim.type)} operation, which this manager does not know; a newer manager must finish it` });
    return endPass('unknown operation type left alone', 60_000);
  }
  const mutating = operation.mutating;
  if (mutating && mayHaveDispatched(claim)) {
    const lost = await renewDispatchedApplyLock(pass, claim, (fields) => writeClaimFields(pass, claim.id, fields));
    if (lost) return endPass(lost);
  }
  if (!claim.jobUID) {
    const found = await pass.readJob(claim.jobName);
    if (found) return adoptMigrationJob(pass, claim, found);
    if (mutating && claim.dispatchStarted === true) {
      await finishUncertainMigrationApply(pass, { reason: 'JobMissing', message: `Job ${claim.jobName} may have been created (the dispatch marker is written) but does not exist; it is never created again` });
      return endPass('dispatched Job missing: recorded unresolved');
    }
    const wait = claim.retryNotBefore ? Date.parse(claim.retryNotBefore) - pass.now().getTime() : 0;
    if (wait > 0) return endPass('waiting to retry the reading', wait);
    return dispatchMigrationClaim(pass, claim);
  }
  return superviseMigrationJob(pass, claim);
}

/** Lost Job, replaced Job, or a Job its claim does not recognise: Unknown for an Apply, a new attempt for a reading. */
async function settleLostJob(pass: MigrationPass, claim: ActiveOperation, reason: string, message: string): Promise<PassEnd> {
  if (migrationOperation(claim.type).mutating) {
    await finishUncertainMigrationApply(pass, { reason, message });
    return endPass(`${reason}: recorded unresolved`);
  }
  return retryMigrationReading(pass, message);
}

/**
 * A Job found under the reserved name with no UID recorded (a pass stopped between the create and the UID write):
 * held to the claim as supervision holds it (to its rebuild while the inputs hold, to what the claim fixes once
 * they moved), then adopted by UID. A suspension or spec edit landing in that window does not retire a running
 * Apply: its Lease keeps being renewed, and the terminal pass settles it without reading its result.
 */
async function adoptMigrationJob(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  const held = await holdMigrationJobToItsClaim(pass, claim, job);
  if (!held.ok) return settleLostJob(pass, claim, 'JobIntentMismatch', `Job ${claim.jobName} is not the claim's: ${held.why}`);
  const mutating = migrationOperation(claim.type).mutating;
  await writeClaimFields(pass, claim.id, { jobUID: job.metadata!.uid!, ...(mutating ? { dispatchStarted: true } : {}) });
  const moved = held.inputsHold ? '' : `; its inputs moved (${held.why}), so its result will not be read`;
  pass.event('Normal', 'OperationAdopted', `Job ${claim.jobName} (${claim.type}) was adopted by UID${moved}`, 'Dispatch');
  return endPass('Job adopted');
}

async function superviseMigrationJob(pass: MigrationPass, claim: ActiveOperation): Promise<PassEnd> {
  const job = await pass.readJob(claim.jobName);
  if (!job) return settleLostJob(pass, claim, 'JobMissing', `Job ${claim.jobName} (uid ${claim.jobUID}) no longer exists`);
  if (job.metadata?.uid !== claim.jobUID) return settleLostJob(pass, claim, 'JobReplaced', `Job ${claim.jobName} is not the Job the claim recorded (uid ${claim.jobUID})`);
  const held = await holdMigrationJobToItsClaim(pass, claim, job);
  if (!held.ok) return settleLostJob(pass, claim, 'JobIntentMismatch', `Job ${claim.jobName} is not the claim's: ${held.why}`);
  if (!isJobTerminal(job)) {
    await publishReport(pass, runningReport(claim));
    return endPass('Job running', superviseEveryMs(migrationOperation(claim.type)));
  }
  if (!held.inputsHold) {
    // The claim cannot rebuild its Job any more: its result is not read. An Apply is Unknown; a reading is stale.
    if (migrationOperation(claim.type).mutating) {
      await finishUncertainMigrationApply(pass, { reason: 'InputsChanged', message: `the run's result is not read: ${held.why}`, job });
      return endPass('Apply under moved inputs recorded unresolved');
    }
    await retireMigrationClaim(pass, {
      disposition: 'discard',
      why: 'InputsChanged',
      job,
      record: (status) => {
        status.nextReconciliationTime = pass.nowIso();
      },
      report: { phase: 'Pending', reason: 'InputsChanged', message: `the reading in Job ${claim.jobName} is stale: ${held.why}` },
    });
    return endPass('stale reading discarded');
  }
  return claim.type === 'Apply' ? harvestMigrationApply(pass, claim, job, held.plan) : harvestMigrationHistory(pass, claim, job);
}

/** A claim the driver refused is a defect no retry can mend: looked at again this often, in case a person or a newer manager repairs it. */
const REFUSED_CLAIM_RETRY_MS = 60_000;

async function dispatchMigrationClaim(pass: MigrationPass, claim: ActiveOperation): Promise<PassEnd> {
  const family = migrationDispatchFamily(pass, claim);
  try {
    const end = await dispatch(family, { client: pass.deps.client, lock: pass.lock }, pass.deps.order);
    return endPass(end.why, end.requeueAfterMs);
  } catch (e) {
    if (!(e instanceof DispatchRefused)) throw e;
    const message = `operation ${claim.id} (${claim.type}) cannot be dispatched: ${e.message}`;
    await publishReport(pass, { phase: 'Blocked', reason: 'ClaimRefused', message });
    pass.event('Warning', 'ClaimRefused', message, 'Dispatch');
    return endPass(e.message, REFUSED_CLAIM_RETRY_MS);
  }
}

/** The migration's side of the shared dispatch sequence. */
function migrationDispatchFamily(pass: MigrationPass, claim: ActiveOperation): DispatchFamily {
  let plan: PtahMigrationPlan | undefined;
  return familyDispatch<MigrationPhase>(pass, claim, {
    family: 'migration',
    operation: migrationOperation(claim.type),
    authorize: async (now) => {
      const { authorization, plan: authorized } = await authorizeMigrationClaim(pass, now);
      plan = authorized ?? plan;
      return authorization;
    },
    // A migration plan carries no SQL: the Apply reads the files from its verified artifact, so nothing is staged.
    buildJob: async (now, snapshot) => {
      if (now.type === 'Apply') plan ??= await claimPlan(pass, now);
      return rebuildMigrationJob(pass, { ...now, admissionSnapshot: snapshot }, plan);
    },
    consume: (now) => consumeMigrationApproval(pass, now),
    withdraw: (reason, message) => retireMigrationClaim(pass, {
      disposition: 'discard',
      why: reason,
      record: (status) => {
        status.nextReconciliationTime = pass.nowIso();
      },
      report: { phase: 'Pending', reason, message },
    }),
    writeClaim: (id, fields, report) => writeClaimFields(pass, id, fields, report),
    running: runningReport,
    finishUncertain: (reason, message) => finishUncertainMigrationApply(pass, { reason, message }),
    retryReadOnly: (why) => retryMigrationReading(pass, why),
  });
}

/**
 * Step 1 of the dispatch sequence: everything the claim was decided from, re-read uncached. Any of it having moved
 * discards the claim rather than narrowing it: the resource (deletion, suspension, a spec or binding change),
 * the pinned artifact and verification policy, and for an Apply its plan, its window and its approval. The
 * resource is the pass's own uncached read: the claim was decided in an earlier pass (the claim's write ends its
 * pass), and every write of this pass hands back the stored object, guarded by the resourceVersion it was read at.
 * The plan is read once and held to both the claim and status.plan; an authorized Apply hands it to the Job's build.
 */
async function authorizeMigrationClaim(pass: MigrationPass, claim: ActiveOperation): Promise<{ authorization: Authorization; plan?: PtahMigrationPlan }> {
  const refuse = (reason: string, message: string) => ({ authorization: { ok: false as const, reason, message } });
  const authorized = (plan?: PtahMigrationPlan) => ({ authorization: { ok: true as const }, ...(plan ? { plan } : {}) });
  if (pass.m.metadata.deletionTimestamp) return refuse('Deleting', 'the resource is being deleted');
  if (pass.m.spec.suspend) return refuse('Suspended', 'the resource is suspended; no new Job is dispatched');
  const inputs = await claimInputsHold(pass, claim);
  if (!inputs.hold) return refuse('InputsChanged', inputs.why);
  if (!claim.artifact) return refuse('ArtifactChanged', 'the claim pins no artifact');
  const artifactMoved = await artifactStillPinned(pass, pass.m.spec.artifact, claim.artifact);
  if (artifactMoved) return refuse('ArtifactChanged', artifactMoved);
  const policyMoved = await verificationPolicyStillBinds(pass, pass.m.spec.artifact, claim.artifact);
  if (policyMoved) return refuse('VerificationPolicyChanged', policyMoved);
  if (claim.type !== 'Apply') return authorized();

  if (pass.status.unresolvedRun) return refuse('UnresolvedRun', `operation ${pass.status.unresolvedRun.operationID} is unresolved`);
  if (claim.dispatchNotAfter && pass.now().getTime() >= Date.parse(claim.dispatchNotAfter)) {
    return refuse('DispatchWindowClosed', `the claim's dispatch window closed at ${claim.dispatchNotAfter}`);
  }
  const current = await currentMigrationPlan(pass, inputs.plan);
  if (!current.ok) return refuse('PlanChanged', current.why);
  if (current.plan.metadata.uid !== claim.planRef?.uid) return refuse('PlanChanged', 'the current plan is not the plan the claim runs');
  switch (pass.m.spec.policy.apply) {
    case 'Always':
      return authorized(current.plan);
    case 'OnApproval': {
      const why = await approvalStillAuthorizes(pass, claim, current.plan);
      return why ? refuse('ApprovalWithdrawn', why) : authorized(current.plan);
    }
    default:
      return refuse('ApplyDisabled', 'spec.policy.apply is Never');
  }
}
