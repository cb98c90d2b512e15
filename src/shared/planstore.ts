// A schema plan's bytes, split into chunks and projected into ConfigMaps (the seed's planstore.Project). An Apply
// Pod holds no Kubernetes credential and the kubelet mounts no custom resource, so the controller copies the
// verified chunks of a PtahSchemaPlan into immutable ConfigMaps of the same names, owned by the plan; the Job
// mounts them at /plan as 000.plan, 001.plan, ... and the runner puts the bytes back together and checks their
// digest. Whole-plan content digest = sha256 of the plan bytes (= digest(document) when the bytes are the
// document's canonical JSON, src/shared/canonical.ts).
import type { V1ConfigMap } from '@kubernetes/client-node';
import { isDigest, sha256Digest } from './canonical.js';
import { MANAGED_BY, OWNER_API_VERSION, JOB_LABELS } from './job/metadata.js';
import { jsonEqual, OK, refuse, toPlain, type Verdict } from './job/plain.js';

export const PLAN_CHUNK_MAX_BYTES = 512 * 1024;
export const PLAN_MAX_CHUNKS = 16;
export const PLAN_MAX_BYTES = PLAN_CHUNK_MAX_BYTES * PLAN_MAX_CHUNKS;
/** The key that holds a chunk's bytes, in a projection ConfigMap's binaryData and in the Job's projected volume. */
export const PLAN_CHUNK_KEY = 'chunk';
/** Label on a projection ConfigMap naming its PtahSchemaPlan. */
export const PLAN_LABEL = 'operator.ptah.run/plan';
const PLAN_KIND = 'PtahSchemaPlan';

export class PlanStoreError extends Error {
  override name = 'PlanStoreError';
}

/** The plan object a projection belongs to (a PtahSchemaPlan; only these fields are read). */
export interface PlanObject {
  metadata?: { name?: string; namespace?: string; uid?: string };
}

/** What a plan says its bytes are: PtahSchemaPlan.spec fits. */
export interface PlanContent {
  chunks: readonly string[];
  contentDigest: string;
  size?: number;
}

/** A PtahSchemaPlanChunk (spec.data is base64 of the chunk's bytes). */
export interface PlanChunkObject {
  metadata?: { name?: string };
  spec: { data: string };
}

export function planContentDigest(bytes: Uint8Array): string {
  return sha256Digest(bytes);
}

/** Splits plan bytes into chunks of at most PLAN_CHUNK_MAX_BYTES; refuses an empty or oversized plan. */
export function splitPlan(bytes: Uint8Array): Uint8Array[] {
  if (bytes.length === 0) throw new PlanStoreError('the plan is empty');
  if (bytes.length > PLAN_MAX_BYTES) throw new PlanStoreError(`the plan is ${bytes.length} bytes; at most ${PLAN_MAX_BYTES} can be stored and run`);
  const chunks: Uint8Array[] = [];
  for (let offset = 0; offset < bytes.length; offset += PLAN_CHUNK_MAX_BYTES) chunks.push(bytes.subarray(offset, offset + PLAN_CHUNK_MAX_BYTES));
  return chunks;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Chunk names derived from the plan's: `<plan>-000`, `<plan>-001`, ... The plan name is carried whole in a label. */
export function chunkNamesFor(planName: string, count: number): string[] {
  if (planName.length > 63 || !DNS_SUBDOMAIN.test(planName)) throw new PlanStoreError(`plan name ${JSON.stringify(planName)} is not a DNS name of at most 63 characters`);
  if (!Number.isSafeInteger(count) || count < 1 || count > PLAN_MAX_CHUNKS) throw new PlanStoreError(`a plan has 1 to ${PLAN_MAX_CHUNKS} chunks, not ${count}`);
  return Array.from({ length: count }, (_, i) => `${planName}-${String(i).padStart(3, '0')}`);
}

/** The file a chunk is projected to under /plan; the runner reads them in sorted order. */
export function chunkFileName(index: number): string {
  return `${String(index).padStart(3, '0')}.plan`;
}

/** Immutable ConfigMaps of the chunks' names, owned by the plan (controller, blocking deletion), holding its bytes. */
export function projectionConfigMaps(plan: PlanObject, chunks: readonly Uint8Array[]): V1ConfigMap[] {
  const { name, namespace, uid } = plan.metadata ?? {};
  if (!name || !namespace || !uid) throw new PlanStoreError('the plan has no name, namespace or UID to own its projection');
  const names = chunkNamesFor(name, chunks.length);
  return chunks.map((chunk, i) => {
    if (chunk.length === 0 || chunk.length > PLAN_CHUNK_MAX_BYTES) throw new PlanStoreError(`chunk ${i} of plan ${name} holds ${chunk.length} bytes; a chunk holds 1 to ${PLAN_CHUNK_MAX_BYTES}`);
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: names[i],
        namespace,
        labels: { [JOB_LABELS.managedBy]: MANAGED_BY, [PLAN_LABEL]: name },
        ownerReferences: [{ apiVersion: OWNER_API_VERSION, kind: PLAN_KIND, name, uid, controller: true, blockOwnerDeletion: true }],
      },
      immutable: true,
      binaryData: { [PLAN_CHUNK_KEY]: Buffer.from(chunk).toString('base64') },
    };
  });
}

