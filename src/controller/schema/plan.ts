// The PtahSchemaPlan: the exact statements one Apply may run, bound to everything they were computed from (the
// reading, the artifact, the verification policy, the realm, the database the reading reached, the policy and the
// execution binding). It is published from the Plan operation that computed it, with its bytes in
// PtahSchemaPlanChunks; its name comes from its fingerprint, so publishing the same plan twice finds the first
// one, and any moved binding publishes a new plan with a new name. Before an Apply is marked, the verified chunks
// are projected into immutable ConfigMaps of the same names, which the Apply Pod mounts (the seed's planstore.Project).
import type { V1ConfigMap } from '@kubernetes/client-node';
import { API_VERSION, KINDS, LABELS } from '../../shared/api/names.js';
import type { CurrentPlan, PtahSchemaPlan, PtahSchemaPlanChunk, PtahSchemaPlanSpec } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { canonicalJson, digest } from '../../shared/canonical.js';
import type { SchemaPlanDocument } from '../../shared/executor-report.js';
import { isAlreadyExists, type ResourceRef } from '../../shared/kube-client.js';
import { chunkNamesFor, planContentDigest, PlanStoreError, projectionConfigMaps, projectionMatches, reconstructPlanBytes, splitPlan } from '../../shared/planstore.js';
import type { SchemaPass } from './context.js';
import { schemaPolicyFingerprint } from './fingerprint.js';

const NAME_PREFIX = 'ptah-plan-';

export class PlanError extends Error {
  override name = 'PlanError';
}

/** The plan cannot be staged as approved (a foreign ConfigMap under a projection name, or chunks that no longer hold its content): no retry can clear it. */
export class ProjectionConflict extends Error {
  override name = 'ProjectionConflict';
}

/**
 * Everything a plan's fingerprint binds: its spec without its name-derived chunks and its time. The Plan operation
 * that computed it is bound too: each computation publishes its own plan, so a publication is only ever resumed by
 * the operation that began it (the one the controller-write webhook admits its chunks for), and an approval never
 * carries over to a plan computed again.
 */
type BoundSpec = Omit<PtahSchemaPlanSpec, 'fingerprint' | 'chunks' | 'createdAt'>;

function boundOf(spec: PtahSchemaPlanSpec): BoundSpec {
  const { fingerprint: _f, chunks: _c, createdAt: _t, ...bound } = spec;
  return bound;
}

const fingerprintOf = (bound: BoundSpec): string => digest({ version: 1, ...bound });

export const planNameFor = (fingerprint: string): string => `${NAME_PREFIX}${fingerprint.slice('sha256:'.length, 'sha256:'.length + 24)}`;

const planRef = (pass: SchemaPass, name: string) => ({ apiVersion: API_VERSION, kind: KINDS.PtahSchemaPlan.kind, namespace: pass.namespace, name });
const chunkRef = (pass: SchemaPass, name: string) => ({ apiVersion: API_VERSION, kind: KINDS.PtahSchemaPlanChunk.kind, namespace: pass.namespace, name });

/** What a plan computed now would bind, from the status (and the reading's database). */
function bindingsNow(pass: SchemaPass, targetIdentityDigest: string | undefined): Omit<BoundSpec, 'contentDigest' | 'size' | 'statementCount' | 'destructive' | 'privilegeChanging' | 'lockingStatementCount' | 'transactional' | 'actualStateFingerprint' | 'producedBy'> | undefined {
  const { artifact, executionBinding } = pass.status;
  if (!artifact || !executionBinding || !targetIdentityDigest) return undefined;
  return {
    schemaRef: { name: pass.name, uid: pass.uid },
    artifactDigest: artifact.digest,
    coordinationDigest: pass.realm(),
    targetIdentityDigest,
    policyFingerprint: schemaPolicyFingerprint(pass.s),
    verificationPolicyUID: artifact.verificationPolicyUID,
    verificationPolicyDigest: artifact.verificationPolicyDigest,
    executionBindingID: executionBinding.epoch,
  };
}

/** The status record of a published plan (status.plan). */
export function currentPlanStatus(plan: PtahSchemaPlan, approvalRequiredBecause?: string): CurrentPlan {
  return {
    name: plan.metadata.name!,
    uid: plan.metadata.uid!,
    fingerprint: plan.spec.fingerprint,
    contentDigest: plan.spec.contentDigest,
    destructive: plan.spec.destructive,
    privilegeChanging: plan.spec.privilegeChanging,
    lockingStatementCount: plan.spec.lockingStatementCount,
    statementCount: plan.spec.statementCount,
    ...(approvalRequiredBecause ? { approvalRequiredBecause } : {}),
  };
}

