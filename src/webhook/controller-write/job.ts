// The manager's Job writes: a create only for a persisted, not-yet-dispatched claim that rebuilds to exactly the
// submitted Job, and one update only, the cleanup TTL, on the Job a live claim or a retained record names. Both
// are judged by jobclaim.match, the function the controller itself asks.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration, PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { KINDS } from '../../shared/api/names.js';
import type { PtahSchema, PtahSchemaPlan } from '../../shared/api/schema-kinds.js';
import { JobBuildError, rebuildClaimJob } from '../../shared/job/index.js';
import { familyOfKind, OWNER_KIND } from '../../shared/job/metadata.js';
import { runnerOperationFor } from '../../shared/job/operations.js';
import { CLEANUP_TTL_SECONDS, isCleanupTtlUpdate, match, recordedApplyClaim, type BindingInForce, type JobClaim } from '../../shared/jobclaim.js';
import { RealmError, realmDigestOf } from '../../shared/realm.js';
import { allow, refuse, type Verdict } from '../admission.js';
import { readObject } from '../reads.js';
import type { AdmissionContext } from '../judge.js';
import { controllerOwnerOf, readOwner, refTo, type Owned, type OwnerRef } from './owner.js';

type Owner = PtahSchema | PtahMigration;
type SubmittedJob = V1Job & Owned;

const OWNER_KINDS = [OWNER_KIND.schema, OWNER_KIND.migration] as const;

const describeJob = (job: SubmittedJob) => `Job ${job.metadata.namespace}/${job.metadata.name}`;

function bindingOf(owner: Owner): BindingInForce | undefined {
  const binding = owner.status?.executionBinding;
  return binding ? { epoch: binding.epoch, controllerStateVersion: binding.controllerStateVersion } : undefined;
}

/** Job CREATE: the owner's claim is persisted, names this Job, has no Job UID yet, and rebuilds to this Job. */
export async function judgeJobCreate(job: SubmittedJob, ctx: AdmissionContext): Promise<Verdict> {
  const ownerRef = controllerOwnerOf(job, OWNER_KINDS);
  const owner = await readOwner<Owner>(ctx.reader, job.metadata.namespace, ownerRef);
  const what = describeJob(job);
  const claim = owner.status?.activeOperation;
  if (!claim) refuse(`${what} does not match a not-yet-created active operation: ${ownerRef.kind} ${owner.metadata.name} has no claim in status.activeOperation`);
  if (claim.jobName !== job.metadata.name) {
    refuse(`${what} does not match a not-yet-created active operation: the claim of ${ownerRef.kind} ${owner.metadata.name} reserves Job ${claim.jobName}`);
  }
  if (claim.jobUID) refuse(`${what} does not match a not-yet-created active operation: the claim already recorded Job UID ${claim.jobUID}`);
  const binding = bindingOf(owner);
  if (!binding) refuse(`${ownerRef.kind} ${owner.metadata.name} records no execution binding, so no Job can be built under its claim`);

  const family = familyOfKind(owner.kind)!;
  const plan = await claimPlan(owner, claim, family, ctx);
  let rebuilt: V1Job;
  try {
    rebuilt = rebuildClaimJob({
      owner,
      claim,
      plan,
      coordinationDigest: claim.coordinationDigest ?? realmOf(owner),
      // The bound components are what the binding in force names, not this replica's configuration, whichever
      // replica judges it; the images and revision are the submitted Job's own (docs/execution-binding.md).
      manager: {
        ...ctx.manager,
        executorIdentity: owner.status!.executionBinding!.executorIdentity!,
        controllerStateVersion: owner.status!.executionBinding!.controllerStateVersion,
        runnerProtocolVersion: owner.status!.executionBinding!.runnerProtocolVersion,
      },
      liveJob: job,
    });
  } catch (e) {
    if (e instanceof JobBuildError || e instanceof RealmError) refuse(`the active operation cannot rebuild the submitted ${what}: ${e.message}`);
    throw e;
  }
  const verdict = match(job, claim, { kind: 'rebuild', rebuilt, submitted: true }, binding);
  if (!verdict.ok) refuse(`${what} is outside its ${family} operation claim: ${verdict.reason}`);
  return allow('the Job is the one its persisted claim builds');
}

