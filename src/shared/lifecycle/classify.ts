// What a failed Job create means for its claim (the seed's mutationlifecycle.ClassifyCreate).
//
// A mutating claim's create is uncertain unless the API server refused it before storing anything: then
// nothing stands under the reserved name and the claim withdraws its dispatch marker. A read-only claim
// retries under a new attempt when the name is taken, and otherwise comes back later.

/** A failed request as the API server answered it; all fields absent when no answer came back. */
export interface CreateFailure {
  code?: number;
  reason?: string;
  message?: string;
}

export type CreateVerdict = 'withdraw' | 'uncertain' | 'retry' | 'requeue';

// Authentication, authorization (and admission denials, which answer 403), validation, and priority-and-fairness
// shedding: each is decided before the object is stored.
const REFUSED_BEFORE_STORAGE = new Set([401, 403, 422, 429]);
// A fail-closed webhook the API server could not call refuses the request as a 500 carrying this text.
const WEBHOOK_UNREACHABLE = /failed (calling|to call) webhook/i;

export function classifyCreate(failure: CreateFailure, mutating: boolean): CreateVerdict {
  const { code, reason, message } = failure;
  if (mutating) {
    if (code !== undefined && REFUSED_BEFORE_STORAGE.has(code)) return 'withdraw';
    if (code === 500 && message !== undefined && WEBHOOK_UNREACHABLE.test(message)) return 'withdraw';
    return 'uncertain';
  }
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
