// What every family's integration world starts from: the project's CRDs (waited until Established), the manager's
// RBAC and the status-write policy on the shared control plane, once per test process; the sample manifests; and
// the test log.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino, type Logger } from 'pino';
import { parseAllDocuments } from 'yaml';
import { GROUP } from '../../src/shared/api/names.js';
import type { KubeObject } from '../../src/shared/kube-client.js';
import { sharedCluster, waitForCrdsEstablished } from '../../tools/stack/cluster.js';
import { buildOrLocateBinaries } from '../../tools/stack/controlplane.js';
import { applyManifestFile, crdManifestFiles } from '../../tools/stack/manifests.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';

const cluster = sharedCluster();
export const FIELD_MANAGER = 'ptah-migration-test';

let installed: Promise<void> | undefined;

/**
 * CRDs (waited until Established), the manager's RBAC and the status-write policy, once per test process. The CRDs
 * go through kubectl: client-node's typed serializer drops `default`, `enum` and `x-kubernetes-validations` from a
 * plain schema, and the controller depends on the defaults the API server fills in.
 */
export function installOperator(): Promise<void> {
  installed ??= (async () => {
    const kc = cluster.kubeConfig('admin');
    const kubectl = join(process.env.PTAH_CONTROLPLANE_BIN ?? (await buildOrLocateBinaries()), 'kubectl');
    const files = await crdManifestFiles();
    await promisify(execFile)(kubectl, ['--kubeconfig', cluster.state.kubeconfigs.admin, 'apply', '--server-side', '--force-conflicts',
      '--field-manager', FIELD_MANAGER, ...files.flatMap((f) => ['-f', join(REPO_ROOT, 'manifests/crds', f)])], { timeout: 120_000 });
    const names = files.map((f) => `${f.replace(/\.yaml$/, '')}.${GROUP}`);
    await applyManifestFile(kc, 'manifests/rbac.yaml');
    await applyManifestFile(kc, 'manifests/status-write-policy.yaml');
    await waitForCrdsEstablished(names);
  })();
  return installed;
}

export async function sampleObjects(file: string): Promise<KubeObject[]> {
  return parseAllDocuments(await readFile(join(REPO_ROOT, file), 'utf8')).map((doc) => doc.toJS() as KubeObject).filter(Boolean);
}

export function sampleOf<T extends KubeObject>(objects: KubeObject[], kind: string, name?: string): T {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
  if (!found) throw new Error(`the sample holds no ${kind}${name ? ` ${name}` : ''}`);
  return structuredClone(found) as T;
}

export function testLogger(): Logger {
  const file = process.env.PTAH_MIGRATION_TEST_LOG;
  return file ? pino({ level: 'debug' }, pino.destination({ dest: file, append: true, sync: true })) : pino({ level: 'silent' });
}

