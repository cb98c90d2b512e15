// Finalizer edits as kube-rs makes them: a JSON Patch on metadata whose `test` ops make it fail, rather than
// clobber, when someone else changed the finalizer list since we read it (the API server does not deduplicate
// finalizers, and a merge patch of the whole list would drop another controller's entry). A failed guard is an
// ApiError from the API server (422); the caller re-reads and decides again on its next pass.
import { refOf, type JsonPatchOp, type KubeClient, type KubeObject } from '../shared/kube-client.js';

export interface FinalizerPatchOptions {
  /** Also require the object to be exactly at the resourceVersion it was read at (any change fails the write). */
  guardResourceVersion?: boolean;
}

export class FinalizerError extends Error {
  override name = 'FinalizerError';
}

export function hasFinalizer(obj: KubeObject, finalizer: string): boolean {
  return obj.metadata?.finalizers?.includes(finalizer) ?? false;
}

function resourceVersionGuard(obj: KubeObject, options: FinalizerPatchOptions): JsonPatchOp[] {
  if (!options.guardResourceVersion) return [];
  const rv = obj.metadata?.resourceVersion;
  if (!rv) throw new FinalizerError(`${describe(obj)} has no resourceVersion to guard the finalizer patch with`);
  return [{ op: 'test', path: '/metadata/resourceVersion', value: rv }];
}

const describe = (obj: KubeObject): string => `${obj.kind ?? 'object'} ${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata?.name ?? '?'}`;

/** Adds `finalizer` to obj (as read); returns the updated object, or obj itself when the finalizer is already there. */
export async function addFinalizer<T extends KubeObject>(client: Pick<KubeClient, 'patch'>, obj: T, finalizer: string, options: FinalizerPatchOptions = {}): Promise<T> {
  if (!finalizer) throw new FinalizerError('the finalizer name is empty');
  if (hasFinalizer(obj, finalizer)) return obj;
  // The API server refuses new finalizers on an object being deleted; say so instead of sending a doomed patch.
  if (obj.metadata?.deletionTimestamp) throw new FinalizerError(`${describe(obj)} is being deleted; finalizer ${finalizer} can no longer be added`);
  const current = obj.metadata?.finalizers ?? [];
  const ops: JsonPatchOp[] = [
    ...resourceVersionGuard(obj, options),
    ...(current.length === 0
      ? // An absent list tests as null; the server omits an empty list, so [] read locally means absent there too.
        [{ op: 'test', path: '/metadata/finalizers', value: null } as const, { op: 'add', path: '/metadata/finalizers', value: [finalizer] } as const]
      : [{ op: 'test', path: '/metadata/finalizers', value: current } as const, { op: 'add', path: '/metadata/finalizers/-', value: finalizer } as const]),
  ];
  return client.patch<T>(refOf(obj), ops, 'json');
}

/** Removes `finalizer` from obj (as read); returns the updated object, or obj itself when it is not there. */
export async function removeFinalizer<T extends KubeObject>(client: Pick<KubeClient, 'patch'>, obj: T, finalizer: string, options: FinalizerPatchOptions = {}): Promise<T> {
  if (!finalizer) throw new FinalizerError('the finalizer name is empty');
  const index = obj.metadata?.finalizers?.indexOf(finalizer) ?? -1;
  if (index < 0) return obj;
  // Removal is by index; the test makes sure the index still names our finalizer and not another one.
  const ops: JsonPatchOp[] = [
    ...resourceVersionGuard(obj, options),
    { op: 'test', path: `/metadata/finalizers/${index}`, value: finalizer },
    { op: 'remove', path: `/metadata/finalizers/${index}` },
  ];
  return client.patch<T>(refOf(obj), ops, 'json');
}
