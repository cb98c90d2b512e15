// The world a PtahSchema integration test runs in: the project's CRDs, RBAC and status policy on the shared control
// plane; a fresh namespace with the manager's admission service registered for it; the schema controller run by the
// controller manager (leader election and all) on the manager's credentials; fresh PostgreSQL databases; and a record
// of every Job ever created in the namespace. Jobs run the real runner and executor through the fake kubelet.
import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import type { V1ConfigMap, V1Job, V1Secret } from '@kubernetes/client-node';
import pg from 'pg';
import { schemaControllerRegistration } from '../../src/controller/schema/register.js';
import type { FamilyControllerOptions } from '../../src/controller/family-controller.js';
import { startController, type ManagerHandle } from '../../src/controller/manager.js';
import { Informer } from '../../src/controller/informer.js';
import type { DispatchOrder } from '../../src/shared/lifecycle/dispatch.js';
import type { PtahSchema, PtahSchemaApproval, PtahSchemaPlan } from '../../src/shared/api/schema-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { ApplyPolicy } from '../../src/shared/api/shapes.js';
import { restClient, type KubeClient, type ResourceRef } from '../../src/shared/kube-client.js';
import { bindApprovers, sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { createTestDatabase, sharedPostgresUrl, type TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { startManagerService } from './manager-service.js';
import { MANAGER, realmTarget, WAIT_MS, type WorldOptions } from './migration-world.js';
import { FIELD_MANAGER, installOperator, sampleObjects, sampleOf, testLogger } from './operator-install.js';

const cluster = sharedCluster();
export const SCHEMA_SAMPLE = 'examples/ptahschema-catalog.yaml';
export { MANAGER, WAIT_MS };

/** One row of the executor's schema_applies table: which operation applied which plan content. */
export interface SchemaApplyRow {
  operationId: string;
  planContentDigest: string;
  appliedAt: Date;
}

export interface CreateSchema {
  name: string;
  artifact: string;
  secret: string;
  apply: ApplyPolicy;
  allowDestructive?: boolean;
  coordinationKey?: string;
  /** Names a PtahRealm instead of a coordination key. */
  realm?: { name: string; shared?: boolean };
  activeDeadlineSeconds?: number;
  lockTimeout?: string;
  failureRetryInterval?: string;
  suspend?: boolean;
}

export interface SchemaWorld {
  ns: string;
  /** Where the controller keeps the Leases of realms named by a realmRef (the manager's Lease namespace). */
  realmLeaseNamespace: string;
  admin: KubeClient;
  approver: KubeClient;
  jobsSeen: Map<string, V1Job>;
  database(prefix: string): Promise<TestDatabase>;
  sql<R extends pg.QueryResultRow>(db: TestDatabase, text: string, values?: unknown[]): Promise<R[]>;
  /** The executor's own record of every schema Apply, oldest first ([] before the first). */
  applies(db: TestDatabase): Promise<SchemaApplyRow[]>;
  /** Names of the ordinary tables in the database's public schema, sorted. */
  tables(db: TestDatabase): Promise<string[]>;
  ref(kind: keyof typeof KINDS, name: string): ResourceRef;
  get(name: string): Promise<PtahSchema>;
  waitFor<T>(name: string, what: string, ready: (s: PtahSchema) => T | undefined, timeoutMs?: number): Promise<T>;
  /** The sample's verification policy and a target Secret for `db`; returns the Secret's name. */
  installSample(db: TestDatabase, secretName?: string): Promise<string>;
  /** An immutable desired-schema ConfigMap meeting the sample policy. */
  desired(name: string, sql: string): Promise<V1ConfigMap>;
  createSchema(options: CreateSchema): Promise<PtahSchema>;
  plan(name: string): Promise<PtahSchemaPlan>;
  /** Approves the schema's current plan as the approver identity. */
  approve(name: string): Promise<PtahSchemaApproval>;
  startController(order?: DispatchOrder, manager?: FamilyControllerOptions['manager']): Promise<void>;
  stopController(): Promise<void>;
}

/** Job operation label values of the Jobs a world saw for `schema`, oldest first. */
export function schemaJobsOf(world: Pick<SchemaWorld, 'jobsSeen'>, operation: 'observe' | 'plan' | 'apply', schema?: string): V1Job[] {
  return [...world.jobsSeen.values()].filter((job) => job.metadata?.labels?.['operator.ptah.run/operation'] === operation &&
    (schema === undefined || job.metadata?.labels?.['operator.ptah.run/schema'] === schema));
}

export async function schemaWorld(t: Test, options: WorldOptions = {}): Promise<SchemaWorld> {
  await installOperator();
  const as = (identity: 'admin' | 'manager' | 'approver') => restClient(cluster.kubeConfig(identity), { fieldManager: FIELD_MANAGER });
  const [admin, managerClient, approver] = await Promise.all([as('admin'), as('manager'), as('approver')]);
  const ns = await testNamespace(t);
  await bindApprovers(ns);
  const log = testLogger().child({ test: t.name, ns });
  const service = await startManagerService({ namespace: ns });
  const samples = await sampleObjects(SCHEMA_SAMPLE);
  const databases: TestDatabase[] = [];

  const jobsSeen = new Map<string, V1Job>();
  const jobs = new Informer<V1Job>({ kubeConfig: cluster.kubeConfig('admin'), apiVersion: 'batch/v1', kind: 'Job', namespace: ns, logger: log });
  jobs.on('add', (job) => {
    if (job.metadata?.uid && !jobsSeen.has(job.metadata.uid)) jobsSeen.set(job.metadata.uid, job);
  });
  jobs.start();
  await jobs.waitForSync();

  let handle: ManagerHandle | undefined;
  const ref = (kind: keyof typeof KINDS, name: string): ResourceRef => ({ apiVersion: API_VERSION, kind: KINDS[kind].kind, namespace: ns, name });
  const get = (name: string) => admin.get<PtahSchema>(ref('PtahSchema', name));

  const world: SchemaWorld = {
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
    async applies(db) {
      const exists = await world.sql<{ present: boolean }>(db, 'SELECT to_regclass(\'ptah_migrations.schema_applies\') IS NOT NULL AS present');
      if (!exists[0]?.present) return [];
      const rows = await world.sql<{ operation_id: string; plan_content_digest: string; applied_at: Date }>(db,
        'SELECT operation_id, plan_content_digest, applied_at FROM ptah_migrations.schema_applies ORDER BY seq');
      return rows.map((r) => ({ operationId: r.operation_id, planContentDigest: r.plan_content_digest, appliedAt: r.applied_at }));
    },
    async tables(db) {
      const rows = await world.sql<{ name: string }>(db, 'SELECT tablename AS name FROM pg_tables WHERE schemaname = \'public\' ORDER BY 1');
      return rows.map((r) => r.name);
    },
    ref,
    get,
    async waitFor(name, what, ready, timeoutMs = WAIT_MS) {
      let last = '';
      try {
        return await waitFor(async () => {
          const s = await get(name);
          last = JSON.stringify({ phase: s.status?.phase, ready: s.status?.conditions?.find((c) => c.type === 'Ready'), claim: s.status?.activeOperation?.type,
            pending: s.status?.pendingObservation && { outcome: s.status.pendingObservation.outcome, planRequired: s.status.pendingObservation.planRequired }, plan: s.status?.plan?.name });
          return ready(s) ?? undefined;
        }, { what: `${name}: ${what}`, timeoutMs, intervalMs: 250 });
      } catch (e) {
        throw new Error(`${(e as Error).message}; last status: ${last}`);
      }
    },
    async installSample(db, secretName = 'catalog-db') {
      const policy = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'catalog-schema-policy');
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
    async desired(name, sql) {
      const sample = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'catalog-schema-r1');
      return admin.create<V1ConfigMap>({ ...sample, metadata: { ...sample.metadata, name, namespace: ns }, data: { 'schema.sql': sql } });
    },
    async createSchema(options) {
      const sample = sampleOf<PtahSchema>(samples, KINDS.PtahSchema.kind);
      sample.metadata = { name: options.name, namespace: ns };
      sample.spec.desired.configMapRef!.name = options.artifact;
      sample.spec.target.urlFrom.name = options.secret;
      sample.spec.policy = { ...sample.spec.policy, apply: options.apply, allowDestructive: options.allowDestructive ?? false };
      if (options.coordinationKey) sample.spec.target.coordinationKey = options.coordinationKey;
      if (options.realm) sample.spec.target = realmTarget(sample.spec.target, options.realm);
      if (options.activeDeadlineSeconds) sample.spec.execution = { ...sample.spec.execution, activeDeadlineSeconds: options.activeDeadlineSeconds };
      if (options.lockTimeout) sample.spec.policy.lockTimeout = options.lockTimeout;
      if (options.failureRetryInterval) sample.spec.execution = { ...sample.spec.execution, failureRetryInterval: options.failureRetryInterval };
      if (options.suspend) sample.spec.suspend = true;
      return admin.create(sample);
    },
    async plan(name) {
      const s = await get(name);
      if (!s.status?.plan) throw new Error(`${name} names no plan`);
      return admin.get<PtahSchemaPlan>(ref('PtahSchemaPlan', s.status.plan.name));
    },
    async approve(name) {
      const plan = await world.plan(name);
      const s = await get(name);
      return approver.create<PtahSchemaApproval>({
        apiVersion: API_VERSION,
        kind: KINDS.PtahSchemaApproval.kind,
        metadata: { name: `${name}-approval-${randomBytes(3).toString('hex')}`, namespace: ns },
        spec: { schemaRef: { name, uid: s.metadata.uid! }, planRef: { name: plan.metadata.name!, uid: plan.metadata.uid! }, planFingerprint: plan.spec.fingerprint },
      } as PtahSchemaApproval);
    },
    async startController(order, manager = MANAGER) {
      if (handle) throw new Error('the controller manager is already running');
      const started = startController({
        kubeConfig: cluster.kubeConfig('manager'),
        client: managerClient,
        logger: log,
        leaseNamespace: ns,
        leaseName: 'ptah-manager',
        leaderElection: { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 },
        controllers: [schemaControllerRegistration({ manager, namespace: ns, order, leaseNamespace: world.realmLeaseNamespace })],
      });
      handle = started;
      await waitFor(async () => (started.isLeader() && started.ready() ? true : undefined), { what: 'the controller manager to lead and sync', timeoutMs: 30_000 });
    },
    async stopController() {
      const running = handle;
      handle = undefined;
      await running?.stop();
    },
  };

  t.teardown(async () => {
    const schemas = await admin.list<PtahSchema>(API_VERSION, KINDS.PtahSchema.kind, ns).catch(() => []);
    await Promise.all(schemas.map((s) => admin.delete(ref('PtahSchema', s.metadata.name!)).catch(() => undefined)));
    if (handle) {
      await waitFor(async () => ((await admin.list(API_VERSION, KINDS.PtahSchema.kind, ns)).length === 0 ? true : undefined),
        { what: 'the test\'s PtahSchemas to be deleted', timeoutMs: 60_000 }).catch(() => undefined);
    }
    await world.stopController();
    await jobs.stop();
    await service.stop();
    for (const db of databases) await db.drop();
  });
  return world;
}

/**
 * The common opening: a fresh database `prefix`, the sample policy and Secret, `sql` as desired-schema ConfigMap
 * `<name>-r1`, the controller started and schema `name` (OnApproval) created; resolves once its first plan awaits
 * an approval.
 */
export async function firstPlanAwaitingApproval(w: SchemaWorld, name: string, prefix: string, sql: string): Promise<{ db: TestDatabase; secret: string; plan: PtahSchemaPlan }> {
  const db = await w.database(prefix);
  const secret = await w.installSample(db);
  await w.desired(`${name}-r1`, sql);
  await w.startController();
  await w.createSchema({ name, artifact: `${name}-r1`, secret, apply: 'OnApproval' });
  await w.waitFor(name, 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  return { db, secret, plan: await w.plan(name) };
}

/** A PtahSchemaApproval as stored now. */
export const approvalNamed = (w: SchemaWorld, name: string): Promise<PtahSchemaApproval> => w.admin.get<PtahSchemaApproval>(w.ref('PtahSchemaApproval', name));

/** An approval's condition of `type`, if it has one. */
export const approvalConditionOf = (a: PtahSchemaApproval, type: string) => a.status?.conditions?.find((c) => c.type === type);

/** Points `name`'s spec.desired at another desired-schema ConfigMap. */
export async function switchDesired(w: SchemaWorld, name: string, artifact: string): Promise<void> {
  await w.admin.patch(w.ref('PtahSchema', name), { spec: { desired: { configMapRef: { name: artifact } } } }, 'merge');
}

/** Every stored version of the namespace's PtahSchemas (or of `name` alone) from now on, in the order stored. */
export async function watchSchemas(t: Test, w: SchemaWorld, name?: string): Promise<PtahSchema[]> {
  const states: PtahSchema[] = [];
  const informer = new Informer<PtahSchema>({ kubeConfig: cluster.kubeConfig('admin'), apiVersion: API_VERSION, kind: KINDS.PtahSchema.kind,
    namespace: w.ns, ...(name ? { fieldSelector: `metadata.name=${name}` } : {}), logger: testLogger() });
  const keep = (s: PtahSchema) => void states.push(structuredClone(s));
  informer.on('add', keep);
  informer.on('update', keep);
  informer.start();
  await informer.waitForSync();
  t.teardown(() => informer.stop());
  return states;
}
