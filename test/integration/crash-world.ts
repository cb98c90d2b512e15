// The migration world with the manager as a real process: migration-world.ts's namespace, CRDs, RBAC, database
// and helpers, plus src/main.ts run as its own process under the manager's identity (its own client certificate),
// serving its webhooks (registered with the API server by URL) and reaching the API server through the crash proxy.
// A row of the seed's "the process stopped, what does the next pass see" table is run as: arm a kill on the row's
// first write, drive the migration until the proxy kills the manager right after that write is stored, read what
// the API server holds, start a new manager (always the real src/main.ts) and read what it made of it.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { V1Job, V1Lease, V1Pod } from '@kubernetes/client-node';
import { generateCertificates } from '../../certs/generate.js';
import type { PtahMigration, PtahMigrationStatus } from '../../src/shared/api/migration-kinds.js';
import type { PtahSchema, PtahSchemaStatus } from '../../src/shared/api/schema-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import type { DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { restClient } from '../../src/shared/kube-client.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { LEASE_EPOCH_ANNOTATION } from '../../src/shared/targetlock.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { IDENTITIES } from '../../tools/stack/controlplane.js';
import { startCrashProxy, type CrashProxy, type FiredKill, type KillTrigger, type ProxiedWrite, type RecordedRequest } from '../harness/crash-proxy.js';
import { writeKubeconfig } from '../../tools/stack/kubeconfig.js';
import { httpsText, LEADING, startManagerProcess, type ManagerProcess, type ManagerProcessOptions } from '../harness/manager-process.js';
import { freePort } from '../../tools/stack/ports.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { registerWebhooks, type RegisteredWebhooks } from '../../tools/stack/webhooks.js';
import { jobsOf, MANAGER, migrationWorld, WAIT_MS, type HistoryRow, type MigrationWorld } from './migration-world.js';
import { schemaWorld, type SchemaWorld } from './schema-world.js';
import { sleepingSessions } from './slow-apply.js';

export const NAME = 'orders';
export type Swap = readonly [DispatchStep, DispatchStep];

/** How the crash world runs its manager processes (the benchmarks run the compiled manager at info level). */
export type ManagerBuild = Pick<ManagerProcessOptions, 'build' | 'logLevel' | 'nodeArgs'>;
/** Another release of the manager: the source tree it runs from (tools/stack/variants.ts) and what its config names. */
export type ManagerRelease = Partial<Pick<ManagerProcessOptions, 'root' | 'runnerImage' | 'controllerImage' | 'revision'>>;

/** What of a test world the crash world uses: its namespace and an admin client. */
export interface CrashBase {
  ns: string;
  admin: MigrationWorld['admin'];
}

export interface CrashWorld<W extends CrashBase = MigrationWorld> {
  w: W;
  proxy: CrashProxy;
  /** The manager process running now, if any. */
  readonly manager: ManagerProcess | undefined;
  /**
   * Starts a manager process (the real src/main.ts, or the swapped test entry); the previous one must be gone.
   * `release` is another release's: the source tree it runs from and the images and revision its config names
   * (default the checkout and the world's MANAGER).
   */
  startManager(order?: Swap, release?: ManagerRelease): Promise<ManagerProcess>;
  /** Kills the running manager now, wherever it is; returns when it was dead (ms since the epoch). */
  killNow(): Promise<number>;
  /** Stops the running manager with SIGTERM and waits for its orderly exit. */
  stopManager(): Promise<void>;
  /** Arms a kill of the manager running when `trigger`'s write arrives; resolves once it is dead. */
  killOn(trigger: KillTrigger): Promise<FiredKill>;
  /**
   * Unregisters the manager process's webhooks while no manager runs, so a person's write is admitted by the
   * world's own admission service alone (a dead manager's webhooks fail closed); the next startManager registers
   * them again.
   */
  unregisterManagerWebhooks(): Promise<void>;
  /** The running manager's /metrics text (the benchmarks read its heap by space from it). */
  managerMetrics(): Promise<string>;
}

