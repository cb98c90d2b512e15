// Recovering a dirty history row by hand, as docs/executor.md ("Recovering a dirty row") tells a person to, against a
// real PostgreSQL: a no-transaction file fails after its first statement (a unique index built concurrently over
// duplicate rows, which also leaves an INVALID index behind), and the database itself holds what each repair leaves.
// Finishing the file by hand and marking its row finished makes it applied; undoing it and deleting its row makes it
// pending again, run once by the next approved apply; editing the applied file instead is refused.
import t, { type Test } from 'tap';
import type { MigrationHistoryReport, MigrationRunReport } from '../../src/shared/executor-report.js';
import {
  COORDINATION_DIGEST, artifactDir, freshDatabase, jsonFile, operationId, runExecutor, type Database, type ExecutorEnv,
} from './executor-helpers.js';

const FILES = {
  '1_orders.up.sql': 'CREATE TABLE orders (id int, ref text);\nINSERT INTO orders VALUES (1, \'a\'), (2, \'a\');',
  '2_indexes.up.sql': '-- ptah:no-transaction\nCREATE INDEX CONCURRENTLY orders_id_idx ON orders (id);\n' +
    'CREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref);\n',
};
const NEXT = { '3_note.up.sql': 'ALTER TABLE orders ADD COLUMN note text;' };

async function history(db: Database, dir: string): Promise<NonNullable<MigrationHistoryReport['history']>> {
  const report = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: dir });
  if (!report.history) throw new Error(`history failed: ${JSON.stringify(report.error)}`);
  return report.history;
}

/** An apply of `dir` approved for `sequence` on the history `fingerprint` names. */
function applyApproved(t: Test, db: Database, dir: string, label: string, sequence: unknown[], fingerprint: string): Promise<MigrationRunReport> {
  const env: ExecutorEnv = {
    dbUrl: db.url, artifactDir: dir, operationId: operationId(label), coordinationDigest: COORDINATION_DIGEST,
    expectedSequenceFile: jsonFile(t, sequence), expectedHistoryFingerprint: fingerprint,
  };
  return runExecutor<MigrationRunReport>('migration-apply', env);
}

/** An apply approved for what the history shows pending now. */
async function apply(t: Test, db: Database, dir: string, label: string): Promise<MigrationRunReport> {
  const h = await history(db, dir);
  return applyApproved(t, db, dir, label, h.pending.map((p) => ({ version: p.version, checksum: p.checksum })), h.fingerprint);
}

const rows = (db: Database) => db.query<{ version: string; dirty: boolean; finished: boolean }>(
  'SELECT version, dirty, finished_at IS NOT NULL AS finished FROM ptah_migrations.history ORDER BY seq');
const indexes = (db: Database) => db.query<{ name: string; valid: boolean }>(
  "SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'orders'::regclass ORDER BY 1");

/** Files 1 and 2 applied as far as they go: file 2 stops at its second statement and its row stays dirty. */
async function dirtyDatabase(t: Test, label: string): Promise<{ db: Database; dir: string }> {
  const db = await freshDatabase(t, `exec_dirty_${label}`);
  const dir = artifactDir(t, FILES);
  const run = await apply(t, db, dir, label);
  t.equal(run.outcome, 'unknown', 'fixture: the no-transaction file failed after its first statement');
  t.equal(run.failedVersion, '2');
  t.same(await rows(db), [{ version: '1', dirty: false, finished: true }, { version: '2', dirty: true, finished: false }], 'fixture: row 2 is dirty');
  t.same(await indexes(db), [{ name: 'orders_id_idx', valid: true }, { name: 'orders_ref_key', valid: false }],
    'fixture: the first index was built, the failed concurrent build left an INVALID index');
  t.equal((await apply(t, db, dir, `${label}-blocked`)).error?.code, 'dirty_history', 'fixture: a dirty row blocks every apply');
  return { db, dir };
}

/** The repair the docs give: mend what made it fail, finish the file's remaining statements as written, mark the row. */
async function finishByHand(db: Database): Promise<void> {
  await db.query('DELETE FROM orders WHERE id = 2');
  await db.query('DROP INDEX CONCURRENTLY orders_ref_key');
  await db.query('CREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref)');
  await db.query("UPDATE ptah_migrations.history SET dirty = false, finished_at = now() WHERE version = '2' AND dirty");
}

