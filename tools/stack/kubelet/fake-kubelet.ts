// A kubelet for one fake Node, in TypeScript: it registers the Node (InternalIP 127.0.0.1 and the port of its log
// endpoint), binds every unscheduled Pod whose nodeSelector it satisfies (there is no scheduler), runs the Pods bound
// to it as local processes (pod-worker.ts) and serves their logs to the API server (log-server.ts). It talks to the
// API with the admin kubeconfig: the kubelet's privilege, never the manager's.
import { arch, cpus, release, totalmem } from 'node:os';
import { mkdir, readFile } from 'node:fs/promises';
import {
  CoreV1Api, makeInformer, PatchStrategy, setHeaderOptions, VersionApi, type KubeConfig, type V1Node, type V1Pod,
} from '@kubernetes/client-node';
import type { Pki } from '../pki.js';
import { defaultImages, type ImageMap } from './images.js';
import { startLogServer, type LogLookup } from './log-server.js';
import { PodWorker } from './pod-worker.js';
import { canSandbox } from './sandbox.js';

export interface FakeKubeletOptions {
  /** Admin credentials: the kubelet reads Secrets for env and volumes and writes pods/status and bindings. */
  kubeConfig: KubeConfig;
  /** Signs the log endpoint's serving certificate; the API server's kubelet client certificate must chain to it. */
  pki: Pki;
  /** State directory (volumes, termination-message files). */
  dir: string;
  nodeName?: string;
  images?: ImageMap;
  log?: (line: string) => void;
}

export interface FakeKubelet {
  nodeName: string;
  /** The log endpoint's port (the Node's kubeletEndpoint). */
  port: number;
  stop(): Promise<void>;
}

export const DEFAULT_NODE_NAME = 'ptah-fake-node';
const INFORMER_RESTART_MS = 1_000;

export async function startFakeKubelet(options: FakeKubeletOptions): Promise<FakeKubelet> {
  const refusal = await canSandbox();
  if (refusal) throw new Error(refusal);
  const nodeName = options.nodeName ?? DEFAULT_NODE_NAME;
  const log = options.log ?? ((line: string) => process.stderr.write(`[fake-kubelet] ${line}\n`));
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const ctx = { core, images: options.images ?? defaultImages(), rootDir: options.dir, log };
  await mkdir(options.dir, { recursive: true });

  const workers = new Map<string, PodWorker>();
  const byName = new Map<string, PodWorker>();
  const bindings = new Set<string>();
  const lookup = (namespace: string, pod: string, container: string): LogLookup =>
    byName.get(`${namespace}/${pod}`)?.logs(container) ?? { status: 404, error: `pod ${namespace}/${pod} is not on node ${nodeName}` };

  const serving = await options.pki.issueServing('fake-kubelet', { ips: ['127.0.0.1'], dns: ['localhost', nodeName] });
  const server = await startLogServer({
    cert: await readFile(serving.cert, 'utf8'), key: await readFile(serving.key, 'utf8'), clientCA: options.pki.caPem, lookup,
  });
  await registerNode(core, options.kubeConfig, nodeName, server.port);

  const onPod = (pod: V1Pod): void => {
    const uid = pod.metadata?.uid ?? '';
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    if (pod.spec?.nodeName === nodeName) {
      const existing = workers.get(uid);
      if (existing) return existing.update(pod);
      const terminal = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
      if (terminal && !pod.metadata?.deletionTimestamp) return; // finished before this kubelet started
      const worker = new PodWorker(pod, ctx);
      workers.set(uid, worker);
      byName.set(key, worker);
    } else if (!pod.spec?.nodeName && !pod.metadata?.deletionTimestamp && !bindings.has(uid)) {
      bindings.add(uid);
      void schedule(core, pod, nodeName, log).catch((e: Error) => {
        bindings.delete(uid);
        log(`pod ${key}: binding failed: ${e.message}`);
      });
    }
  };
  const onDelete = (pod: V1Pod): void => {
    const uid = pod.metadata?.uid ?? '';
    bindings.delete(uid);
    const worker = workers.get(uid);
    if (!worker) return;
    workers.delete(uid);
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    if (byName.get(key) === worker) byName.delete(key);
    void worker.dispose();
  };

  const informer = makeInformer(options.kubeConfig, '/api/v1/pods', () => core.listPodForAllNamespaces());
  let stopped = false;
  informer.on('add', onPod);
  informer.on('update', onPod);
  informer.on('delete', onDelete);
  informer.on('error', (err: unknown) => {
    if (stopped) return;
    log(`pod watch failed, restarting: ${(err as Error)?.message ?? String(err)}`);
    setTimeout(() => { if (!stopped) void informer.start(); }, INFORMER_RESTART_MS);
  });
  await informer.start();

  return {
    nodeName,
    port: server.port,
    stop: async () => {
      stopped = true;
      await informer.stop();
      await Promise.all([...workers.values()].map((w) => w.dispose()));
      await server.close();
    },
  };
}

