// Kubernetes objects as plain JSON data, the form every comparison in the project is made on: a Job read through
// @kubernetes/client-node (class instances, Date objects) and one decoded from an AdmissionReview compare equal.
import { CanonicalJsonError, canonicalJson } from '../canonical.js';

export type PlainValue = null | boolean | number | string | PlainValue[] | PlainObject;
export interface PlainObject {
  [key: string]: PlainValue;
}

/** A judge's answer: a reason a person can read when the answer is no. */
export type Verdict = { ok: true } | { ok: false; reason: string };
export const OK: Verdict = { ok: true };
export const refuse = (reason: string): Verdict => ({ ok: false, reason });

/**
 * Plain JSON of `value`; a null property is absent, as the API server treats an unset field. A value too deeply
 * nested to copy (only a hostile request holds one) is refused with a CanonicalJsonError, as a value with no
 * canonical form is, rather than escaping as the RangeError of an exhausted stack.
 */
export function toPlain(value: unknown): PlainValue | undefined {
  if (value === undefined) return undefined;
  try {
    return dropNullProperties(JSON.parse(JSON.stringify(value)) as PlainValue);
  } catch (e) {
    if (e instanceof RangeError) throw new CanonicalJsonError(`$: cannot be copied as plain JSON: ${e.message}`);
    throw e;
  }
}

/** `toPlain` of something that must be an object (a Job, a template); `{}` when it is absent. */
export function plainObject(value: unknown): PlainObject {
  const plain = toPlain(value);
  return isPlainObject(plain) ? plain : {};
}

export function isPlainObject(value: unknown): value is PlainObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function dropNullProperties(value: PlainValue): PlainValue {
  if (Array.isArray(value)) return value.map(dropNullProperties);
  if (!isPlainObject(value)) return value;
  const out: PlainObject = {};
  for (const [key, child] of Object.entries(value)) if (child !== null) out[key] = dropNullProperties(child);
  return out;
}

export function jsonEqual(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

// Fields of the core shapes a resource passes through (resources, affinity, tolerations, ...) that are Go maps:
// their entries survive with empty values, where a struct's empty string field does not.
const MAP_FIELDS = new Set(['nodeSelector', 'matchLabels', 'limits', 'requests']);

/**
 * `value` as the API server stores it: Go's `omitempty` drops empty strings, empty lists and empty maps, and keeps
 * empty structs. A builder that copied a declared `tolerations: []` would otherwise never compare equal to its
 * stored Job. Returns undefined where the stored object has no field at all.
 */
export function storedShape(value: PlainValue | undefined, isMap = false): PlainValue | undefined {
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map((item) => storedShape(item) ?? item);
  if (!isPlainObject(value)) return value;
  const out: PlainObject = {};
  for (const [key, child] of Object.entries(value)) {
    if (!isMap && child === '') continue;
    const shaped = isMap ? child : storedShape(child, MAP_FIELDS.has(key));
    if (shaped !== undefined) out[key] = shaped;
  }
  return isMap && Object.keys(out).length === 0 ? undefined : out;
}

/** The path of the first place two plain values differ (`.spec.template.spec.containers[0].env`), for a reason a person can follow; never the values, which may be anything. */
export function firstDifference(a: unknown, b: unknown, path = ''): string | undefined {
  if (jsonEqual(a ?? null, b ?? null)) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const inner = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (inner) return inner;
    }
    return `${path} (length ${a.length} vs ${b.length})`;
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const inner = firstDifference(a[key], b[key], `${path}.${key}`);
      if (inner) return inner;
    }
  }
  return path || '(the whole value)';
}
