// The Pod admission snapshot (the seed's podintent.Resolve): made durable in its own pass before any Job carries
// its digest, it records which Pod template the claim's Job runs and under which ServiceAccount, RuntimeClass
// and PriorityClass its Pod is admitted. Every later pass rebuilds the Job and holds the template to it.
import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import { digest, isDigest } from './canonical.js';
import type { KubeClient, KubeObject } from './kube-client.js';
import { GENERATED_IDENTITY_LABEL_KEYS, JOB_ANNOTATIONS } from './job/metadata.js';
import { isPlainObject, plainObject, toPlain, type PlainObject } from './job/plain.js';
import { withQuantityValues } from './job/quantity.js';

export const SNAPSHOT_VERSION = 'v1';

export interface AdmissionSnapshot {
  version: 'v1';
  /** digest of the snapshot without this field. */
  digest: string;
  /** templateDigestOf the Pod template the claim's Job runs. */
  templateDigest: string;
  serviceAccount: string;
  runtimeClass?: string;
  priorityClass?: string;
}

/** What any persisted snapshot has; its digest covers every other field, whichever a newer version adds. */
export interface SnapshotLike {
  version: string;
  digest: string;
  templateDigest: string;
}

/** What the resolver read besides the template (never a Secret). */
export interface SnapshotExtras {
  /** The PriorityClass marked globalDefault, which Priority admission gives a Pod whose template names none. */
  globalDefaultPriorityClass?: string;
}

/** A PriorityClass as far as the snapshot reads it. */
interface PriorityClassLike {
  metadata?: { name?: string };
  value?: number;
  globalDefault?: boolean;
}

/**
 * What Priority admission will give a Pod whose template names no PriorityClass: the class marked globalDefault,
 * and when several are, the one with the smallest value (the API's documented rule).
 */
export function globalDefaultPriorityClass(classes: readonly PriorityClassLike[]): string | undefined {
  const defaults = classes.filter((c) => c.globalDefault === true && c.metadata?.name);
  defaults.sort((a, b) => (a.value ?? 0) - (b.value ?? 0) || a.metadata!.name!.localeCompare(b.metadata!.name!));
  return defaults[0]?.metadata?.name;
}

/** Reads what the resolver needs besides the template (the cluster's PriorityClasses; never a Secret). */
export async function readSnapshotExtras(client: Pick<KubeClient, 'list'>): Promise<SnapshotExtras> {
  const classes = await client.list<PriorityClassLike & KubeObject>('scheduling.k8s.io/v1', 'PriorityClass', undefined);
  const globalDefault = globalDefaultPriorityClass(classes);
  return globalDefault ? { globalDefaultPriorityClass: globalDefault } : {};
}

export class PodIntentError extends Error {
  override name = 'PodIntentError';
}

/**
 * A plain Pod spec as it compares: the deprecated `serviceAccount` alias is dropped where it repeats the name in
 * force (some API server versions fill it in, others do not) and quantities are read by value.
 */
export function normalizedPodSpec(spec: PlainObject): PlainObject {
  const normalized = withQuantityValues(spec);
  if (normalized.serviceAccount !== undefined && normalized.serviceAccount === normalized.serviceAccountName) delete normalized.serviceAccount;
  return normalized;
}

/**
 * Digest of a Pod template as the claim fixes it: without the labels the API server generates from the Job's
 * identity and without the snapshot-digest annotation (the snapshot holds this digest, so it cannot cover itself).
 */
export function templateDigestOf(template: V1PodTemplateSpec): string {
  const plain = plainObject(template);
  const metadata = plainObject(plain.metadata);
  if (isPlainObject(metadata.labels)) {
    for (const key of GENERATED_IDENTITY_LABEL_KEYS) delete metadata.labels[key];
    if (Object.keys(metadata.labels).length === 0) delete metadata.labels;
  }
  if (isPlainObject(metadata.annotations)) {
    delete metadata.annotations[JOB_ANNOTATIONS.admissionSnapshotDigest];
    if (Object.keys(metadata.annotations).length === 0) delete metadata.annotations;
  }
  return digest({ ...plain, metadata, spec: normalizedPodSpec(plainObject(plain.spec)) });
}

/** The admission snapshot of a claim's Pod template (the seed's podintent.Resolve). */
export function resolveSnapshot(template: V1PodTemplateSpec, extras: SnapshotExtras = {}): AdmissionSnapshot {
  const spec = template.spec;
  if (!spec) throw new PodIntentError('the Pod template has no spec');
  if (!spec.serviceAccountName) throw new PodIntentError('the Pod template names no ServiceAccount');
  const priorityClass = spec.priorityClassName || extras.globalDefaultPriorityClass || undefined;
  const body = {
    version: SNAPSHOT_VERSION,
    templateDigest: templateDigestOf(template),
    serviceAccount: spec.serviceAccountName,
    ...(spec.runtimeClassName ? { runtimeClass: spec.runtimeClassName } : {}),
    ...(priorityClass ? { priorityClass } : {}),
  } as const;
  return { ...body, digest: digest(body) };
}

/** Why a persisted snapshot cannot be used, or undefined when its digest recomputes. */
export function snapshotProblem(snapshot: SnapshotLike | undefined): string | undefined {
  if (!snapshot) return 'there is no admission snapshot';
  if (snapshot.version !== SNAPSHOT_VERSION) return `admission snapshot version ${JSON.stringify(snapshot.version)} is not ${SNAPSHOT_VERSION}`;
  if (!isDigest(snapshot.templateDigest) || !isDigest(snapshot.digest)) return 'the admission snapshot holds a malformed digest';
  const { digest: recorded, ...body } = plainObject(snapshot);
  if (typeof body.serviceAccount !== 'string' || body.serviceAccount === '') return 'the admission snapshot names no ServiceAccount';
  if (digest(toPlain(body)) !== recorded) return 'the admission snapshot does not hash to its recorded digest';
  return undefined;
}

export function verifySnapshot(snapshot: SnapshotLike | undefined): boolean {
  return snapshotProblem(snapshot) === undefined;
}
