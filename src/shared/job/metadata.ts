// The names an operation Job carries: its owner reference, labels and annotations (identical on the Job and its
// Pod template), the identity the API server generates for it, and the rules for metadata a resource declares
// in spec.execution.podMetadata. The builder writes them and jobclaim.match reads them, from this one place.
import { recentSha256Hex } from '../canonical.js';
import type { Family } from '../naming.js';

export const OWNER_API_VERSION = 'operator.ptah.run/v1alpha1';
export const OWNER_KIND = { schema: 'PtahSchema', migration: 'PtahMigration' } as const satisfies Record<Family, string>;
export type OwnerKind = (typeof OWNER_KIND)[Family];

export function familyOfKind(kind: string | undefined): Family | undefined {
  if (kind === OWNER_KIND.schema) return 'schema';
  if (kind === OWNER_KIND.migration) return 'migration';
  return undefined;
}

export const MANAGED_BY = 'ptah-operator';

export const JOB_LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  component: 'app.kubernetes.io/component',
  schema: 'operator.ptah.run/schema',
  migration: 'operator.ptah.run/migration',
  operation: 'operator.ptah.run/operation',
  /** A short, label-safe form of the operation ID (operationIdLabelValue); the annotation holds it whole. */
  operationId: 'operator.ptah.run/operation-id',
} as const;

export const JOB_ANNOTATIONS = {
  operationId: 'operator.ptah.run/operation-id',
  inputFingerprint: 'operator.ptah.run/input-fingerprint',
  executionBindingId: 'operator.ptah.run/execution-binding-id',
  /** The manager that dispatched the Job: recorded, never bound, so an upgrade that keeps the binding adopts it. */
  controllerImage: 'operator.ptah.run/controller-image',
  controllerRevision: 'operator.ptah.run/controller-revision',
  runnerImage: 'operator.ptah.run/runner-image',
  controllerStateVersion: 'operator.ptah.run/controller-state-version',
  /** Written once the claim's admission snapshot is durable; the template digest leaves it out (it names that digest). */
  admissionSnapshotDigest: 'operator.ptah.run/admission-snapshot-digest',
  /** The plan an Apply runs (both families) and, for a schema Apply, the digest of its bytes. */
  planName: 'operator.ptah.run/plan-name',
  planUid: 'operator.ptah.run/plan-uid',
  planContentDigest: 'operator.ptah.run/plan-content-digest',
  /** Mutating Jobs only: an autoscaler must not evict a Pod that may be writing. */
  safeToEvict: 'cluster-autoscaler.kubernetes.io/safe-to-evict',
} as const;

/**
 * On a migration Apply's Pod template, so the Job controller puts it on the Pod: the Pod object, and with it the
 * runner's termination message and log, outlives a delete (a drain, an eviction, grace 0 included) until the manager
 * has recorded the run's outcome from it and removes the finalizer (src/controller/evidence.ts).
 */
export const EVIDENCE_FINALIZER = 'operator.ptah.run/run-evidence';

const COMPONENT: Record<Family, string> = { schema: 'schema-operation', migration: 'migration-operation' };
const SUBJECT_LABEL: Record<Family, string> = { schema: JOB_LABELS.schema, migration: JOB_LABELS.migration };

/** First 8 bytes (16 hex) of SHA-256 of the full operation ID: short enough for a label value, unique enough to select by. */
export function operationIdLabelValue(operationId: string): string {
  return recentSha256Hex(operationId).slice(0, 16);
}

/** The five labels the operator fixes on every operation Job of a claim. */
export function operatorLabels(family: Family, ownerName: string, operationType: string, operationId: string): Record<string, string> {
  return {
    [JOB_LABELS.managedBy]: MANAGED_BY,
    [JOB_LABELS.component]: COMPONENT[family],
    [SUBJECT_LABEL[family]]: ownerName,
    [JOB_LABELS.operation]: operationType.toLowerCase(),
    [JOB_LABELS.operationId]: operationIdLabelValue(operationId),
  };
}

/** A label selector for every operation Job and Pod of `ownerName`'s family, whatever its operation. */
export function operationsOfSelector(family: Family, ownerName: string): string {
  return `${JOB_LABELS.component}=${COMPONENT[family]},${SUBJECT_LABEL[family]}=${ownerName}`;
}

/** What the API server writes on a Job it stores (selector and template labels), keyed to the Job's UID and name. */
export function generatedIdentityLabels(uid: string, name: string): Record<string, string> {
  return {
    'batch.kubernetes.io/controller-uid': uid,
    'batch.kubernetes.io/job-name': name,
    'controller-uid': uid,
    'job-name': name,
  };
}
export const GENERATED_IDENTITY_LABEL_KEYS: readonly string[] = Object.keys(generatedIdentityLabels('', ''));

// ---- declared Pod metadata (spec.execution.podMetadata) ----

export const MAX_DECLARED_ENTRIES = 16;
export const MAX_ANNOTATION_VALUE_BYTES = 1024;

const DNS_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const QUALIFIED_NAME = new RegExp(`^(${DNS_LABEL}(\\.${DNS_LABEL})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`);
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
// Keys the operator and Kubernetes set on a Job's Pod: a declared value there could hide the Pod from them.
const RESERVED_KEY = /^([^/]*\.)?(ptah\.run|kubernetes\.io|k8s\.io)\//;
const RESERVED_BARE_KEYS = new Set(['controller-uid', 'job-name']);

/** Why `key` cannot be declared in podMetadata, or undefined when it can. */
export function declaredKeyProblem(key: string): string | undefined {
  const name = key.includes('/') ? key.slice(key.indexOf('/') + 1) : key;
  if (key.length > 316 || name.length > 63 || !QUALIFIED_NAME.test(key)) return `${JSON.stringify(key)} is not a qualified name`;
  if (RESERVED_KEY.test(key) || RESERVED_BARE_KEYS.has(key)) return `${JSON.stringify(key)} is reserved for the operator and Kubernetes`;
  return undefined;
}

/** Why these declared labels or annotations cannot go on an operation Pod, or undefined when they can. */
export function declaredMetadataProblem(what: 'label' | 'annotation', entries: Readonly<Record<string, string>>): string | undefined {
  const keys = Object.keys(entries);
  if (keys.length > MAX_DECLARED_ENTRIES) return `more than ${MAX_DECLARED_ENTRIES} declared ${what}s`;
  for (const key of keys) {
    const keyProblem = declaredKeyProblem(key);
    if (keyProblem) return `declared ${what} ${keyProblem}`;
    const value = entries[key];
    if (typeof value !== 'string') return `declared ${what} ${JSON.stringify(key)} has no string value`;
    if (what === 'label' && (value.length > 63 || !LABEL_VALUE.test(value))) {
      return `declared label ${JSON.stringify(key)} has a value that is not a label value`;
    }
    if (what === 'annotation' && Buffer.byteLength(value, 'utf8') > MAX_ANNOTATION_VALUE_BYTES) {
      return `declared annotation ${JSON.stringify(key)} is longer than ${MAX_ANNOTATION_VALUE_BYTES} bytes`;
    }
  }
  return undefined;
}

/** Whether `value` is a valid label value (an owner name is carried whole in one). */
export function isLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE.test(value);
}
