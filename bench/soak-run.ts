// One chaos soak (bench/soak.ts runs it on its own stack, test/integration/soak.test.ts on the suite's): both
// families, each in its own crash world (a namespace, a manager process behind its crash proxy), R resources over D
// databases, the resources of one database sharing its realm (one coordination key), half of them under
// OnApproval. While it runs: new revisions of a database's artifact or desired schema, approvals and
// acknowledgments as the approver identity, SIGKILLs of a manager (restarted after a random delay), API faults
// injected by the proxies, and Apply Pods deleted (grace 0 and graceful). Then chaos stops, the resources are given
// a bounded time to converge, and the report counts from the databases' own tables and the API server's history.
import { cp, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Test } from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { Informer } from '../src/controller/informer.js';
import type { PtahMigration } from '../src/shared/api/migration-kinds.js';
import type { PtahSchema } from '../src/shared/api/schema-kinds.js';
import { ApiError } from '../src/shared/kube-client.js';
import { holderIdentityFor } from '../src/shared/realm.js';
import { sharedCluster } from '../tools/stack/cluster.js';
import type { RecordedRequest } from '../test/harness/crash-proxy.js';
import { DEFAULT_FAULT_RATES, faultInjector, type FaultInjector, type FaultKind, type FaultRates } from '../test/harness/fault-injection.js';
import type { TestDatabase } from '../tools/stack/postgres.js';
import { sleep } from '../tools/stack/wait.js';
import { crashSchemaWorld, crashWorld, type CrashBase, type CrashWorld } from '../test/integration/crash-world.js';
import type { MigrationWorld } from '../test/integration/migration-world.js';
import { testLogger } from '../test/integration/operator-install.js';
import { switchDesired, watchSchemas, type SchemaWorld } from '../test/integration/schema-world.js';
import {
  appliedTwice, executionsOf, leaseTransitions, overlaps, type AppliedTwice, type DatabaseRecord, type LeaseTransition, type LeaseWrite, type Overlap, type PodLife,
} from './soak-count.js';

export interface SoakOptions {
  minutes: number;
  resources: number;
  databases: number;
  /** The longest the drain waits for convergence once chaos stopped. */
  drainMinutes: number;
  seed: number;
  /** Gaps between manager kills, a killed manager's downtime, and gaps between Pod kills and between revisions (ms). */
  killEveryMs: readonly [number, number];
  downMs: readonly [number, number];
  podKillEveryMs: readonly [number, number];
  reviseEveryMs: readonly [number, number];
  /** A migration's unresolved run standing this long is acknowledged, as a person would after checking. */
  acknowledgeAfterMs: number;
  /**
   * Chaos goes on past `minutes`, up to `atMostMinutes` in all, until this many Apply Pods were deleted and this many
   * executions are recorded in the databases: on a loaded machine a short soak can end before enough ran, and then
   * it judged nothing. Once this many Pods were deleted, the extension deletes no more (manager kills, API faults and
   * revisions go on).
   */
  chaosUntil?: { podKills: number; executions: number; revisions: number; atMostMinutes: number };
  faults: FaultRates;
  log(line: string): void;
}

type Family = 'migration' | 'schema';

interface SoakDatabase {
  index: number;
  family: Family;
  db: TestDatabase;
  realm: string;
  secret: string;
  revision: number;
  resources: string[];
}

export interface UnresolvedRecord {
  resource: string;
  operationId: string;
  outcome: string;
  settled: string;
}

export interface ResourceEnd {
  resource: string;
  family: Family;
  database: string;
  converged: boolean;
  why?: string;
}

