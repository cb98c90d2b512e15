// The objects the manager writes name their owner through exactly one controller owner reference; the owner is
// the record the write is judged against, so it is read uncached before anything else is decided.
import type { V1ObjectMeta, V1OwnerReference } from '@kubernetes/client-node';
import { API_VERSION } from '../../shared/api/names.js';
import type { KubeObject, ResourceRef } from '../../shared/kube-client.js';
import type { UncachedReader } from '../../shared/kube.js';
import { clip, kindOfValue, optionalList, optionalObject, optionalString, refuse, rejectRequest } from '../admission.js';
import { describeRef, readObject } from '../reads.js';

export interface Owned {
  kind: string;
  metadata: V1ObjectMeta & { name: string; namespace: string };
}

export interface OwnerRef {
  kind: string;
  name: string;
  uid: string;
}

/** The owner references as sent, each an object whose fields are of their types; anything else is a 400. */
export function ownerReferencesOf(object: Owned): V1OwnerReference[] {
  const field = 'object.metadata.ownerReferences';
  return (optionalList(object.metadata.ownerReferences, field) ?? []).map((entry, i) => {
    const reference = optionalObject(entry, `${field}[${i}]`);
    if (!reference) rejectRequest(`${field}[${i}] is missing`);
    for (const key of ['apiVersion', 'kind', 'name', 'uid'] as const) optionalString(reference[key], `${field}[${i}].${key}`);
    if (reference.controller !== undefined && typeof reference.controller !== 'boolean') rejectRequest(`${field}[${i}].controller is ${kindOfValue(reference.controller)}, not a boolean`);
    return reference as unknown as V1OwnerReference;
  });
}

/** The one owner reference of `object`, which must be a controller reference to one of `kinds`. */
export function controllerOwnerOf(object: Owned, kinds: readonly string[]): OwnerRef {
  const what = `${object.kind} ${object.metadata.namespace}/${object.metadata.name}`;
  const references = ownerReferencesOf(object);
  const reference = references[0];
  if (references.length !== 1 || !reference || reference.controller !== true) {
    refuse(`${what} must have exactly one owner reference, a controller reference to a ${kinds.join(' or ')}`);
  }
  if (reference.apiVersion !== API_VERSION || !kinds.includes(reference.kind) || !reference.name || !reference.uid) {
    refuse(`${what} is owned by ${clip(String(reference.apiVersion))} ${clip(String(reference.kind))} ${clip(String(reference.name))}, not by a ${API_VERSION} ${kinds.join(' or ')}`);
  }
  return { kind: reference.kind, name: reference.name, uid: reference.uid };
}

export function refTo(kind: string, namespace: string, name: string, apiVersion: string = API_VERSION): ResourceRef {
  return { apiVersion, kind, namespace, name };
}

/** Reads the owner uncached and holds it to the UID the reference names: a re-created owner is another object. */
export async function readOwner<T extends KubeObject>(reader: UncachedReader, namespace: string, owner: OwnerRef): Promise<T> {
  const ref = refTo(owner.kind, namespace, owner.name);
  const object = await readObject<T>(reader, ref);
  if (object.metadata?.uid !== owner.uid) {
    refuse(`${describeRef(ref)} has uid ${object.metadata?.uid ?? 'unset'}, not ${owner.uid} as the owner reference names (it was deleted and created again)`);
  }
  return object;
}
