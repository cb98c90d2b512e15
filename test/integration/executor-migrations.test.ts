// migration-history and migration-apply against a real PostgreSQL, one fresh database per test.
import t, { type Test } from 'tap';
import pg from 'pg';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MigrationHistoryReport, MigrationRunReport } from '../../src/shared/executor-report.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { realmLockKey } from '../../src/shared/realm-lock-key.js';
import { historyFingerprint } from '../../src/executor/migrations/history.js';
import { MAX_PLANNED_MIGRATIONS } from '../../src/shared/api/migration-kinds.js';
import {
  COORDINATION_DIGEST, artifactDir, freshDatabase, jsonFile, operationId, queryOnce, runExecutor, runExecutorProcess, waitFor,
  type Database, type ExecutorEnv,
} from './executor-helpers.js';

async function history(db: Database, dir: string): Promise<MigrationHistoryReport['history'] & object> {
  const report = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: dir });
  if (!report.history) throw new Error(`history failed: ${JSON.stringify(report.error)}`);
  return report.history;
}

/** The env of an apply approved for what the history shows now (or for `approve`, when given). */
async function approvedApply(t: Test, db: Database, dir: string, opId: string, approve?: { version: string; checksum: string }[]): Promise<ExecutorEnv> {
  const h = await history(db, dir);
  return {
    dbUrl: db.url,
    artifactDir: dir,
    operationId: opId,
    coordinationDigest: COORDINATION_DIGEST,
    expectedSequenceFile: jsonFile(t, approve ?? h.pending.map((p) => ({ version: p.version, checksum: p.checksum }))),
    expectedHistoryFingerprint: h.fingerprint,
  };
}

/**
 * The env of an apply approved for `files` (in version order) on an empty history, as if migration-history had
 * let them through: the apply's own refusal is what is tested.
 */
function approvedWithoutReading(t: Test, db: Database, files: Record<string, string>, opId: string): ExecutorEnv {
  return {
    dbUrl: db.url,
    artifactDir: artifactDir(t, files),
    operationId: opId,
    coordinationDigest: COORDINATION_DIGEST,
    expectedSequenceFile: jsonFile(t, Object.entries(files).map(([name, sql]) => ({ version: name.split('_')[0]!, checksum: sha256Digest(sql) }))),
    expectedHistoryFingerprint: historyFingerprint({ rows: [] }),
  };
}

const historyRows = (db: Database) =>
  db.query<{ version: string; operation_id: string; dirty: boolean }>('SELECT version, operation_id, dirty FROM ptah_migrations.history ORDER BY seq');
const relationExists = async (db: Database, name: string) =>
  (await db.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [name]))[0]!.found;

t.test('migrations apply once, record their operation ID, and a second apply is up-to-date', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_once');
  const dir = artifactDir(t, {
    '001_users.up.sql': 'CREATE TABLE users (id int PRIMARY KEY);\nINSERT INTO users VALUES (1);',
    '002_orders.up.sql': 'CREATE TABLE orders (id int PRIMARY KEY, user_id int REFERENCES users (id));',
  });
  const before = await runExecutorProcess<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: dir });
  t.equal(before.code, 0);
  t.same(before.report.history?.pending.map((p) => p.version), ['001', '002']);
  t.notOk(await relationExists(db, 'ptah_migrations.history'), 'reading the history creates nothing');

  const op = operationId('first');
  const first = await runExecutorProcess<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, op));
  t.equal(first.code, 0, first.stderr);
  t.equal(first.report.outcome, 'applied');
  t.same(first.report.applied.map((m) => m.version), ['001', '002']);
  t.same(await historyRows(db), [{ version: '001', operation_id: op, dirty: false }, { version: '002', operation_id: op, dirty: false }]);
  t.same(await db.query('SELECT id FROM users'), [{ id: 1 }], 'the file ran exactly once');

  const after = await history(db, dir);
  t.same(after.pending, []);
  t.same(after.applied.map((a) => [a.version, a.operationId]), [['001', op], ['002', op]]);

  const again = await runExecutorProcess<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('second')));
  t.equal(again.code, 0);
  t.equal(again.report.outcome, 'up-to-date');
  t.same(again.report.applied, []);
  t.equal((await historyRows(db)).length, 2, 'nothing recorded');

  const stale = await runExecutor<MigrationRunReport>('migration-apply', { ...(await approvedApply(t, db, dir, operationId('stale'))), expectedHistoryFingerprint: before.report.history!.fingerprint });
  t.equal(stale.outcome, 'failed');
  t.equal(stale.error?.code, 'history_moved', 'an approval taken on the old history is refused');
});

