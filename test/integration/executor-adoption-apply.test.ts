// Adopting a database another tool migrated, end to end through the executor's own commands against a real
// PostgreSQL: psql builds the first files (as the tool ran them) and the tool's history table is written as the tool
// writes it; the reading then lists only the files after the tool's head, and the approved Apply runs only those and
// records the adopted ones without running them. The database is the witness: its rows, its history table, and its
// catalog against a psql build of every file's up SQL.
import t, { type Test } from 'tap';
import type { MigrationHistory, MigrationHistoryReport, MigrationRunReport } from '../../src/shared/executor-report.js';
import type { MigrationAdoption } from '../../src/shared/migration-adoption.js';
import type { MigrationFormat } from '../../src/shared/migration-format.js';
import {
  COORDINATION_DIGEST, artifactDir, catalogFacts, freshDatabase, jsonFile, operationId, runExecutor, type Database,
} from './executor-helpers.js';
import { LAYOUTS, STEPS, TOOL_HISTORY, adoptedWitness, witness, recorded, type Tool } from './migration-format-fixtures.js';

async function read(db: Database, dir: string, format: MigrationFormat, adoption?: MigrationAdoption): Promise<MigrationHistory> {
  const report = await runExecutor<MigrationHistoryReport>('migration-history', {
    dbUrl: db.url, artifactDir: dir, migrationFormat: format, ...(adoption ? { migrationAdoption: JSON.stringify(adoption) } : {}),
  });
  if (!report.history) throw new Error(`history failed: ${JSON.stringify(report.error)}`);
  return report.history;
}

/** Applies what `history` says is pending, approved on its fingerprint, as the Job of an approved plan would. */
function apply(t: Test, db: Database, dir: string, format: MigrationFormat, history: MigrationHistory, opId: string, adoption?: MigrationAdoption): Promise<MigrationRunReport> {
  return runExecutor<MigrationRunReport>('migration-apply', {
    dbUrl: db.url,
    artifactDir: dir,
    migrationFormat: format,
    ...(adoption ? { migrationAdoption: JSON.stringify(adoption) } : {}),
    operationId: opId,
    coordinationDigest: COORDINATION_DIGEST,
    expectedSequenceFile: jsonFile(t, history.pending.map(({ version, checksum }) => ({ version, checksum }))),
    expectedHistoryFingerprint: history.fingerprint,
  });
}

const historyTableExists = async (db: Database) =>
  (await db.query<{ found: boolean }>("SELECT to_regclass('ptah_migrations.history') IS NOT NULL AS found"))[0]!.found;
/** The executor's history rows; none when a rolled-back first file took the table's creation with it. */
const historyRows = async (db: Database) => (!(await historyTableExists(db)) ? [] : db.query<{ version: string; adopted_from: string | null; operation_id: string; dirty: boolean }>(
  'SELECT version_order::text AS version, adopted_from, operation_id, dirty FROM ptah_migrations.history ORDER BY version_order'));

for (const tool of Object.keys(TOOL_HISTORY) as Tool[]) {
  t.test(`${tool}: a database it migrated is adopted; only the files after its head run, and each version is recorded once`, async (t) => {
    const files = LAYOUTS[tool](STEPS);
    const dir = artifactDir(t, files);
    const ranByTool = STEPS.slice(0, 2);
    const db = await witness(t, ranByTool);
    await db.query(TOOL_HISTORY[tool](ranByTool, files));
    const adoption: MigrationAdoption = { from: tool };

    t.same((await read(db, dir, tool)).pending.map((p) => BigInt(p.version).toString()), STEPS.map((s) => recorded(tool, s)),
      'without spec.adoption every file is pending, as before');
    const history = await read(db, dir, tool, adoption);
    t.same(history.pending.map((p) => BigInt(p.version).toString()), STEPS.slice(2).map((s) => recorded(tool, s)), 'only the files after the tool\'s head are pending');
    t.same(history.adoptable?.files.map((f) => BigInt(f.version).toString()), ranByTool.map((s) => recorded(tool, s)), 'the files the tool ran are adoptable');
    t.equal(history.adoptable?.from, tool);
    t.same(history.applied, [], 'nothing is recorded by reading');
    t.equal(await historyTableExists(db), false, 'the reading created nothing');

    const opId = operationId(`${tool}-adopt`);
    const run = await apply(t, db, dir, tool, history, opId, adoption);
    t.equal(run.outcome, 'applied', `the approved files apply: ${JSON.stringify(run.error)}`);
    t.same(run.applied.map((f) => BigInt(f.version).toString()), STEPS.slice(2).map((s) => recorded(tool, s)), 'and only they ran');
    t.same(await historyRows(db), STEPS.map((s, i) => ({ version: recorded(tool, s), adopted_from: i < 2 ? tool : null, operation_id: opId, dirty: false })),
      'every version is recorded once by the Apply, the adopted ones as adopted from the tool');
    t.same(await db.query('SELECT email FROM users ORDER BY id'), [{ email: 'a@example.org' }, { email: 'semi;colon@example.org' }],
      'the data file the tool ran did not run again');
    t.same(await catalogFacts(db.url), await catalogFacts((await adoptedWitness(t, tool, ranByTool, files)).url), 'the schema equals psql\'s build of every up section (besides the history tables)');

    const after = await read(db, dir, tool, adoption);
    t.same(after.pending, [], 'nothing is pending afterwards');
    t.equal(after.adoptable, undefined, 'and the adoption is no longer read: the history records the files');
    t.equal((await apply(t, db, dir, tool, after, operationId(`${tool}-again`), adoption)).outcome, 'up-to-date', 'nothing runs twice');
  });
}

