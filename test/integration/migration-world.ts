// The world a PtahMigration integration test runs in: the project's CRDs, RBAC and status policy on the shared
// control plane; a fresh namespace with the manager's admission service registered for it; the migration
// controller itself, run by the controller manager (leader election and all) on the manager's credentials; a fresh
// PostgreSQL database; and a record of every Job ever created in the namespace. Jobs run the real runner and
// executor through the fake kubelet.
import type { MigrationFormat } from '../../src/shared/migration-format.js';
import type { MigrationAdoption } from '../../src/shared/migration-adoption.js';
import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import type { V1ConfigMap, V1Job, V1Lease, V1Secret } from '@kubernetes/client-node';
import pg from 'pg';
import { pino } from 'pino';
import type { MigrationDeps, MigrationManagerIdentity } from '../../src/controller/migration/context.js';
import { reconcileMigration } from '../../src/controller/migration/reconcile.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { CONTROLLER_STATE_VERSION, migrationControllerRegistration, type MigrationControllerOptions } from '../../src/controller/migration/register.js';
import type { EventInput } from '../../src/controller/events.js';
import { startController, type ManagerHandle } from '../../src/controller/manager.js';
import { Informer } from '../../src/controller/informer.js';
import type { DispatchOrder } from '../../src/shared/lifecycle/dispatch.js';
import type { PtahMigration, PtahMigrationApproval, PtahMigrationPlan, PtahMigrationRunAcknowledgment } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { ApplyPolicy } from '../../src/shared/api/shapes.js';
import { systemClock } from '../../src/shared/clock.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import { RUNNER_PROTOCOL_VERSION } from '../../src/shared/runner-protocol.js';
import { LEASE_EPOCH_ANNOTATION, TargetLock } from '../../src/shared/targetlock.js';
import { restClient, type KubeClient, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import { bindApprovers, sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { RUNNER_IMAGE } from '../../tools/stack/kubelet/images.js';
import { createTestDatabase, sharedPostgresUrl, type TestDatabase } from '../../tools/stack/postgres.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { startManagerService } from './manager-service.js';
import { FIELD_MANAGER, installOperator, sampleObjects, sampleOf, testLogger } from './operator-install.js';
import { jobRef as jobRefOf, sleepingSessions, type RunningApply } from './slow-apply.js';

const cluster = sharedCluster();
export const SAMPLE = 'examples/ptahmigration-orders.yaml';
/** The manager release the controller believes it is; its runner image is the one the fake kubelet runs. */
export const MANAGER = { controllerImage: 'localhost/ptah-operator:test', controllerRevision: 'migration-test', runnerImage: RUNNER_IMAGE };
/** Long enough for a History reading, an Apply and the reading after it on a busy two-core machine. */
export const WAIT_MS = 120_000;

export interface HistoryRow {
  version: string;
  operationId: string;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface MigrationWorld {
  ns: string;
  /** Where the controller keeps the Leases of realms named by a realmRef (the manager's Lease namespace). */
  realmLeaseNamespace: string;
  admin: KubeClient;
  approver: KubeClient;
  /** Every Job ever created in the namespace, by UID, as first seen. */
  jobsSeen: Map<string, V1Job>;
  database(prefix: string): Promise<TestDatabase>;
  history(db: TestDatabase): Promise<HistoryRow[]>;
  sql<R extends pg.QueryResultRow>(db: TestDatabase, text: string, values?: unknown[]): Promise<R[]>;
  ref(kind: keyof typeof KINDS, name: string): ResourceRef;
  get(name: string): Promise<PtahMigration>;
  /** Polls the PtahMigration until `ready` returns something; fails naming `what` and the last status. */
  waitFor<T>(name: string, what: string, ready: (m: PtahMigration) => T | undefined, timeoutMs?: number): Promise<T>;
  /** The sample's verification policy and target Secret; returns the Secret's name. */
  installSample(db: TestDatabase, secretName?: string): Promise<string>;
  /** The sample's artifact ConfigMap (orders-migrations-r1), exactly as the sample ships it. */
  sampleArtifact(): Promise<V1ConfigMap>;
  /** An immutable artifact ConfigMap meeting the sample policy, holding `files`. */
  artifact(name: string, files: Record<string, string>): Promise<V1ConfigMap>;
  /** A PtahMigration built on the sample's, with the given name, artifact, Secret, policy and realm. */
  createMigration(options: CreateMigration): Promise<PtahMigration>;
  /** Approves the migration's current plan as the approver identity. */
  approve(name: string): Promise<PtahMigrationApproval>;
  approvalFor(name: string, plan: { name: string; uid: string; fingerprint: string }): Promise<PtahMigrationApproval>;
  acknowledge(name: string, operationID: string): Promise<PtahMigrationRunAcknowledgment>;
  plan(name: string): Promise<PtahMigrationPlan>;
  /**
   * Starts (again) the controller manager running the migration controller; the previous one must be stopped.
   * `manager` is the release it believes it is (an operator upgrade, or a moved execution binding).
   */
  startController(order?: DispatchOrder, manager?: ManagerIdentity): Promise<void>;
  stopController(): Promise<void>;
  /** Every stored version of the PtahMigration `name` from now on, in the order the API server stored them. */
  watchMigration(name: string): Promise<PtahMigration[]>;
}

/** The manager release a started controller believes it is. */
export type ManagerIdentity = MigrationControllerOptions['manager'];

export interface CreateMigration {
  name: string;
  artifact: string;
  secret: string;
  apply: ApplyPolicy;
  coordinationKey?: string;
  /** Names a PtahRealm instead of a coordination key. */
  realm?: { name: string; shared?: boolean };
  /** Shorter windows need a lock timeout that fits in them (the CRD refuses one that does not). */
  activeDeadlineSeconds?: number;
  lockTimeout?: string;
  failureRetryInterval?: string;
  /** spec.artifact.format; the CRD's default (ptah) when absent. */
  format?: MigrationFormat;
  /** The verification policy ConfigMap (same key as the sample's); the sample's when absent. */
  verificationPolicy?: string;
  /** spec.adoption. */
  adoption?: MigrationAdoption;
  /** spec.interval; the sample's when absent. */
  interval?: string;
}

export interface WorldOptions {
  /** The namespace of realmRef Leases; the test's own namespace by default. Worlds that share a realm share one. */
  realmLeaseNamespace?: string;
}

export async function migrationWorld(t: Test, options: WorldOptions = {}): Promise<MigrationWorld> {
  await installOperator();
  const as = (identity: 'admin' | 'manager' | 'approver') => restClient(cluster.kubeConfig(identity), { fieldManager: FIELD_MANAGER });
  const [admin, managerClient, approver] = await Promise.all([as('admin'), as('manager'), as('approver')]);
  const ns = await testNamespace(t);
  await bindApprovers(ns);
  const log = testLogger().child({ test: t.name, ns });
  const service = await startManagerService({ namespace: ns });
  const samples = await sampleObjects(SAMPLE);
  const databases: TestDatabase[] = [];

  const jobsSeen = new Map<string, V1Job>();
  const jobs = new Informer<V1Job>({ kubeConfig: cluster.kubeConfig('admin'), apiVersion: 'batch/v1', kind: 'Job', namespace: ns, logger: log });
  jobs.on('add', (job) => {
    if (job.metadata?.uid && !jobsSeen.has(job.metadata.uid)) jobsSeen.set(job.metadata.uid, job);
  });
  jobs.start();
  await jobs.waitForSync();

  const watches: Informer<PtahMigration>[] = [];
  let handle: ManagerHandle | undefined;
  const ref = (kind: keyof typeof KINDS, name: string): ResourceRef => ({ apiVersion: API_VERSION, kind: KINDS[kind].kind, namespace: ns, name });
  const get = (name: string) => admin.get<PtahMigration>(ref('PtahMigration', name));

  const world: MigrationWorld = {
    ns,
    realmLeaseNamespace: options.realmLeaseNamespace ?? ns,
    admin,
    approver,
    jobsSeen,
    async database(prefix) {
      const db = await createTestDatabase(sharedPostgresUrl(), prefix);
      databases.push(db);
      return db;
    },
    async sql(db, text, values) {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        return (await client.query(text, values)).rows;
      } finally {
        await client.end();
      }
    },
    async history(db) {
      const exists = await world.sql<{ present: boolean }>(db, 'SELECT to_regclass(\'ptah_migrations.history\') IS NOT NULL AS present');
      if (!exists[0]?.present) return [];
      const rows = await world.sql<{ version: string; operation_id: string; started_at: Date; finished_at: Date | null }>(db,
        'SELECT version, operation_id, started_at, finished_at FROM ptah_migrations.history ORDER BY seq');
      return rows.map((r) => ({ version: r.version, operationId: r.operation_id, startedAt: r.started_at, finishedAt: r.finished_at }));
    },
    ref,
    get,
    async waitFor(name, what, ready, timeoutMs = WAIT_MS) {
      let last = '';
      try {
        return await waitFor(async () => {
          const m = await get(name);
          last = JSON.stringify({ phase: m.status?.phase, conditions: m.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}: ${c.message}`), claim: m.status?.activeOperation?.type, lastRun: m.status?.lastRun?.outcome, unresolved: m.status?.unresolvedRun?.outcome });
          return ready(m) ?? undefined;
        }, { what: `${name}: ${what}`, timeoutMs, intervalMs: 250 });
      } catch (e) {
        throw new Error(`${(e as Error).message}; last status: ${last}`);
      }
    },
    async installSample(db, secretName = 'orders-db') {
      const policy = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'orders-migration-policy');
      policy.metadata!.namespace = ns;
      await admin.create(policy).catch((e: { code?: number }) => {
        if (e.code !== 409) throw e;
      });
      const secret = sampleOf<V1Secret>(samples, 'Secret');
      secret.metadata = { name: secretName, namespace: ns };
      secret.stringData = { url: db.url };
      await admin.create(secret);
      return secretName;
    },
    async sampleArtifact() {
      const sample = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'orders-migrations-r1');
      return admin.create<V1ConfigMap>({ ...sample, metadata: { ...sample.metadata, namespace: ns } });
    },
    async artifact(name, files) {
      const sample = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'orders-migrations-r1');
      return admin.create<V1ConfigMap>({ ...sample, metadata: { ...sample.metadata, name, namespace: ns }, data: files });
    },
    async createMigration(options) {
      const sample = sampleOf<PtahMigration>(samples, KINDS.PtahMigration.kind);
      sample.metadata = { name: options.name, namespace: ns };
      sample.spec.artifact.configMapRef!.name = options.artifact;
      sample.spec.target.urlFrom.name = options.secret;
      sample.spec.policy.apply = options.apply;
      if (options.coordinationKey) sample.spec.target.coordinationKey = options.coordinationKey;
      if (options.realm) sample.spec.target = realmTarget(sample.spec.target, options.realm);
      if (options.activeDeadlineSeconds) sample.spec.execution = { ...sample.spec.execution, activeDeadlineSeconds: options.activeDeadlineSeconds };
      if (options.lockTimeout) sample.spec.policy.lockTimeout = options.lockTimeout;
      if (options.failureRetryInterval) sample.spec.execution = { ...sample.spec.execution, failureRetryInterval: options.failureRetryInterval };
      if (options.format) sample.spec.artifact.format = options.format;
      if (options.verificationPolicy) sample.spec.artifact.verificationPolicyRef.name = options.verificationPolicy;
      if (options.adoption) sample.spec.adoption = options.adoption;
      if (options.interval) sample.spec.interval = options.interval;
      return admin.create(sample);
    },
    async plan(name) {
      const m = await get(name);
      if (!m.status?.plan) throw new Error(`${name} names no plan`);
      return admin.get<PtahMigrationPlan>(ref('PtahMigrationPlan', m.status.plan.name));
    },
    async approve(name) {
      const plan = await world.plan(name);
      return world.approvalFor(name, { name: plan.metadata.name!, uid: plan.metadata.uid!, fingerprint: plan.spec.fingerprint });
    },
    async approvalFor(name, plan) {
      const m = await get(name);
      return approver.create<PtahMigrationApproval>({
        apiVersion: API_VERSION,
        kind: KINDS.PtahMigrationApproval.kind,
        metadata: { name: `${name}-approval-${randomBytes(3).toString('hex')}`, namespace: ns },
        spec: { migrationRef: { name, uid: m.metadata.uid! }, planRef: { name: plan.name, uid: plan.uid }, planFingerprint: plan.fingerprint },
      } as PtahMigrationApproval);
    },
    async acknowledge(name, operationID) {
      const m = await get(name);
      return approver.create<PtahMigrationRunAcknowledgment>({
        apiVersion: API_VERSION,
        kind: KINDS.PtahMigrationRunAcknowledgment.kind,
        metadata: { name: `${name}-ack-${randomBytes(3).toString('hex')}`, namespace: ns },
        spec: { migrationRef: { name, uid: m.metadata.uid! }, operationID },
      } as PtahMigrationRunAcknowledgment);
    },
    async startController(order, manager = MANAGER) {
      if (handle) throw new Error('the controller manager is already running');
      const kubeConfig = cluster.kubeConfig('manager');
      const started = startController({
        kubeConfig,
        client: managerClient,
        logger: log,
        leaseNamespace: ns,
        leaseName: 'ptah-manager',
        leaderElection: { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 },
        controllers: [migrationControllerRegistration({ manager, namespace: ns, order, leaseNamespace: world.realmLeaseNamespace })],
      });
      handle = started;
      await waitFor(async () => (started.isLeader() && started.ready() ? true : undefined), { what: 'the controller manager to lead and sync', timeoutMs: 30_000 });
    },
    async stopController() {
      const running = handle;
      handle = undefined;
      await running?.stop();
    },
    async watchMigration(name) {
      const states: PtahMigration[] = [];
      const informer = new Informer<PtahMigration>({ kubeConfig: cluster.kubeConfig('admin'), apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind,
        namespace: ns, fieldSelector: `metadata.name=${name}`, logger: log });
      const keep = (m: PtahMigration) => {
        states.push(structuredClone(m));
      };
      informer.on('add', keep);
      informer.on('update', keep);
      watches.push(informer);
      informer.start();
      await informer.waitForSync();
      return states;
    },
  };

  t.teardown(async () => {
    // Deleting the resources while the controller runs lets it take its finalizers off, so the namespace can go.
    const migrations = await admin.list<PtahMigration>(API_VERSION, KINDS.PtahMigration.kind, ns).catch(() => []);
    await Promise.all(migrations.map((m) => admin.delete(ref('PtahMigration', m.metadata.name!)).catch(() => undefined)));
    if (handle) {
      await waitFor(async () => ((await admin.list(API_VERSION, KINDS.PtahMigration.kind, ns)).length === 0 ? true : undefined),
        { what: 'the test\'s PtahMigrations to be deleted', timeoutMs: 30_000 }).catch(() => undefined);
    }
    await world.stopController();
    for (const watch of watches) await watch.stop();
    await jobs.stop();
    await service.stop();
    for (const db of databases) await db.drop();
  });
  return world;
}

/** A sample's spec.target pointed at the PtahRealm `realm` instead of its coordination key. */
export function realmTarget<T extends { coordinationKey?: string }>(target: T, realm: { name: string; shared?: boolean }): Omit<T, 'coordinationKey'> & { realmRef: { name: string }; sharedRealm?: boolean } {
  const { coordinationKey: _key, ...rest } = target;
  return { ...rest, realmRef: { name: realm.name }, ...(realm.shared ? { sharedRealm: true } : {}) };
}

/** The Jobs a world saw whose operation label is `operation` (history or apply), oldest first. */
export function jobsOf(world: MigrationWorld, operation: 'history' | 'apply', migration?: string): V1Job[] {
  return [...world.jobsSeen.values()].filter((job) => job.metadata?.labels?.['operator.ptah.run/operation'] === operation &&
    (migration === undefined || job.metadata?.labels?.['operator.ptah.run/migration'] === migration));
}

// ---- what the paths tests read besides status (Lease, Events), and the reconciler driven pass by pass ----

// slow-apply.ts holds the slow Apply; these names are the ones tests already import from the world.
export { jobRef, slowFiles, VERSIONS as SLOW_VERSIONS } from './slow-apply.js';

/** Waits until `name`'s claim is an Apply whose Job UID is recorded and the database is sleeping in it. */
export async function runningApply(w: MigrationWorld, db: TestDatabase, name: string): Promise<RunningApply> {
  const m = await w.waitFor(name, 'an Apply dispatched with its Job UID recorded', (m) =>
    (m.status?.activeOperation?.type === 'Apply' && m.status.activeOperation.jobUID ? m : undefined));
  const claim = m.status!.activeOperation!;
  await waitFor(async () => ((await sleepingSessions(w, db)) > 0 ? true : undefined), { what: `${name}'s Apply to be sleeping in the database`, timeoutMs: WAIT_MS });
  const job = await w.admin.get<V1Job>(jobRefOf(w, claim.jobName));
  return { m, claim, job, lease: { name: leaseNameFor(claim.coordinationDigest!), holder: holderIdentityFor(m.metadata.uid!, claim.id) } };
}

/** Who holds the realm Lease `name`, and under which epoch ([undefined, undefined] when there is no Lease). */
export async function leaseHolding(w: Pick<MigrationWorld, 'admin' | 'ns'>, name: string): Promise<[string | undefined, string | undefined]> {
  const lease = await w.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name });
  return [lease?.spec?.holderIdentity, lease?.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION]];
}

export type RecordedEvent = KubeObject & { type?: string; reason?: string; note?: string; eventTime?: string; regarding?: { uid?: string; kind?: string } };

/** The Events the controller recorded about the object with `uid`, with `reason`. */
export async function eventsAbout(w: Pick<MigrationWorld, 'admin' | 'ns'>, uid: string, reason: string): Promise<RecordedEvent[]> {
  const events = await w.admin.list<RecordedEvent>('events.k8s.io/v1', 'Event', w.ns);
  return events.filter((e) => e.regarding?.uid === uid && e.reason === reason);
}

/** Waits for an Event about `uid` with `reason` whose note matches `note`. */
export async function eventAbout(w: Pick<MigrationWorld, 'admin' | 'ns'>, uid: string, reason: string, note: RegExp | string): Promise<RecordedEvent> {
  return waitFor(async () => (await eventsAbout(w, uid, reason)).find((e) => (typeof note === 'string' ? e.note?.includes(note) : note.test(e.note ?? ''))),
    { what: `a ${reason} Event matching ${String(note)}`, timeoutMs: 30_000 });
}

/** The full identity a migration controller registered with `manager` runs as, filled in as register.ts fills it. */
export function managerIdentity(manager: ManagerIdentity = MANAGER): MigrationManagerIdentity {
  return { controllerStateVersion: CONTROLLER_STATE_VERSION, runnerProtocolVersion: RUNNER_PROTOCOL_VERSION, executorIdentity: ownExecutorIdentity(), ...manager };
}

/** The reconciler driven by the test itself, one pass at a time, on `client`; the Events it records are kept. */
export interface ManualReconciler {
  deps: MigrationDeps;
  events: EventInput[];
  /** One pass over `name`; why it ended, or `error: …` when it threw. */
  pass(name: string, deps?: MigrationDeps): Promise<string>;
  /** Passes until `ready` returns something; fails naming `what` and the last passes. */
  passUntil<T>(name: string, what: string, ready: (m: PtahMigration) => T | undefined, timeoutMs?: number): Promise<T>;
}

export function manualReconciler(w: MigrationWorld, client: KubeClient, manager: ManagerIdentity = MANAGER): ManualReconciler {
  const events: EventInput[] = [];
  const locks = new Map<string, TargetLock>();
  const deps: MigrationDeps = {
    client,
    events: { record: (_m, e) => void events.push(e) },
    manager: managerIdentity(manager),
    clock: systemClock,
    lockFor: (ns) => {
      let lock = locks.get(ns);
      if (!lock) locks.set(ns, (lock = new TargetLock(client, ns, systemClock)));
      return lock;
    },
    coordinationNamespace: w.realmLeaseNamespace,
    log: pino({ level: 'silent' }),
    readFailures: new Map(),
  };
  const pass = async (name: string, using = deps): Promise<string> => {
    try {
      return (await reconcileMigration(using, w.ns, name))?.why ?? 'gone';
    } catch (e) {
      return `error: ${e instanceof Error ? e.message : String(e)}`;
    }
  };
  return {
    deps,
    events,
    pass,
    async passUntil(name, what, ready, timeoutMs = WAIT_MS) {
      const passes: string[] = [];
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const found = ready(await w.get(name));
        if (found !== undefined) return found;
        passes.push(await pass(name));
        // A pass that waits on a Job or a realm asks to be looked at later; the Job runs meanwhile.
        await sleep(200);
      }
      throw new Error(`${name}: ${what} not reached in ${timeoutMs} ms (last passes: ${passes.slice(-5).join(' | ')})`);
    },
  };
}