/**
 * Puts a plan's bytes back together from its projection ConfigMaps or its PtahSchemaPlanChunks, in the order
 * the plan lists its chunks, and refuses a missing, extra, oversized or undecodable chunk and any size or
 * content-digest mismatch.
 */
export function reconstructPlanBytes(parts: readonly (V1ConfigMap | PlanChunkObject)[], plan: PlanContent): Uint8Array {
  if (!isDigest(plan.contentDigest)) throw new PlanStoreError('the plan names no well-formed content digest');
  if (plan.chunks.length < 1 || plan.chunks.length > PLAN_MAX_CHUNKS) throw new PlanStoreError(`the plan lists ${plan.chunks.length} chunks; a plan has 1 to ${PLAN_MAX_CHUNKS}`);
  const byName = new Map<string, V1ConfigMap | PlanChunkObject>();
  for (const part of parts) {
    const name = part.metadata?.name ?? '';
    if (byName.has(name)) throw new PlanStoreError(`chunk ${JSON.stringify(name)} is given twice`);
    byName.set(name, part);
  }
  const extra = [...byName.keys()].filter((name) => !plan.chunks.includes(name));
  if (extra.length > 0) throw new PlanStoreError(`chunk ${JSON.stringify(extra[0])} is not one the plan lists`);
  const chunks = plan.chunks.map((name) => {
    const part = byName.get(name);
    if (!part) throw new PlanStoreError(`chunk ${JSON.stringify(name)} of the plan is missing`);
    const bytes = decodeBase64(chunkData(part), name);
    if (bytes.length === 0 || bytes.length > PLAN_CHUNK_MAX_BYTES) throw new PlanStoreError(`chunk ${JSON.stringify(name)} holds ${bytes.length} bytes; a chunk holds 1 to ${PLAN_CHUNK_MAX_BYTES}`);
    return bytes;
  });
  const whole = Buffer.concat(chunks);
  if (plan.size !== undefined && whole.length !== plan.size) throw new PlanStoreError(`the chunks hold ${whole.length} bytes; the plan says ${plan.size}`);
  if (planContentDigest(whole) !== plan.contentDigest) throw new PlanStoreError('the chunks do not hash to the plan content digest');
  return new Uint8Array(whole);
}

function chunkData(part: V1ConfigMap | PlanChunkObject): string | undefined {
  if ('spec' in part) return part.spec?.data;
  const configMap = part as V1ConfigMap;
  if (configMap.data && Object.keys(configMap.data).length > 0) {
    throw new PlanStoreError(`projection ${JSON.stringify(configMap.metadata?.name)} holds text data; a projection holds binaryData.${PLAN_CHUNK_KEY} only`);
  }
  return configMap.binaryData?.[PLAN_CHUNK_KEY];
}

function decodeBase64(data: string | undefined, name: string): Buffer {
  if (typeof data !== 'string') throw new PlanStoreError(`chunk ${JSON.stringify(name)} holds no ${PLAN_CHUNK_KEY} data`);
  const bytes = Buffer.from(data, 'base64');
  // Buffer.from skips characters it cannot decode; only the canonical spelling is accepted.
  if (bytes.toString('base64') !== data) throw new PlanStoreError(`chunk ${JSON.stringify(name)} is not canonical base64`);
  return bytes;
}

/**
 * Whether an existing (or submitted) ConfigMap is exactly the wanted projection: same name and namespace,
 * immutable, the same labels, the plan as its one controller owner and the same bytes. A ConfigMap under a
 * projection name that is not this plan's projection cannot be repaired: its name is derived from the plan.
 */
export function projectionMatches(existing: V1ConfigMap, wanted: V1ConfigMap): Verdict {
  const have = existing.metadata ?? {};
  const want = wanted.metadata ?? {};
  const name = JSON.stringify(want.name);
  if (have.name !== want.name || have.namespace !== want.namespace) return refuse(`ConfigMap ${JSON.stringify(have.name)} is not the projection ${name}`);
  if (existing.immutable !== true) return refuse(`projection ${name} is not immutable`);
  if (!jsonEqual(toPlain(have.ownerReferences) ?? null, toPlain(want.ownerReferences) ?? null)) return refuse(`projection ${name} is not owned by its plan alone`);
  if (!jsonEqual(toPlain(have.labels) ?? null, toPlain(want.labels) ?? null)) return refuse(`projection ${name} carries other labels than its plan's projection`);
  if (!jsonEqual(toPlain(existing.data) ?? null, toPlain(wanted.data) ?? null) || !jsonEqual(toPlain(existing.binaryData) ?? null, toPlain(wanted.binaryData) ?? null)) {
    return refuse(`projection ${name} holds other bytes than the plan's chunk`);
  }
  return OK;
}
