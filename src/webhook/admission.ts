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
        name: { type: 'string' },
        namespace: { type: 'string' },
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

/** Thrown by a judge to end with a denial; the route catches it. */
export class Refusal extends Error {
  override name = 'Refusal';
  constructor(readonly verdict: Denial) {
    super(verdict.message);
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
    ? { uid, allowed: true, ...(verdict.message ? { status: { code: 200, message: verdict.message } } : {}) }
    : { uid, allowed: false, status: { code: verdict.code, ...(verdict.reason ? { reason: verdict.reason } : {}), message: verdict.message } };
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
