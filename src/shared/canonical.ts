// Canonical JSON (RFC 8785, JCS) and the `sha256:` digests every binding in the project is made of.
// One definition, so the controller, the webhook and the runner can never hash the same value differently.
import { createHash } from 'node:crypto';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue | undefined };

/** Why a value has no canonical form, with the path (`$.spec.a[0]`) of the part that has none. */
export class CanonicalJsonError extends Error {
  override name = 'CanonicalJsonError';
}

/**
 * Containers nested deeper than this are refused rather than recursed into: no Kubernetes object comes near it,
 * and a request that does would otherwise end the recursion in a stack overflow (a RangeError, not a refusal).
 */
export const MAX_CANONICAL_DEPTH = 512;

/**
 * Serializes `value` as RFC 8785 canonical JSON. Object properties whose value is `undefined` are absent. `root`
 * only names the value in a refusal (`object.spec.a: ...`); it changes no output.
 */
export function canonicalJson(value: unknown, root = '$'): string {
  return write(value, root, 0);
}

function write(value: unknown, path: string, depth: number): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      // ECMAScript Number-to-String is exactly what RFC 8785 §3.2.2.3 prescribes; -0 serializes as 0.
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`${path}: ${value} has no JSON representation`);
      return JSON.stringify(value);
    case 'string':
      if (!value.isWellFormed()) throw new CanonicalJsonError(`${path}: string holds a lone UTF-16 surrogate`);
      return JSON.stringify(value);
    case 'object': {
      if (depth === MAX_CANONICAL_DEPTH) throw new CanonicalJsonError(`${path}: nests more than ${MAX_CANONICAL_DEPTH} levels deep`);
      if (Array.isArray(value)) {
        return `[${value.map((item, i) => {
          if (item === undefined) throw new CanonicalJsonError(`${path}[${i}]: undefined has no JSON representation`);
          return write(item, `${path}[${i}]`, depth + 1);
        }).join(',')}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new CanonicalJsonError(`${path}: ${proto?.constructor?.name ?? 'object'} is not plain JSON data`);
      }
      const record = value as Record<string, unknown>;
      // RFC 8785 §3.2.3: sort by UTF-16 code units, which is the order of the default sort of strings.
      const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort();
      return `{${keys.map((k) => {
        if (!k.isWellFormed()) throw new CanonicalJsonError(`${path}: property name holds a lone UTF-16 surrogate`);
        return `${JSON.stringify(k)}:${write(record[k], `${path}.${k}`, depth + 1)}`;
      }).join(',')}}`;
    }
    default:
      throw new CanonicalJsonError(`${path}: a ${typeof value} has no JSON representation`);
  }
}

/** `sha256:` + lowercase hex SHA-256 of `canonicalJson(value)`. */
export function digest(value: unknown): string {
  return sha256Digest(canonicalJson(value));
}

/** `sha256:` + lowercase hex SHA-256 of raw bytes (UTF-8 for strings). */
export function sha256Digest(bytes: string | Uint8Array): string {
  return `sha256:${sha256Hex(bytes)}`;
}

export function sha256Hex(bytes: string | Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * A pure function of one short string, with an immutable answer (a string, a number), answered from the last `size`
 * answers it gave: the key is the whole input, so each answer is the one the function gives. A longer input, one that
 * is no string after all (a caller outside the types) or one the function throws on is computed every time; the
 * oldest answer is forgotten first.
 */
export function recentAnswers<V>(compute: (input: string) => V, size = 256, maxKeyLength = 1024): (input: string) => V {
  const answers = new Map<string, V>();
  return (input) => {
    if (answers.has(input)) return answers.get(input)!;
    const answer = compute(input);
    if (typeof input === 'string' && input.length <= maxKeyLength) {
      if (answers.size >= size) answers.delete(answers.keys().next().value!);
      answers.set(input, answer);
    }
    return answer;
  };
}

/** `sha256Hex` of a string hashed again and again (a claim's Job name seed, its operation ID). */
export const recentSha256Hex = recentAnswers((text: string) => sha256Hex(text));

const DIGEST = /^sha256:[0-9a-f]{64}$/;
export function isDigest(value: unknown): value is string {
  return typeof value === 'string' && DIGEST.test(value);
}

declare global {
  interface String {
    /** ES2024 (Node 20 has it): false when the string holds a lone UTF-16 surrogate. The project's lib is ES2023. */
    isWellFormed(): boolean;
  }
}
