// AdmissionReview v1: the envelope schema the routes validate, the request fields the judges read, and the
// answers they give. A judge returns a Verdict or throws a Refusal; the route turns either into the response the
// API server expects (HTTP 200, the request's uid echoed, allowed or not with a status code and message).
import type { JsonPatchOp } from '../shared/kube-client.js';

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

export interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  subResource?: string;
  requestKind?: GroupVersionKind;
  requestResource?: GroupVersionResource;
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: Operation;
  userInfo: UserInfo;
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
}

export interface AdmissionReview {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  request: AdmissionRequest;
}

const GVK = {
  type: 'object',
  required: ['group', 'version', 'kind'],
  properties: { group: { type: 'string' }, version: { type: 'string', minLength: 1 }, kind: { type: 'string', minLength: 1 } },
} as const;
const GVR = {
  type: 'object',
  required: ['group', 'version', 'resource'],
  properties: { group: { type: 'string' }, version: { type: 'string', minLength: 1 }, resource: { type: 'string', minLength: 1 } },
} as const;

/** The envelope only: object and oldObject stay opaque here and are judged by the route. */
export const ADMISSION_REVIEW_SCHEMA = {
  type: 'object',
  required: ['apiVersion', 'kind', 'request'],
  properties: {
    apiVersion: { const: 'admission.k8s.io/v1' },
    kind: { const: 'AdmissionReview' },
    request: {
      type: 'object',
      required: ['uid', 'kind', 'resource', 'operation', 'userInfo'],
      properties: {
        uid: { type: 'string', minLength: 1, maxLength: 128 },
        kind: GVK,
        resource: GVR,
        subResource: { type: 'string' },
        requestKind: GVK,
        requestResource: GVR,
        requestSubResource: { type: 'string' },
        // Every object these routes judge is named by a DNS subdomain (at most 253) in a namespace (a DNS label).
        name: { type: 'string', maxLength: 253 },
        namespace: { type: 'string', maxLength: 63 },
        operation: { enum: ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] },
        userInfo: {
          type: 'object',
          properties: {
            username: { type: 'string' },
            uid: { type: 'string' },
            groups: { type: 'array', items: { type: 'string' } },
            extra: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
          },
        },
        object: { type: ['object', 'null'] },
        oldObject: { type: ['object', 'null'] },
        dryRun: { type: 'boolean' },
        options: { type: ['object', 'null'] },
      },
    },
  },
} as const;

/**
 * Containers nested deeper than this in an AdmissionReview are refused before any judge runs. The API server's
 * objects nest a few dozen levels at most (a Job's managedFields are the deepest); a hostile body nested
 * thousands deep would otherwise overflow the stack of the first recursive comparison.
 */
export const MAX_REVIEW_DEPTH = 100;

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** `request.object.metadata.annotations["a/b"]`, built only when a value is refused. */
function pathOf(keys: readonly (string | number)[]): string {
  const parts = keys.map((key) => (typeof key === 'number' ? `[${key}]` : IDENTIFIER.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`));
  return parts.join('').replace(/^\./, '') || 'the body';
}

/**
 * The first value in a decoded body that no API server sends, named by its path: a number beyond JSON's range
 * (1e400 decodes to Infinity), a string or property name holding a lone UTF-16 surrogate, or nesting deeper than
 * MAX_REVIEW_DEPTH. The API server decodes every object into Go values first, so none of these comes from it;
 * refusing them here keeps them out of every judge. One pass over the body in document order, an object's
 * property names before its values; the depth bound also bounds the recursion.
 */
export function unsendableValue(body: unknown): string | undefined {
  return unsendableIn(body, []);
}

/** unsendableValue of `value`, found at `keys` (the path, extended and restored as the walk goes). */
function unsendableIn(value: unknown, keys: (string | number)[]): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${pathOf(keys)} is a number JSON cannot hold (${value})`;
  if (typeof value === 'string') return value.isWellFormed() ? undefined : `${pathOf(keys)} holds a lone UTF-16 surrogate`;
  if (typeof value !== 'object' || value === null) return undefined;
  if (keys.length === MAX_REVIEW_DEPTH) return `${pathOf(keys)} nests more than ${MAX_REVIEW_DEPTH} levels deep`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      keys.push(i);
      const problem = unsendableIn(value[i], keys);
      if (problem) return problem;
      keys.pop();
    }
    return undefined;
  }
  const names = Object.keys(value);
  for (const name of names) if (!name.isWellFormed()) return `${pathOf(keys)} holds a property name with a lone UTF-16 surrogate`;
  for (const name of names) {
    keys.push(name);
    const problem = unsendableIn((value as Record<string, unknown>)[name], keys);
    if (problem) return problem;
    keys.pop();
  }
  return undefined;
}

