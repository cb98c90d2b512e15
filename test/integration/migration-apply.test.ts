// A PtahMigration's ordinary lives on the real control plane, with the real runner, executor and PostgreSQL: the
// sample applied once after an approval, Always applying without one, an approval of a replaced plan refused, and
// a modified applied file refused with the database untouched. Every assertion is on a durable record: the
// resource's status, the plan object, the database's history table, and every Job ever created.
import t from 'tap';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, FINALIZERS, KINDS } from '../../src/shared/api/names.js';
import { ApiError } from '../../src/shared/kube-client.js';
import { sleep } from '../../tools/stack/wait.js';
import { jobsOf, migrationWorld } from './migration-world.js';

const SAMPLE_FILES = {
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE);\n',
  '0002_create_orders.up.sql': 'CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id));\n',
  '0003_index_orders_by_customer.up.sql': 'CREATE INDEX orders_customer_id_idx ON orders (customer_id);\n',
};

const inSync = (m: PtahMigration) => (m.status?.phase === 'InSync' && !m.status.activeOperation ? m : undefined);

t.test('first run: the OnApproval sample publishes a plan, applies once after the approver approves it, and a second reconcile runs nothing', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('first_run');
  const secret = await w.installSample(db);
  // The sample's own artifact, exactly as examples/ ships it.
  await w.sampleArtifact();
  await w.createMigration({ name: 'orders', artifact: 'orders-migrations-r1', secret, apply: 'OnApproval' });

  const waiting = await w.waitFor('orders', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  t.match(waiting.status?.conditions?.find((c) => c.type === 'ApprovalRequired'), { status: 'True', reason: 'AwaitingApproval' });
  t.match(waiting.status?.artifact, { configMapName: 'orders-migrations-r1' }, 'the artifact is pinned');
  t.equal(waiting.status?.history?.pendingCount, 3, 'the reading found three pending migrations');
  const plan = await w.plan('orders');
  t.same(plan.spec.migrations.map((m) => m.version), ['0001', '0002', '0003'], 'the plan lists the three versions in order');
  for (const m of plan.spec.migrations) t.match(m.checksum, /^sha256:[0-9a-f]{64}$/, `version ${m.version} carries its checksum`);
  t.notOk(JSON.stringify(plan.spec).includes('CREATE'), 'the plan carries no SQL');
  t.same(plan.metadata.ownerReferences?.map((r) => [r.kind, r.name, r.controller]), [['PtahMigration', 'orders', true]], 'owned by the migration');
  t.same(await w.history(db), [], 'nothing was applied before the approval');
  t.equal(jobsOf(w, 'apply').length, 0, 'no Apply Job before the approval');

  const approval = await w.approve('orders');
  t.match(approval.spec.approver, { username: 'alice' }, 'admission stamped the approver identity');
  const done = await w.waitFor('orders', 'the applied history read back in sync', (m) => (inSync(m) && m.status?.lastRun?.outcome === 'Applied' ? m : undefined));
  const rows = await w.history(db);
  t.same(rows.map((r) => r.version), ['0001', '0002', '0003'], 'the database\'s history holds each migration once');
  const operation = done.status!.lastRun!.operationID;
  t.same(new Set(rows.map((r) => r.operationId)), new Set([operation]), 'all three were applied by the one recorded operation');
  t.same(done.status?.lastRun?.appliedVersions, ['0001', '0002', '0003']);
  t.match(done.status?.history, { pendingCount: 0, appliedCount: 3, currentVersion: '0003' });
  t.match(done.status?.conditions?.find((c) => c.type === 'Ready'), { status: 'True', reason: 'HistoryMatched' });
  t.notOk(done.status?.plan, 'the spent plan is no longer current');
  t.notOk(done.status?.pendingLockRelease, 'the realm was handed back');
  const consumed = await w.admin.get<typeof approval>(w.ref('PtahMigrationApproval', approval.metadata.name!));
  t.match(consumed.status?.conditions?.find((c) => c.type === 'Consumed'), { status: 'True', reason: 'DispatchCommitted' }, 'the approval is spent');
  t.match(consumed.status?.conditions?.find((c) => c.type === 'Consumed')?.message, operation, 'on the operation that ran');
  const applies = jobsOf(w, 'apply', 'orders');
  t.equal(applies.length, 1, 'exactly one Apply Job was ever created');
  t.equal(applies[0]?.metadata?.name, done.status?.lastRun?.jobName);
  const released = await w.waitFor('orders', 'its finalizer removed once no claim or record stands', (m) => (!(m.metadata.finalizers ?? []).includes(FINALIZERS.migration) ? m : undefined));
  t.equal(released.status?.lastRun?.operationID, operation, 'the finalizer went with nothing else changing');

  // A second reconcile: a restarted manager reconciles every key afresh and finds nothing to do. The reading stays
  // fresh until status.nextReconciliationTime (spec.interval, 10m, after it), so no Job of any kind is due.
  const jobsBefore = [...w.jobsSeen.keys()];
  const readingDue = Date.parse(released.status!.nextReconciliationTime!);
  await w.stopController();
  await w.startController();
  await sleep(3_000);
  const again = await w.waitFor('orders', 'still in sync after a restart', inSync);
  t.ok(Date.now() < readingDue, 'fixture: the interval has not elapsed, so no reading is due');
  t.equal(again.status?.lastRun?.operationID, operation, 'no other run was recorded');
  t.equal(jobsOf(w, 'apply').length, 1, 'no second Apply Job');
  t.same([...w.jobsSeen.keys()], jobsBefore, 'the restarted manager created no Job of any kind');
  t.same((await w.history(db)).map((r) => r.operationId), [operation, operation, operation], 'the history is unchanged');
});

