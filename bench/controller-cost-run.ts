// One controller-cost run (bench/controller-cost.ts runs it on a stack of its own): K PtahMigrations and K PtahSchemas,
// each on its own database and realm, taken through a whole lifecycle each by a real manager process per family (the
// crash worlds of the integration tests: src/main.ts behind the crash proxy). Around it: the manager's
// ptah_operator_api_requests_total scraped from /metrics, its CPU time from /proc/<pid>/stat, and the proxy's record
// of the requests it forwarded, which checks the counter and tells the manager's own leader-election Lease apart.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { loadavg } from 'node:os';
import type { Test } from 'tap';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { apiRequestLabels } from '../src/shared/api-request-metrics.js';
import type { PtahMigration } from '../src/shared/api/migration-kinds.js';
import { API_VERSION } from '../src/shared/api/names.js';
import type { PtahSchema } from '../src/shared/api/schema-kinds.js';
import { JOB_LABELS } from '../src/shared/job/metadata.js';
import type { KubeObject } from '../src/shared/kube-client.js';
import { sharedCluster } from '../tools/stack/cluster.js';
import { sleep, waitFor } from '../tools/stack/wait.js';
import type { RecordedRequest } from '../test/harness/crash-proxy.js';
import { crashSchemaWorld, crashWorld, type CrashBase, type CrashWorld, type ManagerBuild } from '../test/integration/crash-world.js';
import { processFigures } from './measure.js';
import type { MigrationWorld } from '../test/integration/migration-world.js';
import type { SchemaWorld } from '../test/integration/schema-world.js';

export type Family = 'migration' | 'schema';

export interface CostOptions {
  /** Resources per family. */
  resources: number;
  /** How long the managers are watched doing nothing, before and after, for the background rate. */
  idleSeconds: number;
  /** How long after the last resource converged the window stays open, for the passes its last writes wake. */
  settleSeconds: number;
  /** Keep the manager's own webhooks registered (admission reads then count in its traffic too). */
  managerWebhooks: boolean;
  /** Run the compiled manager (`dist/`, `npm run build` done) at info level, as production does; else tsx at debug. */
  compiled: boolean;
  /** Node's `--cpu-prof` into this directory for each manager: it is written when the manager exits on SIGTERM. */
  cpuProfileDir?: string;
  timeoutMs: number;
  log(line: string): void;
}

/** `verb resource` → requests. */
export type RequestTally = Record<string, number>;

export interface FamilyCost {
  family: Family;
  resources: number;
  /** Jobs the manager created, by operation label. */
  jobs: Record<string, number>;
  seconds: number;
  /** Every request of the window, by verb and resource, from the manager's counter. */
  requests: RequestTally;
  /** Answers other than 2xx in the window, by `verb resource code`. */
  failures: RequestTally;
  /** The part of `requests` that was the manager's leader-election Lease, from the proxy's record. */
  leaderElection: RequestTally;
  /** Requests the proxy forwarded in the window: equal to the counter's total when the counter is right. */
  proxied: number;
  /** TLS connections the manager opened to the proxy in the window (each a handshake). */
  connections: number;
  managerCpuMs: number;
  /** The manager's CPU and requests per second while it has nothing to do. */
  idle: { cpuMsPerSecond: number; requestsPerSecond: number; requests: RequestTally };
}

export interface CostReport {
  startedAt: string;
  loadavgBefore: number[];
  loadavgAfter: number[];
  node: string;
  options: Omit<CostOptions, 'log'>;
  families: FamilyCost[];
  /** This process: the fake kubelet, the proxies and the worlds (own), and the Pod processes it reaped (children). */
  benchCpuMs: { own: number; children: number };
}

const MANAGER_LEASE = /\/leases\/ptah-operator\.operator\.ptah\.run$/;

/** CPU ms of this process, and of the child processes it reaped (cutime and cstime: the Pods' runners and executors). */
function benchCpuMs(): { own: number; children: number } {
  const { userCPUTime, systemCPUTime } = process.resourceUsage();
  // Fields after the command name start at field 3 (state): cutime and cstime are fields 16 and 17, in ticks of 1/100 s.
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ').map(Number);
  return { own: (userCPUTime + systemCPUTime) / 1000, children: (fields[13]! + fields[14]!) * 10 };
}