t.test('a baseline adopts every file at or below its version, in the ptah format', async (t) => {
  const db = await freshDatabase(t, 'exec_adopt_baseline');
  await db.query('CREATE TABLE a (id int); CREATE TABLE b (id int)');
  const dir = artifactDir(t, { '1_a.up.sql': 'CREATE TABLE a (id int);', '2_b.up.sql': 'CREATE TABLE b (id int);', '3_c.up.sql': 'CREATE TABLE c (id int);' });
  const adoption: MigrationAdoption = { from: 'baseline', baselineVersion: '2' };
  const history = await read(db, dir, 'ptah', adoption);
  t.same(history.pending.map((p) => p.version), ['3']);
  const opId = operationId('baseline');
  t.equal((await apply(t, db, dir, 'ptah', history, opId, adoption)).outcome, 'applied');
  t.same((await historyRows(db)).map((r) => [r.version, r.adopted_from]), [['1', 'baseline'], ['2', 'baseline'], ['3', null]]);
});

t.test('an adoption binds the approval: the tool moving after the reading refuses the Apply, and nothing is recorded', async (t) => {
  const files = LAYOUTS.goose(STEPS);
  const dir = artifactDir(t, files);
  const db = await witness(t, STEPS.slice(0, 2));
  await db.query(TOOL_HISTORY.goose(STEPS.slice(0, 2), files));
  const history = await read(db, dir, 'goose', { from: 'goose' });
  await db.query('CREATE UNIQUE INDEX users_email ON users (email); INSERT INTO goose_db_version (version_id, is_applied) VALUES (3, true)');
  const run = await apply(t, db, dir, 'goose', history, operationId('moved'), { from: 'goose' });
  t.equal(run.outcome, 'failed');
  t.equal(run.error?.code, 'history_moved', 'the adoption read under the lock is not the approved one');
  t.equal(await historyTableExists(db), false, 'nothing was recorded');
  const dropped = await apply(t, db, dir, 'goose', history, operationId('dropped'));
  t.equal(dropped.error?.code, 'history_moved', 'an Apply without the adoption the plan was read with is refused too');
});

t.test('the adoption commits with the first file, or not at all', async (t) => {
  const adoption: MigrationAdoption = { from: 'baseline', baselineVersion: '1' };
  const cases: [string, string][] = [
    ['a transactional first file fails', 'CREATE TABLE b (id int);\nSELEC 1;'],
    ['a no-transaction first file fails at its first statement', '-- ptah:no-transaction\nCREATE INDEX CONCURRENTLY b_idx ON missing_table (id);'],
  ];
  for (const [what, second] of cases) {
    const db = await freshDatabase(t, 'exec_adopt_rollback');
    await db.query('CREATE TABLE a (id int)');
    const dir = artifactDir(t, { '1_a.up.sql': 'CREATE TABLE a (id int);', '2_b.up.sql': second });
    const history = await read(db, dir, 'ptah', adoption);
    t.same(history.pending.map((p) => p.version), ['2'], `${what}: only file 2 is pending`);
    const run = await apply(t, db, dir, 'ptah', history, operationId('rollback'), adoption);
    t.equal(run.outcome, 'failed', `${what}: the run changed nothing (${JSON.stringify(run.error)})`);
    t.same(await historyRows(db), [], `${what}: the adoption was not recorded either`);
    t.same((await read(db, dir, 'ptah', adoption)).adoptable?.files.map((f) => f.version), ['1'], `${what}: it is still adoptable, for the next approved run`);
  }
});

t.test('a refused adoption is the reading\'s refusal, naming the table, and changes nothing', async (t) => {
  const db = await freshDatabase(t, 'exec_adopt_refused');
  const dir = artifactDir(t, LAYOUTS.goose(STEPS));
  const report = await runExecutor<MigrationHistoryReport>('migration-history', {
    dbUrl: db.url, artifactDir: dir, migrationFormat: 'goose', migrationAdoption: JSON.stringify({ from: 'goose' }),
  });
  t.equal(report.error?.code, 'adoption_refused');
  t.match(report.error?.message, /no table goose_db_version/);
  t.equal(report.history, undefined, 'no history is reported');
  const malformed = await runExecutor<MigrationHistoryReport>('migration-history', {
    dbUrl: db.url, artifactDir: dir, migrationFormat: 'goose', migrationAdoption: '{"from":"baseline"}',
  });
  t.equal(malformed.error?.code, 'invalid_input');
  t.match(malformed.error?.message, /PTAH_MIGRATION_ADOPTION from: baseline needs baselineVersion/);
  t.equal(await historyTableExists(db), false, 'nothing was created');
});