t.test('policy Always applies the plan without an approval', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('always');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', SAMPLE_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always' });
  const done = await w.waitFor('orders', 'applied and in sync', (m) => (inSync(m) && m.status?.lastRun?.outcome === 'Applied' ? m : undefined));
  t.same((await w.history(db)).map((r) => r.version), ['0001', '0002', '0003']);
  t.same(await w.admin.list(API_VERSION, KINDS.PtahMigrationApproval.kind, w.ns), [], 'no approval exists');
  t.equal(jobsOf(w, 'apply').length, 1, 'one Apply Job');
  t.notOk(done.status?.unresolvedRun);
});

t.test('an approval of a replaced plan is refused and authorizes nothing', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('replaced');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', SAMPLE_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'OnApproval' });
  await w.waitFor('orders', 'the first plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  const first = await w.plan('orders');

  // An approval admitted while the first plan is current, then the plan replaced before anything ran: suspended,
  // so nothing claims the approval, and resumed together with a new artifact revision.
  await w.admin.patch(w.ref('PtahMigration', 'orders'), { spec: { suspend: true } }, 'merge');
  await w.waitFor('orders', 'suspended', (m) => (m.status?.phase === 'Suspended' ? m : undefined));
  const early = await w.approve('orders');
  t.equal(early.spec.planRef.uid, first.metadata.uid, 'the approval names the first plan');
  await w.artifact('orders-r2', { ...SAMPLE_FILES, '0004_add_note.up.sql': 'ALTER TABLE orders ADD COLUMN note text;\n' });
  await w.admin.patch(w.ref('PtahMigration', 'orders'), { spec: { suspend: false, artifact: { configMapRef: { name: 'orders-r2' } } } }, 'merge');
  const replaced = await w.waitFor('orders', 'a new plan awaiting approval', (m) =>
    (m.status?.phase === 'AwaitingApproval' && m.status.plan && m.status.plan.uid !== first.metadata.uid ? m : undefined));
  const second = await w.plan('orders');
  t.same(second.spec.migrations.map((m) => m.version), ['0001', '0002', '0003', '0004'], 'the new plan covers the new revision');
  t.not(second.metadata.name, first.metadata.name, 'a new plan is a new object');

  // Admission refuses a new approval of the replaced plan.
  const refused = await w.approvalFor('orders', { name: first.metadata.name!, uid: first.metadata.uid!, fingerprint: first.spec.fingerprint }).then(() => undefined, (e: unknown) => e);
  t.ok(refused instanceof ApiError, 'the API server refused the approval');
  t.match((refused as ApiError).status.message, /current plan is ptah-mplan-[0-9a-f]+ .*not ptah-mplan/, 'because the plan it names is not current');

  // The approval admitted earlier authorizes nothing: nothing runs and it is not spent.
  await sleep(3_000);
  const still = await w.get('orders');
  t.equal(still.status?.phase, 'AwaitingApproval', 'still waiting for an approval of the current plan');
  t.equal(still.status?.plan?.uid, replaced.status?.plan?.uid);
  t.equal(jobsOf(w, 'apply').length, 0, 'no Apply Job was created');
  t.same(await w.history(db), [], 'the database is untouched');
  const kept = await w.admin.get<typeof early>(w.ref('PtahMigrationApproval', early.metadata.name!));
  t.notOk(kept.status?.conditions?.some((c) => c.type === 'Consumed' && c.status === 'True'), 'the old approval was not spent');
});

t.test('a modified applied file is refused with the database untouched', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('modified');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', SAMPLE_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always' });
  const applied = await w.waitFor('orders', 'applied and in sync', (m) => (inSync(m) && m.status?.lastRun?.outcome === 'Applied' ? m : undefined));
  const before = await w.history(db);
  t.equal(before.length, 3, 'fixture: three migrations applied');

  await w.artifact('orders-r2', {
    ...SAMPLE_FILES,
    '0002_create_orders.up.sql': 'CREATE TABLE orders (id bigserial PRIMARY KEY);\n',
    '0004_add_note.up.sql': 'ALTER TABLE customers ADD COLUMN note text;\n',
  });
  await w.admin.patch(w.ref('PtahMigration', 'orders'), { spec: { artifact: { configMapRef: { name: 'orders-r2' } } } }, 'merge');
  const blocked = await w.waitFor('orders', 'blocked by the modified file', (m) =>
    (m.status?.phase === 'Blocked' && m.status.history?.modifiedVersions.includes('0002') && !m.status.activeOperation ? m : undefined));
  t.match(blocked.status?.conditions?.find((c) => c.type === 'Blocked'), { status: 'True', reason: 'HistoryModified' });
  t.notOk(blocked.status?.plan, 'no plan is published');
  await sleep(3_000);
  t.same(await w.history(db), before, 'the history is untouched');
  const note = await w.sql<{ present: boolean }>(db, `SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'customers' AND column_name = 'note') AS present`);
  t.equal(note[0]?.present, false, 'the new migration did not run');
  t.equal(jobsOf(w, 'apply').length, 1, 'no Apply Job after the first');
  t.equal((await w.get('orders')).status?.lastRun?.operationID, applied.status?.lastRun?.operationID);
});