/** A manager's /metrics text. */
async function metricsText(url: string, caPem: string): Promise<string> {
  return (await httpsText(`${url}/metrics`, caPem)).body;
}

/** Sums controller_runtime_webhook_requests_total: how many admission requests the process has answered. */
async function webhookRequests(url: string, caPem: string): Promise<number> {
  return (await metricsText(url, caPem)).split('\n').filter((l) => l.startsWith('controller_runtime_webhook_requests_total'))
    .reduce((sum, l) => sum + Number(l.split(' ').pop() ?? 0), 0);
}

/** `schemas`: the test also creates PtahSchemas in the migration world's namespace, which the teardown deletes too. */
export async function crashWorld(t: Test, options: { schemas?: boolean; manager?: ManagerBuild } = {}): Promise<CrashWorld> {
  return crashWorldOn(t, await migrationWorld(t), options.schemas ? ['PtahMigration', 'PtahSchema'] : ['PtahMigration'], options.manager);
}

/** The schema world (schema-world.ts's namespace, database and helpers) with the manager as a real process. */
export async function crashSchemaWorld(t: Test, manager?: ManagerBuild): Promise<CrashWorld<SchemaWorld>> {
  return crashWorldOn(t, await schemaWorld(t), ['PtahSchema'], manager);
}

/**
 * The crash world on `w`'s namespace; `kinds` are the resources the teardown deletes while a manager runs, so it
 * takes its finalizers off and the namespace can go.
 */
async function crashWorldOn<W extends CrashBase>(t: Test, w: W, kinds: readonly ('PtahMigration' | 'PtahSchema')[], build: ManagerBuild = {}): Promise<CrashWorld<W>> {
  const cluster = sharedCluster();
  const pki = await cluster.pki();
  const dir = await mkdtemp(join(tmpdir(), 'ptah-crash-'));
  const [client, serving, certs, port, metricsPort] = await Promise.all([
    pki.issueClient('crash-manager', IDENTITIES.manager),
    pki.issueServing('crash-proxy', { ips: ['127.0.0.1'] }),
    generateCertificates({ outDir: join(dir, 'serving'), sans: ['IP:127.0.0.1'], commonName: 'ptah-crash-manager' }),
    freePort(),
    freePort(),
  ]);
  const servingCa = await readFile(certs.caCert, 'utf8');
  const proxy = await startCrashProxy({ upstream: cluster.state.server, caPem: pki.caPem, client, serving, namespace: w.ns });
  const kubeconfig = join(dir, 'manager.kubeconfig');
  await writeKubeconfig(kubeconfig, { server: proxy.url, caPem: pki.caPem, client, name: 'manager' });
  let manager: ManagerProcess | undefined;
  let hooks: RegisteredWebhooks | undefined;
  let started = 0;

  const world: CrashWorld<W> = {
    w,
    proxy,
    get manager() {
      return manager;
    },
    async startManager(order, release = {}) {
      if (manager) throw new Error(`${manager.name} is still running`);
      started += 1;
      // The same port and certificate every time, so the webhook registration outlives a killed manager.
      manager = await startManagerProcess({
        name: `manager-${started}${order ? `-swapped-${order.join('-')}` : ''}`, logFile: join(dir, `manager-${started}.log`), kubeconfig,
        certDir: certs.dir, caPem: servingCa, port, metricsPort, leaseNamespace: w.ns, watchNamespace: w.ns,
        runnerImage: release.runnerImage ?? MANAGER.runnerImage, controllerImage: release.controllerImage ?? MANAGER.controllerImage,
        revision: release.revision ?? MANAGER.controllerRevision, ...(order ? { order } : {}), ...build, ...(release.root ? { root: release.root, build: 'source' as const } : {}),
      });
      if (!hooks) {
        const { url, metricsUrl } = manager;
        let answered = await webhookRequests(metricsUrl, servingCa);
        const managerClient = await restClient(cluster.kubeConfig('manager'));
        hooks = await registerWebhooks(url, servingCa, {
          namespace: w.ns, name: `ptah-crash-${w.ns}`, cluster,
          answered: () => answered,
          probe: async () => {
            try {
              await managerClient.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'ptah-webhook-probe-', namespace: w.ns } }, { dryRun: true });
            } finally {
              answered = await webhookRequests(metricsUrl, servingCa);
            }
          },
        });
      }
      return manager;
    },
    async killNow() {
      const running = manager;
      if (!running) throw new Error('no manager is running');
      manager = undefined;
      await running.kill();
      return Date.now();
    },
    async stopManager() {
      const running = manager;
      if (!running) throw new Error('no manager is running');
      manager = undefined;
      await running.stop();
    },
    killOn(trigger) {
      // Whichever manager is running when the write arrives is the one that dies.
      return proxy.armKill(trigger, async () => {
        const running = manager;
        manager = undefined;
        await running?.kill();
      });
    },
    async managerMetrics() {
      if (!manager) throw new Error('no manager is running');
      return metricsText(manager.metricsUrl, servingCa);
    },
    async unregisterManagerWebhooks() {
      if (manager) throw new Error(`${manager.name} is still running`);
      await hooks?.unregister();
      hooks = undefined;
    },
  };

  t.teardown(async () => {
    proxy.disarm();
    // A live manager takes its finalizers off the deleted resources, so the namespace can go.
    for (const kind of kinds) {
      const { kind: kindName } = KINDS[kind];
      const resources = await w.admin.list<PtahMigration | PtahSchema>(API_VERSION, kindName, w.ns).catch(() => []);
      if (resources.length === 0) continue;
      if (!manager) await world.startManager().catch(() => undefined);
      const ref = (name: string) => ({ apiVersion: API_VERSION, kind: kindName, namespace: w.ns, name });
      await Promise.all(resources.map((r) => w.admin.delete(ref(r.metadata.name!)).catch(() => undefined)));
      await waitFor(async () => ((await w.admin.list(API_VERSION, kindName, w.ns)).length === 0 ? true : undefined),
        { what: `the crash test's ${kindName}s to be deleted`, timeoutMs: 60_000 }).catch(() => undefined);
    }
    await manager?.kill();
    await hooks?.unregister();
    await proxy.close();
    if (t.passing()) await rm(dir, { recursive: true, force: true });
    else t.comment(`crash world kept in ${dir} (manager logs)`);
  });
  return world;
}

