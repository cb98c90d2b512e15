// The claim in flight (the seed's reconcileActiveMigration), driven by the shared active-claim.ts: the migration
// supplies how its claims are authorized and dispatched, held to their Jobs, harvested, and recorded unresolved.
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { dispatch, type Authorization, type DispatchFamily } from '../../shared/lifecycle/dispatch.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import type { V1Job } from '@kubernetes/client-node';
import type { MigrationPhase, PtahMigrationPlan, PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import { approvalStillAuthorizes, consumeMigrationApproval } from './approval.js';
import { reconcileActiveClaim } from '../active-claim.js';
import { familyDispatch } from '../dispatch-family.js';
import { artifactStillPinned, verificationPolicyStillBinds } from '../artifact.js';
import { retryMigrationReading } from './claim.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { harvestMigrationApply, harvestMigrationHistory } from './harvest.js';
import { harvestResolve, resolveStillAuthorized } from '../resolution.js';
import { claimInputsHold, claimPlan, holdMigrationJobToItsClaim, rebuildMigrationJob } from './job.js';
import { currentMigrationPlan } from './plan.js';
import { retireMigrationClaim } from './retire.js';
import { publishReport, writeClaimFields, type Report } from './status.js';
import { finishUncertainMigrationApply } from './uncertain.js';

const runningReport = (claim: ActiveOperation): Report => claim.type === 'Apply'
  ? { phase: 'Applying', reason: 'Applying', message: `operation ${claim.id} is running in Job ${claim.jobName}` }
  : claim.type === 'Resolve'
    ? { phase: 'Resolving', reason: 'Resolving', message: `resolving the artifact in Job ${claim.jobName}` }
    : { phase: 'Reading', reason: 'ReadingHistory', message: `reading the migration history in Job ${claim.jobName}` };

/** The migration's side of the shared claim in flight (active-claim.ts). */
export function reconcileActiveMigration(pass: MigrationPass, claim: ActiveOperation): Promise<PassEnd> {
  return reconcileActiveClaim<MigrationPhase, PtahMigrationPlan>(pass, claim, {
    operation: migrationOperation(claim.type),
    publish: (report) => publishReport(pass, report),
    writeClaimFields: (fields) => writeClaimFields(pass, claim.id, fields),
    dispatch: async () => {
      const end = await dispatch(migrationDispatchFamily(pass, claim), { client: pass.deps.client, lock: pass.lock }, pass.deps.order);
      return endPass(end.why, end.requeueAfterMs);
    },
    holdJob: (job) => holdMigrationJobToItsClaim(pass, claim, job),
    running: runningReport(claim),
    finishUncertain: (uncertain) => finishUncertainMigrationApply(pass, uncertain),
    uncertainOwes: 'recorded unresolved',
    retryReading: (why) => retryMigrationReading(pass, why),
    discardStaleReading: (job, why) => retireMigrationClaim(pass, {
      disposition: 'discard',
      why: 'InputsChanged',
      job,
      record: (status) => {
        status.nextReconciliationTime = pass.nowIso();
      },
      report: { phase: 'Pending', reason: 'InputsChanged', message: `the reading in Job ${claim.jobName} is stale: ${why}` },
    }),
    harvest: (job, plan) => (claim.type === 'Apply'
      ? harvestMigrationApply(pass, claim, job, plan)
      : claim.type === 'Resolve' ? harvestMigrationResolve(pass, claim, job) : harvestMigrationHistory(pass, claim, job)),
  });
}

function harvestMigrationResolve(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  return harvestResolve<PtahMigrationStatus, MigrationPhase>(pass, claim, job, {
    status: pass.status,
    oci: pass.m.spec.artifact.oci,
    retry: (why, refused) => retryMigrationReading(pass, why, refused),
    retire: (j, record, report) => retireMigrationClaim(pass, { disposition: 'accounted', why: 'Resolved', job: j, record, report }),
  });
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
  if (claim.type === 'Resolve') {
    const moved = await resolveStillAuthorized(pass, pass.m.spec.artifact, claim);
    return moved ? refuse('VerificationPolicyChanged', moved) : authorized();
  }
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
  const policy = pass.m.spec.policy.apply;
  // A repair plan runs only under an approval, whatever the policy (idle.ts).
  if (policy === 'Always' && !current.plan.spec.repair) return authorized(current.plan);
  switch (policy) {
    case 'Always':
    case 'OnApproval': {
      const why = await approvalStillAuthorizes(pass, claim, current.plan);
      return why ? refuse('ApprovalWithdrawn', why) : authorized(current.plan);
    }
    default:
      return refuse('ApplyDisabled', 'spec.policy.apply is Never');
  }
}
