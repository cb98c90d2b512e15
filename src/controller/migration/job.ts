// A migration claim's Job: rebuilt from the claim and the objects it was decided from, and held to its claim
// through jobclaim.match on every pass that adopts or supervises it. While the claim's inputs hold, the Job is
// held to the rebuild; once they moved it cannot be rebuilt and is held to what the claim fixes.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { JobBuildError, rebuildClaimJob } from '../../shared/job/index.js';
import { OWNER_KIND } from '../../shared/job/metadata.js';
import { match, type BindingInForce, type Verdict } from '../../shared/jobclaim.js';
import type { MigrationPass } from './context.js';
import { migrationInputFingerprint } from './fingerprint.js';

/** The plan an Apply claim runs, read uncached under its planRef (undefined when gone or replaced). */
export async function claimPlan(pass: MigrationPass, claim: ActiveOperation): Promise<PtahMigrationPlan | undefined> {
  if (!claim.planRef) return undefined;
  const plan = await pass.deps.client.tryGet<PtahMigrationPlan>({ apiVersion: API_VERSION, kind: KINDS.PtahMigrationPlan.kind, namespace: pass.namespace, name: claim.planRef.name });
  return plan?.metadata.uid === claim.planRef.uid ? plan : undefined;
}

function bindingInForce(pass: MigrationPass): BindingInForce | undefined {
  const binding = pass.status.executionBinding;
  return binding && { epoch: binding.epoch, controllerStateVersion: binding.controllerStateVersion };
}

/**
 * The Job `claim` builds (the same rebuild the controller-write webhook admits the create against). `liveJob`
 * gives the manager identity the stored Job recorded, which binds nothing and comes first.
 */
export function rebuildMigrationJob(pass: MigrationPass, claim: ActiveOperation, plan: PtahMigrationPlan | undefined, liveJob?: V1Job): V1Job {
  const binding = pass.status.executionBinding;
  if (!binding) throw new JobBuildError('InvalidBinding', 'the migration records no execution binding');
  const { controllerImage, controllerRevision, runnerImage } = pass.deps.manager;
  return rebuildClaimJob({
    owner: pass.m,
    claim,
    plan,
    coordinationDigest: pass.realm(),
    // The bound components come from the binding in force (docs/execution-binding.md).
    manager: { controllerImage, controllerRevision, runnerImage, executorIdentity: binding.executorIdentity!, controllerStateVersion: binding.controllerStateVersion, runnerProtocolVersion: binding.runnerProtocolVersion },
    liveJob,
  });
}

/** Whether the claim's inputs still hold: its fingerprint recomputes and, for an Apply, its plan still stands. */
export async function claimInputsHold(pass: MigrationPass, claim: ActiveOperation): Promise<{ hold: true; plan?: PtahMigrationPlan } | { hold: false; why: string }> {
  const binding = pass.status.executionBinding;
  if (!binding || binding.epoch !== claim.executionBindingID) return { hold: false, why: 'the execution binding moved' };
  const fingerprint = migrationInputFingerprint(pass.m, {
    type: claim.type,
    artifact: pass.status.artifact,
    executionBindingID: binding.epoch,
    coordinationDigest: pass.realm(),
    planRef: claim.planRef,
  });
  if (fingerprint !== claim.inputFingerprint) return { hold: false, why: 'the resource changed since the claim was made (spec, artifact or binding)' };
  if (claim.type !== 'Apply') return { hold: true };
  const plan = await claimPlan(pass, claim);
  return plan ? { hold: true, plan } : { hold: false, why: `the plan ${claim.planRef?.name ?? '?'} the Apply runs was deleted or replaced` };
}

/** Adoption and supervision while the inputs hold: the Job is held to its rebuild (validateAdoptedJobIntent). */
export function validateAdoptedMigrationJobIntent(pass: MigrationPass, claim: ActiveOperation, job: V1Job, plan: PtahMigrationPlan | undefined): Verdict {
  let rebuilt: V1Job;
  try {
    rebuilt = rebuildMigrationJob(pass, claim, plan, job);
  } catch (e) {
    if (e instanceof JobBuildError) return { ok: false, reason: `the claim cannot rebuild its Job: ${e.message}` };
    throw e;
  }
  return match(job, claim, { kind: 'rebuild', rebuilt }, bindingInForce(pass));
}

/** Once the inputs moved: the Job is held to what the claim fixes (the match the webhook applies to the cleanup TTL). */
export function validateMigrationJobEnvelope(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Verdict {
  return match(job, claim, { kind: 'claim-fixed', owner: { kind: OWNER_KIND.migration, name: pass.name, namespace: pass.namespace, uid: pass.uid } }, bindingInForce(pass));
}

export type HeldJob = { ok: true; inputsHold: boolean; why?: string; plan?: PtahMigrationPlan } | { ok: false; why: string };

/**
 * Holds the Job under the claim's name to the claim (holdMigrationJobToItsClaim): to its rebuild while the inputs
 * hold, to what the claim fixes once they moved. A Job that fails either is settled as a lost one.
 */
export async function holdMigrationJobToItsClaim(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Promise<HeldJob> {
  const inputs = await claimInputsHold(pass, claim);
  if (inputs.hold) {
    const verdict = validateAdoptedMigrationJobIntent(pass, claim, job, inputs.plan);
    return verdict.ok ? { ok: true, inputsHold: true, plan: inputs.plan } : { ok: false, why: verdict.reason };
  }
  const verdict = validateMigrationJobEnvelope(pass, claim, job);
  return verdict.ok ? { ok: true, inputsHold: false, why: inputs.why } : { ok: false, why: verdict.reason };
}