t.test('an apply run again under its operation ID is refused as applied by it, naming its approval and changing nothing', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_rerun');
  const dir = artifactDir(t, { '001_a.up.sql': 'CREATE TABLE a (x int);', '002_b.up.sql': 'INSERT INTO a VALUES (1);' });
  const approved = (await history(db, dir)).pending.map((p) => ({ version: p.version, checksum: p.checksum }));
  const op = operationId('rerun');
  const env = await approvedApply(t, db, dir, op, approved);
  const rowCount = async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM ptah_migrations.history'))[0]!.n;

  const first = await runExecutorProcess<MigrationRunReport>('migration-apply', env);
  t.equal(first.report.outcome, 'applied', first.stderr);
  t.equal(await rowCount(), 2);

  // The same Job's next Pod: the same operation ID, approval and approved history fingerprint.
  const again = await runExecutorProcess<MigrationRunReport>('migration-apply', env);
  t.equal(again.code, 1);
  t.equal(again.report.outcome, 'failed');
  t.equal(again.report.error?.code, 'history_moved');
  t.same(again.report.applied, [], 'this run applied nothing');
  t.same(again.report.planned, approved, 'the report names the approval it was held to');
  t.match(again.report.error?.message, `every approved migration (2: 001, 002) is already recorded as applied by this operation (${op})`);
  t.notMatch(again.report.error?.message, /another run applied/);
  t.equal(await rowCount(), 2, 'nothing recorded again');
  t.same(await db.query('SELECT x FROM a'), [{ x: 1 }], 'nothing ran again');

  const other = await runExecutor<MigrationRunReport>('migration-apply', { ...env, operationId: operationId('other') });
  t.equal(other.error?.code, 'history_moved');
  t.same(other.planned, approved);
  t.match(other.error?.message, `another run applied approved migration 001, 002 (operation ${op})`);
  t.equal(await rowCount(), 2);

  const misnamed = await runExecutor<MigrationRunReport>('migration-apply', { ...env, artifactDir: artifactDir(t, { 'init.sql': '' }) });
  t.equal(misnamed.error?.code, 'invalid_migration_name');
  t.same(misnamed.planned, approved, 'an artifact refused before the database is opened still names the approval');
});

t.test('an apply whose approved sequence no longer matches refuses and changes nothing', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_mismatch');
  const dir = artifactDir(t, { '1_a.up.sql': 'CREATE TABLE a (x int);', '2_b.up.sql': 'CREATE TABLE b (x int);' });
  const h = await history(db, dir);
  const [a, b] = h.pending.map((p) => ({ version: p.version, checksum: p.checksum }));
  const cases: [string, { version: string; checksum: string }[]][] = [
    ['approval covers only the second file', [b!]],
    ['approval names a checksum the file no longer has', [a!, { version: '2', checksum: `sha256:${'0'.repeat(64)}` }]],
    ['approval is empty', []],
  ];
  for (const [name, approve] of cases) {
    const report = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('mismatch'), approve));
    t.equal(report.outcome, 'failed', name);
    t.equal(report.error?.code, 'sequence_mismatch', name);
    t.same(report.planned, approve, `${name}: the report names the approval it was held to`);
  }
  t.notOk(await relationExists(db, 'a'));
  t.notOk(await relationExists(db, 'ptah_migrations.history'), 'not even the bookkeeping was created');
  const ok = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('ok'), [a!, b!]));
  t.equal(ok.outcome, 'applied', 'the exact sequence is accepted (the fixture is sound)');
});