/**
 * Publishes the plan a harvested Plan operation computed (the seed's publishPlan): the PtahSchemaPlan, then each
 * PtahSchemaPlanChunk. It resumes and never transacts: an object already stored under its name must be exactly the
 * one this publication would write (its time aside), or the publication fails.
 */
export async function publishSchemaPlan(pass: SchemaPass, claim: ActiveOperation, document: SchemaPlanDocument, contentDigest: string, targetIdentityDigest: string): Promise<PtahSchemaPlan> {
  const bytes = Buffer.from(canonicalJson(document), 'utf8');
  if (planContentDigest(bytes) !== contentDigest) throw new PlanError('the plan document does not hash to the content digest its frame names');
  const bindings = bindingsNow(pass, targetIdentityDigest);
  if (!bindings) throw new PlanError('a plan needs a pinned artifact, an execution binding and a reading of the database');
  let parts: Uint8Array[];
  try {
    parts = splitPlan(bytes);
  } catch (e) {
    if (e instanceof PlanStoreError) throw new PlanError(e.message);
    throw e;
  }
  const bound: BoundSpec = {
    ...bindings,
    contentDigest,
    size: bytes.length,
    statementCount: document.statementCount,
    destructive: document.destructive,
    privilegeChanging: document.privilegeChanging,
    lockingStatementCount: document.lockingStatements.length,
    transactional: document.transactional,
    actualStateFingerprint: document.actualStateFingerprint,
    producedBy: { operationID: claim.id, jobName: claim.jobName },
  };
  const fingerprint = fingerprintOf(bound);
  const name = planNameFor(fingerprint);
  const chunks = chunkNamesFor(name, parts.length);
  const plan: PtahSchemaPlan = {
    apiVersion: API_VERSION,
    kind: KINDS.PtahSchemaPlan.kind,
    metadata: {
      name,
      namespace: pass.namespace,
      labels: { [LABELS.schema]: pass.name },
      ownerReferences: [{ apiVersion: API_VERSION, kind: KINDS.PtahSchema.kind, name: pass.name, uid: pass.uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: { ...bound, fingerprint, chunks, createdAt: pass.nowIso() },
  };
  const stored = await createOrFind(pass, plan, (found) => {
    if (found.metadata.deletionTimestamp) return 'it is being deleted';
    if (canonicalJson(boundOf(found.spec)) !== canonicalJson(bound) || canonicalJson(found.spec.chunks) !== canonicalJson(chunks)) return 'it binds something else';
    if (canonicalJson(found.metadata.ownerReferences ?? []) !== canonicalJson(plan.metadata.ownerReferences)) return 'it has other owners';
    return undefined;
  }, planRef(pass, name));
  const owner = { apiVersion: API_VERSION, kind: KINDS.PtahSchemaPlan.kind, name, uid: stored.metadata.uid!, controller: true, blockOwnerDeletion: true };
  for (const [i, chunkName] of chunks.entries()) {
    const data = Buffer.from(parts[i]!).toString('base64');
    const chunk: PtahSchemaPlanChunk = {
      apiVersion: API_VERSION,
      kind: KINDS.PtahSchemaPlanChunk.kind,
      metadata: { name: chunkName, namespace: pass.namespace, labels: { [LABELS.plan]: name, [LABELS.schema]: pass.name }, ownerReferences: [owner] },
      spec: { data },
    };
    await createOrFind(pass, chunk, (found) => {
      if (found.spec.data !== data) return 'it holds other bytes';
      if (canonicalJson(found.metadata.ownerReferences ?? []) !== canonicalJson([owner])) return 'it is not owned by the plan alone';
      return undefined;
    }, chunkRef(pass, chunkName));
  }
  return stored;
}

async function createOrFind<T extends PtahSchemaPlan | PtahSchemaPlanChunk>(pass: SchemaPass, object: T, differs: (found: T) => string | undefined, ref: ResourceRef): Promise<T> {
  try {
    return await pass.deps.client.create(object);
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
  }
  const found = await pass.deps.client.get<T>(ref);
  const why = differs(found);
  if (why) throw new PlanError(`a ${object.kind} named ${object.metadata.name} exists but is not this plan's: ${why}`);
  return found;
}

export type PlanVerdict = { ok: true; plan: PtahSchemaPlan } | { ok: false; why: string };

/**
 * The plan status.plan names, read uncached and held to every binding it was computed under as the status now
 * stands (the seed's currentPlan). Any binding having moved discards the plan; a re-read, never a cached comparison.
 * `read`: a plan the same step has just read uncached (the claim's), which stands for the read when it is under the
 * name status.plan gives.
 */
export async function currentSchemaPlan(pass: SchemaPass, read?: PtahSchemaPlan): Promise<PlanVerdict> {
  const ref = pass.status.plan;
  if (!ref) return { ok: false, why: 'no plan is published' };
  const plan = read?.metadata.name === ref.name ? read : await pass.deps.client.tryGet<PtahSchemaPlan>(planRef(pass, ref.name));
  if (!plan) return { ok: false, why: `plan ${ref.name} no longer exists` };
  if (plan.metadata.uid !== ref.uid) return { ok: false, why: `plan ${ref.name} was replaced` };
  if (plan.metadata.deletionTimestamp) return { ok: false, why: `plan ${ref.name} is being deleted` };
  const bound = boundOf(plan.spec);
  if (fingerprintOf(bound) !== plan.spec.fingerprint || plan.spec.fingerprint !== ref.fingerprint) return { ok: false, why: `plan ${ref.name} does not hash to its fingerprint` };
  const now = bindingsNow(pass, pass.status.target?.identityDigest);
  if (!now) return { ok: false, why: 'the status holds no reading, pin or execution binding to hold the plan to' };
  for (const [key, value] of Object.entries(now) as [keyof typeof now, unknown][]) {
    if (canonicalJson(bound[key]) !== canonicalJson(value)) return { ok: false, why: `plan ${ref.name} was computed for another ${key}` };
  }
  return { ok: true, plan };
}

/** The plan's bytes from its PtahSchemaPlanChunks, read uncached and checked against its size and content digest. */
export async function loadPlanBytes(pass: SchemaPass, plan: PtahSchemaPlan): Promise<Uint8Array> {
  const found = await Promise.all(plan.spec.chunks.map((name) => pass.deps.client.tryGet<PtahSchemaPlanChunk>(chunkRef(pass, name))));
  const missing = plan.spec.chunks.filter((_, i) => !found[i]);
  if (missing.length > 0) throw new PlanStoreError(`chunk ${missing.join(', ')} of plan ${plan.metadata.name} no longer exists`);
  const chunks = found as PtahSchemaPlanChunk[];
  const owned = chunks.filter((c) => c.metadata.ownerReferences?.some((r) => r.controller === true && r.uid === plan.metadata.uid));
  if (owned.length !== chunks.length) throw new PlanStoreError(`a chunk of plan ${plan.metadata.name} is not owned by it`);
  return reconstructPlanBytes(chunks, plan.spec);
}

/**
 * The stage step (the seed's planstore.Project): the verified chunks copied into immutable ConfigMaps of the same
 * names, owned by the plan. One already stored is read back and must match; one that does not is a
 * ProjectionConflict, which retires the plan, because its name is derived from the plan. Chunks that no longer
 * reconstruct the approved content (one deleted or not the plan's) are a ProjectionConflict too: no retry can bring
 * the approved bytes back.
 */
export async function projectPlan(pass: SchemaPass, plan: PtahSchemaPlan): Promise<void> {
  let bytes: Uint8Array;
  try {
    bytes = await loadPlanBytes(pass, plan);
  } catch (e) {
    if (e instanceof PlanStoreError) throw new ProjectionConflict(`its stored chunks do not hold the approved content: ${e.message}`);
    throw e;
  }
  for (const wanted of projectionConfigMaps(plan, splitPlan(bytes))) {
    try {
      await pass.deps.client.create(wanted);
      continue;
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
    }
    const found = await pass.deps.client.get<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', namespace: pass.namespace, name: wanted.metadata!.name! });
    const verdict = projectionMatches(found, wanted);
    if (!verdict.ok) throw new ProjectionConflict(`ConfigMap ${wanted.metadata!.name!} under one of its projection names is not its projection: ${verdict.reason}`);
  }
}

