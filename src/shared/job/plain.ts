// Kubernetes objects as plain JSON data, the form every comparison in the project is made on: a Job read through
// @kubernetes/client-node (class instances, Date objects) and one decoded from an AdmissionReview compare equal.
import { CanonicalJsonError, canonicalJson, MAX_CANONICAL_DEPTH } from '../canonical.js';

export type PlainValue = null | boolean | number | string | PlainValue[] | PlainObject;
export interface PlainObject {
  [key: string]: PlainValue;
}

/** A judge's answer: a reason a person can read when the answer is no. */
export type Verdict = { ok: true } | { ok: false; reason: string };
export const OK: Verdict = { ok: true };
export const refuse = (reason: string): Verdict => ({ ok: false, reason });

/**
 * Plain JSON of `value`, as a JSON round trip gives it; a null property is absent, as the API server treats an
 * unset field. A value too deeply nested to copy (only a hostile request holds one) is refused with a
 * CanonicalJsonError, as a value with no canonical form is, rather than escaping as the RangeError of an exhausted
 * stack. Data that is JSON already (a decoded AdmissionReview, a built Job) is copied by one walk; anything else
 * takes the round trip itself.
 */
export function toPlain(value: unknown): PlainValue | undefined {
  if (value === undefined) return undefined;
  const copied = copyData(value, 0);
  if (copied !== NOT_DATA) return copied;
  try {
    return dropNullProperties(JSON.parse(JSON.stringify(value)) as PlainValue);
  } catch (e) {
    if (e instanceof RangeError) throw new CanonicalJsonError(`$: cannot be copied as plain JSON: ${e.message}`);
    throw e;
  }
}

/** What copyData leaves to the JSON round trip. */
const NOT_DATA = Symbol('not JSON data');

/**
 * The round trip's result by one walk, for a value made only of what JSON.stringify writes as it stands: objects
 * with a plain prototype, arrays, strings, booleans, numbers, null and undefined (a non-finite number and an
 * undefined or missing array item become null, -0 becomes 0, a null property is dropped). NOT_DATA for anything
 * whose JSON form another rule decides (a toJSON, a class instance, a function, a symbol, a bigint) and for
 * nesting deeper than canonical JSON allows, where the round trip's own limits answer.
 */
function copyData(value: unknown, depth: number): PlainValue | typeof NOT_DATA {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value + 0 : null;
    case 'undefined':
      return null;
    case 'object': {
      if (value === null) return null;
      if (depth === MAX_CANONICAL_DEPTH || typeof (value as { toJSON?: unknown }).toJSON === 'function') return NOT_DATA;
      const proto: unknown = Object.getPrototypeOf(value);
      if (Array.isArray(value)) {
        if (proto !== Array.prototype) return NOT_DATA;
        const out: PlainValue[] = [];
        for (let i = 0; i < value.length; i++) {
          const item = copyData(value[i], depth + 1);
          if (item === NOT_DATA) return NOT_DATA;
          out.push(item);
        }
        return out;
      }
      if (proto !== Object.prototype && proto !== null) return NOT_DATA;
      const record = value as Record<string, unknown>;
      const out: PlainObject = {};
      for (const key of Object.keys(record)) {
        const child = copyData(record[key], depth + 1);
        if (child === NOT_DATA) return NOT_DATA;
        // The same assignment dropNullProperties makes, so even a `__proto__` key ends where the round trip puts it.
        if (child !== null) out[key] = child;
      }
      return out;
    }
    default:
      return NOT_DATA;
  }
}

/** `toPlain` of something that must be an object (a Job, a template); `{}` when it is absent. */
export function plainObject(value: unknown): PlainObject {
  const plain = toPlain(value);
  return isPlainObject(plain) ? plain : {};
}

/**
 * A part of a value that is plain already, as an object (`{}` when it is none): what `plainObject` gives for it,
 * without the copy. The result is shared with `value`, so it is read, never written.
 */
export function asObject(value: PlainValue | undefined): PlainObject {
  return isPlainObject(value) ? value : {};
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

/**
 * Whether `a` and `b` have the same canonical JSON; throws the CanonicalJsonError canonicalJson would for a value
 * that has none. Equal values are recognised by one walk of both (no string is built); anything else (a
 * difference, or a part canonicalJson refuses) is decided by comparing the canonical JSON itself, so the answer and
 * the error are canonicalJson's in every case.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return shownCanonicallyEqual(a, b) || canonicalJson(a) === canonicalJson(b);
}

/**
 * True only when canonicalJson accepts both values and writes the same text for them: the rules of its `write`
 * (finite numbers, well-formed strings and keys, plain prototypes, undefined properties absent, no undefined
 * array item, the depth bound) checked on both sides as the walk compares. False means "not shown equal".
 */
export function shownCanonicallyEqual(a: unknown, b: unknown, depth = 0): boolean {
  // Strings first: most of what a Kubernetes object holds.
  if (typeof a === 'string') return a === b && a.isWellFormed();
  if (a === null) return b === null;
  switch (typeof a) {
    case 'boolean':
      return a === b;
    case 'number':
      return a === b && Number.isFinite(a);
    case 'object': {
      if (typeof b !== 'object' || b === null || depth === MAX_CANONICAL_DEPTH) return false;
      if (Array.isArray(a)) {
        if (!Array.isArray(b) || a.length !== b.length) return false;
        for (let i = 0; i < a.length; i++) {
          const x: unknown = a[i];
          const y: unknown = b[i];
          // An undefined item (or a hole) is left to canonicalJson, which refuses or spells it.
          if (x === undefined || y === undefined || !shownCanonicallyEqual(x, y, depth + 1)) return false;
        }
        return true;
      }
      if (Array.isArray(b) || !isPlainPrototype(a) || !isPlainPrototype(b)) return false;
      const left = a as Record<string, unknown>;
      const right = b as Record<string, unknown>;
      const rightKeys = Object.keys(right);
      let keys = 0;
      for (const key of Object.keys(left)) {
        const x = left[key];
        if (x === undefined) continue;
        keys++;
        // hasOwn: an inherited member of `b` (`constructor`, `__proto__`) is not a property it has.
        if (!key.isWellFormed() || !Object.hasOwn(right, key) || !shownCanonicallyEqual(x, right[key], depth + 1)) return false;
      }
      // Each of those keys is one of b's, with a value (only a value equals one): as many means no other.
      if (keys === rightKeys.length) return true;
      for (const key of rightKeys) if (right[key] !== undefined) keys--;
      return keys === 0;
    }
    default:
      return false;
  }
}

function isPlainPrototype(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
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