t.test('an approval of the first pending files applies exactly those, in order; the rest wait for their own plan', async (t) => {
  // More files than one plan carries (MAX_PLANNED_MIGRATIONS): each plan approves the next ones.
  const db = await freshDatabase(t, 'exec_mig_prefix');
  const files = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`${i + 1}_t${i + 1}.up.sql`, `CREATE TABLE t${i + 1} (x int);`]));
  const dir = artifactDir(t, files);
  const first = (await history(db, dir)).pending.slice(0, MAX_PLANNED_MIGRATIONS).map((p) => ({ version: p.version, checksum: p.checksum }));
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('first'), first));
  t.equal(run.outcome, 'applied');
  t.same(run.applied.map((a) => a.version), first.map((p) => p.version), `the ${MAX_PLANNED_MIGRATIONS} approved files, in order`);
  const tables = async () => Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'"))[0]!.n);
  t.equal(await tables(), MAX_PLANNED_MIGRATIONS, 'and nothing after them');
  const after = await history(db, dir);
  t.equal(after.pending.length, 300 - MAX_PLANNED_MIGRATIONS, 'the rest are pending');
  t.equal(after.pending[0]?.version, String(MAX_PLANNED_MIGRATIONS + 1));
  const rest = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('rest')));
  t.same([rest.outcome, rest.applied.length], ['applied', 300 - MAX_PLANNED_MIGRATIONS], 'the next approval applies the rest');
  t.equal(await tables(), 300);
  t.equal(Number((await db.query<{ n: string }>('SELECT count(DISTINCT version) AS n FROM ptah_migrations.history'))[0]!.n), 300, 'each version recorded once');
});

t.test('a failing file rolls back alone; a failing no-transaction file after a committed one is partial', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_partial');
  const dir = artifactDir(t, {
    '001_table.up.sql': 'CREATE TABLE t (a int);',
    '002_index.up.sql': '-- ptah:no-transaction\nCREATE INDEX CONCURRENTLY t_b_idx ON t (b);\nCREATE INDEX CONCURRENTLY t_a_idx ON t (a);',
  });
  const run = await runExecutorProcess<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('partial')));
  t.equal(run.code, 1);
  t.equal(run.report.outcome, 'partial');
  t.same(run.report.applied.map((m) => m.version), ['001']);
  t.equal(run.report.failedVersion, '002');
  t.equal(run.report.error?.code, 'migration_failed');
  t.match(run.report.error?.message, /002_index\.up\.sql.*statement 1 of 2.*column "b" does not exist/);
  t.same((await historyRows(db)).map((r) => r.version), ['001'], 'the failed file left no row: nothing of it ran');
  t.ok(await relationExists(db, 't'));
  t.notOk(await relationExists(db, 't_a_idx'));

  const transactional = artifactDir(t, { '001_bad.up.sql': 'CREATE TABLE first_half (a int);\nINSERT INTO first_half VALUES (\'x\');' });
  const db2 = await freshDatabase(t, 'exec_mig_rollback');
  const failed = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db2, transactional, operationId('rollback')));
  t.equal(failed.outcome, 'failed');
  t.match(failed.error?.message, /line 2: invalid input syntax for type integer/);
  t.notOk(await relationExists(db2, 'first_half'), 'the file rolled back');
  t.notOk(await relationExists(db2, 'ptah_migrations.history'), 'with the bookkeeping created in its transaction');
});

t.test('a no-transaction file failing midway is unknown, stays dirty, and blocks the next apply', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_dirty');
  const dir = artifactDir(t, { '7_load.up.sql': "-- ptah:no-transaction\nCREATE TABLE t (a int);\nINSERT INTO t VALUES ('x');" });
  const op = operationId('midway');
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, op));
  t.equal(run.outcome, 'unknown');
  t.equal(run.failedVersion, '7');
  t.ok(await relationExists(db, 't'), 'the first statement committed');
  t.same(await historyRows(db), [{ version: '7', operation_id: op, dirty: true }]);
  const h = await history(db, dir);
  t.same(h.dirty, ['7']);
  t.same(h.pending, []);
  const next = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('next'), []));
  t.equal(next.outcome, 'failed');
  t.equal(next.error?.code, 'dirty_history');
});