// ---- triggers: the first write of a row, recognised in the manager's request stream ----

const isStored = (r: { status: number }) => r.status >= 200 && r.status < 300;
const MIGRATIONS = `/apis/${API_VERSION}/namespaces/[^/]+/${KINDS.PtahMigration.plural}/`;
const SCHEMAS = `/apis/${API_VERSION}/namespaces/[^/]+/${KINDS.PtahSchema.plural}/`;

/** A status write (PUT or PATCH of the status subresource) of migration `name` whose new status satisfies `is`. */
export function statusWrite(what: string, is: (status: PtahMigrationStatus) => boolean, name = NAME): KillTrigger {
  return statusWriteOf(MIGRATIONS, what, is, name);
}

/** A status write of PtahSchema `name` whose new status satisfies `is`. */
export function schemaStatusWrite(what: string, is: (status: PtahSchemaStatus) => boolean, name: string): KillTrigger {
  return statusWriteOf(SCHEMAS, what, is, name);
}

function statusWriteOf<S>(collection: string, what: string, is: (status: S) => boolean, name: string): KillTrigger {
  const path = new RegExp(`^${collection}${name}/status$`);
  return {
    what,
    match: (write: ProxiedWrite) => (write.method === 'PUT' || write.method === 'PATCH') && path.test(write.path) &&
      is(((write.body as { status?: S } | undefined)?.status) ?? ({} as S)),
  };
}

