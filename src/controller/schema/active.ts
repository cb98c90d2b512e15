// The claim in flight (the seed's reconcileActive), driven by the shared active-claim.ts: the schema supplies how its
// claims are authorized and dispatched (its stage step projects an Apply's plan), held to their Jobs and harvested,
// and what its proof adds. A reading that carries out a proof renews the proof's Lease first (a proof whose Lease
// changed hands proves nothing), never starts beside an Apply Pod that may still run, and may be ended by a person's
// acknowledgment instead of being created.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahSchemaPlan, PtahSchemaStatus, SchemaPhase } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { dispatch, DispatchRefused, type Authorization, type DispatchFamily } from '../../shared/lifecycle/dispatch.js';
import { JobBuildError } from '../../shared/job/index.js';
import { renewHolding } from '../../shared/lifecycle/leases.js';
import { superviseEveryMs } from '../../shared/lifecycle/supervision.js';
import { reconcileActiveClaim } from '../active-claim.js';
import { familyDispatch } from '../dispatch-family.js';
import { artifactStillPinned, verificationPolicyStillBinds } from '../artifact.js';
import { isJobTerminal } from '../evidence.js';
import { harvestResolve, resolveStillAuthorized } from '../resolution.js';
import { consumeSchemaApproval, markSchemaPlanApprovalsStale, schemaApprovalStillAuthorizes } from './approval.js';
import { retrySchemaReading } from './claim.js';
import { endPass, operationOf, servesProof, type PassEnd, type SchemaPass } from './context.js';
import { harvestSchemaApply, harvestSchemaObserve, harvestSchemaPlan } from './harvest.js';
import { claimPlan, holdSchemaJobToItsClaim, rebuildSchemaJob, schemaClaimInputsHold } from './job.js';
import { currentSchemaPlan, ProjectionConflict, projectPlan } from './plan.js';
import { planPolicy } from './policy.js';
import { settleProofByAcknowledgment } from './acknowledgment.js';
import { acquirePendingLock, finishUncertainSchemaApply, possibleApplyPodActive } from './proof.js';
import { retireSchemaClaim } from './retire.js';
import { publishSchemaReport, writeSchemaClaimFields, type Report } from './status.js';
import { discardProofUnread, isDeleting, proofArtifactGone } from './unreadable.js';

const runningReport = (claim: ActiveOperation, proving: boolean): Report => proving
  ? { phase: 'VerifyingConvergence', reason: 'VerifyingConvergence', message: `the proof's ${claim.type} is running in Job ${claim.jobName}` }
  : claim.type === 'Apply'
    ? { phase: 'Applying', reason: 'ApprovedPlan', message: `operation ${claim.id} is running in Job ${claim.jobName}` }
    : claim.type === 'Resolve'
      ? { phase: 'Resolving', reason: 'Resolving', message: `resolving the desired schema in Job ${claim.jobName}` }
      : { phase: claim.type === 'Plan' ? 'Planning' : 'Observing', reason: 'OperationInProgress', message: `${claim.type} is running in Job ${claim.jobName}` };