t.test('a connection lost inside a file is reported as such, never half-written', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_lost');
  const dir = artifactDir(t, {
    '1_a.up.sql': 'CREATE TABLE a (x int);',
    '2_lost.up.sql': 'CREATE TABLE b (x int);\nSELECT pg_terminate_backend(pg_backend_pid());',
  });
  const run = await runExecutorProcess<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('lost')));
  t.equal(run.code, 1);
  t.equal(run.report.outcome, 'partial', 'the lost transaction never committed, the file before it did');
  t.equal(run.report.error?.code, 'connection_lost');
  t.equal(run.report.failedVersion, '2');
  t.ok(await relationExists(db, 'a'));
  t.notOk(await relationExists(db, 'b'));
  t.same((await history(db, dir)).pending.map((p) => p.version), ['2']);

  const noTx = artifactDir(t, { '1_lost.up.sql': '-- ptah:no-transaction\nSELECT pg_terminate_backend(pg_backend_pid());' });
  const db2 = await freshDatabase(t, 'exec_mig_lost_notx');
  const uncertain = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db2, noTx, operationId('lost-notx')));
  t.equal(uncertain.outcome, 'unknown', 'a statement cut off outside a transaction may or may not have run');
  t.equal(uncertain.error?.code, 'connection_lost');
});

t.test('a modified applied file is reported by history and refused by apply', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_modified');
  const dir = artifactDir(t, { '1_a.up.sql': 'CREATE TABLE a (x int);' });
  t.equal((await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('a')))).outcome, 'applied');
  t.same((await history(db, dir)).modified, [], 'unchanged file: nothing modified');
  writeFileSync(join(dir, '1_a.up.sql'), 'CREATE TABLE a (x bigint);');
  writeFileSync(join(dir, '2_b.up.sql'), 'CREATE TABLE b (x int);');
  const h = await history(db, dir);
  t.same(h.modified, ['1']);
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('b')));
  t.equal(run.outcome, 'failed');
  t.equal(run.error?.code, 'modified_migration');
  t.notOk(await relationExists(db, 'b'));
});

t.test('history reports out-of-order and missing versions', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_order');
  const dir = artifactDir(t, { '10_a.up.sql': 'SELECT 1;', '20_b.up.sql': 'SELECT 2;' });
  t.equal((await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('a')))).outcome, 'applied');
  const later = artifactDir(t, { '5_early.up.sql': 'SELECT 5;', '10_a.up.sql': 'SELECT 1;', '30_c.up.sql': 'SELECT 3;' });
  const h = await history(db, later);
  t.same(h.outOfOrder, ['5']);
  t.same(h.missing, ['20']);
  t.same(h.pending.map((p) => p.version), ['5', '30']);
});

t.test('transaction control and bad file names are refused before anything runs', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_invalid');
  const control = { '1_a.up.sql': 'CREATE TABLE a (x int);\nCOMMIT;\nCREATE TABLE b (x int);' };
  const read = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, control) });
  t.equal(read.error?.code, 'migration_invalid');
  const refused = await runExecutor<MigrationRunReport>('migration-apply', approvedWithoutReading(t, db, control, operationId('tx')));
  t.equal(refused.error?.code, 'migration_invalid');
  t.notOk(await relationExists(db, 'a'));
  for (const [files, code] of [[{ 'init.sql': '' }, 'invalid_migration_name'], [{ '1_a.up.sql': '', '01_b.up.sql': '' }, 'duplicate_migration_version']] as const) {
    const report = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, files) });
    t.equal(report.error?.code, code);
  }
});