/** Any write whose method and path match. */
export function writeTo(what: string, method: string, path: RegExp, body: (b: unknown) => boolean = () => true): KillTrigger {
  return { what, match: (write) => write.method === method && path.test(write.path) && body(write.body) };
}

/** The Apply claim in a status, if it is one. */
export function applyClaim(status: PtahMigrationStatus | undefined): ActiveOperation | undefined {
  const claim = status?.activeOperation;
  return claim?.type === 'Apply' ? claim : undefined;
}

// ---- a row: the fixture up to the window, the kill, and the new manager's answer ----

export interface RowRun {
  cw: CrashWorld;
  db: TestDatabase;
  fired: FiredKill;
  /** What the API server held right after the (last) kill. */
  atKill: PtahMigration;
  /** The Apply claim at the first kill (undefined for a row before the claim). */
  claim: ActiveOperation | undefined;
  jobAtKill: V1Job | undefined;
  /** The namespace's Leases right after the (last) kill, read before the new manager starts (it may release them). */
  leasesAtKill: V1Lease[];
  /** Every stored version of the migration from before the kill on. */
  states: PtahMigration[];
  /** From the kill until the new manager led. */
  recoveryMs: number;
}

export interface RowOptions {
  /** When the kill is armed: before the migration exists, or once its plan waits for approval (then it is approved). */
  armAt: 'create' | 'approval';
  trigger: KillTrigger;
  /** The first manager's wrong order; every later manager is the real one. */
  order?: Swap;
  /**
   * A second window, for rows that need a record the first kill leaves: armed before the second manager starts,
   * after which `act` runs (e.g. a person's acknowledgment); a third manager then starts.
   */
  then?: { trigger: KillTrigger; act?: (w: MigrationWorld, claim: ActiveOperation | undefined) => Promise<unknown> };
}

/** Runs a row up to its kill and starts the new manager. */
export async function runToKill(t: Test, options: RowOptions): Promise<RowRun> {
  const cw = await crashWorld(t);
  const { w } = cw;
  const db = await w.database('crash');
  const secret = await w.installSample(db);
  await w.sampleArtifact();
  await cw.startManager(options.order);
  const states = await w.watchMigration(NAME);
  let kill: Promise<FiredKill> | undefined;
  if (options.armAt === 'create') kill = cw.killOn(options.trigger);
  await w.createMigration({ name: NAME, artifact: 'orders-migrations-r1', secret, apply: 'OnApproval' });
  if (options.armAt === 'approval') {
    await w.waitFor(NAME, 'the plan to wait for approval', (m) => (m.status?.phase === 'AwaitingApproval' && m.status.plan ? true : undefined));
    kill = cw.killOn(options.trigger);
    await w.approve(NAME);
  }
  let fired = await within(kill!, WAIT_MS, `the kill on ${options.trigger.what}`, () => cw.proxy.disarm());
  const claim = applyClaim((await w.get(NAME)).status);
  if (options.then) {
    const second = cw.killOn(options.then.trigger);
    await cw.startManager();
    await options.then.act?.(w, claim);
    fired = await within(second, WAIT_MS, `the kill on ${options.then.trigger.what}`, () => cw.proxy.disarm());
  }
  const atKill = await w.get(NAME);
  const jobAtKill = claim ? await w.admin.tryGet<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }) : undefined;
  const leasesAtKill = await w.admin.list<V1Lease>('coordination.k8s.io/v1', 'Lease', w.ns);
  const next = await cw.startManager();
  const ledAt = await next.waitForLog(LEADING, 60_000);
  return { cw, db, fired, atKill, claim, jobAtKill, leasesAtKill, states, recoveryMs: ledAt - fired.killedAt };
}