/** The schema's side of the shared claim in flight (active-claim.ts). */
export function reconcileActiveSchema(pass: SchemaPass, claim: ActiveOperation): Promise<PassEnd> {
  const operation = operationOf(pass, claim);
  const proving = servesProof(pass, claim);
  // Only a pass with the admission snapshot recorded can create the proof's Job; the one before it ends at the
  // snapshot step, having created nothing.
  const provingBeforeCreate = proving && !claim.jobUID && !claim.dispatchStarted && claim.admissionSnapshot !== undefined;
  const deletingProof = isDeleting(pass) && proving;
  return reconcileActiveClaim<SchemaPhase, PtahSchemaPlan>(pass, claim, {
    operation,
    publish: (report) => publishSchemaReport(pass, report),
    writeClaimFields: (fields) => writeSchemaClaimFields(pass, claim.id, fields),
    first: proving ? () => renewProof(pass, provingBeforeCreate) : undefined,
    // The proof's reading is about to be created (every attempt of one that keeps failing comes here), and this pass
    // found no Apply Pod that may run and no Job of the reading: a person's acknowledgment may end the proof instead.
    beforeCreate: provingBeforeCreate ? () => settleProofByAcknowledgment(pass) : undefined,
    dispatch: async () => {
      const gone = deletingProof ? await proofArtifactGone(pass) : undefined;
      if (gone) return discardProofUnread(pass, gone);
      const end = await dispatch(schemaDispatchFamily(pass, claim), { client: pass.deps.client, lock: pass.lock }, pass.deps.order);
      return endPass(end.why, end.requeueAfterMs);
    },
    // A proof reading that cannot be dispatched on deletion is one no retry mends: deletion ends the proof unread.
    refused: deletingProof
      ? async (e) => (e instanceof DispatchRefused || e instanceof JobBuildError
        ? discardProofUnread(pass, { reason: 'ReadingRefused', message: `the proof's ${claim.type} cannot be dispatched: ${e.message}` })
        : undefined)
      : undefined,
    holdJob: (job) => holdSchemaJobToItsClaim(pass, claim, job),
    // An ordinary Plan holds the realm while it reads: its Lease is renewed on every pass.
    supervising: operation.readOnly && operation.holdsRealm && !proving ? () => renewReadingLease(pass, claim) : undefined,
    running: runningReport(claim, proving),
    finishUncertain: (uncertain) => finishUncertainSchemaApply(pass, uncertain),
    uncertainOwes: 'proof owed, outcome unknown',
    retryReading: (why) => retrySchemaReading(pass, why),
    discardStaleReading: (job, why) => retireSchemaClaim(pass, {
      disposition: 'discard',
      why: proving ? 'ProofInputsChanged' : 'InputsChanged',
      job,
      record: (status) => {
        status.nextReconciliationTime = pass.nowIso();
      },
      report: { phase: 'Pending', reason: 'InputsChanged', message: `the reading in Job ${claim.jobName} is stale: ${why}` },
    }),
    harvest: (job) => (claim.type === 'Apply'
      ? harvestSchemaApply(pass, claim, job)
      : claim.type === 'Plan' ? harvestSchemaPlan(pass, claim, job) : claim.type === 'Resolve' ? harvestSchemaResolve(pass, claim, job) : harvestSchemaObserve(pass, claim, job)),
  });
}

function harvestSchemaResolve(pass: SchemaPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  return harvestResolve<PtahSchemaStatus, SchemaPhase>(pass, claim, job, {
    status: pass.status,
    oci: pass.s.spec.desired.oci,
    retry: (why, refused) => retrySchemaReading(pass, why, refused),
    retire: (j, record, report) => retireSchemaClaim(pass, { disposition: 'accounted', why: 'Resolved', job: j, record, report }),
    // Approvals of the old desired schema's plan can never be reserved again.
    moved: async (previous) => {
      if (previous.plan) await markSchemaPlanApprovalsStale(pass, previous.plan, 'DesiredStateChanged', `the desired schema moved to ${pass.status.artifact?.digest ?? 'another artifact'}`);
    },
  });
}

/**
 * A proof reading renews the proof's Lease first: a proof whose Lease changed hands proves nothing. It never starts
 * beside an Apply Pod that may still run.
 */
async function renewProof(pass: SchemaPass, beforeCreate: boolean): Promise<PassEnd | undefined> {
  const renewed = await acquirePendingLock(pass);
  if (renewed) return renewed;
  if (pass.claim?.leaseContinuityLost) return recoverLeaseContinuity(pass, pass.claim);
  return beforeCreate ? possibleApplyPodActive(pass) : undefined;
}

/**
 * A proof reading whose Lease changed hands (the seed's recoverLeaseContinuity): it proves nothing. Its Job is left
 * to stop, the claim is retired releasing nothing, and the proof, now of an unknown outcome, starts over.
 */
