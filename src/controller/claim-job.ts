// A claim's Job, as both families rebuild it and hold it to its claim through jobclaim.match on every pass that
// adopts or supervises it: to its rebuild while the claim's inputs hold, to what the claim fixes once they moved
// (then it cannot be rebuilt). Each family supplies its owner, its plan and whether its claim's inputs still hold.
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation, ExecutionBinding } from '../shared/api/shapes.js';
import { JobBuildError, rebuildClaimJob, type ClaimOwnerObject, type RebuildClaimJobInput } from '../shared/job/index.js';
import { match, type JobClaim, type Verdict } from '../shared/jobclaim.js';
import type { HeldJob } from './active-claim.js';
import type { OwnerPass, OwnerResource } from './pass.js';

export type ClaimPlan = NonNullable<RebuildClaimJobInput['plan']>;

/** Whether a claim's inputs still hold; an Apply's that do carry the plan it runs. */
export type InputsVerdict<Plan> = { hold: true; plan?: Plan } | { hold: false; why: string };

/**
 * The Job `claim` builds (the same rebuild the controller-write webhook admits the create against), under the
 * binding in force. `liveJob` gives the manager identity the stored Job recorded, which binds nothing and comes first.
 */
export function rebuildOwnedJob(pass: OwnerPass<OwnerResource>, owner: ClaimOwnerObject, binding: ExecutionBinding | undefined, claim: ActiveOperation, plan: ClaimPlan | undefined, liveJob?: V1Job): V1Job {
  if (!binding) throw new JobBuildError('InvalidBinding', `the ${pass.kind} records no execution binding`);
  const { controllerImage, controllerRevision, runnerImage } = pass.deps.manager;
  return rebuildClaimJob({
    owner,
    claim,
    plan,
    coordinationDigest: pass.realm(),
    // The bound components come from the binding in force (docs/execution-binding.md).
    manager: { controllerImage, controllerRevision, runnerImage, executorIdentity: binding.executorIdentity!, controllerStateVersion: binding.controllerStateVersion, runnerProtocolVersion: binding.runnerProtocolVersion },
    liveJob,
  });
}

/**
 * What the claim fixes, without a rebuild (the match the controller-write webhook applies to the cleanup TTL).
 * `retiredEpoch`: the claim belongs to an epoch a rotation retired, and is held to that epoch alone.
 */
export function claimFixedVerdict(pass: OwnerPass<OwnerResource>, claim: JobClaim, job: V1Job, options: { retiredEpoch?: boolean } = {}): Verdict {
  return match(job, claim, { kind: 'claim-fixed', owner: pass.owner() }, options.retiredEpoch ? undefined : pass.bindingInForce());
}

/**
 * Holds the Job under the claim's name to the claim (validateAdoptedJobIntent while the inputs hold, the claim's
 * fixed match once they moved). A Job that fails either is settled as a lost one.
 */
export function holdJobToItsClaim<Plan extends ClaimPlan>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, job: V1Job, inputs: InputsVerdict<Plan>, rebuild: (plan: Plan | undefined, liveJob: V1Job) => V1Job): HeldJob<Plan> {
  if (!inputs.hold) {
    const verdict = claimFixedVerdict(pass, claim, job);
    return verdict.ok ? { ok: true, inputsHold: false, why: inputs.why } : { ok: false, why: verdict.reason };
  }
  let rebuilt: V1Job;
  try {
    rebuilt = rebuild(inputs.plan, job);
  } catch (e) {
    if (e instanceof JobBuildError) return { ok: false, why: `the claim cannot rebuild its Job: ${e.message}` };
    throw e;
  }
  const verdict = match(job, claim, { kind: 'rebuild', rebuilt }, pass.bindingInForce());
  return verdict.ok ? { ok: true, inputsHold: true, plan: inputs.plan } : { ok: false, why: verdict.reason };
}
