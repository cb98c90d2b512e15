// The Pod admission snapshot (the seed's podintent.Resolve): made durable in its own pass before any Job carries
// its digest, it records which Pod template the claim's Job runs and under which ServiceAccount, RuntimeClass
// and PriorityClass its Pod is admitted. Every later pass rebuilds the Job and holds the template to it.
import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import { digest, isDigest } from './canonical.js';
import type { KubeClient, KubeObject } from './kube-client.js';
import { GENERATED_IDENTITY_LABEL_KEYS, JOB_ANNOTATIONS } from './job/metadata.js';
import { asObject, isPlainObject, plainObject, shownCanonicallyEqual, type PlainObject, type PlainValue } from './job/plain.js';
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
  return digest(digestBody(plainObject(template)));
}

/**
 * Whether a template that is plain already hashes to `templateDigest`, as templateDigestOf computes it; `spec` is
 * normalizedPodSpec of its spec, for a caller that has it (jobclaim.match compares it too). Writes neither.
 */
export function templateHasDigest(template: PlainObject, templateDigest: string, spec?: PlainObject): boolean {
  return hashesTo(digestBody(template, spec), templateDigest);
}

/** Values shown to hash to a digest (templates, snapshot bodies), by that digest; the oldest is forgotten first. */
const hashed = new Map<string, PlainValue>();
const HASHED_MAX = 256;

/**
 * `digest(value) === expected`. A value once shown to hash to a digest is kept under it, so the same template or
 * snapshot judged again (each read-back, each admission of one claim's Job) is shown to be that value by one walk
 * instead of hashing its canonical JSON; the same canonical JSON is the same digest, so the answer is the one
 * hashing gives. Only a value that does hash to its key is kept.
 */
function hashesTo(value: PlainValue, expected: string): boolean {
  const known = hashed.get(expected);
  if (known !== undefined && shownCanonicallyEqual(known, value)) return true;
  if (digest(value) !== expected) return false;
  if (known === undefined) {
    if (hashed.size >= HASHED_MAX) hashed.delete(hashed.keys().next().value!);
    hashed.set(expected, structuredClone(value));
  }
  return true;
}

/** What a template's digest is taken over; shares what it does not change with `template`. */
function digestBody(template: PlainObject, spec: PlainObject = normalizedPodSpec(asObject(template.spec))): PlainObject {
  const metadata = { ...asObject(template.metadata) };
  if (isPlainObject(metadata.labels)) {
    const labels = { ...metadata.labels };
    for (const key of GENERATED_IDENTITY_LABEL_KEYS) delete labels[key];
    if (Object.keys(labels).length === 0) delete metadata.labels;
    else metadata.labels = labels;
  }
  if (isPlainObject(metadata.annotations)) {
    const { [JOB_ANNOTATIONS.admissionSnapshotDigest]: _snapshot, ...annotations } = metadata.annotations;
    if (Object.keys(annotations).length === 0) delete metadata.annotations;
    else metadata.annotations = annotations;
  }
  return { ...template, metadata, spec };
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
  if (typeof recorded !== 'string' || !hashesTo(body, recorded)) return 'the admission snapshot does not hash to its recorded digest';
  return undefined;
}

export function verifySnapshot(snapshot: SnapshotLike | undefined): boolean {
  return snapshotProblem(snapshot) === undefined;
}