/** `p`, or a failure naming `what` after `ms` (`onTimeout` runs first). */
export async function within<T>(p: Promise<T>, ms: number, what: string, onTimeout: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The first stored version, after the kill, in which the claim `id` is no longer in flight. */
export async function settled(run: RowRun, id: string): Promise<PtahMigration> {
  return run.cw.w.waitFor(NAME, `claim ${id} to be settled by the new manager`, (m) => (m.status?.activeOperation?.id !== id ? m : undefined));
}

/** The Apply Jobs ever seen for the migration, and the creates of `jobName` the managers sent. */
export function applyJobs(run: RowRun, jobName: string): { seen: V1Job[]; creates: number } {
  const creates = run.cw.proxy.writes().filter((r) => r.method === 'POST' && /\/jobs$/.test(r.path) &&
    (r.body as { metadata?: { name?: string } } | undefined)?.metadata?.name === jobName && isStored(r)).length;
  return { seen: jobsOf(run.cw.w, 'apply', NAME), creates };
}

/** The database's history rows written under operation `id`. */
export async function historyOf(run: RowRun, id: string): Promise<HistoryRow[]> {
  return (await run.cw.w.history(run.db)).filter((r) => r.operationId === id);
}

/** A row of the table: where its kill is armed, its first write, and its third column as a list of problems. */
export interface CrashRow {
  armAt: RowOptions['armAt'];
  trigger: KillTrigger;
  then?: RowOptions['then'];
  verdict(run: RowRun): Promise<string[]>;
}

/** Runs `row` (against the wrong `order`, when given) and returns what its verdict found. */
export async function proveRow(t: Test, row: CrashRow, order?: Swap): Promise<string[]> {
  const run = await runToKill(t, { armAt: row.armAt, trigger: row.trigger, ...(row.then ? { then: row.then } : {}), ...(order ? { order } : {}) });
  const started = Date.now();
  const problems = await row.verdict(run);
  t.comment(`${(row.then?.trigger ?? row.trigger).what}: killed ${run.fired.killedAt - run.fired.storedAt} ms after it was stored; the new manager led ` +
    `${run.recoveryMs} ms after the kill; verdict reached ${Date.now() - started} ms later`);
  if (problems.length > 0) t.comment(`problems: ${problems.join('; ')}`);
  return problems;
}

/** The outcome a settled migration records for claim `id`: its unresolved run's, else its last run's. */
export function outcomeOf(m: PtahMigration, id: string): string {
  const s = m.status;
  if (s?.unresolvedRun?.operationID === id) return s.unresolvedRun.outcome;
  if (s?.lastRun?.operationID === id) return s.lastRun.outcome;
  return 'nothing';
}


/**
 * The third column of every row whose window closes before anything ran: the new manager proceeds with the same
 * claim and applies its plan exactly once, in the one Job created under the reserved name, with the database
 * recording each version once under the claim's operation ID and nothing left unresolved.
 */
export async function appliedOnce(run: RowRun, claim: ActiveOperation): Promise<string[]> {
  const problems: string[] = [];
  const after = await settled(run, claim.id);
  const outcome = outcomeOf(after, claim.id);
  if (outcome !== 'Applied') problems.push(`the new manager recorded ${outcome}, not Applied`);
  if (after.status?.unresolvedRun) problems.push(`an unresolved run stands (${after.status.unresolvedRun.outcome})`);
  const { seen, creates } = applyJobs(run, claim.jobName);
  if (seen.length !== 1 || seen[0]?.metadata?.name !== claim.jobName) problems.push(`${seen.length} Apply Jobs were seen (${seen.map((j) => j.metadata?.name).join(', ')}), not the one under ${claim.jobName}`);
  if (creates !== 1) problems.push(`${creates} creates of ${claim.jobName} were stored, not one`);
  if (seen[0] && after.status?.lastRun?.jobUID !== seen[0].metadata?.uid) problems.push(`the last run names Job UID ${after.status?.lastRun?.jobUID}, not the Job's ${seen[0].metadata?.uid}`);
  const rows = await historyOf(run, claim.id);
  const versions = rows.map((r) => r.version);
  if (rows.length === 0) problems.push('the database recorded nothing under the claim');
  if (new Set(versions).size !== versions.length) problems.push(`the database applied a version twice: ${versions.join(', ')}`);
  const planned = after.status?.lastRun?.appliedVersions ?? [];
  if (versions.join(',') !== planned.join(',')) problems.push(`the database holds ${versions.join(', ')} under the claim, the status ${planned.join(', ')}`);
  return problems;
}

/** The stored version in which claim `id` first carries its Job UID: the claim as it was dispatched. */
export function dispatchedClaim(run: RowRun, id: string): ActiveOperation | undefined {
  return run.states.map((m) => applyClaim(m.status)).find((c) => c?.id === id && c.jobUID);
}

/** The stored writes the manager after the (last) kill sent, optionally only those to paths `path` matches, in order. */
export function recoveryWrites(run: RowRun, path?: RegExp): RecordedRequest[] {
  return run.cw.proxy.writes().filter((r) => r.at >= run.fired.killedAt && isStored(r) && (!path || path.test(r.path)));
}

/** The stored writes the manager after the (last) kill sent to the migration itself (metadata or status). */
export function recoveryWritesTo(run: RowRun, name = NAME): RecordedRequest[] {
  return recoveryWrites(run, new RegExp(`^${MIGRATIONS}${name}(/status)?$`));
}

/** A row's test, and optionally its run against a wrong dispatch order whose verdict must name `caught`. */
export interface RowTest {
  title: string;
  row: CrashRow;
  wrongOrder?: { swap: Swap; against: string; caught: string };
}

/** One tap test per row (its verdict finds nothing) and one per wrong order (its verdict finds `caught`). */
export function testRows(tap: Test, rows: readonly RowTest[]): void {
  for (const { title, row, wrongOrder } of rows) {
    void tap.test(title, async (tt) => {
      tt.same(await proveRow(tt, row), []);
    });
    if (!wrongOrder) continue;
    void tap.test(`${title.split(':')[0]}, against a manager that ${wrongOrder.against}: the verdict finds it`, async (tt) => {
      const problems = await proveRow(tt, row, wrongOrder.swap);
      tt.ok(problems.some((p) => p.includes(wrongOrder.caught)), `the wrong order is caught: "${wrongOrder.caught}"`);
    });
  }
}

// ---- Applies caught while they run ----

export interface RunningApply {
  name: string;
  db: TestDatabase;
  claim: ActiveOperation;
  /** UIDs of the Job's Pods when it was caught. */
  pods: string[];
  /** The realm Lease's epoch when it was caught. */
  epoch: string | undefined;
  /** Every stored version of the migration from its creation on. */
  states: PtahMigration[];
}

export const podsOf = async (cw: CrashWorld, jobName: string): Promise<string[]> =>
  (await cw.w.admin.list<V1Pod>('v1', 'Pod', cw.w.ns, { labelSelector: `job-name=${jobName}` })).map((p) => p.metadata!.uid!).sort();

/** A migration `name` (realm `key`) whose slow Apply (artifact slow-r1) is dispatched and sleeping in its own database. */
export async function sleepingApply(cw: CrashWorld, name: string, key?: string): Promise<RunningApply> {
  const { w } = cw;
  const db = await w.database(`crash-${name}`);
  const secret = await w.installSample(db, `${name}-db`);
  const states = await w.watchMigration(name);
  await w.createMigration({ name, artifact: 'slow-r1', secret, apply: 'Always', activeDeadlineSeconds: 120, lockTimeout: '1m', ...(key ? { coordinationKey: key } : {}) });
  const m = await w.waitFor(name, 'an Apply with its Job UID recorded', (x) => (applyClaim(x.status)?.jobUID ? x : undefined));
  await waitFor(async () => ((await sleepingSessions(w, db)) > 0 ? true : undefined), { what: `${name}'s Apply to sleep in its database`, timeoutMs: WAIT_MS });
  const claim = applyClaim(m.status)!;
  const lease = await w.admin.get<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: leaseNameFor(claim.coordinationDigest!) });
  return { name, db, claim, pods: await podsOf(cw, claim.jobName), epoch: lease.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION], states };
}
