// Runs nobody can account for, and the realm, on the real control plane with the real runner, executor and
// PostgreSQL: a Job deleted after the dispatch marker is recorded Unknown, never created again, and settled by an
// acknowledgment; an Apply Pod killed mid-run leaves an unresolved run that blocks planning until a History
// reading of the same database finds nothing pending; two migrations sharing a coordination key never run at once.
import t from 'tap';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { ANNOTATIONS } from '../../src/shared/api/names.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { jobsOf, migrationWorld, WAIT_MS, type MigrationWorld } from './migration-world.js';

const SLOW_SECONDS = 40;
/** Three files; the second holds the database long enough to be interrupted. */
const SLOW_FILES = {
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY);\n',
  '0002_create_orders.up.sql': `SELECT pg_sleep(${SLOW_SECONDS});\nCREATE TABLE orders (id bigserial PRIMARY KEY);\n`,
  '0003_create_invoices.up.sql': 'CREATE TABLE invoices (id bigserial PRIMARY KEY);\n',
};

/** A person's part after an interrupted run: end the database sessions it left behind. */
async function endLeftoverSessions(w: MigrationWorld, db: TestDatabase): Promise<void> {
  await w.sql(db, 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
}

/** Waits until the claim in flight is an Apply whose Job UID is recorded, and returns it with its Job. */
async function dispatchedApply(w: MigrationWorld, name: string): Promise<{ m: PtahMigration; job: V1Job }> {
  const m = await w.waitFor(name, 'an Apply dispatched with its Job UID recorded', (m) =>
    (m.status?.activeOperation?.type === 'Apply' && m.status.activeOperation.jobUID ? m : undefined));
  const job = await w.admin.get<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: m.status!.activeOperation!.jobName });
  return { m, job };
}

const unresolved = (m: PtahMigration) => (m.status?.unresolvedRun && !m.status.activeOperation ? m : undefined);

