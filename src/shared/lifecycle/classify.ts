// What a failed Job create means for its claim (the seed's mutationlifecycle.ClassifyCreate).
//
// A mutating claim's create is uncertain unless the API server's answer proves the request was turned away
// before storage: then nothing stands under the reserved name and the claim withdraws its dispatch marker. A
// read-only claim retries under a new attempt when the name is taken, and otherwise comes back later.
//
// Refused before storage (the API server's own code or message forms, as kube-apiserver v1.37 writes them):
// - 401: the authentication filter answers before any handler runs.
// - 403: the authorization filter, or an admission plugin's admission.NewForbidden (ResourceQuota's
//   "exceeded quota", NamespaceLifecycle's terminating namespace, a policy that could not be configured).
// - 400 and 422: the create handler decoding the body, rest.BeforeCreate and the strategy's validation, or an
//   admission plugin's NewInvalid. The storage layer answers neither.
// - 429: priority and fairness (or max-in-flight) shed the request before it reached a handler.
// - A webhook denial, whatever its code: admission calls webhooks before storage, and the webhook picks the code
//   (ours answers 400, 404 and 500), so the code proves nothing. The API server writes the message's head,
//   `admission webhook "<name>" denied the request` (newer releases put `<resource> "<name>" is forbidden: ` or
//   `Internal error occurred: ` in front), and nothing after storage says that. Details prove nothing either:
//   the webhook supplies them too.
// - A fail-closed webhook the API server could not call: a 500 whose message is
//   `Internal error occurred: failed calling webhook "<name>"…` (apierrors.NewInternalError of ErrCallingWebhook).
// - A ValidatingAdmissionPolicy denial, whatever its code (its reason maps to 401, 403, 413 or 422):
//   `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>'[ with binding '<binding>'] denied request: …`.
// - ResourceQuota admission that gave up waiting: a 500 `Internal error occurred: resource quota evaluation timed out`.
// - NamespaceLifecycle refusing a create in a namespace that does not exist: a 404 `namespaces "<ns>" not found`.
//
// Everything else stays uncertain: a 409 (AlreadyExists may be this very create stored on an earlier attempt), a
// 504 or any other timeout, a 500 that is none of the forms above (storage answers "Internal error occurred" too),
// and no answer at all. The message forms are anchored at the start, so a message that merely mentions a
// webhook or a policy proves nothing.

/** A failed request as the API server answered it; all fields absent when no answer came back. */
export interface CreateFailure {
  code?: number;
  reason?: string;
  message?: string;
}

export type CreateVerdict = 'withdraw' | 'uncertain' | 'retry' | 'requeue';

/** Codes only a stage before storage answers a create with. */
const REFUSED_BEFORE_STORAGE = new Set([400, 401, 403, 422, 429]);

// The optional head newer API servers put before a webhook's denial (webhook/errors.ToStatusErr).
const RESOURCE_FORBIDDEN = String.raw`[a-z0-9.-]+ "[^"]*" is forbidden: `;

/** Message forms the admission chain writes, each with the codes it comes with (undefined: any code). */
const ADMISSION_REFUSALS: readonly { stage: string; codes?: readonly number[]; form: RegExp }[] = [
  {
    stage: 'webhook denial',
    form: new RegExp(String.raw`^(?:Internal error occurred: |${RESOURCE_FORBIDDEN})?admission webhook "[^"]+" denied the request(?::| without explanation)`),
  },
  { stage: 'fail-closed webhook not called', codes: [500], form: /^Internal error occurred: failed calling webhook "[^"]+"(?::|; no further details available)/ },
  {
    stage: 'ValidatingAdmissionPolicy denial',
    form: /^(?:[a-z0-9.-]+ (?:"[^"]*" )?is )?forbidden: ValidatingAdmissionPolicy '[^']+'(?: with binding '[^']+')? denied request: /,
  },
  { stage: 'ResourceQuota evaluation timed out', codes: [500], form: /^Internal error occurred: resource quota evaluation timed out$/ },
  { stage: 'namespace does not exist', codes: [404], form: /^namespaces "[^"]+" not found$/ },
];

/** Which stage before storage refused the create, or undefined when the answer does not prove one did. */
export function refusedBeforeStorage(failure: CreateFailure): string | undefined {
  const { code, message } = failure;
  // No code means no answer: the request may have been stored before the connection failed.
  if (code === undefined) return undefined;
  if (REFUSED_BEFORE_STORAGE.has(code)) return `HTTP ${code}`;
  if (message === undefined) return undefined;
  return ADMISSION_REFUSALS.find((r) => (r.codes === undefined || r.codes.includes(code)) && r.form.test(message))?.stage;
}

export function classifyCreate(failure: CreateFailure, mutating: boolean): CreateVerdict {
  if (mutating) return refusedBeforeStorage(failure) === undefined ? 'uncertain' : 'withdraw';
  const { code, reason } = failure;
  const alreadyExists = reason === 'AlreadyExists' || (code === 409 && (reason === undefined || reason === ''));
  return alreadyExists ? 'retry' : 'requeue';
}

/**
 * The failure a thrown error describes: a Status carried by the project's client (`status`), a
 * @kubernetes/client-node ApiException (`code` and a JSON `body`), or nothing when no answer came back.
 */
export function failureOf(error: unknown): CreateFailure {
  if (typeof error !== 'object' || error === null) return {};
  const e = error as { status?: unknown; code?: unknown; body?: unknown; message?: unknown };
  if (typeof e.status === 'object' && e.status !== null) return statusFields(e.status);
  if (isHttpCode(e.code)) {
    const body = typeof e.body === 'string' ? parseJson(e.body) : e.body;
    return { ...statusFields(body), code: e.code };
  }
  // A network error (refused, reset, timed out): no answer, so nothing is known about the write.
  return typeof e.message === 'string' ? { message: e.message } : {};
}

function statusFields(status: unknown): CreateFailure {
  if (typeof status !== 'object' || status === null) return {};
  const s = status as Record<string, unknown>;
  const out: CreateFailure = {};
  if (isHttpCode(s.code)) out.code = s.code;
  if (typeof s.reason === 'string') out.reason = s.reason;
  if (typeof s.message === 'string') out.message = s.message;
  return out;
}

function isHttpCode(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 599;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
