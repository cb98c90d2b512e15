// Repairing a dirty history row through the operator, on the real control plane with the real webhook, runner,
// executor and PostgreSQL: a no-transaction file stops after its first statement under spec.policy.apply Always; a
// person acknowledges the run, mends the database and asks for the repair with kubectl ptah repair; the repair plan
// waits for an approval although the policy is Always, and the approved Apply marks the row finished. The database
// is the witness: the history holds each version once, and ptah_migrations.repairs names the operation that made
// the repair, which the PtahMigration's status and Events tie to the approval and the person who gave it.
import t from 'tap';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { approveCommand, repairCommand, type Context } from '../../src/cli/commands.js';
import { sleep } from '../../tools/stack/wait.js';
import { eventAbout, jobsOf, migrationWorld } from './migration-world.js';

const FILES = {
  '1_orders.up.sql': 'CREATE TABLE orders (id int, ref text);\nINSERT INTO orders VALUES (1, \'a\'), (2, \'a\');\n',
  // The second index cannot be built over the duplicate refs: the first statement has run, the row stays dirty.
  '2_indexes.up.sql': '-- ptah:no-transaction\nCREATE INDEX CONCURRENTLY orders_id_idx ON orders (id);\nCREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref);\n',
};

const blockedBy = (m: PtahMigration) => m.status?.conditions?.find((c) => c.type === 'Blocked' && c.status === 'True');

t.test('a dirty row is repaired through kubectl ptah repair and an approval, even under apply: Always, and the database records it', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('repair');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always' });
  const cli = (client: Context['client']) => {
    const lines: string[] = [];
    return { ctx: { client, namespace: w.ns, out: (line: string) => void lines.push(line) }, lines };
  };

  const stopped = await w.waitFor('orders', 'the run recorded unresolved', (m) => (m.status?.unresolvedRun && !m.status.activeOperation ? m : undefined));
  const run = stopped.status!.unresolvedRun!;
  t.equal(run.outcome, 'Unknown', 'fixture: the no-transaction file stopped after its first statement');
  t.same(await w.sql(db, 'SELECT version, dirty FROM ptah_migrations.history ORDER BY seq'), [{ version: '1', dirty: false }, { version: '2', dirty: true }], 'fixture: row 2 is dirty');

  await w.acknowledge('orders', run.operationID);
  const dirty = await w.waitFor('orders', 'the dirty history blocking', (m) => (blockedBy(m)?.reason === 'HistoryDirty' && !m.status?.unresolvedRun ? m : undefined));
  t.match(blockedBy(dirty)?.message, /migration 2 started without finishing; mend the database, then say what it holds with kubectl ptah repair/, 'the block says what to do');
  t.notOk(dirty.status?.plan, 'nothing is planned');

  // A repair of another version is no repair of this row: still Blocked, and the message says why.
  const wrong = cli(w.admin);
  await repairCommand(wrong.ctx, 'orders', undefined, { version: '5', resolution: 'finished' });
  t.match(wrong.lines.join('\n'), /spec\.repair set: the repair marks migration 5 finished/, 'kubectl ptah repair sets spec.repair');
  const unread = await w.waitFor('orders', 'the repair of another row not read', (m) =>
    (/spec\.repair \(migration 5\) is not read: the dirty row is 2/.test(blockedBy(m)?.message ?? '') ? m : undefined));
  t.notOk(unread.status?.plan, 'no plan for a row that is not dirty');

  // The person mends the database: the duplicate removed, the INVALID index built again, as file 2 would have.
  await w.sql(db, 'DELETE FROM orders WHERE id = 2');
  await w.sql(db, 'DROP INDEX CONCURRENTLY orders_ref_key');
  await w.sql(db, 'CREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref)');
  const asked = cli(w.admin);
  await repairCommand(asked.ctx, 'orders', undefined, { version: '2', resolution: 'finished' });
  const awaiting = await w.waitFor('orders', 'the repair plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  const plan = await w.plan('orders');
  t.equal(plan.metadata.name, awaiting.status?.plan?.name, 'the status names the repair plan');
  t.same(plan.spec.migrations, [], 'a repair plan runs no migration');
  t.match(plan.spec.repair, { version: '2', resolution: 'finished' }, 'it repairs row 2 as asked');
  const [row] = await w.sql<{ checksum: string }>(db, 'SELECT checksum FROM ptah_migrations.history WHERE version = \'2\'');
  t.equal(plan.spec.repair?.checksum, row?.checksum, 'bound to the checksum the dirty row holds');

  await sleep(3_000);
  t.equal(jobsOf(w, 'apply').length, 1, 'apply: Always runs no repair without an approval: one Apply Job ever, the first');
  t.same(await w.sql(db, 'SELECT dirty FROM ptah_migrations.history WHERE version = \'2\''), [{ dirty: true }], 'and the row is still dirty');
  t.equal((await w.get('orders')).status?.phase, 'AwaitingApproval', 'still awaiting the approval');

  const approving = cli(w.approver);
  await approveCommand(approving.ctx, 'orders', undefined);
  t.match(approving.lines.join('\n'), new RegExp(`approves plan ${plan.metadata.name} .* as alice`), 'the approval is stamped with the approver');
  const settled = await w.waitFor('orders', 'in sync after the repair', (m) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
  const repairRun = settled.status!.lastRun!;
  t.match(repairRun.message, /the repair marks migration 2 finished .* under approval \S+, recorded in ptah_migrations\.repairs/, 'the run names its repair and approval');
  t.match(blockedBy(settled), undefined, 'nothing blocks');
  t.match(settled.status?.conditions?.find((c) => c.type === 'Ready')?.message, /spec\.repair \(migration 2\) is not read: no history row is dirty; remove it/,
    'the spec.repair left behind is said to be unread');
  await eventAbout(w, settled.metadata.uid!, 'ApplyClaimed', new RegExp(`plan ${plan.metadata.name} \\(marks migration 2 finished.*approved by alice`));

  t.same(await w.sql(db, 'SELECT version, dirty, finished_at IS NOT NULL AS finished FROM ptah_migrations.history ORDER BY seq'),
    [{ version: '1', dirty: false, finished: true }, { version: '2', dirty: false, finished: true }], 'each version once, both finished');
  t.same(await w.sql(db, 'SELECT operation_id, version, resolution, row_operation_id FROM ptah_migrations.repairs'),
    [{ operation_id: repairRun.operationID, version: '2', resolution: 'finished', row_operation_id: run.operationID }],
    'the database records the repair, the operation that made it and the run that left the row dirty');
  t.same(await w.sql(db, "SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'orders'::regclass ORDER BY 1"),
    [{ name: 'orders_id_idx', valid: true }, { name: 'orders_ref_key', valid: true }], 'the indexes are the person\'s and the file\'s, each once');
  t.equal(jobsOf(w, 'apply').length, 2, 'two Apply Jobs in all: the run that stopped and the repair');
});