t.test('finished by hand: the rest of the file run by a person and the row marked finished make the file applied', async (t) => {
  const { db, dir } = await dirtyDatabase(t, 'finish');
  await finishByHand(db);

  const h = await history(db, dir);
  t.same([h.dirty, h.pending, h.modified], [[], [], []], 'the history reads clean: nothing dirty, pending or modified');
  t.same(await indexes(db), [{ name: 'orders_id_idx', valid: true }, { name: 'orders_ref_key', valid: true }], 'both indexes valid');

  const more = artifactDir(t, { ...FILES, ...NEXT });
  const next = await apply(t, db, more, 'finish-next');
  t.equal(next.outcome, 'applied', 'the next file applies');
  t.same(next.applied.map((a) => a.version), ['3'], 'and only it: file 2 is not run again');
  t.same(await rows(db), [{ version: '1', dirty: false, finished: true }, { version: '2', dirty: false, finished: true }, { version: '3', dirty: false, finished: true }]);
});

t.test('undone by hand: what the file did removed and its row deleted make it pending, run once by the next apply', async (t) => {
  const { db, dir } = await dirtyDatabase(t, 'undo');
  await db.query('DROP INDEX CONCURRENTLY orders_id_idx');
  await db.query('DROP INDEX CONCURRENTLY orders_ref_key');
  await db.query('DELETE FROM orders WHERE id = 2');
  await db.query("DELETE FROM ptah_migrations.history WHERE version = '2' AND dirty");

  const h = await history(db, dir);
  t.same(h.dirty, [], 'nothing dirty');
  t.same(h.pending.map((p) => p.version), ['2'], 'file 2 is pending again');
  const run = await apply(t, db, dir, 'undo-again');
  t.equal(run.outcome, 'applied', 'a new approved apply runs it');
  t.same(run.applied.map((a) => a.version), ['2']);
  t.same(await indexes(db), [{ name: 'orders_id_idx', valid: true }, { name: 'orders_ref_key', valid: true }], 'both indexes built, once');
  t.same((await rows(db)).filter((r) => r.version === '2'), [{ version: '2', dirty: false, finished: true }], 'one row for version 2');
});

t.test('the repair that edits the applied file is refused: an applied file must never change', async (t) => {
  const { db } = await dirtyDatabase(t, 'edit');
  await finishByHand(db);
  // Instead of leaving file 2 as it was applied, the person cut the statement that ran from it.
  const edited = artifactDir(t, { ...FILES, '2_indexes.up.sql': '-- ptah:no-transaction\nCREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref);\n', ...NEXT });
  t.same((await history(db, edited)).modified, ['2'], 'the history reports file 2 modified');
  const run = await apply(t, db, edited, 'edit-next');
  t.equal(run.outcome, 'failed');
  t.equal(run.error?.code, 'modified_migration', 'the apply is refused');
  t.match(run.error?.message, /restore the original file/, 'and says to restore the file');
  t.equal((await rows(db)).length, 2, 'nothing was recorded');
});

// The same repairs made by an approved repair sequence (spec.repair's plan): the executor changes the row and
// records the repair in ptah_migrations.repairs in one transaction, and only on the history it was approved for.

/** A repair sequence for `version`, held to the history as it reads now unless `fingerprint` says otherwise. */
async function repair(t: Test, db: Database, dir: string, label: string,
  step: { version: string; resolution: string; checksum?: string }, fingerprint?: string): Promise<MigrationRunReport> {
  const h = await history(db, dir);
  const checksum = step.checksum ?? h.applied.find((a) => a.version === step.version)?.checksum ?? 'sha256:' + '0'.repeat(64);
  return applyApproved(t, db, dir, label, [{ version: step.version, checksum, repair: step.resolution }], fingerprint ?? h.fingerprint);
}

const repairs = async (db: Database) => (await db.query<{ exists: boolean }>("SELECT to_regclass('ptah_migrations.repairs') IS NOT NULL AS exists"))[0]!.exists
  ? db.query<{ operation_id: string; version: string; resolution: string; row_operation_id: string }>(
    'SELECT operation_id, version, resolution, row_operation_id FROM ptah_migrations.repairs ORDER BY seq')
  : [];
const rowOperation = async (db: Database, version: string) =>
  (await db.query<{ operation_id: string }>('SELECT operation_id FROM ptah_migrations.history WHERE version = $1', [version]))[0]!.operation_id;

