// Other tools' migration directories (spec.artifact.format), applied by the executor against a real PostgreSQL
// (fixtures and the psql witness: migration-format-fixtures.ts). Each run must give the witness's catalog, record
// each file once in the history table, and never run a down section.
import t, { type Test } from 'tap';
import type { MigrationHistoryReport, MigrationRunReport } from '../../src/shared/executor-report.js';
import type { MigrationFormat } from '../../src/shared/migration-format.js';
import {
  COORDINATION_DIGEST, artifactDir, catalogFacts, freshDatabase, jsonFile, operationId, runExecutor, type Database, type ExecutorEnv,
} from './executor-helpers.js';
import { LAYOUTS, STEPS, recorded, witness } from './migration-format-fixtures.js';

async function read(db: Database, dir: string, format: MigrationFormat): Promise<NonNullable<MigrationHistoryReport['history']>> {
  const report = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: dir, migrationFormat: format });
  if (!report.history) throw new Error(`history failed: ${JSON.stringify(report.error)}`);
  return report.history;
}

async function applyPending(t: Test, db: Database, dir: string, format: MigrationFormat, opId: string): Promise<MigrationRunReport> {
  const history = await read(db, dir, format);
  const env: ExecutorEnv = {
    dbUrl: db.url,
    artifactDir: dir,
    migrationFormat: format,
    operationId: opId,
    coordinationDigest: COORDINATION_DIGEST,
    expectedSequenceFile: jsonFile(t, history.pending.map((p) => ({ version: p.version, checksum: p.checksum }))),
    expectedHistoryFingerprint: history.fingerprint,
  };
  return runExecutor<MigrationRunReport>('migration-apply', env);
}

for (const format of Object.keys(LAYOUTS) as (keyof typeof LAYOUTS)[]) {
  t.test(`${format}: a directory in the tool's shape converges to what psql builds from its up SQL, each file once`, async (t) => {
    const layout = LAYOUTS[format];
    const db = await freshDatabase(t, `exec_fmt_${format.replace('-', '_')}`);
    const first = await applyPending(t, db, artifactDir(t, layout(STEPS.slice(0, 3))), format, operationId(`${format}-1`));
    t.equal(first.outcome, 'applied', `the first three files apply: ${JSON.stringify(first.error)}`);
    const dir = artifactDir(t, layout(STEPS));
    t.same((await read(db, dir, format)).pending.map((p) => BigInt(p.version).toString()), [recorded(format, STEPS[3]!)], 'the artifact grown by one file has only that file pending');
    const second = await applyPending(t, db, dir, format, operationId(`${format}-2`));
    t.equal(second.outcome, 'applied', `the fourth applies: ${JSON.stringify(second.error)}`);
    t.equal((await applyPending(t, db, dir, format, operationId(`${format}-3`))).outcome, 'up-to-date', 'nothing runs twice');

    const rows = await db.query<{ version: string; count: string; dirty: boolean }>(
      'SELECT version_order::text AS version, count(*)::text AS count, bool_or(dirty) AS dirty FROM ptah_migrations.history GROUP BY version_order ORDER BY version_order');
    t.same(rows, STEPS.map((s) => ({ version: recorded(format, s), count: '1', dirty: false })), 'the history table holds each version once, finished');
    const transactional = await db.query<{ version: string; transactional: boolean }>('SELECT version_order::text AS version, transactional FROM ptah_migrations.history ORDER BY seq');
    t.same(transactional, STEPS.map((s) => ({ version: recorded(format, s), transactional: !s.noTransaction })), 'only the index file ran outside a transaction');
    t.same(await catalogFacts(db.url), await catalogFacts((await witness(t, STEPS)).url), 'the catalog equals the witness (no down section ran)');
    t.same(await db.query('SELECT email FROM users ORDER BY id'), [{ email: 'a@example.org' }, { email: 'semi;colon@example.org' }], 'the data too');
  });
}

t.test('a directory read in the wrong format is refused before anything runs, naming the files', async (t) => {
  const db = await freshDatabase(t, 'exec_fmt_wrong');
  const goose = artifactDir(t, LAYOUTS.goose(STEPS));
  const asPtah = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: goose });
  t.equal(asPtah.error?.code, 'invalid_migration_name');
  t.match(asPtah.error?.message, /4 files are not named <version>_<name>\.up\.sql: 00001_users\.sql.*declare the spec\.artifact\.format/);
  const asDbmate = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: goose, migrationFormat: 'dbmate' });
  t.equal(asDbmate.error?.code, 'migration_invalid');
  t.match(asDbmate.error?.message, /^migration 00001_users\.sql line 3: dbmate refuses SQL before -- migrate:up/);
  const unknown = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: goose, migrationFormat: 'liquibase' });
  t.equal(unknown.error?.code, 'invalid_input');
  t.match(unknown.error?.message, /PTAH_MIGRATION_FORMAT must be one of ptah, golang-migrate, goose, dbmate, flyway/);
  t.equal((await db.query<{ found: boolean }>("SELECT to_regclass('ptah_migrations.history') IS NOT NULL AS found"))[0]!.found, false, 'nothing was created');
});