t.test('a file carrying goose or dbmate section markers is refused when read and when applied, never run whole', async (t) => {
  const down = 'DROP TABLE up_ran;\nCREATE TABLE down_ran (a int);\n';
  const cases: { file: string; sql: string; line: number; tool: string }[] = [
    { file: '1_goose.up.sql', sql: `-- +goose Up\nCREATE TABLE up_ran (a int);\n-- +goose Down\n${down}`, line: 1, tool: 'goose' },
    { file: '1_goose_terse.up.sql', sql: `-- a header comment\n--+goose up\nCREATE TABLE up_ran (a int);\n--+goose down\n${down}`, line: 2, tool: 'goose' },
    { file: '1_goose_block.up.sql', sql: 'CREATE TABLE up_ran (a int);\n-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n-- +goose StatementEnd\n', line: 2, tool: 'goose' },
    { file: '1_goose_notx.up.sql', sql: '-- ptah:no-transaction\n-- +goose NO TRANSACTION\nCREATE TABLE up_ran (a int);\n', line: 2, tool: 'goose' },
    { file: '1_dbmate.up.sql', sql: `-- migrate:up\nCREATE TABLE up_ran (a int);\n\n-- migrate:down\n${down}`, line: 1, tool: 'dbmate' },
    { file: '1_dbmate_opts.up.sql', sql: `CREATE TABLE up_ran (a int);\n--migrate:down transaction:false\n${down}`, line: 2, tool: 'dbmate' },
  ];
  for (const c of cases) {
    const db = await freshDatabase(t, 'exec_mig_markers');
    const read = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, { [c.file]: c.sql }) });
    t.equal(read.error?.code, 'migration_invalid', `${c.file}: refused when read`);
    t.match(read.error?.message, new RegExp(`${c.file.replace(/\./g, '\\.')} line ${c.line}: .*${c.tool} marker.*down section.*remove the markers`), `${c.file}: the message names the file, the line, the tool and the fix`);
    const run = await runExecutor<MigrationRunReport>('migration-apply', approvedWithoutReading(t, db, { [c.file]: c.sql }, operationId('markers')));
    t.equal(run.outcome, 'failed', `${c.file}: refused when applied`);
    t.equal(run.error?.code, 'migration_invalid');
    t.notOk(await relationExists(db, 'up_ran'), `${c.file}: no up section ran`);
    t.notOk(await relationExists(db, 'down_ran'), `${c.file}: no down section ran`);
    t.notOk(await relationExists(db, 'ptah_migrations.history'), `${c.file}: nothing was recorded`);
  }

  const db = await freshDatabase(t, 'exec_mig_mentions');
  const mentions = {
    '1_mentions.up.sql': "CREATE TABLE notes (a text);\nINSERT INTO notes VALUES ('-- +goose Down');\n-- this file came from +goose, and from dbmate before\n" +
      "  -- migrate:down (indented: dbmate reads no marker here)\nSELECT 1; -- migrate:up\n",
  };
  const dir = artifactDir(t, mentions);
  t.same((await history(db, dir)).pending.map((p) => p.version), ['1'], 'a file that only mentions markers is read');
  t.equal((await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('mentions')))).outcome, 'applied', 'and applied');
});

t.test('a no-transaction file runs a multi-action rule as one statement, as psql does', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_rule');
  const dir = artifactDir(t, {
    '1_rule.up.sql': '-- ptah:no-transaction\nCREATE TABLE t (a int);\nCREATE TABLE log (msg text);\n' +
      "CREATE RULE r AS ON INSERT TO t DO ALSO (\n  INSERT INTO log VALUES ('one; of two');\n  INSERT INTO log VALUES ('two')\n);\nINSERT INTO t VALUES (1);\n",
  });
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('rule')));
  t.equal(run.outcome, 'applied', JSON.stringify(run.error));
  t.same(await db.query('SELECT msg FROM log ORDER BY msg'), [{ msg: 'one; of two' }, { msg: 'two' }], 'both actions of the rule ran');
});

t.test('a no-transaction file is cut as the session reads strings, with standard_conforming_strings off too', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_escape');
  await db.query(`ALTER DATABASE "${db.name}" SET standard_conforming_strings = off`);
  const dir = artifactDir(t, { '1_escape.up.sql': "-- ptah:no-transaction\nCREATE TABLE t AS SELECT 'it\\'s; one value' AS s;\nSELECT 1;\n" });
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, dir, operationId('escape')));
  t.equal(run.outcome, 'applied', JSON.stringify(run.error));
  t.same(await db.query('SELECT s FROM t'), [{ s: "it's; one value" }]);
});