/** The manager's ptah_operator_api_requests_total series, `verb resource code` → value. */
export async function scrapeRequests(url: string): Promise<RequestTally> {
  const body = await new Promise<string>((resolve, reject) => {
    // The crash world's serving certificate; only the loopback manager is asked.
    const req = request(`${url}/metrics`, { rejectUnauthorized: false, timeout: 10_000 }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve(text));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
  const tally: RequestTally = {};
  for (const line of body.split('\n')) {
    const m = /^ptah_operator_api_requests_total\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    tally[`${labels.verb} ${labels.resource} ${labels.code}`] = Number(m[2]);
  }
  return tally;
}

/** after − before, dropping zeros. */
export function difference(after: RequestTally, before: RequestTally): RequestTally {
  const out: RequestTally = {};
  for (const [key, n] of Object.entries(after)) {
    const d = n - (before[key] ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}

/** `verb resource code` tallies folded into `verb resource`, with the non-2xx answers apart. */
export function byVerbAndResource(tally: RequestTally): { requests: RequestTally; failures: RequestTally } {
  const requests: RequestTally = {};
  const failures: RequestTally = {};
  for (const [key, n] of Object.entries(tally)) {
    const [verb, resource, code] = key.split(' ');
    requests[`${verb} ${resource}`] = (requests[`${verb} ${resource}`] ?? 0) + n;
    if (!/^2\d\d$/.test(code ?? '')) failures[key] = n;
  }
  return { requests, failures };
}

const total = (tally: RequestTally) => Object.values(tally).reduce((a, b) => a + b, 0);

/** What the proxy forwarded of the manager's leader-election Lease, by verb and resource. */
function leaderElectionOf(requests: readonly RecordedRequest[]): RequestTally {
  const tally: RequestTally = {};
  for (const r of requests) {
    if (!MANAGER_LEASE.test(r.path)) continue;
    const { verb, resource } = apiRequestLabels(r.method, r.path);
    tally[`${verb} ${resource}`] = (tally[`${verb} ${resource}`] ?? 0) + 1;
  }
  return tally;
}

/** The Jobs the manager created (stored creates), by operation. */
function jobsOf(requests: readonly RecordedRequest[]): Record<string, number> {
  const jobs: Record<string, number> = {};
  for (const r of requests) {
    if (r.method !== 'POST' || !/\/jobs$/.test(r.path) || r.status < 200 || r.status >= 300) continue;
    const operation = (r.body as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels?.[JOB_LABELS.operation] ?? 'unknown';
    jobs[operation] = (jobs[operation] ?? 0) + 1;
  }
  return jobs;
}

/** A family's world, and how to put K resources of it through their lifecycle. */
interface FamilyRun {
  family: Family;
  cw: CrashWorld<CrashBase>;
  prepare(k: number): Promise<void>;
  create(k: number): Promise<void>;
  converged(k: number): Promise<boolean>;
}

/** What differs between the families: the shared artifact, a resource on its own database and realm, and its end. */
interface FamilySpec<R> {
  kind: 'PtahMigration' | 'PtahSchema';
  artifact(): Promise<unknown>;
  installSample(name: string): Promise<string>;
  create(name: string, secret: string): Promise<unknown>;
  done(resource: R): boolean;
}

function familyRun<R>(family: Family, cw: CrashWorld<CrashBase>, spec: FamilySpec<R>): FamilyRun {
  const names = (k: number) => Array.from({ length: k }, (_, i) => `cost-${family === 'migration' ? 'm' : 's'}${i}`);
  const secrets: string[] = [];
  return {
    family,
    cw,
    async prepare(k) {
      await spec.artifact();
      for (const name of names(k)) secrets.push(await spec.installSample(name));
    },
    async create(k) {
      await Promise.all(names(k).map((name, i) => spec.create(name, secrets[i]!)));
    },
    async converged(k) {
      const all = await cw.w.admin.list<R & KubeObject>(API_VERSION, spec.kind, cw.w.ns);
      return all.filter((r) => spec.done(r)).length === k;
    },
  };
}

function migrationRun(cw: CrashWorld<MigrationWorld>): FamilyRun {
  const { w } = cw;
  return familyRun<PtahMigration>('migration', cw, {
    kind: 'PtahMigration',
    artifact: () => w.sampleArtifact(),
    installSample: async (name) => w.installSample(await w.database(name), `${name}-db`),
    create: (name, secret) => w.createMigration({ name, artifact: 'orders-migrations-r1', secret, apply: 'Always', coordinationKey: `${name}-db` }),
    done: (m) => m.status?.phase === 'InSync' && !m.status.activeOperation && m.status.lastRun?.outcome === 'Applied',
  });
}

const DESIRED = 'CREATE TABLE items (\n  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n  name text NOT NULL\n);\n';

function schemaRun(cw: CrashWorld<SchemaWorld>): FamilyRun {
  const { w } = cw;
  return familyRun<PtahSchema>('schema', cw, {
    kind: 'PtahSchema',
    artifact: () => w.desired('cost-desired-r1', DESIRED),
    installSample: async (name) => w.installSample(await w.database(name), `${name}-db`),
    create: (name, secret) => w.createSchema({ name, artifact: 'cost-desired-r1', secret, apply: 'Always', coordinationKey: `${name}-db` }),
    done: (s) => s.status?.phase === 'InSync' && !s.status.activeOperation && !s.status.pendingObservation && s.status.applied !== undefined,
  });
}

/** Admission served by the world's own service alone: the manager's counter then holds what its controller sent. */
async function unregisterManagerWebhooks(ns: string): Promise<void> {
  const admission = sharedCluster().kubeConfig('admin').makeApiClient(AdmissionregistrationV1Api);
  const name = `ptah-crash-${ns}`;
  await admission.deleteMutatingWebhookConfiguration({ name });
  await admission.deleteValidatingWebhookConfiguration({ name });
}

interface Snapshot {
  at: number;
  requests: RequestTally;
  cpuMs: number;
  proxied: number;
  connections: number;
}

async function snapshot(run: FamilyRun): Promise<Snapshot> {
  const manager = run.cw.manager!;
  const [requests, figures] = await Promise.all([scrapeRequests(manager.metricsUrl), processFigures(manager.pid)]);
  return { at: Date.now(), requests, cpuMs: figures.cpuSeconds * 1000, proxied: run.cw.proxy.requests.length, connections: run.cw.proxy.connections };
}

export async function runControllerCost(t: Test, options: CostOptions): Promise<CostReport> {
  const say = options.log;
  const startedAt = new Date().toISOString();
  const manager: ManagerBuild = {
    ...(options.compiled ? { build: 'compiled', logLevel: 'info' } : {}),
    ...(options.cpuProfileDir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`] } : {}),
  };
  const runs = [migrationRun(await crashWorld(t, { manager })), schemaRun(await crashSchemaWorld(t, manager))];
  for (const run of runs) {
    await run.prepare(options.resources);
    await run.cw.startManager();
    if (!options.managerWebhooks) await unregisterManagerWebhooks(run.cw.w.ns);
  }
  say(`managers started; watching them idle for ${options.idleSeconds} s`);
  await sleep(5_000);
  const idleFrom = await Promise.all(runs.map(snapshot));
  await sleep(options.idleSeconds * 1000);
  const idleTo = await Promise.all(runs.map(snapshot));

  const loadavgBefore = loadavg();
  const benchFrom = benchCpuMs();
  const from = await Promise.all(runs.map(snapshot));
  say(`creating ${options.resources} PtahMigrations and ${options.resources} PtahSchemas (loadavg ${loadavgBefore.map((l) => l.toFixed(2)).join(' ')})`);
  await Promise.all(runs.map((run) => run.create(options.resources)));
  await Promise.all(runs.map((run) => waitFor(async () => ((await run.converged(options.resources)) ? true : undefined),
    { what: `every ${run.family} to converge`, timeoutMs: options.timeoutMs, intervalMs: 1_000 })));
  say(`every resource converged; the window stays open ${options.settleSeconds} s more`);
  await sleep(options.settleSeconds * 1000);
  const to = await Promise.all(runs.map(snapshot));
  const benchTo = benchCpuMs();
  const loadavgAfter = loadavg();
  if (options.cpuProfileDir) {
    // The profile is written at an orderly exit only.
    await Promise.all(runs.map((run) => run.cw.stopManager()));
    say(`the managers' CPU profiles are in ${options.cpuProfileDir}`);
  }

  const families = runs.map((run, i): FamilyCost => {
    const window = run.cw.proxy.requests.slice(from[i]!.proxied, to[i]!.proxied);
    const idleWindow = run.cw.proxy.requests.slice(idleFrom[i]!.proxied, idleTo[i]!.proxied);
    const idleSeconds = (idleTo[i]!.at - idleFrom[i]!.at) / 1000;
    const idleRequests = byVerbAndResource(difference(idleTo[i]!.requests, idleFrom[i]!.requests)).requests;
    const { requests, failures } = byVerbAndResource(difference(to[i]!.requests, from[i]!.requests));
    return {
      family: run.family,
      resources: options.resources,
      jobs: jobsOf(window),
      seconds: (to[i]!.at - from[i]!.at) / 1000,
      requests,
      failures,
      leaderElection: leaderElectionOf(window),
      proxied: window.length,
      connections: to[i]!.connections - from[i]!.connections,
      managerCpuMs: to[i]!.cpuMs - from[i]!.cpuMs,
      idle: {
        cpuMsPerSecond: (idleTo[i]!.cpuMs - idleFrom[i]!.cpuMs) / idleSeconds,
        requestsPerSecond: idleWindow.length / idleSeconds,
        requests: idleRequests,
      },
    };
  });
  return {
    startedAt, loadavgBefore, loadavgAfter, node: process.version,
    options: { resources: options.resources, idleSeconds: options.idleSeconds, settleSeconds: options.settleSeconds, managerWebhooks: options.managerWebhooks, compiled: options.compiled, timeoutMs: options.timeoutMs },
    families,
    benchCpuMs: { own: benchTo.own - benchFrom.own, children: benchTo.children - benchFrom.children },
  };
}

const perRow = (n: number, of: number) => (n / of).toFixed(2);

/** The report as the README quotes it: per family, requests per resource lifecycle and per Job by verb and resource. */
export function costText(report: CostReport): string {
  const lines: string[] = [];
  lines.push(`node ${report.node}, started ${report.startedAt}, loadavg before ${report.loadavgBefore.map((l) => l.toFixed(2)).join(' ')}, after ${report.loadavgAfter.map((l) => l.toFixed(2)).join(' ')}`);
  lines.push(`K=${report.options.resources} per family, manager webhooks ${report.options.managerWebhooks ? 'registered' : 'unregistered (admission by the world\'s service)'}, settle ${report.options.settleSeconds} s, manager ${report.options.compiled ? 'compiled (node dist/, info logs)' : 'under tsx (debug logs)'}`);
  for (const f of report.families) {
    const jobs = Object.values(f.jobs).reduce((a, b) => a + b, 0);
    const lease = total(f.leaderElection);
    const all = total(f.requests);
    lines.push('');
    lines.push(`== ${f.family}: ${f.resources} resources, ${jobs} Jobs (${Object.entries(f.jobs).map(([k, v]) => `${k} ${v}`).join(', ')}), ${f.seconds.toFixed(0)} s`);
    const watches = Object.entries(f.requests).filter(([key]) => key.startsWith('watch ')).reduce((sum, [, n]) => sum + n, 0);
    // A watch is counted when its answer's headers arrive (the first event or bookmark), the proxy records it on arrival.
    lines.push(`counter total ${all} (${watches} watches), proxy forwarded ${f.proxied} over ${f.connections} new TLS connections; of them leader election ${lease}`);
    lines.push(`${'verb resource'.padEnd(34)} ${'total'.padStart(6)} ${'per resource'.padStart(13)} ${'per Job'.padStart(8)}`);
    const rows = Object.entries(f.requests).map(([key, n]) => [key, n - (f.leaderElection[key] ?? 0)] as const).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
    for (const [key, n] of rows) lines.push(`${key.padEnd(34)} ${String(n).padStart(6)} ${perRow(n, f.resources).padStart(13)} ${perRow(n, jobs).padStart(8)}`);
    const lifecycle = all - lease;
    lines.push(`${'all but leader election'.padEnd(34)} ${String(lifecycle).padStart(6)} ${perRow(lifecycle, f.resources).padStart(13)} ${perRow(lifecycle, jobs).padStart(8)}`);
    if (Object.keys(f.failures).length > 0) lines.push(`answers other than 2xx: ${Object.entries(f.failures).map(([k, v]) => `${k} ×${v}`).join(', ')}`);
    const idleCpu = f.idle.cpuMsPerSecond * f.seconds;
    lines.push(`manager CPU ${f.managerCpuMs.toFixed(0)} ms: ${(f.managerCpuMs / jobs).toFixed(1)} ms per Job; idle ${f.idle.cpuMsPerSecond.toFixed(1)} ms/s ` +
      `(${idleCpu.toFixed(0)} ms of the window), so ${((f.managerCpuMs - idleCpu) / jobs).toFixed(1)} ms per Job above idle`);
    lines.push(`idle: ${f.idle.requestsPerSecond.toFixed(2)} requests/s (${Object.entries(f.idle.requests).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'})`);
  }
  lines.push('');
  lines.push(`bench process (fake kubelet, proxies, worlds): ${report.benchCpuMs.own.toFixed(0)} ms; the Pod processes it reaped (runner and executor): ${report.benchCpuMs.children.toFixed(0)} ms`);
  return lines.join('\n');
}
