// Everything a test run (or `npm run local`) shares: PostgreSQL, the control plane and the fake kubelet, described
// by one state file whose path travels to test processes in PTAH_TEST_STACK (read back by cluster.ts).
import { appendFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions, type ControlPlaneTimings, type IdentityName } from './controlplane.js';
import { startFakeKubelet, type FakeKubelet } from './kubelet/fake-kubelet.js';
import type { ImageMap } from './kubelet/images.js';
import { startPostgres, TEST_PG_URL_ENV, type PostgresServer } from './postgres.js';
import { onInterrupt } from './processes.js';

/** Environment variables a test process finds the shared stack through. */
export const STACK_ENV = {
  state: 'PTAH_TEST_STACK',
  kubeconfigs: { admin: 'PTAH_TEST_KUBECONFIG_ADMIN', manager: 'PTAH_TEST_KUBECONFIG_MANAGER', approver: 'PTAH_TEST_KUBECONFIG_APPROVER' },
  postgres: TEST_PG_URL_ENV,
} as const satisfies { state: string; kubeconfigs: Record<IdentityName, string>; postgres: string };

export interface StackState {
  server: string;
  kubeconfigs: Record<IdentityName, string>;
  /** The test CA's directory (certificate and key): tests issue webhook serving certificates from it. */
  pkiDir: string;
  nodeName: string;
  /** The stack's scratch directory (logs, kubelet state). */
  dir: string;
}

export interface StackTimings extends ControlPlaneTimings {
  kubeletReadyMs: number;
  postgresReadyMs?: number;
}

export interface Stack {
  state: StackState;
  stateFile: string;
  /** What to add to a test process's environment. */
  env: Record<string, string>;
  controlPlane: ControlPlane;
  kubelet: FakeKubelet;
  postgres: PostgresServer | undefined;
  timings: StackTimings;
  /** Resident memory in KiB of each process the stack runs (the fake kubelet lives in this process). */
  memory(): Promise<Record<string, number>>;
  stop(options?: { keepDir?: boolean }): Promise<void>;
}

export interface StackOptions {
  /**
   * Start a PostgreSQL server as well (default true), or use one the caller started earlier and stops itself (the
   * suite's runner starts it before the control plane is built, for the tests that need only PostgreSQL).
   */
  postgres?: boolean | PostgresServer;
  /** Where the control plane's binaries are (default: controlplane.ts's choice). */
  binDir?: string;
  images?: ImageMap;
  log?: (line: string) => void;
  serviceClusterIpRange?: ControlPlaneOptions['serviceClusterIpRange'];
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const started = Date.now();
  const given = typeof options.postgres === 'object' ? options.postgres : undefined;
  const pgStart = given ? Promise.resolve({ pg: given, readyMs: undefined })
    : options.postgres === false ? undefined : startPostgres().then((pg) => ({ pg, readyMs: Date.now() - started }));
  // Stop whatever did start when the other half fails.
  const controlPlane = await startControlPlane({
    log: options.log, serviceClusterIpRange: options.serviceClusterIpRange, binDir: options.binDir,
  }).catch(async (e: unknown) => {
    if (!given) await pgStart?.then(({ pg }) => pg.stop(), () => undefined);
    throw e;
  });
  let kubelet: FakeKubelet | undefined;
  let postgres: PostgresServer | undefined;
  const stop = async (stopOptions: { keepDir?: boolean } = {}) => {
    await kubelet?.stop();
    await Promise.all([controlPlane.stop(stopOptions), given ? undefined : postgres?.stop()]);
  };
  const unregister = onInterrupt(() => stop({ keepDir: true }));
  try {
    kubelet = await startFakeKubelet({
      kubeConfig: controlPlane.kubeConfig('admin'), pki: controlPlane.pki, dir: join(controlPlane.dir, 'kubelet'), images: options.images,
      log: kubeletLogger(join(controlPlane.dir, 'logs', 'fake-kubelet.log')),
    });
    const kubeletReadyMs = Date.now() - started;
    const pgReady = await pgStart;
    postgres = pgReady?.pg;
    const state: StackState = {
      server: controlPlane.server, kubeconfigs: controlPlane.kubeconfigs, pkiDir: controlPlane.pki.dir, nodeName: kubelet.nodeName, dir: controlPlane.dir,
    };
    const stateFile = join(controlPlane.dir, 'stack.json');
    await writeFile(stateFile, JSON.stringify(state, null, 2));
    const env: Record<string, string> = { [STACK_ENV.state]: stateFile };
    for (const id of Object.keys(STACK_ENV.kubeconfigs) as IdentityName[]) env[STACK_ENV.kubeconfigs[id]] = controlPlane.kubeconfigs[id];
    if (postgres) env[STACK_ENV.postgres] = postgres.url;
    const runningKubelet = kubelet;
    return {
      state, stateFile, env, controlPlane, kubelet: runningKubelet, postgres,
      timings: { ...controlPlane.timings, kubeletReadyMs, postgresReadyMs: pgReady?.readyMs },
      memory: async () => {
        const out: Record<string, number> = {};
        for (const p of controlPlane.processes) out[p.name] = await rssKiB(p.pid);
        out['fake kubelet (this process)'] = Math.round(process.memoryUsage().rss / 1024);
        return out;
      },
      stop: async (stopOptions) => {
        unregister();
        await stop(stopOptions);
      },
    };
  } catch (e) {
    unregister();
    await stop({ keepDir: true });
    throw e;
  }
}

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

function kubeletLogger(file: string): (line: string) => void {
  return (line) => appendFileSync(file, `${new Date().toISOString()} ${line}\n`);
}