t.test('transaction wrappers, and statements that cannot run in a transaction, are refused when read', async (t) => {
  const first = { '1_first.up.sql': 'CREATE TABLE first (a int);' };
  const cases: { file: string; sql: string; message: RegExp }[] = [
    { file: '2_wrapped.up.sql', sql: 'BEGIN;\nCREATE TABLE wrapped (a int);\nCOMMIT;\n', message: /2_wrapped\.up\.sql line 1: BEGIN is not allowed.*remove it/ },
    {
      file: '2_index.up.sql', sql: 'CREATE TABLE t2 (a int);\n\nCREATE INDEX CONCURRENTLY t2_a ON t2 (a);\n',
      message: /2_index\.up\.sql line 3: CREATE INDEX CONCURRENTLY cannot run inside a transaction block.*`-- ptah:no-transaction`.*first line/,
    },
    { file: '2_vacuum.up.sql', sql: 'CREATE TABLE t2 (a int);\nVACUUM (ANALYZE) t2;\n', message: /2_vacuum\.up\.sql line 2: VACUUM cannot run inside a transaction block/ },
    { file: '2_reindex.up.sql', sql: 'CREATE TABLE t2 (a int);\nREINDEX (VERBOSE) TABLE CONCURRENTLY t2;\n', message: /line 2: REINDEX CONCURRENTLY cannot/ },
  ];
  for (const c of cases) {
    const db = await freshDatabase(t, 'exec_mig_tx_rules');
    const files = { ...first, [c.file]: c.sql };
    const read = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, files) });
    t.equal(read.error?.code, 'migration_invalid', `${c.file}: refused when read`);
    t.match(read.error?.message, c.message, `${c.file}: the message names the file, the line and the fix`);
    const run = await runExecutor<MigrationRunReport>('migration-apply', approvedWithoutReading(t, db, files, operationId('tx-rules')));
    t.equal(run.outcome, 'failed', `${c.file}: refused when applied, before the first file`);
    t.equal(run.error?.code, 'migration_invalid');
    t.match(run.error?.message, c.message);
    t.notOk(await relationExists(db, 'first'), `${c.file}: no file ran, not even the one before`);
  }

  const db = await freshDatabase(t, 'exec_mig_tx_directive');
  const noTransaction = artifactDir(t, {
    ...first,
    '2_index.up.sql': '-- ptah:no-transaction\nCREATE TABLE t2 (a int);\nCREATE INDEX CONCURRENTLY t2_a ON t2 (a);\nVACUUM (ANALYZE) t2;\nREINDEX TABLE CONCURRENTLY t2;\n',
    '3_plain.up.sql': 'CREATE INDEX t2_plain ON t2 (a);\nREINDEX TABLE t2;\nANALYZE t2;\n',
  });
  t.same((await history(db, noTransaction)).pending.map((p) => p.version), ['1', '2', '3'], 'with the directive, or in their transactional forms, they are read');
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approvedApply(t, db, noTransaction, operationId('no-tx')));
  t.equal(run.outcome, 'applied', JSON.stringify(run.error));
  t.ok(await relationExists(db, 't2_a'));
});

t.test('every naming problem is refused at once, with the rule to rename by', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_names');
  const misnamed = Object.fromEntries(Array.from({ length: 13 }, (_, i) => [`m${String(i).padStart(2, '0')}.sql`, '']));
  const duplicates = { '1_a.up.sql': '', '01_b.up.sql': '', '001_c.up.sql': '', '2_x.up.sql': '', '02_y.up.sql': '', '3_fine.up.sql': '' };
  const both = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, { ...misnamed, ...duplicates }) });
  t.equal(both.error?.code, 'invalid_migration_name');
  t.match(both.error?.message, /13 files are not named <version>_<name>\.up\.sql: m00\.sql, m01\.sql, .*m09\.sql and 3 more/, 'a count and the first names');
  t.match(both.error?.message, /2 versions are used by more than one file: 1 \(001_c\.up\.sql, 01_b\.up\.sql, 1_a\.up\.sql\), 2 \(02_y\.up\.sql, 2_x\.up\.sql\)/, 'every duplicate, with its files');
  t.match(both.error?.message, /version: 1 to 30 digits.*001 and 1 are the same version.*name: a letter or digit/, 'and the rule');
  t.notMatch(both.error?.message, /3_fine/);
  const onlyDuplicates = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, duplicates) });
  t.equal(onlyDuplicates.error?.code, 'duplicate_migration_version');
  t.match(onlyDuplicates.error?.message, /^2 versions are used by more than one file: 1 \(.*\), 2 \(.*\)/);
  const one = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: artifactDir(t, { 'init.sql': '' }) });
  t.match(one.error?.message, /^1 file is not named <version>_<name>\.up\.sql: init\.sql\./);
});