/** Binds the Pod to this node, or records why it cannot go there (a real scheduler would leave it Pending too). */
async function schedule(core: CoreV1Api, pod: V1Pod, nodeName: string, log: (line: string) => void): Promise<void> {
  const name = pod.metadata?.name ?? '';
  const namespace = pod.metadata?.namespace ?? '';
  const scheduler = pod.spec?.schedulerName ?? 'default-scheduler';
  if (scheduler !== 'default-scheduler') return;
  const labels = nodeLabels(nodeName);
  const mismatch = Object.entries(pod.spec?.nodeSelector ?? {}).filter(([k, v]) => labels[k] !== v);
  if (mismatch.length > 0) {
    const message = `0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector (${mismatch.map(([k, v]) => `${k}=${v}`).join(', ')}).`;
    log(`pod ${namespace}/${name}: ${message}`);
    await core.patchNamespacedPodStatus(
      { name, namespace, body: { status: { conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastTransitionTime: new Date().toISOString() }] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );
    return;
  }
  try {
    await core.createNamespacedPodBinding({
      name, namespace,
      body: { apiVersion: 'v1', kind: 'Binding', metadata: { name, namespace, uid: pod.metadata?.uid }, target: { apiVersion: 'v1', kind: 'Node', name: nodeName } },
    });
  } catch (e) {
    // 409: already bound, or deleted and recreated under the same name; 404: gone. Either way nothing to do.
    if (![404, 409].includes((e as { code?: number }).code ?? 0)) throw e;
  }
}

function nodeLabels(nodeName: string): Record<string, string> {
  return { 'kubernetes.io/hostname': nodeName, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': arch() === 'x64' ? 'amd64' : arch() };
}

async function registerNode(core: CoreV1Api, kc: KubeConfig, nodeName: string, port: number): Promise<void> {
  const version = await kc.makeApiClient(VersionApi).getCode();
  const now = new Date();
  const resources = { cpu: String(cpus().length), memory: `${Math.floor(totalmem() / 1024)}Ki`, pods: '110' };
  const node: V1Node = {
    metadata: { name: nodeName, labels: nodeLabels(nodeName) },
    status: {
      // InternalIP only: the API server is told to prefer it, and a Hostname entry would not resolve.
      addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
      daemonEndpoints: { kubeletEndpoint: { Port: port } },
      conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'the fake kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now }],
      capacity: resources,
      allocatable: resources,
      nodeInfo: {
        machineID: 'ptah-fake', systemUUID: 'ptah-fake', bootID: 'ptah-fake', kernelVersion: release(), osImage: 'ptah fake kubelet',
        containerRuntimeVersion: 'fake://1', kubeletVersion: version.gitVersion, kubeProxyVersion: '', operatingSystem: 'linux', architecture: nodeLabels(nodeName)['kubernetes.io/arch'] ?? '',
      },
    },
  };
  // Node status is accepted on create; later changes would have to go through nodes/status.
  await core.createNode({ body: node });
}
