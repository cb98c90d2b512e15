// A schema claim's Job (claim-job.ts): rebuilt from the claim and the objects it was decided from, and held to its
// claim; the schema supplies its plan and whether its claim's inputs still hold (a proof reading's, against the
// Apply it proves).
import type { V1Job } from '@kubernetes/client-node';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { PtahSchemaPlan } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import type { HeldJob } from '../active-claim.js';
import { holdJobToItsClaim, rebuildOwnedJob } from '../claim-job.js';
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
  return rebuildOwnedJob(pass, pass.s, pass.status.executionBinding, claim, plan, liveJob);
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
    // A Resolve is decided before any pin: it finds one.
    artifact: claim.proofOf ? claim.artifact : claim.type === 'Resolve' ? undefined : pass.status.artifact,
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

/** Holds the Job under the claim's name to the claim (claim-job.ts). */
export async function holdSchemaJobToItsClaim(pass: SchemaPass, claim: ActiveOperation, job: V1Job): Promise<HeldJob<PtahSchemaPlan>> {
  return holdJobToItsClaim(pass, claim, job, await schemaClaimInputsHold(pass, claim), (plan, liveJob) => rebuildSchemaJob(pass, claim, plan, liveJob));
}