t.test('a repair sequence marks the mended row finished and records who: the file is applied, never run again', async (t) => {
  const { db, dir } = await dirtyDatabase(t, 'seqfinish');
  const started = await rowOperation(db, '2');
  await db.query('DELETE FROM orders WHERE id = 2');
  await db.query('DROP INDEX CONCURRENTLY orders_ref_key');
  await db.query('CREATE UNIQUE INDEX CONCURRENTLY orders_ref_key ON orders (ref)');

  const run = await repair(t, db, dir, 'seqfinish-repair', { version: '2', resolution: 'finished' });
  t.equal(run.outcome, 'applied', 'the repair run is applied');
  t.same(run.applied, [], 'it applies no migration');
  t.same(run.repaired, { version: '2', resolution: 'finished' }, 'it reports the repair it made');
  t.same(await rows(db), [{ version: '1', dirty: false, finished: true }, { version: '2', dirty: false, finished: true }], 'row 2 is finished');
  const recorded = await repairs(db);
  t.equal(recorded.length, 1, 'ptah_migrations.repairs holds one repair');
  t.same({ ...recorded[0], operation_id: recorded[0]?.operation_id.replace(/^sha256:[0-9a-f]{64}/, '') },
    { operation_id: '#seqfinish-repair', version: '2', resolution: 'finished', row_operation_id: started },
    'it records the repair, the operation that made it and the run that left the row dirty');

  const again = await repair(t, db, dir, 'seqfinish-again', { version: '2', resolution: 'finished' });
  t.equal(again.error?.code, 'repair_refused', 'the same repair again finds no dirty row and is refused');
  t.equal((await repairs(db)).length, 1, 'and records nothing');

  const more = artifactDir(t, { ...FILES, ...NEXT });
  const next = await apply(t, db, more, 'seqfinish-next');
  t.same([next.outcome, next.applied.map((a) => a.version)], ['applied', ['3']], 'the next apply runs only file 3');
  t.same(await indexes(db), [{ name: 'orders_id_idx', valid: true }, { name: 'orders_ref_key', valid: true }], 'both indexes valid, built once');
});

t.test('a repair sequence removes the undone row and records it: the file is pending, run once by the next apply', async (t) => {
  const { db, dir } = await dirtyDatabase(t, 'sequndo');
  await db.query('DROP INDEX CONCURRENTLY orders_id_idx');
  await db.query('DROP INDEX CONCURRENTLY orders_ref_key');
  await db.query('DELETE FROM orders WHERE id = 2');

  const run = await repair(t, db, dir, 'sequndo-repair', { version: '2', resolution: 'undone' });
  t.same([run.outcome, run.applied, run.repaired], ['applied', [], { version: '2', resolution: 'undone' }], 'the repair is made');
  t.same(await rows(db), [{ version: '1', dirty: false, finished: true }], 'row 2 is removed');
  t.same((await repairs(db)).map((r) => [r.version, r.resolution]), [['2', 'undone']], 'and the repair recorded');
  t.same((await history(db, dir)).pending.map((p) => p.version), ['2'], 'file 2 is pending again');
  const next = await apply(t, db, dir, 'sequndo-next');
  t.same([next.outcome, next.applied.map((a) => a.version)], ['applied', ['2']], 'the next apply runs it');
  t.same((await rows(db)).filter((r) => r.version === '2'), [{ version: '2', dirty: false, finished: true }], 'once');
});

t.test('a repair sequence changes nothing unless the history is the one it was approved for', async (t) => {
  const { db, dir } = await dirtyDatabase(t, 'seqrefuse');
  const before = await rows(db);
  const old = (await history(db, dir)).fingerprint;
  const refusals: [string, { version: string; resolution: string; checksum?: string }, string | undefined, string, RegExp][] = [
    ['another checksum', { version: '2', resolution: 'finished', checksum: 'sha256:' + 'a'.repeat(64) }, undefined, 'repair_refused', /not sha256:a+ as approved/],
    ['a finished row', { version: '1', resolution: 'undone' }, undefined, 'repair_refused', /no dirty row to repair \(its row is finished\)/],
    ['a version with no row', { version: '7', resolution: 'finished' }, undefined, 'repair_refused', /migration 7 has no dirty row/],
    ['another history', { version: '2', resolution: 'finished' }, 'sha256:' + 'b'.repeat(64), 'history_moved', /changed after this repair was approved/],
  ];
  for (const [what, step, fingerprint, code, message] of refusals) {
    const run = await repair(t, db, dir, `seqrefuse-${code}-${step.version}`, step, fingerprint);
    t.same([run.outcome, run.error?.code, run.repaired], ['failed', code, undefined], `${what}: refused ${code}`);
    t.match(run.error?.message, message, `${what}: the message says why`);
  }
  const mixed = await applyApproved(t, db, dir, 'seqrefuse-mixed',
    [{ version: '2', checksum: 'sha256:' + 'c'.repeat(64), repair: 'finished' }, { version: '3', checksum: 'sha256:' + 'd'.repeat(64) }], old);
  t.equal(mixed.error?.code, 'invalid_input', 'a repair beside another entry is not a sequence');
  t.same(await rows(db), before, 'row 2 is still dirty, nothing else changed');
  t.same(await repairs(db), [], 'and no repair is recorded');
});
