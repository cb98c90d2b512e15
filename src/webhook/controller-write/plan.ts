// The manager's plan-store writes. A PtahSchemaPlan and its PtahSchemaPlanChunks are published only from the
// Plan operation that computed them, once its Job has finished; a projection ConfigMap is created only for an
// Apply that has not crossed its dispatch boundary, and only with bytes that reconstruct the plan's content.
import type { V1ConfigMap, V1Job } from '@kubernetes/client-node';
import { KINDS } from '../../shared/api/names.js';
import type { PtahSchema, PtahSchemaPlan, PtahSchemaPlanChunk } from '../../shared/api/schema-kinds.js';
import { match } from '../../shared/jobclaim.js';
import { PLAN_LABEL, PlanStoreError, projectionConfigMaps, projectionMatches, reconstructPlanBytes, splitPlan } from '../../shared/planstore.js';
import { allow, optionalList, optionalObject, refuse, type Verdict } from '../admission.js';
import { readAll, readObject } from '../reads.js';
import type { AdmissionContext } from '../judge.js';
import { controllerOwnerOf, ownerReferencesOf, readOwner, refTo, type Owned } from './owner.js';

const SCHEMA = KINDS.PtahSchema.kind;
const PLAN = KINDS.PtahSchemaPlan.kind;
const CHUNK = KINDS.PtahSchemaPlanChunk.kind;

const terminal = (job: V1Job): boolean =>
  (job.status?.conditions ?? []).some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');

/** The schema a plan names, read uncached and held to the UID the plan records. */
async function schemaOfPlan(plan: PtahSchemaPlan, ctx: AdmissionContext): Promise<PtahSchema> {
  return readOwner<PtahSchema>(ctx.reader, plan.metadata.namespace!, { kind: SCHEMA, ...plan.spec.schemaRef });
}

/**
 * What publishes a plan: the schema's claim is the Plan operation named in the plan's producedBy, under the
 * plan's epoch, with its Job recorded, finished, and still the claim's Job (jobclaim.match on what the claim fixes).
 */
async function requirePublication(schema: PtahSchema, plan: PtahSchemaPlan, what: string, ctx: AdmissionContext): Promise<void> {
  const schemaName = `PtahSchema ${schema.metadata.namespace}/${schema.metadata.name}`;
  const claim = schema.status?.activeOperation;
  const prefix = `${what} does not come from the harvested Plan operation of ${schemaName}`;
  if (!claim || claim.type !== 'Plan') refuse(`${prefix}: its claim is ${claim ? `a ${claim.type}` : 'absent'}`);
  const { producedBy } = plan.spec;
  if (producedBy.operationID !== claim.id || producedBy.jobName !== claim.jobName) {
    refuse(`${prefix}: the plan names operation ${producedBy.operationID} (Job ${producedBy.jobName}), the claim is ${claim.id} (Job ${claim.jobName})`);
  }
  if (plan.spec.executionBindingID !== claim.executionBindingID) refuse(`${prefix}: the plan was computed under another execution epoch than the claim`);
  if (!claim.jobUID) refuse(`${prefix}: the claim has not recorded its Job's UID`);
  const job = await readObject<V1Job>(ctx.reader, refTo('Job', schema.metadata.namespace!, claim.jobName, 'batch/v1'));
  if (job.metadata?.uid !== claim.jobUID) refuse(`${prefix}: Job ${claim.jobName} is not the instance the claim recorded`);
  if (!terminal(job)) refuse(`${prefix}: Plan Job ${claim.jobName} has not finished`);
  const binding = schema.status?.executionBinding;
  const owner = { kind: SCHEMA, name: schema.metadata.name!, namespace: schema.metadata.namespace!, uid: schema.metadata.uid! };
  const verdict = match(job, claim, { kind: 'claim-fixed', owner }, binding && { epoch: binding.epoch, controllerStateVersion: binding.controllerStateVersion });
  if (!verdict.ok) refuse(`${prefix}: Plan Job ${claim.jobName} is outside its claim: ${verdict.reason}`);
}

/** PtahSchemaPlan CREATE, owned by the schema it names. */
export async function judgePlanCreate(plan: PtahSchemaPlan & Owned, ctx: AdmissionContext): Promise<Verdict> {
  const what = `PtahSchemaPlan ${plan.metadata.namespace}/${plan.metadata.name}`;
  const ownerRef = controllerOwnerOf(plan, [SCHEMA]);
  const schemaRef = plan.spec?.schemaRef;
  if (!schemaRef || schemaRef.name !== ownerRef.name || schemaRef.uid !== ownerRef.uid) refuse(`${what}: spec.schemaRef does not name its owner ${ownerRef.name} (uid ${ownerRef.uid})`);
  const schema = await readOwner<PtahSchema>(ctx.reader, plan.metadata.namespace, ownerRef);
  await requirePublication(schema, plan, what, ctx);
  return allow('the plan is published by the Plan operation that computed it');
}