/** The longest message an answer carries: the API server shows it to a person, and a request is attacker-sized. */
export const MAX_MESSAGE_LENGTH = 4096;
/** The longest piece of a request (a username, a value) quoted into a message. */
export const MAX_QUOTED_LENGTH = 256;

/** `text` cut to at most `max` characters, the cut marked with the length it had. */
export function clip(text: string, max: number = MAX_QUOTED_LENGTH): string {
  if (text.length <= max) return text;
  const marker = `…(${text.length} characters)`;
  let keep = Math.max(0, max - marker.length);
  const last = text.charCodeAt(keep - 1);
  if (last >= 0xd800 && last <= 0xdbff) keep--;
  return `${text.slice(0, keep)}${marker}`;
}

/** What a JSON value is, for a message that says a field holds the wrong kind of value. */
export function kindOfValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** `value` when it is a string or absent; anything else is a malformed request (400) naming `field`. */
export function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined || typeof value === 'string') return value;
  rejectRequest(`${field} is ${kindOfValue(value)}, not a string`);
}

/** `value` when it is an object (not a list, not null) or absent; anything else is a 400 naming `field`. */
export function optionalObject(value: unknown, field: string): Record<string, unknown> | undefined {
  if (value === undefined || (typeof value === 'object' && value !== null && !Array.isArray(value))) return value as Record<string, unknown> | undefined;
  rejectRequest(`${field} is ${kindOfValue(value)}, not an object`);
}

/** `value` when it is a list or absent; anything else is a 400 naming `field`. */
export function optionalList(value: unknown, field: string): unknown[] | undefined {
  if (value === undefined || Array.isArray(value)) return value;
  rejectRequest(`${field} is ${kindOfValue(value)}, not a list`);
}

export type Verdict =
  | { allowed: true; message?: string; patch?: JsonPatchOp[] }
  | { allowed: false; code: number; reason?: string; message: string };

export type Denial = Extract<Verdict, { allowed: false }>;

export const allow = (message?: string): Verdict => ({ allowed: true, ...(message ? { message } : {}) });

/** A refusal on the merits: 403 Forbidden. */
export const deny = (message: string): Denial => ({ allowed: false, code: 403, reason: 'Forbidden', message });

/** The request itself is malformed or sent to the wrong route: 400. */
export const badRequest = (message: string): Denial => ({ allowed: false, code: 400, reason: 'BadRequest', message });

export const notFound = (message: string): Denial => ({ allowed: false, code: 404, reason: 'NotFound', message });

/** Something this webhook needed failed (an API read): 500, which the API server treats as a refusal. */
export const internalError = (message: string): Denial => ({ allowed: false, code: 500, reason: 'InternalError', message });

/**
 * Thrown by a judge to end with a denial; the route catches it. It is an answer, not a failure: nothing reads its
 * stack, so none is captured (that took several µs of every refused request).
 */
export class Refusal extends Error {
  override name = 'Refusal';
  readonly verdict: Denial;
  constructor(verdict: Denial) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(verdict.message);
    Error.stackTraceLimit = limit;
    this.verdict = verdict;
  }
}

export function refuse(message: string): never {
  throw new Refusal(deny(message));
}

export function rejectRequest(message: string): never {
  throw new Refusal(badRequest(message));
}

export interface AdmissionResponseBody {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    status?: { code: number; reason?: string; message?: string };
    patchType?: 'JSONPatch';
    patch?: string;
  };
}

export function reviewResponse(uid: string, verdict: Verdict): AdmissionResponseBody {
  const response: AdmissionResponseBody['response'] = verdict.allowed
    ? { uid, allowed: true, ...(verdict.message ? { status: { code: 200, message: clip(verdict.message, MAX_MESSAGE_LENGTH) } } : {}) }
    : { uid, allowed: false, status: { code: verdict.code, ...(verdict.reason ? { reason: verdict.reason } : {}), message: clip(verdict.message, MAX_MESSAGE_LENGTH) } };
  if (verdict.allowed && verdict.patch) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(verdict.patch)).toString('base64');
  }
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/** `namespace/name` (or `name`) of what a request is about, for messages and logs. */
export function subjectOf(request: AdmissionRequest): string {
  return request.namespace ? `${request.namespace}/${request.name ?? ''}` : (request.name ?? '');
}