/** The plan an Apply claim runs, read uncached under the claim's planRef. */
async function claimPlan(owner: Owner, claim: JobClaim, family: 'schema' | 'migration', ctx: AdmissionContext): Promise<PtahSchemaPlan | PtahMigrationPlan | undefined> {
  const operation = runnerOperationFor(family, claim.type);
  if (operation !== 'apply' && operation !== 'migration-apply') return undefined;
  if (!claim.planRef) refuse(`the ${family} Apply claim of ${owner.metadata.name} names no plan`);
  const kind = family === 'schema' ? KINDS.PtahSchemaPlan.kind : KINDS.PtahMigrationPlan.kind;
  return readObject<PtahSchemaPlan | PtahMigrationPlan>(ctx.reader, refTo(kind, owner.metadata.namespace!, claim.planRef.name));
}

// A claim that takes no Lease records no realm; the Job still carries the owner's.
function realmOf(owner: Owner): string {
  return realmDigestOf(owner.spec.target, owner.metadata.namespace ?? '');
}

/**
 * Job UPDATE: only ttlSecondsAfterFinished from absent to the cleanup TTL, on the Job that the live claim or a
 * retained record (a schema's pending observation) names by name and UID. The inputs may have moved since the
 * dispatch, so the Job is held to what that record fixes, under the epoch in force or the retired epoch the
 * schema's pendingBindingRetirement names. A deleting owner may still clean up.
 */
export async function judgeJobCleanup(job: SubmittedJob, oldJob: V1Job, ctx: AdmissionContext): Promise<Verdict> {
  const what = describeJob(job);
  if (!isCleanupTtlUpdate(oldJob, job)) {
    refuse(`${what}: the manager may only set ttlSecondsAfterFinished from unset to ${CLEANUP_TTL_SECONDS} and change nothing else; this update is not that`);
  }
  const ownerRef = controllerOwnerOf(job, OWNER_KINDS);
  const owner = await readOwner<Owner>(ctx.reader, job.metadata.namespace, ownerRef);
  const claim = recordNaming(owner, job);
  if (!claim) {
    refuse(`${what} (uid ${job.metadata.uid ?? 'unset'}) is named by no claim or retained record of ${ownerRef.kind} ${owner.metadata.name}, so it is not the manager's to clean up`);
  }
  const binding = epochFor(owner, claim, job, ownerRef);
  const verdict = match(job, claim, { kind: 'claim-fixed', owner: { kind: ownerRef.kind, name: ownerRef.name, namespace: job.metadata.namespace, uid: ownerRef.uid } }, binding);
  if (!verdict.ok) refuse(`${what} is outside the claim that names it: ${verdict.reason}`);
  return allow('the cleanup TTL is set on the Job its record names');
}

/** The live claim, or for a schema the pending observation, that names this Job by name and UID. */
function recordNaming(owner: Owner, job: SubmittedJob): JobClaim | undefined {
  const { name, uid } = job.metadata;
  if (!uid) return undefined;
  const claim = owner.status?.activeOperation;
  if (claim && claim.jobName === name && claim.jobUID === uid) return claim;
  if (owner.kind !== OWNER_KIND.schema) return undefined;
  const pending = (owner as PtahSchema).status?.pendingObservation;
  if (!pending || pending.applyJobName !== name || pending.applyJobUID !== uid) return undefined;
  return recordedApplyClaim(pending);
}

/** The binding to hold the Job to: the one in force, or none for the retired epoch a retirement record names. */
function epochFor(owner: Owner, claim: JobClaim, job: SubmittedJob, ownerRef: OwnerRef): BindingInForce | undefined {
  const binding = bindingOf(owner);
  if (binding && claim.executionBindingID === binding.epoch) return binding;
  const retirement = owner.kind === OWNER_KIND.schema ? (owner as PtahSchema).status?.pendingBindingRetirement : undefined;
  const named = retirement?.job && retirement.job.name === job.metadata.name && (!retirement.job.uid || retirement.job.uid === job.metadata.uid);
  if (retirement && retirement.retiredEpoch === claim.executionBindingID && named) return undefined;
  refuse(
    `Job ${job.metadata.namespace}/${job.metadata.name} was claimed under execution epoch ${claim.executionBindingID}, which is neither in force on ${ownerRef.kind} ${ownerRef.name} ` +
      'nor the retired epoch its pendingBindingRetirement names for this Job',
  );
}