/** PtahSchemaPlanChunk CREATE, owned by a plan that lists it, while that plan is being published. */
export async function judgeChunkCreate(chunk: PtahSchemaPlanChunk & Owned, ctx: AdmissionContext): Promise<Verdict> {
  const what = `PtahSchemaPlanChunk ${chunk.metadata.namespace}/${chunk.metadata.name}`;
  const plan = await readOwner<PtahSchemaPlan>(ctx.reader, chunk.metadata.namespace, controllerOwnerOf(chunk, [PLAN]));
  if (!plan.spec.chunks.includes(chunk.metadata.name)) refuse(`${what} is not a chunk PtahSchemaPlan ${plan.metadata.name} lists`);
  const schema = await schemaOfPlan(plan, ctx);
  await requirePublication(schema, plan, what, ctx);
  return allow('the chunk is published with its plan');
}

/** A ConfigMap the manager creates is a plan projection: it says so by its plan label or its plan owner. */
export function isProjection(configMap: V1ConfigMap & Owned): boolean {
  const labels = optionalObject(configMap.metadata.labels, 'object.metadata.labels');
  const labelled = labels?.[PLAN_LABEL] !== undefined;
  const owned = ownerReferencesOf(configMap).some((r) => r.kind === PLAN);
  return labelled || owned;
}

/** Projection ConfigMap CREATE: for the schema's current plan, under an Apply claim that has not dispatched yet. */
export async function judgeProjectionCreate(configMap: V1ConfigMap & Owned, ctx: AdmissionContext): Promise<Verdict> {
  const { namespace, name } = configMap.metadata;
  const what = `ConfigMap ${namespace}/${name}`;
  if (!isProjection(configMap)) {
    refuse(`${what} is not a plan projection (no ${PLAN_LABEL} label, no PtahSchemaPlan owner); plan projections are the only ConfigMaps the manager creates`);
  }
  const plan = await readOwner<PtahSchemaPlan>(ctx.reader, namespace, controllerOwnerOf(configMap, [PLAN]));
  if (!plan.spec.chunks.includes(name)) refuse(`${what} is not a chunk PtahSchemaPlan ${plan.metadata.name} lists`);
  const [schema, ...chunks] = await readAll<[PtahSchema, ...PtahSchemaPlanChunk[]]>(ctx.reader, [
    refTo(SCHEMA, namespace, plan.spec.schemaRef.name),
    ...plan.spec.chunks.map((chunk) => refTo(CHUNK, namespace, chunk)),
  ]);
  if (schema.metadata.uid !== plan.spec.schemaRef.uid) refuse(`PtahSchema ${namespace}/${schema.metadata.name} is not the schema PtahSchemaPlan ${plan.metadata.name} was computed for`);

  const prefix = `${what} does not belong to an Apply that can still be dispatched`;
  const claim = schema.status?.activeOperation;
  if (!claim || claim.type !== 'Apply') refuse(`${prefix}: PtahSchema ${schema.metadata.name}'s claim is ${claim ? `a ${claim.type}` : 'absent'}`);
  if (claim.jobUID || claim.dispatchStarted) refuse(`${prefix}: the active Apply has already crossed its dispatch boundary`);
  const current = schema.status?.plan;
  if (!current || current.name !== plan.metadata.name || current.uid !== plan.metadata.uid) refuse(`${prefix}: PtahSchemaPlan ${plan.metadata.name} is not the schema's current plan`);
  if (claim.planRef && (claim.planRef.name !== plan.metadata.name || claim.planRef.uid !== plan.metadata.uid)) refuse(`${prefix}: the Apply claim runs another plan`);

  let wanted: V1ConfigMap | undefined;
  try {
    const bytes = reconstructPlanBytes(chunks, plan.spec);
    wanted = projectionConfigMaps(plan, splitPlan(bytes)).find((c) => c.metadata?.name === name);
  } catch (e) {
    if (e instanceof PlanStoreError) refuse(`${what}: the plan's stored chunks do not reconstruct its content digest: ${e.message}`);
    throw e;
  }
  if (!wanted) refuse(`${what} is not one of the projections PtahSchemaPlan ${plan.metadata.name}'s bytes make`);
  const verdict = projectionMatches(configMap, wanted);
  if (!verdict.ok) refuse(`${what} does not match its immutable plan chunk: ${verdict.reason}`);
  const annotations = optionalObject(configMap.metadata.annotations, 'object.metadata.annotations') ?? {};
  if (Object.keys(annotations).length > 0 || (optionalList(configMap.metadata.finalizers, 'object.metadata.finalizers') ?? []).length > 0) {
    refuse(`${what} does not match its immutable plan chunk: a projection carries no annotations or finalizers`);
  }
  return allow('the projection holds the current plan’s bytes for an Apply not yet dispatched');
}