t.test('an apply waits for the realm lock at most PTAH_LOCK_TIMEOUT_MS and then refuses', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_lock_timeout');
  const dir = artifactDir(t, { '1_a.up.sql': 'CREATE TABLE a (x int);' });
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('SELECT pg_advisory_lock($1::bigint)', [realmLockKey(COORDINATION_DIGEST)]);
  const run = await runExecutor<MigrationRunReport>('migration-apply', { ...(await approvedApply(t, db, dir, operationId('timeout'))), lockTimeoutMs: '200' });
  t.equal(run.outcome, 'failed');
  t.equal(run.error?.code, 'lock_timeout');
  t.notOk(await relationExists(db, 'a'));
});

t.test('two concurrent applies on one database serialize on the realm lock', async (t) => {
  const db = await freshDatabase(t, 'exec_mig_concurrent');
  const gate = 4242;
  const dir = artifactDir(t, {
    '001_gated.up.sql': `SELECT pg_advisory_xact_lock(${gate});\nCREATE TABLE a (x int);`,
    '002_b.up.sql': 'CREATE TABLE b (x int);',
  });
  const blocker = new pg.Client({ connectionString: db.url });
  await blocker.connect();
  t.teardown(() => blocker.end());
  await blocker.query('SELECT pg_advisory_lock($1)', [gate]);

  const env = (op: string) => approvedApply(t, db, dir, op);
  const [opA, opB] = [operationId('A'), operationId('B')];
  const envA = await env(opA);
  const envB = await env(opB);
  const realm = splitKey(realmLockKey(COORDINATION_DIGEST));
  const locks = () => queryOnce<{ pid: number; granted: boolean; realm: boolean }>(db.url,
    `SELECT pid, granted, (classid = $1 AND objid = $2) AS realm FROM pg_locks
      WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND ((classid = $1 AND objid = $2) OR (classid = 0 AND objid = $3))`, [realm.classid, realm.objid, gate]);

  const a = runExecutorProcess<MigrationRunReport>('migration-apply', envA);
  let holderPid = 0;
  await waitFor('apply A to hold the realm and wait inside its first file', async () => {
    const rows = await locks();
    const realmHolder = rows.find((r) => r.realm && r.granted);
    holderPid = realmHolder?.pid ?? 0;
    return realmHolder !== undefined && rows.some((r) => !r.realm && !r.granted && r.pid === realmHolder.pid);
  });
  const b = runExecutorProcess<MigrationRunReport>('migration-apply', envB);
  await waitFor('apply B to queue behind A on the realm lock', async () => {
    const rows = await locks();
    return rows.some((r) => r.realm && !r.granted && r.pid !== holderPid) && rows.some((r) => r.realm && r.granted && r.pid === holderPid);
  });
  t.notOk(await relationExists(db, 'ptah_migrations.history'), 'while B waits, A has committed nothing');
  await blocker.query('SELECT pg_advisory_unlock($1)', [gate]);

  const [ra, rb] = await Promise.all([a, b]);
  t.equal(ra.report.outcome, 'applied');
  t.equal(rb.report.outcome, 'failed', 'B re-read the history under the lock and found it moved');
  t.equal(rb.report.error?.code, 'history_moved');
  t.same((await historyRows(db)).map((r) => [r.version, r.operation_id]), [['001', opA], ['002', opA]], 'every row is A\'s');
});

/** pg_locks shows a bigint advisory key as classid (high 32 bits) and objid (low 32 bits), unsigned. */
function splitKey(key: string): { classid: string; objid: string } {
  const unsigned = BigInt.asUintN(64, BigInt(key));
  return { classid: (unsigned >> 32n).toString(), objid: (unsigned & 0xffffffffn).toString() };
}
