// A real control plane on loopback: etcd, kube-apiserver and kube-controller-manager built from Go modules by
// tools/controlplane/build.sh, with their own PKI, on ports chosen at run time. No Docker, no downloads at run time.
import { execFile, spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { INSTALL, MANAGER_USERNAME } from '../../src/shared/api/names.js';
import { writeKubeconfig } from './kubeconfig.js';
import { REPO_ROOT } from './paths.js';
import { createPki, type CertFiles, type ClientIdentity, type Pki } from './pki.js';
import { freePort } from './ports.js';
import { startProcess, trackGroup, type ManagedProcess } from './processes.js';
import { waitFor } from './wait.js';

/** The namespace and ServiceAccount the manager runs as in a real installation. */
export const MANAGER_NAMESPACE = INSTALL.namespace;
export const MANAGER_SERVICE_ACCOUNT = INSTALL.serviceAccount;

/**
 * The people and programs the tests act as. The manager's certificate carries exactly the user name and groups a
 * ServiceAccount token would (the API server adds system:authenticated to everyone), so RBAC and the webhook see
 * the same identity as in a cluster; only the token's uid and extra fields are absent.
 */
export const IDENTITIES = {
  admin: { user: 'ptah-test-admin', groups: ['system:masters'] },
  manager: {
    user: MANAGER_USERNAME,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${MANAGER_NAMESPACE}`],
  },
  approver: { user: 'alice', groups: ['ptah-approvers'] },
} as const satisfies Record<string, ClientIdentity>;

export type IdentityName = keyof typeof IDENTITIES;

/** Controllers the tests rely on; the rest stay off so the plane stays small and nothing acts behind the tests' back. */
export const CONTROLLERS = [
  'job-controller',
  'garbage-collector-controller',
  'ttl-after-finished-controller',
  'namespace-controller',
  // The `default` ServiceAccount and the kube-root-ca.crt ConfigMap every namespace gets in a real cluster.
  'serviceaccount-controller',
  'root-ca-certificate-publisher-controller',
];

export interface ControlPlaneOptions {
  /** Directory holding etcd, kube-apiserver and kube-controller-manager. Default: $PTAH_CONTROLPLANE_BIN, else build.sh's. */
  binDir?: string;
  /** Where PKI, kubeconfigs and logs go. Default: a new directory under the system temp dir. */
  dir?: string;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  /**
   * Where Services' ClusterIPs come from (default 10.0.0.0/24, which nothing here routes). A range inside
   * 127.0.0.0/8 is local to this machine, so a process listening on a Service's ClusterIP is what the API server
   * reaches when it calls that Service (a webhook's service reference) — kube-proxy's part, with no kube-proxy.
   */
  serviceClusterIpRange?: string;
}

export interface ControlPlaneTimings {
  etcdReadyMs: number;
  apiserverReadyMs: number;
  controllerManagerReadyMs: number;
}

export interface ControlPlane {
  dir: string;
  /** https://127.0.0.1:<port> */
  server: string;
  pki: Pki;
  /** Kubeconfig file per identity. */
  kubeconfigs: Record<IdentityName, string>;
  kubeConfig(identity: IdentityName): KubeConfig;
  processes: ManagedProcess[];
  timings: ControlPlaneTimings;
  /** Stops every process (controller manager first, etcd last) and removes etcd's data; the dir too unless kept. */
  stop(options?: { keepDir?: boolean }): Promise<void>;
}

const START_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 3_000;

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = options.log ?? ((line: string) => process.stderr.write(`[controlplane] ${line}\n`));
  const binDir = options.binDir ?? process.env.PTAH_CONTROLPLANE_BIN ?? (await buildOrLocateBinaries());
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'ptah-cp-')));
  const etcdDir = await mkdtemp(join('/dev/shm', 'ptah-etcd-')).catch(() => mkdtemp(join(tmpdir(), 'ptah-etcd-')));
  const logs = join(dir, 'logs');
  await mkdir(logs, { recursive: true });
  const started = Date.now();
  const processes: ManagedProcess[] = [];
  const stop = async (stopOptions: { keepDir?: boolean } = {}) => {
    for (const p of [...processes].reverse()) await p.stop(STOP_GRACE_MS);
    await rm(etcdDir, { recursive: true, force: true });
    if (!stopOptions.keepDir) await rm(dir, { recursive: true, force: true });
  };

  try {
    const [pki, etcdClientPort, etcdPeerPort, apiPort, kcmPort] = await Promise.all([
      createPki(join(dir, 'pki')),
      freePort(), freePort(), freePort(), freePort(),
    ]);
    const server = `https://127.0.0.1:${apiPort}`;
    const [serving, kubeletClient, admin, manager, approver, controllerManager] = await Promise.all([
      pki.issueServing('kube-apiserver', {
        ips: ['127.0.0.1', '10.0.0.1'],
        dns: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'],
      }),
      pki.issueClient('kube-apiserver-kubelet-client', { user: 'kube-apiserver-kubelet-client', groups: [] }),
      pki.issueClient('admin', IDENTITIES.admin),
      pki.issueClient('manager', IDENTITIES.manager),
      pki.issueClient('approver', IDENTITIES.approver),
      pki.issueClient('kube-controller-manager', { user: 'system:kube-controller-manager', groups: [] }),
    ]);
    const kubeconfigDir = join(dir, 'kubeconfig');
    await mkdir(kubeconfigDir, { recursive: true });
    const kubeconfigs = { admin: join(kubeconfigDir, 'admin.yaml'), manager: join(kubeconfigDir, 'manager.yaml'), approver: join(kubeconfigDir, 'approver.yaml') };
    const kcmKubeconfig = join(kubeconfigDir, 'kube-controller-manager.yaml');
    await Promise.all([
      writeKubeconfig(kubeconfigs.admin, { server, caPem: pki.caPem, client: admin, name: 'admin' }),
      writeKubeconfig(kubeconfigs.manager, { server, caPem: pki.caPem, client: manager, name: 'manager' }),
      writeKubeconfig(kubeconfigs.approver, { server, caPem: pki.caPem, client: approver, name: 'approver' }),
      writeKubeconfig(kcmKubeconfig, { server, caPem: pki.caPem, client: controllerManager, name: 'kube-controller-manager' }),
    ]);

    const etcd = startProcess({
      name: 'etcd',
      command: join(binDir, 'etcd'),
      args: [
        '--name=ptah', `--data-dir=${join(etcdDir, 'data')}`,
        `--listen-client-urls=http://127.0.0.1:${etcdClientPort}`, `--advertise-client-urls=http://127.0.0.1:${etcdClientPort}`,
        // Explicit peer URLs: the default (localhost:2380) collides between runs on one machine.
        `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`, `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
        `--initial-cluster=ptah=http://127.0.0.1:${etcdPeerPort}`,
        '--unsafe-no-fsync=true', '--log-level=warn',
      ],
      logFile: join(logs, 'etcd.log'),
    });
    processes.push(etcd);
    await waitFor(async () => ((await httpGet(`http://127.0.0.1:${etcdClientPort}/health`)).status === 200 ? true : undefined), {
      what: 'etcd /health', timeoutMs: START_TIMEOUT_MS, process: etcd,
    });
    const etcdReadyMs = Date.now() - started;

    const apiserver = startProcess({
      name: 'kube-apiserver',
      command: join(binDir, 'kube-apiserver'),
      args: apiserverArgs({ pki, serving, kubeletClient, etcdClientPort, apiPort, serviceRange: options.serviceClusterIpRange ?? '10.0.0.0/24' }),
      logFile: join(logs, 'kube-apiserver.log'),
    });
    processes.push(apiserver);
    const adminTls = { ca: pki.caPem, cert: await readFile(admin.cert), key: await readFile(admin.key) };
    await waitFor(async () => ((await httpGet(`${server}/readyz`, adminTls)).status === 200 ? true : undefined), {
      what: 'kube-apiserver /readyz', timeoutMs: START_TIMEOUT_MS, process: apiserver,
    });
    const apiserverReadyMs = Date.now() - started;

    const kcm = startProcess({
      name: 'kube-controller-manager',
      command: join(binDir, 'kube-controller-manager'),
      args: [
        `--kubeconfig=${kcmKubeconfig}`,
        '--leader-elect=false',
        `--controllers=${CONTROLLERS.join(',')}`,
        // Each controller acts as its own ServiceAccount (system:serviceaccount:kube-system:job-controller, ...), as
        // in a real cluster, so admission webhooks see the same users.
        '--use-service-account-credentials=true',
        `--root-ca-file=${pki.ca.cert}`,
        '--bind-address=127.0.0.1', `--secure-port=${kcmPort}`, `--cert-dir=${join(dir, 'kube-controller-manager')}`,
      ],
      logFile: join(logs, 'kube-controller-manager.log'),
    });
    processes.push(kcm);
    const kubeConfig = (identity: IdentityName) => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigs[identity]);
      return kc;
    };
    const core = kubeConfig('admin').makeApiClient(CoreV1Api);
    // The default ServiceAccount appearing proves the controllers run and can authenticate as themselves.
    await waitFor(async () => ((await httpGet(`https://127.0.0.1:${kcmPort}/healthz`, { rejectUnauthorized: false })).status === 200 ? true : undefined), {
      what: 'kube-controller-manager /healthz', timeoutMs: START_TIMEOUT_MS, process: kcm,
    });
    await waitFor(async () => ((await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' })) ? true : undefined), {
      what: 'the default ServiceAccount (serviceaccount-controller)', timeoutMs: START_TIMEOUT_MS, process: kcm,
    });
    const controllerManagerReadyMs = Date.now() - started;
    await ensureManagerAccount(core);
    log(`ready in ${(controllerManagerReadyMs / 1000).toFixed(1)} s at ${server} (state in ${dir})`);

    return {
      dir, server, pki, kubeconfigs, kubeConfig, processes,
      timings: { etcdReadyMs, apiserverReadyMs, controllerManagerReadyMs },
      stop,
    };
  } catch (e) {
    await stop({ keepDir: true });
    throw new Error(`the control plane did not start (logs kept in ${logs}): ${(e as Error).message}`);
  }
}

