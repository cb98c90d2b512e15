// A manager as its own process: `node --import tsx src/main.ts` with the flags an installation passes (its
// kubeconfig, serving certificate, port, Lease namespace and images), in its own process group, its output in a
// log file. `order` runs test/harness/manager-swapped-main.ts instead, the same wiring with two dispatch steps
// exchanged, so a test can show that its assertions fail against a wrong order. Nothing here reaches into src/.
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { join } from 'node:path';
import type { DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { startProcess, type ManagedProcess, type ProcessExit } from '../../tools/stack/processes.js';
import { waitFor } from '../../tools/stack/wait.js';

export interface ManagerProcessOptions {
  /** Names the process in messages and its log file. */
  name: string;
  logFile: string;
  kubeconfig: string;
  /** Holds tls.crt and tls.key; `caPem` is the CA that signed them. */
  certDir: string;
  caPem: string;
  port: number;
  /** Where /metrics listens. */
  metricsPort: number;
  leaseNamespace: string;
  /** The one namespace it reconciles (`--watch-namespace`): test files share the control plane and run side by side. */
  watchNamespace: string;
  runnerImage: string;
  controllerImage: string;
  revision: string;
  /**
   * The source tree whose src/main.ts runs (another release, tools/stack/variants.ts); default the checkout. From
   * source only: its executor identity is computed from that tree's own files.
   */
  root?: string;
  /** Two dispatch steps to exchange: the deliberately wrong manager. */
  order?: readonly [DispatchStep, DispatchStep];
  /**
   * `compiled` runs `node dist/src/main.js`, as production does (`npm run build` first): the benchmarks measure
   * that. The default is `compiled` under `npm test` (MANAGER_BUILD_ENV), else the source under tsx, which needs no
   * build; the swapped manager and another release run from source whatever the default.
   */
  build?: 'source' | 'compiled';
  /** Default `debug`: the tests read the manager's decisions from its log. */
  logLevel?: 'debug' | 'info';
  /** Options for node itself, before the entry (a benchmark's `--cpu-prof`, a heap size to compare). */
  nodeArgs?: readonly string[];
}

export interface ManagerProcess {
  name: string;
  pid: number;
  url: string;
  /** Where /metrics is served (same host and certificate). */
  metricsUrl: string;
  logFile: string;
  readonly exited: Promise<ProcessExit>;
  /** SIGKILL to the process group; resolves once the leader is gone. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after 30 s; resolves once it exited (an orderly exit writes a `--cpu-prof` profile). */
  stop(): Promise<ProcessExit>;
  /** Resolves with the time (ms since the epoch) the log first shows `line`. */
  waitForLog(line: string, timeoutMs: number): Promise<number>;
  logTail(lines?: number): string;
}

/** The log line the manager writes when it leads and starts its controllers (src/controller/manager.ts). */
export const LEADING = 'leading: starting controllers';

/**
 * Set to `compiled` by `npm test` (test/run.ts), which brings dist/ up to date before any file runs: a manager then
 * starts from dist/ by default, on about 0.65 s of CPU where tsx needs 1.6 s, and the suite starts many managers.
 */
export const MANAGER_BUILD_ENV = 'PTAH_TEST_MANAGER_BUILD';

/** Starts the manager and waits until it serves /healthz. */
export async function startManagerProcess(options: ManagerProcessOptions): Promise<ManagerProcess> {
  if (options.order && options.build === 'compiled') throw new Error('the swapped manager runs from source only');
  if (options.root && (options.order || options.build === 'compiled')) throw new Error('another release runs from its source, unswapped');
  const fromSourceOnly = options.order !== undefined || options.root !== undefined;
  const compiled = (options.build ?? (fromSourceOnly ? 'source' : process.env[MANAGER_BUILD_ENV])) === 'compiled';
  const flags = compiled ? [] : ['--import', 'tsx'];
  const script = options.order ? 'test/harness/manager-swapped-main.ts' : compiled ? 'dist/src/main.js' : 'src/main.ts';
  const args = [
    ...flags,
    ...(options.nodeArgs ?? []),
    join(options.root ?? REPO_ROOT, script),
    ...(options.order ? ['--swap', options.order.join(',')] : []),
    '--kubeconfig', options.kubeconfig,
    '--cert-dir', options.certDir,
    '--listen-host', '127.0.0.1',
    '--port', String(options.port),
    '--metrics-port', String(options.metricsPort),
    '--lease-namespace', options.leaseNamespace,
    '--watch-namespace', options.watchNamespace,
    '--runner-image', options.runnerImage,
    '--controller-image', options.controllerImage,
    '--revision', options.revision,
    '--log-level', options.logLevel ?? 'debug',
    // A killed leader's successor waits out the Lease: short timings keep the many kills of the suite quick, with a
    // renew deadline (5 s) a loaded two-core machine's API server still meets.
    '--leader-election-lease-duration', '6s',
    '--leader-election-renew-deadline', '5s',
    '--leader-election-retry-period', '500ms',
  ];
  return launchManagerProcess({
    name: options.name, logFile: options.logFile, args, env: managerEnv(), url: `https://127.0.0.1:${options.port}`,
    metricsUrl: `https://127.0.0.1:${options.metricsPort}`, caPem: options.caPem,
  });
}

/** A manager process configured by its environment alone, as a Deployment's container is. */
export interface ManagerLaunch {
  name: string;
  logFile: string;
  /** node's arguments: the entry and anything before it. */
  args: string[];
  env: NodeJS.ProcessEnv;
  /** Where it serves /healthz and /metrics, and the CA its serving certificate chains to. */
  url: string;
  metricsUrl: string;
  caPem: string;
}

/** The entry of the release whose source tree is `root` (default the checkout), run from source. */
export const sourceEntry = (root = REPO_ROOT): string[] => ['--import', 'tsx', join(root, 'src/main.ts')];

/** Starts node with `launch.args` and `launch.env` alone and waits until it serves /healthz. */
export async function launchManagerProcess(launch: ManagerLaunch): Promise<ManagerProcess> {
  const child: ManagedProcess = startProcess({ name: launch.name, command: process.execPath, args: launch.args, logFile: launch.logFile, cwd: REPO_ROOT, env: launch.env });
  const handle: ManagerProcess = {
    name: launch.name,
    pid: child.pid,
    url: launch.url,
    metricsUrl: launch.metricsUrl,
    logFile: launch.logFile,
    exited: child.exited,
    async kill() {
      await child.stop(0);
    },
    stop: () => child.stop(30_000),
    async waitForLog(line, timeoutMs) {
      return waitFor(async () => logTimeOf(await readFile(launch.logFile, 'utf8'), line), { what: `${launch.name} to log "${line}"`, timeoutMs, intervalMs: 100, process: child });
    },
    logTail: (lines) => child.logTail(lines),
  };
  try {
    await waitFor(async () => ((await httpsStatus(`${launch.url}/healthz`, launch.caPem)) === 200 ? true : undefined),
      { what: `${launch.name} to serve /healthz`, timeoutMs: 60_000, process: child });
  } catch (e) {
    await handle.kill();
    throw e;
  }
  return handle;
}

/** The harness's environment without the PTAH_* settings src/config.ts reads: the flags are the whole config. */
export function managerEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PTAH_') || k.startsWith('PTAH_TEST_')));
}

/** The `time` of the first pino line whose msg is `line`. */
function logTimeOf(log: string, line: string): number | undefined {
  for (const text of log.split('\n')) {
    if (!text.includes(line)) continue;
    try {
      // The manager's logger writes ISO times; pino's default is epoch milliseconds.
      const entry = JSON.parse(text) as { msg?: string; time?: number | string };
      const time = typeof entry.time === 'string' ? Date.parse(entry.time) : entry.time;
      if (entry.msg === line && time !== undefined && Number.isFinite(time)) return time;
    } catch {
      // Not a pino line (tsx or node warnings).
    }
  }
  return undefined;
}

/** The status of a GET, or 0 when nothing answered. */
export function httpsStatus(url: string, caPem: string): Promise<number> {
  return httpsText(url, caPem).then((r) => r.status, () => 0);
}

export function httpsText(url: string, caPem: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: caPem, timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}