export interface SoakReport {
  options: Omit<SoakOptions, 'log'>;
  startedAt: string;
  chaosSeconds: number;
  drainSeconds: number;
  safety: {
    operationsAppliedTwice: number;
    overlappingExecutions: number;
    leasesReleasedUnderRunningPod: number;
  };
  evidence: { appliedTwice: AppliedTwice[]; overlaps: Overlap[]; releasesUnderRunningPod: LeaseTransition[]; takeoversUnderRunningPod: LeaseTransition[] };
  /** `schemaStartsMissing`: schema_applies rows without started_at, whose span is their end alone. */
  executions: { total: number; byFamily: Record<Family, number>; schemaStartsMissing: number };
  /** `claimPods`: Pods tied to the claim whose Job created them, the ones a release is judged against. */
  leases: { releases: number; takeovers: number; takeoversUnderRunningPod: number; claimPods: number };
  unresolved: UnresolvedRecord[];
  converged: { count: number; of: number; not: ResourceEnd[] };
  injected: {
    managerKills: number;
    managerSelfExits: number;
    faults: Record<FaultKind, number>;
    podKills: { graceZero: number; graceful: number };
    revisions: number;
    approvals: number;
    approvalsRefused: number;
    acknowledgments: number;
  };
  jobsCreated: Record<string, number>;
  /** A copy of every manager process's log, per family. */
  logs: string;
}

/** What fits this 2-core machine beside other work: bench/soak.ts's defaults. */
export const SOAK_DEFAULTS: Omit<SoakOptions, 'log' | 'seed'> = {
  minutes: 10, resources: 6, databases: 3, drainMinutes: 5,
  killEveryMs: [30_000, 90_000], downMs: [1_000, 10_000], podKillEveryMs: [20_000, 60_000], reviseEveryMs: [30_000, 60_000],
  acknowledgeAfterMs: 60_000, faults: DEFAULT_FAULT_RATES,
};

/** mulberry32: a small seeded generator, so a run's choices can be repeated. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const REALM_LEASE = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/[^/]+\/leases(\/ptah-t-[^/]+)?$/;
const JOB_CREATE = /^\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs$/;

// Migration revision k holds files 0001..k; each sleeps a little so a Pod kill can land inside an Apply.
const migrationFiles = (k: number) => Object.fromEntries(Array.from({ length: k }, (_, i) => [
  `${String(i + 1).padStart(4, '0')}_t${i + 1}.up.sql`, `SELECT pg_sleep(${1 + ((i * 7) % 4)});\nCREATE TABLE t${i + 1} (id bigserial PRIMARY KEY);\n`,
]));
// Desired schema revision k: one table with k nullable columns, so each revision is an additive plan.
const desiredSchema = (k: number) =>
  `CREATE TABLE items (\n  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY${Array.from({ length: k }, (_, i) => `,\n  c${i + 1} text`).join('')}\n);\n`;
const artifactName = (d: SoakDatabase) => `db${d.index}-r${d.revision}`;

/** A Pod informer keeping each Pod's life as revisions: created, then stopped (terminal phase or deleted). */
function podLives(ns: string, lives: Map<string, { name: string; jobName: string; created: number; stopped?: number }>): Informer<V1Pod> {
  const informer = new Informer<V1Pod>({ kubeConfig: sharedCluster().kubeConfig('admin'), apiVersion: 'v1', kind: 'Pod', namespace: ns, logger: testLogger() });
  const seen = (pod: V1Pod, gone: boolean) => {
    const uid = pod.metadata?.uid;
    const rv = Number(pod.metadata?.resourceVersion);
    if (!uid || !Number.isFinite(rv)) return;
    let life = lives.get(uid);
    if (!life) lives.set(uid, (life = { name: `${ns}/${pod.metadata!.name}`, jobName: pod.metadata?.labels?.['job-name'] ?? '', created: rv }));
    const phase = pod.status?.phase;
    if (life.stopped === undefined && (gone || phase === 'Succeeded' || phase === 'Failed')) life.stopped = rv;
  };
  informer.on('add', (p) => seen(p, false));
  informer.on('update', (p) => seen(p, false));
  informer.on('delete', (p) => seen(p, true));
  informer.start();
  return informer;
}