interface ApiserverInput {
  pki: Pki;
  serving: CertFiles;
  kubeletClient: CertFiles;
  etcdClientPort: number;
  apiPort: number;
  serviceRange: string;
}

function apiserverArgs({ pki, serving, kubeletClient, etcdClientPort, apiPort, serviceRange }: ApiserverInput): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${etcdClientPort}`,
    '--bind-address=127.0.0.1', `--secure-port=${apiPort}`,
    // Without it the server derives its address from the default route and dies where there is none.
    '--advertise-address=127.0.0.1',
    // Nothing else can reach 127.0.0.1, so do not publish it in the `kubernetes` Service's endpoints.
    '--endpoint-reconciler-type=none',
    `--tls-cert-file=${serving.cert}`, `--tls-private-key-file=${serving.key}`,
    `--client-ca-file=${pki.ca.cert}`,
    '--authorization-mode=RBAC',
    `--service-cluster-ip-range=${serviceRange}`,
    '--allow-privileged=true',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${pki.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    // pods/log goes to the fake kubelet's InternalIP (127.0.0.1); both ends are verified against the test CA.
    '--kubelet-preferred-address-types=InternalIP',
    `--kubelet-certificate-authority=${pki.ca.cert}`,
    `--kubelet-client-certificate=${kubeletClient.cert}`, `--kubelet-client-key=${kubeletClient.key}`,
    '--profiling=false',
  ];
}

async function ensureManagerAccount(core: CoreV1Api): Promise<void> {
  await ignoreConflict(core.createNamespace({ body: { metadata: { name: MANAGER_NAMESPACE } } }));
  await ignoreConflict(core.createNamespacedServiceAccount({ namespace: MANAGER_NAMESPACE, body: { metadata: { name: MANAGER_SERVICE_ACCOUNT } } }));
}

async function ignoreConflict(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (e) {
    if ((e as { code?: number }).code !== 409) throw e;
  }
}

/** Runs tools/controlplane/build.sh, which returns at once when the binaries are cached, and takes its last line. */
export function buildOrLocateBinaries(): Promise<string> {
  return runBuildScript('tools/controlplane/build.sh');
}

/** Runs a build script of tools/ that prints what it built (or found cached) as its last line; returns that line. */
export async function runBuildScript(relativePath: string): Promise<string> {
  const script = join(REPO_ROOT, relativePath);
  const child = promisify(execFile)('bash', [script], { maxBuffer: 1 << 20 });
  child.child.stderr?.pipe(process.stderr);
  try {
    const { stdout } = await child;
    const dir = stdout.trim().split('\n').pop();
    if (!dir) throw new Error('it printed nothing');
    return dir;
  } catch (e) {
    throw new Error(`${script} failed: ${(e as Error).message}`);
  }
}

/**
 * Runs a build script of tools/ like runBuildScript, but in its own process group that an interrupted or exiting
 * harness kills (a build left running holds its lock and the cores), optionally at a lower CPU priority.
 */
export function runTrackedBuild(relativePath: string, options: { name: string; nice?: number }): Promise<string> {
  const script = join(REPO_ROOT, relativePath);
  const command = options.nice === undefined ? ['bash', script] : ['nice', '-n', String(options.nice), 'bash', script];
  const child = spawn(command[0]!, command.slice(1), { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  trackGroup(options.name, child);
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
  return new Promise((resolve, reject) => {
    child.once('error', (e) => reject(new Error(`${relativePath} could not start: ${e.message}`)));
    // 'close', not 'exit': the path is the last line of stdout, complete only once the stream has closed.
    child.once('close', (code, signal) => {
      const path = stdout.trim().split('\n').pop();
      if (code === 0 && path) resolve(path);
      else reject(new Error(`${relativePath} ended with ${signal ?? `status ${code}`}${path ? '' : ' and printed nothing'}`));
    });
  });
}

interface HttpAnswer {
  status: number;
  body: string;
}

function httpGet(url: string, tls?: RequestOptions): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = (u.protocol === 'https:' ? httpsRequest : httpRequest)(u, { ...(tls ?? {}), method: 'GET', timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { body += chunk; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
    req.end();
  });
}
