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
 * only names the value in a refusal (`object.spec.a: ...`); it changes no output. `limits` bounds the work.
 */
export function canonicalJson(value: unknown, root = '$', limits: CanonicalLimits = {}): string {
  const max = limits.maxValues ?? Infinity;
  return write(value, { up: undefined, key: root }, undefined, 0, { max, left: max });
}

export interface CanonicalLimits {
  /** Values (scalars and containers) past which the value is refused unread, so its size bounds no one's work. */
  maxValues?: number;
}

interface Budget {
  max: number;
  left: number;
}

/**
 * Where a value sits, as a chain of parents: built only for containers and spelled out (`$.spec.a[0]`) only in a
 * refusal, so a wide array of scalars costs no path string per item (a 1 MiB admission body can hold 500,000).
 */
interface Path {
  up: Path | undefined;
  key: string | number;
}

function spell(path: Path | undefined, key?: string | number): string {
  const keys: (string | number)[] = key === undefined ? [] : [key];
  for (let p = path; p; p = p.up) keys.push(p.key);
  return keys.reverse().map((k, i) => (i === 0 ? String(k) : typeof k === 'number' ? `[${k}]` : `.${k}`)).join('');
}

/** Serializes `value`, which sits under `key` of `parent` (or is the root when `key` is undefined). */
function write(value: unknown, parent: Path, key: string | number | undefined, depth: number, budget: Budget): string {
  if (--budget.left < 0) throw new CanonicalJsonError(`${spell(parent, key)}: more than ${budget.max} values`);
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      // ECMAScript Number-to-String is exactly what RFC 8785 §3.2.2.3 prescribes; -0 serializes as 0.
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`${spell(parent, key)}: ${value} has no JSON representation`);
      return String(value);
    case 'string':
      if (!value.isWellFormed()) throw new CanonicalJsonError(`${spell(parent, key)}: string holds a lone UTF-16 surrogate`);
      return JSON.stringify(value);
    case 'object': {
      if (depth === MAX_CANONICAL_DEPTH) throw new CanonicalJsonError(`${spell(parent, key)}: nests more than ${MAX_CANONICAL_DEPTH} levels deep`);
      const here: Path = key === undefined ? parent : { up: parent, key };
      if (Array.isArray(value)) {
        const items: string[] = [];
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          if (item === undefined) throw new CanonicalJsonError(`${spell(here, i)}: undefined has no JSON representation`);
          items.push(write(item, here, i, depth + 1, budget));
        }
        return `[${items.join(',')}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new CanonicalJsonError(`${spell(parent, key)}: ${proto?.constructor?.name ?? 'object'} is not plain JSON data`);
      }
      const record = value as Record<string, unknown>;
      // RFC 8785 §3.2.3: sort by UTF-16 code units, which is the order of the default sort of strings.
      const keys = Object.keys(record).filter((k) => record[k] !== undefined).sort();
      return `{${keys.map((k) => {
        if (!k.isWellFormed()) throw new CanonicalJsonError(`${spell(parent, key)}: property name holds a lone UTF-16 surrogate`);
        return `${JSON.stringify(k)}:${write(record[k], here, k, depth + 1, budget)}`;
      }).join(',')}}`;
    }
    default:
      throw new CanonicalJsonError(`${spell(parent, key)}: a ${typeof value} has no JSON representation`);
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