async function recoverLeaseContinuity(pass: SchemaPass, claim: ActiveOperation): Promise<PassEnd> {
  const job = claim.jobUID ? await pass.readJob(claim.jobName) : undefined;
  if (job && job.metadata?.uid === claim.jobUID && !isJobTerminal(job)) return endPass('waiting for a reading under a lost Lease to stop', superviseEveryMs(operationOf(pass, claim)));
  await retireSchemaClaim(pass, {
    disposition: 'discard',
    why: 'LeaseContinuityLost',
    job,
    report: { phase: 'VerifyingConvergence', reason: 'LeaseContinuityLost', message: 'the proof reading ran under a Lease that changed hands; the database is read again' },
  });
  return endPass('proof reading under a lost Lease retired');
}

/** An ordinary Plan's realm Lease, renewed under its epoch; a Lease that changed hands makes its reading stale. */
async function renewReadingLease(pass: SchemaPass, claim: ActiveOperation): Promise<PassEnd | undefined> {
  const renewal = await renewHolding(pass.lock, {
    coordinationDigest: claim.coordinationDigest!,
    resourceUid: pass.uid,
    operationId: claim.id,
    durationSeconds: claim.leaseDurationSeconds!,
    epoch: claim.leaseEpoch,
  });
  if (renewal.kept) return undefined;
  if (renewal.epoch) await writeSchemaClaimFields(pass, claim.id, { leaseEpoch: renewal.epoch });
  return retrySchemaReading(pass, 'the realm Lease changed hands while the Plan ran');
}

/** The schema's side of the shared dispatch sequence (the seed's schemaDispatch): its stage step projects an Apply's plan. */
function schemaDispatchFamily(pass: SchemaPass, claim: ActiveOperation): DispatchFamily {
  let plan: PtahSchemaPlan | undefined;
  return familyDispatch<SchemaPhase>(pass, claim, {
    family: 'schema',
    operation: operationOf(pass, claim),
    authorize: async (now) => {
      const { authorization, plan: authorized } = await authorizeSchemaClaim(pass, now);
      plan = authorized ?? plan;
      return authorization;
    },
    stage: async (now) => {
      if (now.type !== 'Apply') return true;
      plan ??= await claimPlan(pass, now);
      if (!plan) throw new DispatchRefused(`the plan the Apply ${now.id} runs is gone`);
      try {
        await projectPlan(pass, plan);
        return true;
      } catch (e) {
        if (!(e instanceof ProjectionConflict)) throw e;
        // A name derived from the plan cannot be cleared by a retry: the plan is retired (applyBecameStale).
        await retirePlanAndClaim(pass, plan, `plan ${plan.metadata.name} cannot be staged for its Job: ${e.message}`);
        return false;
      }
    },
    buildJob: async (now, snapshot) => {
      if (now.type === 'Apply') plan ??= await claimPlan(pass, now);
      return rebuildSchemaJob(pass, { ...now, admissionSnapshot: snapshot }, plan);
    },
    consume: (now) => consumeSchemaApproval(pass, now),
    withdraw: (reason, message) => retireSchemaClaim(pass, {
      disposition: 'discard',
      why: reason,
      record: (status) => {
        status.nextReconciliationTime = pass.nowIso();
      },
      report: { phase: 'Pending', reason, message },
    }),
    writeClaim: (id, fields, report) => writeSchemaClaimFields(pass, id, fields, report),
    running: (now) => runningReport(now, servesProof(pass, now)),
    finishUncertain: (reason, message) => finishUncertainSchemaApply(pass, { reason, message }),
    retryReadOnly: (why) => retrySchemaReading(pass, why),
  });
}