t.test('a Job deleted after the dispatch marker is recorded Unknown, never created again, and an acknowledgment settles it', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('job_deleted');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', SLOW_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'OnApproval', activeDeadlineSeconds: 120, lockTimeout: '1m' });
  await w.waitFor('orders', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  await w.approve('orders');

  const { m: dispatched, job } = await dispatchedApply(w, 'orders');
  const claim = dispatched.status!.activeOperation!;
  t.equal(claim.dispatchStarted, true, 'fixture: the dispatch marker is durable');
  t.equal(job.metadata?.uid, claim.jobUID, 'fixture: the claim recorded this Job');
  await w.admin.delete({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }, { propagationPolicy: 'Background' });

  const recorded = await w.waitFor('orders', 'the run recorded unresolved', unresolved);
  const run = recorded.status!.unresolvedRun!;
  t.match(run, { outcome: 'Unknown', operationID: claim.id, jobName: claim.jobName, jobUID: claim.jobUID, planRef: claim.planRef }, 'the unresolved run names the attempt');
  t.equal(run.targetIdentityDigest, claim.targetIdentityDigest, 'against the database the plan was made for');
  t.match(recorded.status?.lastRun, { outcome: 'Unknown', operationID: claim.id });
  t.same(JSON.parse(recorded.metadata.annotations?.[ANNOTATIONS.unresolvedRun] ?? 'null'), run, 'the annotation holds a copy of the record');
  t.notOk(recorded.status?.plan, 'no plan stands beside the record');
  await endLeftoverSessions(w, db);

  // Never created again, and nothing planned while the record stands, across a reading.
  const read = await w.waitFor('orders', 'a reading taken while the record stands', (m) =>
    (m.status?.history && Date.parse(m.status.history.observedAt) > Date.parse(run.recordedAt) && !m.status.activeOperation ? m : undefined));
  t.ok(read.status?.unresolvedRun, 'the reading did not settle it: migrations are still pending');
  t.ok((read.status?.history?.pendingCount ?? 0) >= 2, 'the interrupted and the later migrations are pending');
  t.equal(read.status?.phase, 'Blocked');
  t.match(read.status?.conditions?.find((c) => c.type === 'Blocked'), { status: 'True', reason: 'ApplyOutcomeUnknown' });
  await sleep(3_000);
  t.equal(jobsOf(w, 'apply').length, 1, 'one Apply Job was ever created');
  const gone = await w.admin.tryGet<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName });
  t.notOk(gone, 'the reserved name stays empty');
  t.notOk((await w.get('orders')).status?.plan, 'still nothing planned');

  const ack = await w.acknowledge('orders', run.operationID);
  t.match(ack.spec.acknowledgedBy, { username: 'alice' }, 'admission stamped who acknowledged');
  const settled = await w.waitFor('orders', 'settled, read again and planned', (m) =>
    (!m.status?.unresolvedRun && m.status?.phase === 'AwaitingApproval' && !m.metadata.annotations?.[ANNOTATIONS.unresolvedRun] ? m : undefined));
  t.match(settled.status?.resolvedRun, {
    operationID: run.operationID,
    outcome: 'Unknown',
    resolution: 'ResolvedByAcknowledgment',
    acknowledgmentRef: { name: ack.metadata.name, uid: ack.metadata.uid },
    acknowledgedBy: { username: 'alice' },
  }, 'the record names who settled it and how');
  t.ok(Date.parse(settled.status!.history!.observedAt) > Date.parse(settled.status!.resolvedRun!.resolvedAt), 'a fresh reading came before the new plan');
  const plan = await w.plan('orders');
  t.equal(plan.spec.historyFingerprint, settled.status?.history?.fingerprint, 'the plan is bound to the fresh reading');
  t.equal(plan.spec.migrations.length, settled.status?.history?.pendingCount, 'it plans what is still pending');
  const consumed = await w.admin.get<typeof ack>(w.ref('PtahMigrationRunAcknowledgment', ack.metadata.name!));
  t.match(consumed.status?.conditions?.find((c) => c.type === 'Consumed'), { status: 'True', reason: 'RunAcknowledged' });
  t.equal(jobsOf(w, 'apply').length, 1, 'still one Apply Job: the new plan waits for its own approval');

  const second = await w.acknowledge('orders', run.operationID).then((a) => a, (e: Error) => e);
  t.ok(second instanceof Error, 'a second acknowledgment of the settled run is refused by admission');
});

t.test('an Apply Pod killed mid-run leaves an unresolved run that blocks planning until a History reading of the same database settles it', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('pod_killed');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', SLOW_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always', activeDeadlineSeconds: 120, lockTimeout: '1m' });

  const { m: dispatched, job } = await dispatchedApply(w, 'orders');
  const claim = dispatched.status!.activeOperation!;
  await waitFor(async () => ((await w.history(db)).some((r) => r.version === '0001') ? true : undefined), { what: 'the first migration to commit', timeoutMs: WAIT_MS });
  const pods = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  t.equal(pods.length, 1, 'fixture: the Apply Job runs one Pod');
  t.equal(pods[0]?.status?.phase, 'Running', 'fixture: it is running the second migration');
  await w.admin.delete({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: pods[0]!.metadata!.name! }, { gracePeriodSeconds: 0 });

  const recorded = await w.waitFor('orders', 'the killed run recorded unresolved', unresolved);
  const run = recorded.status!.unresolvedRun!;
  t.match(run, { outcome: 'Unknown', operationID: claim.id });
  await endLeftoverSessions(w, db);
  t.same((await w.history(db)).map((r) => [r.version, r.operationId]), [['0001', claim.id]], 'fixture: the run committed one migration before it was killed');

  const blocked = await w.waitFor('orders', 'a reading that cannot settle it', (m) =>
    (m.status?.history && Date.parse(m.status.history.observedAt) > Date.parse(run.recordedAt) && !m.status.activeOperation ? m : undefined));
  t.ok(blocked.status?.unresolvedRun, 'two migrations are still pending: the record stands');
  t.equal(blocked.status?.history?.pendingCount, 2);
  t.notOk(blocked.status?.plan, 'nothing is planned');
  await sleep(3_000);
  t.equal(jobsOf(w, 'apply').length, 1, 'no Apply is claimed while the record stands');

  // The person restores the artifact the database matches: the next reading of the same database finds nothing pending.
  await w.artifact('orders-r0', { '0001_create_customers.up.sql': SLOW_FILES['0001_create_customers.up.sql'] });
  await w.admin.patch(w.ref('PtahMigration', 'orders'), { spec: { artifact: { configMapRef: { name: 'orders-r0' } } } }, 'merge');
  const settled = await w.waitFor('orders', 'settled by a History reading', (m) =>
    (m.status?.resolvedRun && !m.status.unresolvedRun && m.status.phase === 'InSync' && !m.metadata.annotations?.[ANNOTATIONS.unresolvedRun] ? m : undefined));
  t.match(settled.status?.resolvedRun, { operationID: run.operationID, outcome: 'Unknown', resolution: 'ResolvedByHistoryRead' });
  t.notOk(settled.status?.resolvedRun?.acknowledgedBy, 'no person is named: a reading settled it');
  t.equal(settled.status?.history?.targetIdentityDigest, run.targetIdentityDigest, 'the reading was of the same database');
  t.equal(jobsOf(w, 'apply').length, 1, 'still one Apply Job');
});

