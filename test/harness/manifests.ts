// Installs the project's manifests (RBAC, CRDs, policies) into the test cluster the way `kubectl apply
// --server-side` would, so tests run against exactly what an installation gets.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KubernetesObjectApi, PatchStrategy, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from './paths.js';

const FIELD_MANAGER = 'ptah-test-harness';

/** Server-side applies every document of `file` (relative to the repository) in order; returns what was applied. */
export async function applyManifestFile(kc: KubeConfig, file: string): Promise<KubernetesObject[]> {
  const path = join(REPO_ROOT, file);
  const docs = parseAllDocuments(await readFile(path, 'utf8'));
  const objects: KubernetesObject[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as KubernetesObject | null;
    if (value) objects.push(value);
  }
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) {
    try {
      await api.patch(object, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
    } catch (e) {
      throw new Error(`${file}: applying ${object.kind} ${object.metadata?.name}: ${(e as Error).message}`);
    }
  }
  return objects;
}