/** The plan no longer authorizes anything: its approvals go stale, status.plan goes, and the database is read again. */
async function retirePlanAndClaim(pass: SchemaPass, plan: PtahSchemaPlan, message: string): Promise<void> {
  await retireSchemaClaim(pass, {
    disposition: 'discard',
    why: 'PlanStale',
    record: (status) => {
      status.plan = undefined;
      status.nextReconciliationTime = pass.nowIso();
    },
    report: { phase: 'Observing', reason: 'StalePlan', message },
  });
  pass.event('Warning', 'PlanStale', message);
  await markSchemaPlanApprovalsStale(pass, { name: plan.metadata.name!, uid: plan.metadata.uid! }, 'StalePlan', message);
}

/**
 * Step 1 of the dispatch sequence: everything the claim was decided from, re-read uncached. Any of it having moved
 * discards the claim rather than narrowing it: the resource, the pinned artifact and verification policy, and for
 * an Apply its plan (and every binding it was computed under), its window and its approval. The resource is the
 * pass's own uncached read: the claim was decided in an earlier pass (the claim's write ends its pass), and every
 * write of this pass hands back the stored object, guarded by the resourceVersion it was read at. The plan is read
 * once and held to both the claim and status.plan; an authorized Apply hands it to the stage step and the Job's build.
 */
async function authorizeSchemaClaim(pass: SchemaPass, claim: ActiveOperation): Promise<{ authorization: Authorization; plan?: PtahSchemaPlan }> {
  const refuse = (reason: string, message: string) => ({ authorization: { ok: false as const, reason, message } });
  const authorized = (plan?: PtahSchemaPlan) => ({ authorization: { ok: true as const }, ...(plan ? { plan } : {}) });
  const proving = servesProof(pass, claim);
  // Deletion still runs the proof (unreadable.ts): only its readings are dispatched for a resource being deleted.
  if (isDeleting(pass) && !proving) return refuse('Deleting', 'the resource is being deleted');
  if (pass.s.spec.suspend && !proving) return refuse('Suspended', 'the resource is suspended; no new Job is dispatched');
  const inputs = await schemaClaimInputsHold(pass, claim);
  if (!inputs.hold) return refuse('InputsChanged', inputs.why);
  if (claim.type === 'Resolve') {
    const moved = await resolveStillAuthorized(pass, pass.s.spec.desired, claim);
    return moved ? refuse('VerificationPolicyChanged', moved) : authorized();
  }
  if (!claim.artifact) return refuse('ArtifactChanged', 'the claim pins no artifact');
  if (proving) return authorized();
  const artifactMoved = await artifactStillPinned(pass, pass.s.spec.desired, claim.artifact);
  if (artifactMoved) return refuse('ArtifactChanged', artifactMoved);
  const policyMoved = await verificationPolicyStillBinds(pass, pass.s.spec.desired, claim.artifact);
  if (policyMoved) return refuse('VerificationPolicyChanged', policyMoved);
  if (claim.type !== 'Apply') return authorized();

  if (pass.status.pendingObservation) return refuse('ProofOwed', `Apply ${pass.status.pendingObservation.applyOperationID} still owes its proof`);
  if (claim.dispatchNotAfter && pass.now().getTime() >= Date.parse(claim.dispatchNotAfter)) {
    return refuse('DispatchWindowClosed', `the claim's dispatch window closed at ${claim.dispatchNotAfter}`);
  }
  const currentPlan = await currentSchemaPlan(pass, inputs.plan);
  if (!currentPlan.ok) return refuse('PlanChanged', currentPlan.why);
  if (currentPlan.plan.metadata.uid !== claim.planRef?.uid) return refuse('PlanChanged', 'the current plan is not the plan the claim runs');
  const policy = planPolicy(pass, pass.status.plan!);
  if (policy.kind === 'blocked') return refuse(policy.reason, policy.message);
  if (policy.kind === 'approval' || claim.approvalRef) {
    const why = await schemaApprovalStillAuthorizes(pass, claim, currentPlan.plan);
    if (why) return refuse('ApprovalWithdrawn', why);
  }
  return authorized(currentPlan.plan);
}
