// How the manager reaches the API server: the KubeConfig (a file, or the default chain that ends in the Pod's
// in-cluster ServiceAccount), client-node's typed clients, and the uncached reader every safety decision uses.
import { BatchV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, EventsV1Api, KubeConfig } from '@kubernetes/client-node';
import { restClient, type KubeClient, type KubeObject, type ResourceRef } from './kube-client.js';

/** Loads the kubeconfig at `file`, or the default chain (KUBECONFIG, ~/.kube/config, in-cluster) without one. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
  } catch (e) {
    throw new Error(`cannot load the kubeconfig${file ? ` ${file}` : ''}: ${(e as Error).message}`);
  }
  if (!kc.getCurrentCluster()) {
    throw new Error(`the kubeconfig${file ? ` ${file}` : ''} names no current cluster; pass --kubeconfig or run inside a cluster`);
  }
  return kc;
}

export interface TypedClients {
  core: CoreV1Api;
  batch: BatchV1Api;
  coordination: CoordinationV1Api;
  custom: CustomObjectsApi;
  events: EventsV1Api;
}

export function typedClients(kc: KubeConfig): TypedClients {
  return {
    core: kc.makeApiClient(CoreV1Api),
    batch: kc.makeApiClient(BatchV1Api),
    coordination: kc.makeApiClient(CoordinationV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    events: kc.makeApiClient(EventsV1Api),
  };
}

/** Direct GETs and LISTs against the API server, never a cache. Failures are ApiErrors (404 included). */
export type UncachedReader = Pick<KubeClient, 'get' | 'list'>;

/**
 * The reader admission uses: its own client, with a per-read timeout under the webhook's admission timeout. The
 * client is made on the first read, so a kubeconfig that cannot reach a cluster (a developer's machine) still
 * lets the service start; every read then fails, and admission refuses (fail closed) naming why.
 */
export function createUncachedReader(kc: KubeConfig, timeoutMs: number): UncachedReader {
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
