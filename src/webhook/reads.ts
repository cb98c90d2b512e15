// Every object admission decides from is read here, straight from the API server. A read that fails refuses the
// request (fail closed) with a message naming what could not be read: NotFound answers 404, Forbidden 403, and
// anything else (timeout, 5xx, no answer) 500.
import { ApiError, type KubeObject, type ResourceRef } from '../shared/kube-client.js';
import type { UncachedReader } from '../shared/kube.js';
import { Refusal, internalError, notFound, type Denial } from './admission.js';

export function describeRef(ref: ResourceRef): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;
}

export function readFailure(ref: ResourceRef, error: unknown): Denial {
  const what = describeRef(ref);
  if (error instanceof ApiError) {
    if (error.code === 404) return notFound(`${what} not found`);
    if (error.code === 403) return { allowed: false, code: 403, reason: 'Forbidden', message: `reading ${what} is forbidden to the webhook: ${error.status.message ?? 'no detail'}` };
    const status = error.code === undefined ? 'no response' : `HTTP ${error.code}`;
    return internalError(`could not read ${what} from the API server (${status}${error.status.message ? `: ${error.status.message}` : ''}); refusing until it can be read`);
  }
  return internalError(`could not read ${what} from the API server (${(error as Error)?.message ?? String(error)}); refusing until it can be read`);
}

/** An uncached GET; a failure becomes a Refusal carrying the answer readFailure gives. */
export async function readObject<T extends KubeObject>(reader: UncachedReader, ref: ResourceRef): Promise<T> {
  try {
    return await reader.get<T>(ref);
  } catch (e) {
    throw new Refusal(readFailure(ref, e));
  }
}

/** Reads all refs in parallel; the first failure in argument order refuses. */
export async function readAll<T extends KubeObject[]>(reader: UncachedReader, refs: { [K in keyof T]: ResourceRef }): Promise<T> {
  const settled = await Promise.allSettled(refs.map((ref) => reader.get(ref)));
  return settled.map((s, i) => {
    if (s.status === 'rejected') throw new Refusal(readFailure(refs[i]!, s.reason));
    return s.value;
  }) as T;
}
