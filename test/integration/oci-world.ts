// What the control-plane tests of OCI-sourced resources share: a registry with its own CA and basic auth, pushes of
// hand-made directories with `kubectl ptah push`, and in a test namespace the registry Secret (and one the registry
// refuses), the CA ConfigMap and a verification policy, as a user would install them.
import type { Test } from 'tap';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import type { OciSource } from '../../src/shared/api/shapes.js';
import type { KubeClient } from '../../src/shared/kube-client.js';
import { createPki, type Pki } from '../../tools/stack/pki.js';
import { startRegistry, type RunningRegistry } from '../../tools/stack/registry.js';
import { pushDirectory } from '../harness/oci-push.js';

export const SOURCE_ANNOTATION = { 'org.opencontainers.image.source': 'https://git.example/shop' };

export interface OciWorld {
  registry: RunningRegistry;
  pki: Pki;
  /** The password of the Secret the registry refuses: random, so that no name in a test can contain it. */
  wrongPassword: string;
  /** Pushes `files` as `<registry>/<reference>`; returns the manifest digest. */
  push(files: Record<string, string>, reference: string, annotations?: Record<string, string>): Promise<string>;
  /** Secrets `registry` and `registry-wrong`, ConfigMaps `registry-ca` and (immutable) `oci-policy` holding `policy`. */
  install(client: KubeClient, ns: string, policy: string): Promise<void>;
  /** spec.*.oci naming `<registry>/<reference>` with the Secret and the CA. */
  source(reference: string, options?: { auth?: string; host?: string }): OciSource;
}

export async function ociWorld(t: Test): Promise<OciWorld> {
  const scratch = await mkdtemp(join(tmpdir(), 'ptah-oci-world-'));
  const pki = await createPki(join(scratch, 'pki'));
  const registry = await startRegistry(pki);
  t.teardown(() => registry.stop());
  const wrongPassword = `wrong-${Math.random().toString(36).slice(2)}`;
  let pushes = 0;
  const dockerConfig = (auth: string) => JSON.stringify({ auths: { [registry.host]: { auth: Buffer.from(auth).toString('base64') } } });
  return {
    registry,
    pki,
    wrongPassword,
    async push(files, reference, annotations = SOURCE_ANNOTATION) {
      const dir = join(scratch, `push-${pushes++}`);
      await mkdir(dir);
      for (const [file, text] of Object.entries(files)) await writeFile(join(dir, file), text);
      return pushDirectory(registry, dir, reference, annotations);
    },
    async install(client, ns, policy) {
      const secret = (name: string, config: string): V1Secret =>
        ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: ns }, type: 'kubernetes.io/dockerconfigjson', stringData: { '.dockerconfigjson': config } });
      await client.create(secret('registry', await readFile(join(registry.dockerConfigDir, 'config.json'), 'utf8')));
      await client.create(secret('registry-wrong', dockerConfig(`${registry.username}:${wrongPassword}`)));
      await client.create<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'registry-ca', namespace: ns }, data: { 'ca.pem': registry.caPem } });
      await client.create<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'oci-policy', namespace: ns }, immutable: true, data: { 'policy.yaml': policy } });
    },
    source(reference, options = {}) {
      return { reference: `${options.host ?? registry.host}/${reference}`, registryAuthFrom: { name: options.auth ?? 'registry' }, caFrom: { name: 'registry-ca', key: 'ca.pem' } };
    },
  };
}