/** The proxy's stored writes of realm Leases, in the form the count reads. */
function leaseWrites(requests: readonly RecordedRequest[]): LeaseWrite[] {
  // The lock writes whole Leases (create, update); a DELETE's answer may carry no revision and sorts last.
  return requests.filter((r) => REALM_LEASE.test(r.path) && r.status >= 200 && r.status < 300 &&
    (r.method === 'DELETE' || ((r.method === 'POST' || r.method === 'PUT') && r.storedVersion !== undefined)))
    .map((r) => {
      const body = r.body as { metadata?: { name?: string }; spec?: { holderIdentity?: string | null } } | undefined;
      return {
        lease: r.path.split('/').at(-1) === 'leases' ? body?.metadata?.name ?? '' : r.path.split('/').at(-1)!,
        at: r.answeredAt ?? r.at,
        revision: Number(r.storedVersion ?? Number.MAX_SAFE_INTEGER),
        holderAfter: body?.spec?.holderIdentity ?? undefined,
        deleted: r.method === 'DELETE',
      };
    });
}

export async function runSoak(t: Test, options: SoakOptions): Promise<SoakReport> {
  if (options.databases < 2 || options.resources < options.databases) throw new Error('a soak needs at least 2 databases (one per family) and a resource for each');
  const random = seeded(options.seed);
  const between = ([min, max]: readonly [number, number]) => Math.round(min + random() * (max - min));
  const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(random() * xs.length)];
  const say = options.log;
  const startedAt = new Date();

  const mcw = await crashWorld(t);
  const scw = await crashSchemaWorld(t);
  const worlds: Record<Family, CrashWorld<CrashBase>> = { migration: mcw, schema: scw };
  const mw: MigrationWorld = mcw.w;
  const sw: SchemaWorld = scw.w;
  const injectors: FaultInjector[] = [];
  for (const cw of Object.values(worlds)) {
    cw.proxy.recordOnly((r) => r.method !== 'GET' && (REALM_LEASE.test(r.path) || JOB_CREATE.test(r.path)));
  }
  const lives = new Map<string, { name: string; jobName: string; created: number; stopped?: number }>();
  const podInformers = [podLives(mw.ns, lives), podLives(sw.ns, lives)];
  t.teardown(async () => {
    for (const i of podInformers) await i.stop();
  });
  await Promise.all(podInformers.map((i) => i.waitForSync()));

  // Databases alternate families; resource j lives on database j mod D.
  const databases: SoakDatabase[] = [];
  for (let i = 0; i < options.databases; i += 1) {
    const family: Family = i % 2 === 0 ? 'migration' : 'schema';
    const db = family === 'migration' ? await mw.database(`soak-${i}`) : await sw.database(`soak-${i}`);
    const secret = family === 'migration' ? await mw.installSample(db, `db${i}`) : await sw.installSample(db, `db${i}`);
    databases.push({ index: i, family, db, realm: `db${i}`, secret, revision: 1, resources: [] });
  }
  const publish = async (d: SoakDatabase) => {
    if (d.family === 'migration') await mw.artifact(artifactName(d), migrationFiles(d.revision));
    else await sw.desired(artifactName(d), desiredSchema(d.revision));
  };
  for (const d of databases) await publish(d);
  const [first, second] = await Promise.all([mcw.startManager(), scw.startManager()]);
  const logDirs: Record<Family, string> = { migration: dirname(first.logFile), schema: dirname(second.logFile) };
  const migrationStates = new Map<string, PtahMigration[]>();
  const schemaStates = await watchSchemas(t, sw);
  for (let j = 0; j < options.resources; j += 1) {
    const d = databases[j % databases.length]!;
    const name = `${d.family === 'migration' ? 'm' : 's'}${j}`;
    d.resources.push(name);
    const common = { name, artifact: artifactName(d), secret: d.secret, apply: j % 2 === 0 ? 'Always' as const : 'OnApproval' as const,
      coordinationKey: d.realm, activeDeadlineSeconds: 120, lockTimeout: '1m' };
    if (d.family === 'migration') {
      migrationStates.set(name, await mw.watchMigration(name));
      await mw.createMigration(common);
    } else {
      await sw.createSchema(common);
    }
  }
  say(`soak: ${options.resources} resources on ${options.databases} databases (${databases.map((d) => `${d.db.name}: ${d.family} ${d.resources.join(', ')}`).join('; ')})`);

  const injected: SoakReport['injected'] = {
    managerKills: 0, managerSelfExits: 0, faults: { error: 0, reset: 0, latency: 0, watchDrop: 0 }, podKills: { graceZero: 0, graceful: 0 },
    revisions: 0, approvals: 0, approvalsRefused: 0, acknowledgments: 0,
  };
  for (const cw of Object.values(worlds)) {
    const injector = faultInjector(options.faults, random);
    injectors.push(injector);
    cw.proxy.injectFaults(injector);
  }

  let chaos = true;
  /** Past `minutes`, chaos goes on only for what `chaosUntil` still lacks (see podKillsOwed). */
  let extended = false;
  let running = true;
  const loops: Promise<void>[] = [];
  /** A person's write, tried again for up to 30 s: while a killed manager is down its webhooks fail closed. */
  const asAPersonWould = async (write: () => Promise<unknown>) => {
    for (const until = Date.now() + 30_000; ; await sleep(1_000)) {
      try {
        await write();
        return;
      } catch (e) {
        if (Date.now() > until) throw e;
      }
    }
  };
  const every = (gap: () => number, act: () => Promise<void>, while_: () => boolean) => loops.push((async () => {
    while (while_()) {
      const until = Date.now() + gap();
      while (while_() && Date.now() < until) await sleep(500);
      if (!while_()) return;
      await act().catch((e: unknown) => say(`soak: ${(e as Error).message}`));
    }
  })());

  // One at a time per family: a kill holds its manager down for the whole downtime, and nothing else starts it.
  const busy: Record<Family, Promise<unknown>> = { migration: Promise.resolve(), schema: Promise.resolve() };
  const exclusive = (family: Family, act: () => Promise<void>): Promise<void> => {
    const next = busy[family].then(act);
    busy[family] = next.catch(() => undefined);
    return next;
  };
  // A manager that exited on its own (a lost leader Lease under faults, as controller-runtime exits) is restarted.
  const ensureManager = (family: Family) => exclusive(family, async () => {
    const cw = worlds[family];
    const m = cw.manager;
    if (m && (await Promise.race([m.exited.then(() => true), sleep(0).then(() => false)]))) {
      injected.managerSelfExits += 1;
      say(`soak: ${m.name} exited on its own; restarting`);
      await cw.killNow();
    }
    if (!cw.manager) await cw.startManager();
  });
  every(() => 1_000, async () => {
    await Promise.all([ensureManager('migration'), ensureManager('schema')]);
  }, () => running);

  every(() => between(options.killEveryMs), async () => {
    const family = pick(['migration', 'schema'] as const)!;
    await exclusive(family, async () => {
      const cw = worlds[family];
      if (!cw.manager) return;
      await cw.killNow();
      injected.managerKills += 1;
      const down = between(options.downMs);
      say(`soak: SIGKILLed the ${family} manager; down for ${down} ms`);
      await sleep(down);
      await cw.startManager();
    });
  }, () => chaos);

  const runningApplyPods = async () => (await Promise.all([mw.ns, sw.ns].map((ns) => mw.admin.list<V1Pod>('v1', 'Pod', ns, { labelSelector: 'operator.ptah.run/operation=apply' }))))
    .flat().filter((p) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp);
  // Past `minutes`, Apply Pods are deleted only while fewer than chaosUntil.podKills were: the extension is there for
  // Applies to be recorded, and on a loaded machine an Apply Pod that starts slowly is nearly always the one running
  // when the next kill looks, so killing on would record none however long chaos went on.
  const podKillsOwed = () => !extended || !options.chaosUntil ||
    injected.podKills.graceZero + injected.podKills.graceful < options.chaosUntil.podKills;
  every(() => between(options.podKillEveryMs), async () => {
    if (!podKillsOwed()) return;
    // Apply Pods live seconds: the next one that runs within half a minute is the one killed.
    let pod: V1Pod | undefined;
    for (const until = Date.now() + 30_000; !pod && chaos && podKillsOwed() && Date.now() < until; await sleep(500)) pod = pick(await runningApplyPods());
    if (!pod) return;
    const graceZero = random() < 0.5;
    await mw.admin.delete({ apiVersion: 'v1', kind: 'Pod', namespace: pod.metadata!.namespace!, name: pod.metadata!.name! }, graceZero ? { gracePeriodSeconds: 0 } : {});
    if (graceZero) injected.podKills.graceZero += 1;
    else injected.podKills.graceful += 1;
    say(`soak: deleted Apply Pod ${pod.metadata!.name} (${graceZero ? 'grace 0' : 'graceful'})`);
  }, () => chaos);

  every(() => between(options.reviseEveryMs), async () => {
    const d = pick(databases)!;
    d.revision += 1;
    await publish(d);
    for (const name of d.resources) {
      await asAPersonWould(() => d.family === 'migration'
        ? mw.admin.patch(mw.ref('PtahMigration', name), { spec: { artifact: { configMapRef: { name: artifactName(d) } } } }, 'merge')
        : switchDesired(sw, name, artifactName(d)));
    }
    injected.revisions += 1;
    say(`soak: ${d.db.name} at revision ${d.revision}`);
  }, () => chaos);

  // The approver: every plan that waits for approval is approved once; an unresolved run standing long is acknowledged.
  // A create that admission never answered (the manager serving the webhook is down: the API server says 500, or an
  // injected fault) is tried again at the next look, as a person would; one admission refused (4xx) is not.
  const approved = new Set<string>();
  const acknowledged = new Set<string>();
  const unresolvedSince = new Map<string, number>();
  const refusedByAdmission = (e: unknown): boolean => e instanceof ApiError && e.code !== undefined && e.code >= 400 && e.code < 500;
  const approve = async (key: string, act: () => Promise<unknown>) => {
    if (approved.has(key)) return;
    approved.add(key);
    try {
      await act();
      injected.approvals += 1;
    } catch (e) {
      // A plan retired between the read and the approval is refused by admission; the next plan gets its own.
      if (refusedByAdmission(e)) injected.approvalsRefused += 1;
      else approved.delete(key);
      say(`soak: approving ${key}: ${(e as Error).message}`);
    }
  };
  every(() => 2_000, async () => {
    for (const d of databases) {
      for (const name of d.resources) {
        if (d.family === 'schema') {
          const s = await sw.get(name);
          if (s.status?.phase === 'AwaitingApproval' && s.status.plan) await approve(`${name}/${s.status.plan.name}`, () => sw.approve(name));
          continue;
        }
        const m = await mw.get(name);
        if (m.status?.phase === 'AwaitingApproval' && m.status.plan) await approve(`${name}/${m.status.plan.name}`, () => mw.approve(name));
        const run = m.status?.unresolvedRun;
        if (!run || acknowledged.has(run.operationID)) continue;
        const since = unresolvedSince.get(run.operationID) ?? Date.now();
        unresolvedSince.set(run.operationID, since);
        if (Date.now() - since < options.acknowledgeAfterMs) continue;
        try {
          await mw.acknowledge(name, run.operationID);
        } catch (e) {
          if (!refusedByAdmission(e)) throw e; // logged by the loop; the next look tries again
          acknowledged.add(run.operationID);
          say(`soak: acknowledging ${name}'s unresolved run was refused: ${(e as Error).message}`);
          continue;
        }
        acknowledged.add(run.operationID);
        injected.acknowledgments += 1;
        say(`soak: acknowledged ${name}'s unresolved run ${run.operationID.slice(0, 19)}… (${run.outcome})`);
      }
    }
  }, () => running);

  /** What each database recorded of the executions on it: the witness every count is taken from. */
  const databaseRecords = async (): Promise<DatabaseRecord[]> => {
    const records: DatabaseRecord[] = [];
    for (const d of databases) {
      const history = d.family === 'migration'
        ? (await mw.sql<{ seq: string; version: string; operation_id: string; started_at: Date; finished_at: Date | null }>(d.db,
          'SELECT seq, version, operation_id, started_at, finished_at FROM ptah_migrations.history ORDER BY seq').catch(() => []))
          .map((r) => ({ seq: Number(r.seq), version: r.version, operationId: r.operation_id, startedAt: r.started_at, finishedAt: r.finished_at }))
        : [];
      const schemaApplies = d.family === 'schema'
        ? (await sw.sql<{ seq: string; operation_id: string; started_at: Date | null; applied_at: Date }>(d.db,
          'SELECT seq, operation_id, started_at, applied_at FROM ptah_migrations.schema_applies ORDER BY seq').catch(() => []))
          .map((r) => ({ seq: Number(r.seq), operationId: r.operation_id, startedAt: r.started_at, appliedAt: r.applied_at }))
        : [];
      records.push({ database: d.db.name, realm: d.realm, history, schemaApplies });
    }
    return records;
  };

  const chaosStarted = Date.now();
  await sleep(options.minutes * 60_000);
  extended = true;
  const until = options.chaosUntil;
  const enough = async () => !until || (injected.podKills.graceZero + injected.podKills.graceful >= until.podKills && injected.revisions >= until.revisions &&
    (await databaseRecords().catch(() => [])).flatMap((r) => executionsOf(r).executions).length >= until.executions);
  while (Date.now() - chaosStarted < (until?.atMostMinutes ?? 0) * 60_000 && !(await enough())) await sleep(2_000);
  chaos = false;
  for (const cw of Object.values(worlds)) cw.proxy.injectFaults(undefined);
  const chaosSeconds = Math.round((Date.now() - chaosStarted) / 1000);
  say(`soak: chaos stopped after ${chaosSeconds} s; draining (at most ${options.drainMinutes} min)`);

  const ends = async (): Promise<ResourceEnd[]> => {
    const out: ResourceEnd[] = [];
    for (const d of databases) {
      const inDb = d.family === 'migration'
        ? (await mw.history(d.db)).map((h) => h.version).join() === Object.keys(migrationFiles(d.revision)).map((f) => f.slice(0, 4)).join()
        : (await sw.sql<{ n: number }>(d.db, `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'items'`))[0]?.n === d.revision + 1;
      for (const name of d.resources) {
        const r: PtahMigration | PtahSchema = d.family === 'migration' ? await mw.get(name) : await sw.get(name);
        const s = r.status;
        const pending = d.family === 'schema' && (r as PtahSchema).status?.pendingObservation;
        const unresolved = d.family === 'migration' && (r as PtahMigration).status?.unresolvedRun;
        const converged = inDb && s?.phase === 'InSync' && s.observedGeneration === r.metadata.generation && !s.activeOperation && !pending && !unresolved;
        const ready = s?.conditions?.find((c) => c.type === 'Ready');
        const why = converged ? undefined : `phase ${s?.phase}, Ready ${ready?.status}/${ready?.reason}: ${ready?.message ?? ''}${s?.activeOperation ? `; ${s.activeOperation.type} in flight` : ''}` +
          `${unresolved ? `; unresolved run ${unresolved.outcome}` : ''}${pending ? `; proof owed (${pending.outcome})` : ''}${inDb ? '' : `; the database is not at revision ${d.revision}`}`;
        out.push({ resource: name, family: d.family, database: d.db.name, converged, ...(why ? { why } : {}) });
      }
    }
    return out;
  };
  const drainStarted = Date.now();
  let end = await ends();
  while (end.some((e) => !e.converged) && Date.now() - drainStarted < options.drainMinutes * 60_000) {
    await sleep(3_000);
    end = await ends().catch(() => end);
  }
  running = false;
  await Promise.all(loops);
  const drainSeconds = Math.round((Date.now() - drainStarted) / 1000);

  // ---- the counts ----
  const records = await databaseRecords();
  const twice = appliedTwice(records);
  const overlapping = overlaps(records);

  // A claim's holder identity, from every stored version of every resource; each Pod belongs to its Job's claim.
  const holderOfJob = new Map<string, string>();
  const claimsOf = (r: PtahMigration | PtahSchema) => {
    const c = r.status?.activeOperation;
    if (c?.jobName && r.metadata.uid) holderOfJob.set(c.jobName, holderIdentityFor(r.metadata.uid, c.id));
  };
  for (const states of migrationStates.values()) states.forEach(claimsOf);
  schemaStates.forEach(claimsOf);
  const pods: PodLife[] = [...lives.values()].filter((l) => holderOfJob.has(l.jobName))
    .map((l) => ({ name: l.name, holder: holderOfJob.get(l.jobName)!, createdRevision: l.created, stoppedRevision: l.stopped }));
  const writes = Object.values(worlds).flatMap((cw) => leaseWrites(cw.proxy.requests));
  const { releases, takeovers } = leaseTransitions(writes, pods);
  const underPod = (ts: LeaseTransition[]) => ts.filter((x) => x.runningPods.length > 0);

  const unresolved: UnresolvedRecord[] = [];
  for (const [name, states] of migrationStates) {
    const ids = new Map<string, string>();
    for (const m of states) if (m.status?.unresolvedRun) ids.set(m.status.unresolvedRun.operationID, m.status.unresolvedRun.outcome);
    for (const [id, outcome] of ids) {
      const resolved = states.find((m) => m.status?.resolvedRun?.operationID === id)?.status?.resolvedRun;
      const last = states.at(-1)?.status;
      const settled = resolved ? resolved.resolution : last?.unresolvedRun?.operationID === id ? 'standing' : 'cleared without a resolvedRun record';
      unresolved.push({ resource: name, operationId: id, outcome, settled });
    }
  }
  const proofs = new Map<string, { resource: string; outcome: string }>();
  for (const s of schemaStates) {
    const p = s.status?.pendingObservation;
    // A schema Apply's unresolved run: its outcome unknown, so a fresh reading owes the proof.
    if (p?.outcome === 'OutcomeUnknown') proofs.set(p.applyOperationID, { resource: s.metadata.name!, outcome: p.outcome });
  }
  for (const [id, { resource, outcome }] of proofs) {
    const after = schemaStates.filter((s) => s.metadata.name === resource);
    const last = after.at(-1)?.status;
    const settled = last?.pendingObservation?.applyOperationID === id ? 'standing'
      : after.some((s) => s.status?.applied?.operationID === id) ? 'proven applied' : 'settled by its proof, not recorded as applied';
    unresolved.push({ resource, operationId: id, outcome, settled });
  }

  for (const injector of injectors) for (const [k, n] of Object.entries(injector.counts)) injected.faults[k as FaultKind] += n;
  const jobsCreated: Record<string, number> = {};
  for (const job of [...mw.jobsSeen.values(), ...sw.jobsSeen.values()]) {
    const op = job.metadata?.labels?.['operator.ptah.run/operation'] ?? 'other';
    jobsCreated[op] = (jobsCreated[op] ?? 0) + 1;
  }
  const executions = records.flatMap((r) => executionsOf(r).executions);
  const byFamily: Record<Family, number> = { migration: 0, schema: 0 };
  for (const d of databases) byFamily[d.family] += executions.filter((e) => e.database === d.db.name).length;
  // The managers' logs outlive the crash worlds (which remove them when the test passed).
  const logs = await mkdtemp(join(tmpdir(), 'ptah-soak-logs-'));
  for (const [family, dir] of Object.entries(logDirs)) await cp(dir, join(logs, family), { recursive: true, filter: (f) => !f.includes('serving') });
  const { log: _log, ...reported } = options;
  return {
    logs,
    options: reported,
    startedAt: startedAt.toISOString(),
    chaosSeconds,
    drainSeconds,
    safety: { operationsAppliedTwice: twice.length, overlappingExecutions: overlapping.length, leasesReleasedUnderRunningPod: underPod(releases).length },
    evidence: { appliedTwice: twice, overlaps: overlapping, releasesUnderRunningPod: underPod(releases), takeoversUnderRunningPod: underPod(takeovers) },
    executions: { total: executions.length, byFamily, schemaStartsMissing: records.flatMap((r) => r.schemaApplies).filter((a) => a.startedAt === null).length },
    leases: { releases: releases.length, takeovers: takeovers.length, takeoversUnderRunningPod: underPod(takeovers).length, claimPods: pods.length },
    unresolved,
    converged: { count: end.filter((e) => e.converged).length, of: end.length, not: end.filter((e) => !e.converged) },
    injected,
    jobsCreated,
  };
}

/** The number of non-zero safety counts: what fails a soak. */
export const safetyFailures = (report: SoakReport): number => Object.values(report.safety).filter((n) => n !== 0).length;
