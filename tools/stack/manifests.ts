// Installs the project's manifests (RBAC, CRDs, policies) into the test cluster with `kubectl apply --server-side`,
// so tests run against exactly what an installation gets. (client-node's typed serializer would drop `default`,
// `enum` and `x-kubernetes-validations` from a CRD's schema: the defaults the controller relies on would vanish.)
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { buildOrLocateBinaries } from './controlplane.js';
import { REPO_ROOT } from './paths.js';

const FIELD_MANAGER = 'ptah-test-harness';

let kubectlPath: Promise<string> | undefined;
/** The kubectl built beside the control plane (PTAH_CONTROLPLANE_BIN, or the cache the build script reports). */
export function kubectl(): Promise<string> {
  kubectlPath ??= (async () => join(process.env.PTAH_CONTROLPLANE_BIN ?? (await buildOrLocateBinaries()), 'kubectl'))();
  return kubectlPath;
}

/** The CRD files under manifests/crds, sorted (its kustomization.yaml lists them for `kubectl apply -k`; it is no object). */
export async function crdManifestFiles(): Promise<string[]> {
  return (await readdir(join(REPO_ROOT, 'manifests/crds'))).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort();
}

/** Server-side applies every document of `file` (relative to the repository); returns what was applied. */
export async function applyManifestFile(kc: KubeConfig, file: string): Promise<KubernetesObject[]> {
  const path = join(REPO_ROOT, file);
  const objects: KubernetesObject[] = [];
  for (const doc of parseAllDocuments(await readFile(path, 'utf8'))) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as KubernetesObject | null;
    if (value) objects.push(value);
  }
  const dir = await mkdtemp(join(tmpdir(), 'ptah-apply-'));
  try {
    const config = join(dir, 'kubeconfig');
    await writeFile(config, kc.exportConfig(), { mode: 0o600 });
    await promisify(execFile)(await kubectl(), ['--kubeconfig', config, 'apply', '--server-side', '--force-conflicts', '--field-manager', FIELD_MANAGER, '-f', path], { timeout: 120_000 });
  } catch (e) {
    const err = e as Error & { stderr?: string };
    throw new Error(`${file}: kubectl apply failed: ${err.stderr?.trim() || err.message}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return objects;
}
