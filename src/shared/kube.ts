// How the manager reaches the API server: its kubeconfig (a file, or the default chain that ends in the Pod's
// in-cluster ServiceAccount; src/shared/kubeconfig.ts) and the uncached reader every safety decision uses.
import { restClient, type KubeClient, type KubeObject, type ResourceRef } from './kube-client.js';
import type { ClusterAccess } from './kubeconfig.js';

export { loadKubeConfig } from './kubeconfig.js';

/** Direct GETs and LISTs against the API server, never a cache. Failures are ApiErrors (404 included). */
export type UncachedReader = Pick<KubeClient, 'get' | 'list'>;

/**
 * The reader admission uses: its own client, with a per-read timeout under the webhook's admission timeout. The
 * client is made on the first read, so a kubeconfig that cannot reach a cluster (a developer's machine) still
 * lets the service start; every read then fails, and admission refuses (fail closed) naming why.
 */
export function createUncachedReader(kc: ClusterAccess, timeoutMs: number): UncachedReader {
  let client: Promise<KubeClient> | undefined;
  return {
    async get<T extends KubeObject>(ref: ResourceRef): Promise<T> {
      client ??= restClient(kc, { timeoutMs });
      return (await client).get<T>(ref);
    },
    async list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string | undefined): Promise<T[]> {
      client ??= restClient(kc, { timeoutMs });
      return (await client).list<T>(apiVersion, kind, namespace);
    },
  };
}
