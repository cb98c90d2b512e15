// Applies held running while a manager is stopped, and what the next manager owes each: a PtahSchema Apply held
// waiting on a table lock a test session holds, and the account a new manager must give of a migration Apply it
// found running (the crash-window suite's kill, and an operator upgrade, ask the same of it).
import type { Test } from 'tap';
import type { V1ConfigMap, V1Lease, V1Secret } from '@kubernetes/client-node';
import pg from 'pg';
import { KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema, PtahSchemaStatus } from '../../src/shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { LEASE_EPOCH_ANNOTATION } from '../../src/shared/targetlock.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { applyClaim as migrationApplyClaim, outcomeOf, podsOf, schemaStatusWrite, within, type CrashWorld, type RunningApply } from './crash-world.js';
import { jobsOf } from './migration-world.js';
import { sampleObjects } from './operator-install.js';
import { SCHEMA_SAMPLE, WAIT_MS, watchSchemas, type SchemaWorld } from './schema-world.js';

/** The sample PtahSchema's name. */
export const NAME = 'catalog';
export const PRODUCTS = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  title text NOT NULL
);
`;

export const applyClaim = (status: PtahSchemaStatus | undefined): ActiveOperation | undefined =>
  (status?.activeOperation?.type === 'Apply' ? status.activeOperation : undefined);

/** Every stored version of the sample PtahSchema in the crash world's namespace from now on. */
export const watchSchemaStates = (tt: Test, w: CrashWorld['w']): Promise<PtahSchema[]> => watchSchemas(tt, { ns: w.ns } as Pick<SchemaWorld, 'ns'> as SchemaWorld, NAME);

/**
 * The sample's policy, desired schema (products with a note column), Secret and PtahSchema (Always, realm `key`,
 * Job deadline and Apply window `activeDeadlineSeconds`), in the crash world's namespace, on `db`.
 */
export async function installSampleSchema(w: CrashWorld['w'], db: TestDatabase, key: string, activeDeadlineSeconds: number): Promise<void> {
  for (const obj of await sampleObjects(SCHEMA_SAMPLE)) {
    obj.metadata = { ...obj.metadata, namespace: w.ns };
    if (obj.kind === 'Secret') (obj as V1Secret).stringData = { url: db.url };
    if (obj.kind === 'ConfigMap' && (obj as V1ConfigMap).data?.['schema.sql']) (obj as V1ConfigMap).data = { 'schema.sql': WITH_NOTE };
    if (obj.kind === KINDS.PtahSchema.kind) {
      const { spec } = obj as PtahSchema;
      spec.target.coordinationKey = key;
      // The database's locks are waited for up to four minutes, never past the window (admission holds them to it).
      spec.policy = { ...spec.policy, apply: 'Always', lockTimeout: `${Math.min(240, activeDeadlineSeconds)}s` };
      spec.execution = { ...spec.execution, activeDeadlineSeconds };
    }
    await w.admin.create(obj);
  }
}

/** The sample PtahSchema as stored now. */
export const schemaNow = (w: CrashWorld['w']): Promise<PtahSchema> => w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME));

/** The operation IDs the database recorded a schema Apply under, in order: the database's own account. */
export const appliesIn = async (w: CrashWorld['w'], db: TestDatabase): Promise<string[]> =>
  (await w.sql<{ operation_id: string }>(db, 'SELECT operation_id FROM ptah_migrations.schema_applies ORDER BY seq')).map((r) => r.operation_id);

/**
 * A schema Apply held running, then let finish with the manager killed at the write that records the proof it
 * owes, and the manager's webhooks unregistered: the proof is owed and nothing reads it while a person acts.
 */
export async function proofOwedWithNoManager(tt: Test, cw: CrashWorld, key: string): Promise<HeldSchemaApply> {
  await cw.startManager();
  const held = await heldSchemaApply(tt, cw, key);
  const owed = schemaStatusWrite('the write that records the proof owed', (s) => s.pendingObservation?.applyOperationID === held.claim.id && !s.activeOperation, NAME);
  const kill = cw.killOn(owed);
  await held.session.query('ROLLBACK');
  await within(kill, WAIT_MS, owed.what, () => cw.proxy.disarm());
  // A person's write is then admitted by the world's own admission service alone.
  await cw.unregisterManagerWebhooks();
  return held;
}

/** A schema Apply held waiting: its plan adds a column to a table a test session holds ACCESS EXCLUSIVE. */
export interface HeldSchemaApply {
  db: TestDatabase;
  session: pg.Client;
  claim: ActiveOperation;
  pods: string[];
  epoch: string | undefined;
  states: PtahSchema[];
}

export const WITH_NOTE = PRODUCTS.replace('title text NOT NULL', 'title text NOT NULL,\n  note text');

/** The sample PtahSchema (Always, realm `key`) on a database whose products table lacks a column; Apply dispatched and waiting on the lock. */
export async function heldSchemaApply(tt: Test, cw: CrashWorld, key: string): Promise<HeldSchemaApply> {
  const { w } = cw;
  const db = await w.database(`crash-${key}`);
  await w.sql(db, PRODUCTS);
  const session = new pg.Client({ connectionString: db.url });
  await session.connect();
  tt.teardown(() => session.end());
  await session.query('BEGIN');
  await session.query('LOCK TABLE products IN ACCESS EXCLUSIVE MODE');
  const holder = (await session.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const states = await watchSchemaStates(tt, w);
  await installSampleSchema(w, db, key, 300);
  const s = await waitFor(async () => {
    const now = await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME));
    return applyClaim(now.status)?.jobUID ? now : undefined;
  }, { what: 'the schema\'s Apply dispatched with its Job UID recorded', timeoutMs: WAIT_MS });
  const claim = applyClaim(s.status)!;
  await waitFor(async () => {
    const rows = await w.sql<{ n: number }>(db, `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> $1 AND wait_event_type = 'Lock'`, [holder]);
    return (rows[0]?.n ?? 0) > 0 ? true : undefined;
  }, { what: 'the schema\'s Apply to wait on the table lock', timeoutMs: WAIT_MS });
  const lease = await w.admin.get<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: leaseNameFor(claim.coordinationDigest!) });
  return { db, session, claim, pods: await podsOf(cw, claim.jobName), epoch: lease.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION], states };
}

/** What a new manager owes a migration Apply it found running: the same Job, Pods and Lease epoch, applied once. */
export async function migrationAdoption(cw: CrashWorld, r: RunningApply): Promise<string[]> {
  const { w } = cw;
  const after = await w.waitFor(r.name, 'its claim to be settled', (m) => (m.status?.activeOperation?.id !== r.claim.id ? m : undefined), WAIT_MS);
  const problems: string[] = [];
  if (outcomeOf(after, r.claim.id) !== 'Applied') problems.push(`recorded ${outcomeOf(after, r.claim.id)}, not Applied`);
  if (after.status?.lastRun?.jobUID !== r.claim.jobUID) problems.push(`settled from Job ${after.status?.lastRun?.jobUID}, not ${r.claim.jobUID}`);
  const uids = jobsOf(w, 'apply', r.name).map((j) => j.metadata?.uid);
  if (uids.length !== 1 || uids[0] !== r.claim.jobUID) problems.push(`Apply Jobs ${uids.join(', ')} were seen, not only ${r.claim.jobUID}`);
  const pods = await podsOf(cw, r.claim.jobName);
  if (r.pods.length !== 1 || pods.join() !== r.pods.join()) problems.push(`Pods ${pods.join(', ')} now, ${r.pods.join(', ')} before the kill`);
  const claims = r.states.map((m) => migrationApplyClaim(m.status)).filter((c): c is ActiveOperation => c?.id === r.claim.id && Boolean(c.jobUID));
  const epochs = [...new Set(claims.map((c) => c.leaseEpoch))];
  if (epochs.length !== 1 || epochs[0] !== r.epoch) problems.push(`the claim named Lease epochs ${epochs.join(', ')}, the Lease ${r.epoch} before the kill`);
  if (claims.some((c) => c.leaseContinuityLost)) problems.push('continuity loss recorded');
  const versions = (await w.history(r.db)).filter((h) => h.operationId === r.claim.id).map((h) => h.version);
  if (versions.join() !== '0001,0002,0003') problems.push(`the database applied ${versions.join(', ')} under the claim`);
  return problems;
}

