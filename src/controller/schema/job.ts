// A schema claim's Job: rebuilt from the claim and the objects it was decided from, and held to its claim through
// jobclaim.match on every pass that adopts or supervises it. While the claim's inputs hold, the Job is held to the
// rebuild; once they moved it cannot be rebuilt and is held to what the claim fixes.
import type { V1Job } from '@kubernetes/client-node';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { PtahSchemaPlan } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { JobBuildError, rebuildClaimJob } from '../../shared/job/index.js';
import { match, type JobClaim, type Verdict } from '../../shared/jobclaim.js';
import { servesProof, type SchemaPass } from './context.js';
import { schemaInputFingerprint } from './fingerprint.js';

/** The plan an Apply claim runs, read uncached under its planRef (undefined when gone or replaced). */
export async function claimPlan(pass: SchemaPass, claim: ActiveOperation): Promise<PtahSchemaPlan | undefined> {
  if (!claim.planRef) return undefined;
  const plan = await pass.deps.client.tryGet<PtahSchemaPlan>({ apiVersion: API_VERSION, kind: KINDS.PtahSchemaPlan.kind, namespace: pass.namespace, name: claim.planRef.name });
  return plan?.metadata.uid === claim.planRef.uid ? plan : undefined;
}

/** The Job `claim` builds; `liveJob` gives the manager identity the stored Job recorded, which binds nothing. */
export function rebuildSchemaJob(pass: SchemaPass, claim: ActiveOperation, plan: PtahSchemaPlan | undefined, liveJob?: V1Job): V1Job {
  const binding = pass.status.executionBinding;
  if (!binding) throw new JobBuildError('InvalidBinding', 'the schema records no execution binding');
  const { controllerImage, controllerRevision, runnerImage } = pass.deps.manager;
  return rebuildClaimJob({
    owner: pass.s,
    claim,
    plan,
    coordinationDigest: pass.realm(),
    manager: { controllerImage, controllerRevision, runnerImage, executorIdentity: binding.executorIdentity!, controllerStateVersion: binding.controllerStateVersion, runnerProtocolVersion: binding.runnerProtocolVersion },
    liveJob,
  });
}

/**
 * Whether the claim's inputs still hold: its fingerprint recomputes (a proof reading against the Apply it proves,
 * any other claim against the spec's generation) and, for an Apply, its plan still stands.
 */
export async function schemaClaimInputsHold(pass: SchemaPass, claim: ActiveOperation): Promise<{ hold: true; plan?: PtahSchemaPlan } | { hold: false; why: string }> {
  const binding = pass.status.executionBinding;
  if (!binding || binding.epoch !== claim.executionBindingID) return { hold: false, why: 'the execution binding moved' };
  if (claim.proofOf !== undefined && !servesProof(pass, claim)) return { hold: false, why: 'the proof this reading carries out is no longer owed' };
  const fingerprint = schemaInputFingerprint(pass.s, {
    type: claim.type,
    artifact: claim.proofOf ? claim.artifact : pass.status.artifact,
    executionBindingID: binding.epoch,
    coordinationDigest: claim.proofOf ? pass.status.pendingObservation!.coordinationDigest : pass.realm(),
    planRef: claim.planRef,
    proofOf: claim.proofOf,
  });
  if (fingerprint !== claim.inputFingerprint) return { hold: false, why: 'the resource changed since the claim was made (spec, artifact or binding)' };
  if (claim.type !== 'Apply') return { hold: true };
  const plan = await claimPlan(pass, claim);
  return plan ? { hold: true, plan } : { hold: false, why: `the plan ${claim.planRef?.name ?? '?'} the Apply runs was deleted or replaced` };
}

function validateAdoptedJobIntent(pass: SchemaPass, claim: ActiveOperation, job: V1Job, plan: PtahSchemaPlan | undefined): Verdict {
  let rebuilt: V1Job;
  try {
    rebuilt = rebuildSchemaJob(pass, claim, plan, job);
  } catch (e) {
    if (e instanceof JobBuildError) return { ok: false, reason: `the claim cannot rebuild its Job: ${e.message}` };
    throw e;
  }
  return match(job, claim, { kind: 'rebuild', rebuilt }, pass.bindingInForce());
}

/** What the claim fixes, without a rebuild (the match the controller-write webhook applies to the cleanup TTL). */
export function validateSchemaJobEnvelope(pass: SchemaPass, claim: JobClaim, job: V1Job, options: { retiredEpoch?: boolean } = {}): Verdict {
  return match(job, claim, { kind: 'claim-fixed', owner: pass.owner() }, options.retiredEpoch ? undefined : pass.bindingInForce());
}

export type HeldJob = { ok: true; inputsHold: boolean; why?: string; plan?: PtahSchemaPlan } | { ok: false; why: string };

/** Holds the Job under the claim's name to the claim: to its rebuild while the inputs hold, to what the claim fixes once they moved. */
export async function holdSchemaJobToItsClaim(pass: SchemaPass, claim: ActiveOperation, job: V1Job): Promise<HeldJob> {
  const inputs = await schemaClaimInputsHold(pass, claim);
  if (inputs.hold) {
    const verdict = validateAdoptedJobIntent(pass, claim, job, inputs.plan);
    return verdict.ok ? { ok: true, inputsHold: true, plan: inputs.plan } : { ok: false, why: verdict.reason };
  }
  const verdict = validateSchemaJobEnvelope(pass, claim, job);
  return verdict.ok ? { ok: true, inputsHold: false, why: inputs.why } : { ok: false, why: verdict.reason };
}