t.test('two PtahMigrations with one coordination key never run at the same time', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  // One second per file, so two runs started together would overlap without the realm Lease.
  const files = {
    '0001_a.up.sql': 'SELECT pg_sleep(1);\nCREATE TABLE a (id int);\n',
    '0002_b.up.sql': 'SELECT pg_sleep(1);\nCREATE TABLE b (id int);\n',
    '0003_c.up.sql': 'SELECT pg_sleep(1);\nCREATE TABLE c (id int);\n',
  };
  await w.artifact('shared-r1', files);
  const dbs = await Promise.all([w.database('realm_one'), w.database('realm_two')]);
  const secrets = await Promise.all(dbs.map((db, i) => w.installSample(db, `db-${i}`)));
  await Promise.all(['one', 'two'].map((name, i) => w.createMigration({ name, artifact: 'shared-r1', secret: secrets[i]!, apply: 'Always', coordinationKey: 'shared-db' })));

  // While one Apply runs, the other's claim stands undispatched: the realm's Lease is what holds it back.
  const waited = await waitFor(async () => {
    const [one, two] = await Promise.all([w.get('one'), w.get('two')]);
    const claims = [one, two].map((m) => m.status?.activeOperation).filter((c) => c?.type === 'Apply');
    return claims.length === 2 && claims.filter((c) => c?.jobUID).length === 1 && claims.filter((c) => !c?.dispatchStarted).length === 1 ? true : undefined;
  }, { what: 'one Apply running while the other waits for the realm', timeoutMs: WAIT_MS, intervalMs: 100 });
  t.ok(waited, 'one Apply was dispatched while the other\'s claim waited undispatched');
  for (const name of ['one', 'two']) {
    await w.waitFor(name, 'applied and in sync', (m) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
  }
  const spans = await Promise.all(dbs.map(async (db) => {
    const rows = await w.history(db);
    t.same(rows.map((r) => r.version), ['0001', '0002', '0003'], `${db.name}: each migration applied once`);
    return { from: Math.min(...rows.map((r) => r.startedAt.getTime())), to: Math.max(...rows.map((r) => r.finishedAt!.getTime())) };
  }));
  const [a, b] = spans as [{ from: number; to: number }, { from: number; to: number }];
  t.ok(a.to <= b.from || b.to <= a.from, `the two runs did not overlap (${new Date(a.from).toISOString()}–${new Date(a.to).toISOString()} and ${new Date(b.from).toISOString()}–${new Date(b.to).toISOString()})`);
  t.equal(jobsOf(w, 'apply').length, 2, 'one Apply Job each');
});
