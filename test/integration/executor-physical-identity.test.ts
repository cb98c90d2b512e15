// Issue #14, the database half, against a real PostgreSQL: the executor learns which physical database it
// opened (and reports it as a digest in every report and frame), and every writer holds one lock per database
// that all realms share, so two realms whose URLs differ but reach one database never write to it at once. The
// controller's census is not involved: executors and runners are started directly, as if it had been bypassed.
import t, { type Test } from 'tap';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifactDigest } from '../../src/shared/artifact.js';
import { canonicalJson, digest } from '../../src/shared/canonical.js';
import type {
  ApplyReport, ExecutorReport, MigrationHistoryReport, MigrationRunReport, ObserveReport, PlanReport, SchemaPlanDocument,
} from '../../src/shared/executor-report.js';
import { DATABASE_WRITER_LOCK_KEY, realmLockKey } from '../../src/shared/realm-lock-key.js';
import { expectedSequenceDigest, parseResultFor, parseSummaryFor, type RunnerResult } from '../../src/shared/runner-protocol.js';
import type { RunnerOperation } from '../../src/shared/runner-env.js';
import { targetIdentityDigest } from '../../src/shared/target-identity.js';
import { mountConfigMap, runRunner, workspace } from '../fixtures/runner/harness.js';
import { sharedPostgresUrl } from '../../tools/stack/postgres.js';
import {
  COORDINATION_DIGEST, artifactDir, jsonFile, operationId, queryOnce, roleDatabase, runExecutor, runExecutorProcess, waitFor,
  type ExecutorEnv, type RoleDatabase,
} from './executor-helpers.js';

const REALM_X = COORDINATION_DIGEST;
const REALM_Y = `sha256:${'d1'.repeat(32)}`;
const GATE = 7114;

/** The same database through another name of the same server: the URL differs, the database does not. */
function viaLocalhost(url: string): string {
  const other = new URL(url);
  other.hostname = 'localhost';
  return other.toString();
}

/** The superuser's URL of one test database (to change what its roles may do). */
function adminUrlOf(db: RoleDatabase): string {
  const url = new URL(sharedPostgresUrl());
  url.pathname = new URL(db.url).pathname;
  return url.toString();
}

const identityOf = (report: ExecutorReport) => ({ digest: report.physicalIdentityDigest, kind: report.physicalIdentityKind });

async function historyOf(url: string, dir: string): Promise<NonNullable<MigrationHistoryReport['history']>> {
  const report = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: url, artifactDir: dir });
  if (!report.history) throw new Error(`history failed: ${JSON.stringify(report.error)}`);
  return report.history;
}

/** A migration-apply env for `realm`, approved for what the history shows now. */
async function approved(t: Test, url: string, dir: string, realm: string, op: string, extra: ExecutorEnv = {}): Promise<ExecutorEnv> {
  const h = await historyOf(url, dir);
  return {
    dbUrl: url, artifactDir: dir, operationId: op, coordinationDigest: realm,
    expectedSequenceFile: jsonFile(t, h.pending.map((p) => ({ version: p.version, checksum: p.checksum }))), expectedHistoryFingerprint: h.fingerprint,
    ...extra,
  };
}

/** pg_locks shows a bigint advisory key as classid (high 32 bits) and objid (low 32 bits), unsigned. */
function splitKey(key: string): [string, string] {
  const unsigned = BigInt.asUintN(64, BigInt(key));
  return [(unsigned >> 32n).toString(), (unsigned & 0xffffffffn).toString()];
}

interface LockRow { pid: number; granted: boolean; lock: 'writer' | 'realm-x' | 'gate'; application_name: string | null }

/** Who holds or waits for the database writer lock, realm X's lock and the test's gate. */
function locks(url: string): Promise<LockRow[]> {
  const [wc, wo] = splitKey(DATABASE_WRITER_LOCK_KEY);
  const [rc, ro] = splitKey(realmLockKey(REALM_X));
  return queryOnce<LockRow>(url, `
    SELECT l.pid, l.granted, a.application_name,
           CASE WHEN l.classid = $1 AND l.objid = $2 THEN 'writer' WHEN l.classid = $3 AND l.objid = $4 THEN 'realm-x' ELSE 'gate' END AS lock
      FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((l.classid = $1 AND l.objid = $2) OR (l.classid = $3 AND l.objid = $4) OR (l.classid = 0 AND l.objid = $5))`,
  [wc, wo, rc, ro, GATE]);
}

/** Holds the gate a gated migration file waits on, so a writer stays inside its write until the test lets go. */
async function holdGate(t: Test, url: string): Promise<() => Promise<void>> {
  const blocker = new pg.Client({ connectionString: url });
  await blocker.connect();
  t.teardown(() => blocker.end());
  await blocker.query('SELECT pg_advisory_lock($1)', [GATE]);
  return async () => { await blocker.query('SELECT pg_advisory_unlock($1)', [GATE]); };
}

/** Waits until one writer holds the writer lock and waits at the gate inside its file; returns its pid. */
async function writerInsideItsWrite(url: string): Promise<number> {
  let pid = 0;
  await waitFor('a writer to hold the database writer lock and wait inside its file', async () => {
    const rows = await locks(url);
    pid = rows.find((r) => r.lock === 'writer' && r.granted)?.pid ?? 0;
    return pid !== 0 && rows.some((r) => r.lock === 'gate' && !r.granted && r.pid === pid);
  });
  return pid;
}

const GATED = { '001_slow.up.sql': `SELECT pg_advisory_xact_lock(${GATE});\nSELECT pg_sleep(0.3);\nCREATE TABLE slow (x int);` };
const NEXT = { ...GATED, '002_next.up.sql': 'CREATE TABLE next (x int);' };

const historyRows = (url: string) => queryOnce<{ version: string; operation_id: string; started_at: Date; finished_at: Date }>(url,
  'SELECT version, operation_id, started_at, finished_at FROM ptah_migrations.history ORDER BY seq');
const exists = async (url: string, name: string) =>
  (await queryOnce<{ found: boolean }>(url, 'SELECT to_regclass($1) IS NOT NULL AS found', [name]))[0]!.found;

t.test('the physical identity is one digest through 127.0.0.1 and localhost, another for a second database, on every report', async (t) => {
  const db = await roleDatabase(t, 'phys_same');
  const second = await roleDatabase(t, 'phys_other');
  const [near, far] = [db.url, viaLocalhost(db.url)];
  t.equal(new URL(near).hostname, '127.0.0.1');
  t.not(targetIdentityDigest(near), targetIdentityDigest(far), 'the fixture: the two URLs are two targets to anyone reading URLs');

  const schema = artifactDir(t, { 'schema.sql': 'CREATE TABLE s (x int);' });
  const observed = await runExecutorProcess<ObserveReport>('observe', { dbUrl: near, artifactDir: schema });
  t.equal(observed.code, 0, observed.stderr);
  const identity = identityOf(observed.report);
  t.equal(identity.kind, 'system-identifier', 'an ordinary role may read pg_control_system() on PostgreSQL 15');
  t.match(identity.digest, /^sha256:[0-9a-f]{64}$/);
  const [{ system_identifier: systemIdentifier }] = await db.query<{ system_identifier: string }>('SELECT system_identifier::text FROM pg_control_system()');
  t.notOk(observed.stdout.includes(systemIdentifier), 'the report holds a digest, not the system identifier');

  const planned = await runExecutor<PlanReport>('plan', { dbUrl: far, artifactDir: schema });
  const applied = await runExecutor<ApplyReport>('apply', {
    dbUrl: far, planFile: jsonFile(t, planned.plan), operationId: operationId('apply'), coordinationDigest: REALM_X,
  });
  t.equal(applied.outcome, 'applied', JSON.stringify(applied.error));
  const migrations = artifactDir(t, { '001_m.up.sql': 'CREATE TABLE m (x int);' });
  const history = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: far, artifactDir: migrations });
  const run = await runExecutor<MigrationRunReport>('migration-apply', await approved(t, near, migrations, REALM_Y, operationId('migrate')));
  t.equal(run.outcome, 'applied', JSON.stringify(run.error));
  const refused = await runExecutor<MigrationRunReport>('migration-apply',
    { ...(await approved(t, far, migrations, REALM_Y, operationId('stale'))), expectedHistoryFingerprint: history.history!.fingerprint });
  t.equal(refused.error?.code, 'history_moved', 'the fixture: an error report');
  for (const [name, report] of [['plan', planned], ['apply', applied], ['migration-history', history], ['migration-apply', run], ['an error report', refused]] as const) {
    t.same(identityOf(report), identity, `${name} reports the same physical identity`);
  }

  const other = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: second.url, artifactDir: migrations });
  t.equal(other.physicalIdentityKind, 'system-identifier');
  t.not(other.physicalIdentityDigest, identity.digest, 'a second database on the same server is another physical database');
  const admin = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: adminUrlOf(db), artifactDir: migrations });
  t.same(identityOf(admin), identity, 'another role reaches the same database');

  const unopened = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: 'postgres://nobody@127.0.0.1:1/none', artifactDir: migrations });
  t.equal(unopened.error?.code, 'connection_failed');
  t.same(identityOf(unopened), { digest: undefined, kind: undefined }, 'no database opened, no identity');
});

t.test('where pg_control_system() is withheld, the identity falls back to the weaker server-address kind', async (t) => {
  const db = await roleDatabase(t, 'phys_fallback');
  const second = await roleDatabase(t, 'phys_fallback2');
  for (const d of [db, second]) await queryOnce(adminUrlOf(d), 'REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC');
  const withheld = await db.query('SELECT system_identifier FROM pg_control_system()').then(() => 'allowed', (e: { code?: string }) => e.code);
  t.equal(withheld, '42501', 'the fixture: the role may no longer call pg_control_system()');

  const dir = artifactDir(t, { '001_m.up.sql': 'CREATE TABLE m (x int);' });
  const near = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: db.url, artifactDir: dir });
  const far = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: viaLocalhost(db.url), artifactDir: dir });
  t.equal(near.error, undefined);
  t.equal(near.physicalIdentityKind, 'server-address', 'the report says the identity is the weaker kind');
  t.same(identityOf(far), identityOf(near), 'localhost reaches the server at the same address, so the same digest');
  const other = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: second.url, artifactDir: dir });
  t.equal(other.physicalIdentityKind, 'server-address');
  t.not(other.physicalIdentityDigest, near.physicalIdentityDigest, 'a second database is still another identity');
  const strong = await runExecutor<MigrationHistoryReport>('migration-history', { dbUrl: adminUrlOf(db), artifactDir: dir });
  t.equal(strong.physicalIdentityKind, 'system-identifier', 'the superuser may still call it');
  t.not(strong.physicalIdentityDigest, near.physicalIdentityDigest, 'the two kinds never share a digest');
});

t.test('two realms at once on one database: exactly one writes, the other refuses naming the holder, one writer at a time', async (t) => {
  const db = await roleDatabase(t, 'phys_two_realms');
  const release = await holdGate(t, db.url);
  const dir = artifactDir(t, GATED);
  // A URL may name its own application_name; the writer's session must still name its realm.
  const named = (url: string) => `${url}?application_name=from-the-url`;
  const urls = { [REALM_X]: named(db.url), [REALM_Y]: named(viaLocalhost(db.url)) };
  const ops = { [REALM_X]: operationId('x'), [REALM_Y]: operationId('y') };
  const envs = { [REALM_X]: await approved(t, urls[REALM_X]!, dir, REALM_X, ops[REALM_X]!), [REALM_Y]: await approved(t, urls[REALM_Y]!, dir, REALM_Y, ops[REALM_Y]!) };

  // Started at once: whichever takes the writer lock first waits inside its file until the gate opens.
  const runs = [REALM_X, REALM_Y].map((realm) => runExecutorProcess<MigrationRunReport>('migration-apply', envs[realm]!).then((r) => ({ realm, run: r })));
  const ended: Awaited<(typeof runs)[number]>[] = [];
  for (const run of runs) void run.then((r) => ended.push(r), () => undefined);
  // A writer that refuses waits for no lock; without the writer lock the second waits inside its write (at the
  // gate, or behind the first's creation of the bookkeeping tables).
  const bothInside = async () => (await queryOnce<{ waiting: number }>(db.url, `SELECT count(DISTINCT pid)::int AS waiting FROM pg_locks
    WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`))[0]!.waiting === 2;
  await waitFor('one writer to refuse, or both to be inside a write', async () => ended.length > 0 || (await bothInside()));
  if (ended.length === 0) {
    t.fail('both realms are inside a write to one database at once');
    await release();
    await Promise.all(runs);
    return;
  }
  const loser = ended[0]!;
  const winnerRealm = loser.realm === REALM_X ? REALM_Y : REALM_X;
  const holderPid = await writerInsideItsWrite(db.url);
  t.equal(loser.run.code, 1);
  t.equal(loser.run.report.outcome, 'failed');
  t.same(loser.run.report.applied, []);
  t.equal(loser.run.report.error?.code, 'database_held_by_other_realm');
  t.ok(loser.run.report.error?.message.includes(winnerRealm), 'the refusal names the realm that holds the database');
  t.match(loser.run.report.error?.message, /nothing was changed/);
  t.notOk(loser.run.stdout.includes(db.password) || loser.run.stdout.includes(new URL(db.url).host) || loser.run.stdout.includes('localhost:'),
    'the refusal names no URL and no credential');
  const [holder] = (await locks(db.url)).filter((r) => r.lock === 'writer');
  t.equal(holder?.pid, holderPid);
  t.match(holder?.application_name, /^ptah-writer /, 'the holder names its realm where any session can read it');

  // While the writer is inside its write: it has committed nothing, the refusal changed nothing, and readings run.
  t.notOk(await exists(db.url, 'ptah_migrations.history'), 'nothing is committed yet, by either');
  const reading = await runExecutorProcess<MigrationHistoryReport>('migration-history', { dbUrl: urls[loser.realm]!, artifactDir: dir });
  t.equal(reading.code, 0, reading.stderr);
  t.same(reading.report.history?.pending.map((p) => p.version), ['001'], 'a reading runs while a writer holds the database');
  const observed = await runExecutor<ObserveReport>('observe', { dbUrl: urls[loser.realm]!, artifactDir: artifactDir(t, { 'schema.sql': 'CREATE TABLE r (x int);' }) });
  t.equal(observed.error, undefined, 'so does an observe');
  t.equal(observed.drift, true);
  t.equal((await locks(db.url)).find((r) => r.lock === 'writer' && r.granted)?.pid, holderPid, 'the writer held the lock all along');

  await release();
  const winner = (await Promise.all(runs)).find((r) => r.realm === winnerRealm)!;
  t.equal(winner.run.code, 0, winner.run.stderr);
  t.equal(winner.run.report.outcome, 'applied', 'exactly one of the two wrote');
  t.same(identityOf(loser.run.report), identityOf(winner.run.report), 'both reached one physical database');

  // The other realm writes once the database is free: the database's own records show one writer, then the other.
  const next = artifactDir(t, NEXT);
  const retryOp = operationId('retry');
  const retry = await runExecutorProcess<MigrationRunReport>('migration-apply', await approved(t, urls[loser.realm]!, next, loser.realm, retryOp));
  t.equal(retry.report.outcome, 'applied', JSON.stringify(retry.report.error));
  const rows = await historyRows(db.url);
  t.same(rows.map((r) => [r.version, r.operation_id]), [['001', ops[winnerRealm]], ['002', retryOp]]);
  t.equal(rows.filter((r) => r.operation_id === ops[loser.realm]).length, 0, 'the refused run recorded nothing');
  const [first, then] = rows;
  t.ok(first!.finished_at.getTime() - first!.started_at.getTime() >= 300, 'the first write lasted through its sleep and the gate: the overlap was real');
  t.ok(first!.finished_at.getTime() <= then!.started_at.getTime(), 'the two writes do not overlap');
});

t.test('the same realm twice still serializes on the realm lock, through 127.0.0.1 and localhost', async (t) => {
  const db = await roleDatabase(t, 'phys_same_realm');
  const release = await holdGate(t, db.url);
  const dir = artifactDir(t, GATED);
  const [opA, opB] = [operationId('a'), operationId('b')];
  const envA = await approved(t, db.url, dir, REALM_X, opA);
  const envB = await approved(t, viaLocalhost(db.url), dir, REALM_X, opB);
  const a = runExecutorProcess<MigrationRunReport>('migration-apply', envA);
  const holderPid = await writerInsideItsWrite(db.url);
  const b = runExecutorProcess<MigrationRunReport>('migration-apply', envB);
  await waitFor('B to queue behind A on the realm lock', async () => {
    const rows = await locks(db.url);
    return rows.some((r) => r.lock === 'realm-x' && !r.granted && r.pid !== holderPid);
  });
  const impatient = await runExecutor<MigrationRunReport>('migration-apply', { ...envB, operationId: operationId('impatient'), lockTimeoutMs: '200' });
  t.equal(impatient.error?.code, 'lock_timeout', 'a same-realm writer that cannot wait refuses as lock contention, as before');
  t.equal((await locks(db.url)).filter((r) => r.lock === 'writer').length, 1, 'and never reached the writer lock');

  await release();
  const [ra, rb] = await Promise.all([a, b]);
  t.equal(ra.report.outcome, 'applied');
  t.equal(rb.report.error?.code, 'history_moved', 'B waited, then re-read the history under the lock: not refused as another realm');
  t.same((await historyRows(db.url)).map((r) => r.operation_id), [opA]);
});

interface RunnerRun { result: RunnerResult; termination: string }

/** The real runner (and through it the real executor) for one mutating operation, as an operation Job runs it. */
async function runnerFor(t: Test, operation: RunnerOperation, url: string, realm: string, inputs: Record<string, string>): Promise<RunnerRun> {
  const ws = await workspace(t);
  const op = `sha256:${randomBytes(32).toString('hex')}`;
  // Bounds only a broken run (a writer stuck behind the test's gate); a refusal takes a second or two.
  const deadline = new Date(Date.now() + 60_000).toISOString();
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: ws.home, TMPDIR: tmpdir(),
    PTAH_OPERATION_ID: op, PTAH_RUNNER_PROTOCOL_VERSION: '1', PTAH_EXECUTOR_IDENTITY: ownExecutorIdentity(), PTAH_DB_URL: url, PTAH_COORDINATION_DIGEST: realm,
    PTAH_TERMINATION_MESSAGE_PATH: ws.terminationLog, PTAH_EXPECTED_COORDINATION_DIGEST: realm,
    PTAH_EXPECTED_TARGET_IDENTITY_DIGEST: targetIdentityDigest(url), PTAH_DISPATCH_NOT_AFTER: deadline, PTAH_EXECUTION_NOT_AFTER: deadline,
    PTAH_TERMINATION_GRACE_PERIOD_SECONDS: '3', ...inputs,
  };
  const out = await runRunner(ws, { rawArgs: ['--operation', operation], env });
  t.equal(out.code, 0, `${operation}: the runner framed a result`, { stderr: out.stderr });
  return { result: parseResultFor(out.stdout, operation, op), termination: out.termination };
}

t.test('through the runner, a refusal for another realm is framed as nothing changed, with the physical identity', async (t) => {
  const db = await roleDatabase(t, 'phys_runner');
  const release = await holdGate(t, db.url);
  const dir = artifactDir(t, GATED);
  const holderEnv = await approved(t, db.url, dir, REALM_X, operationId('holder'));
  const holder = runExecutorProcess<MigrationRunReport>('migration-apply', holderEnv);
  await writerInsideItsWrite(db.url);
  const url = viaLocalhost(db.url);
  const ws = await workspace(t);

  const migrationsMount = join(ws.root, 'migration-files');
  await mountConfigMap(migrationsMount, GATED);
  const h = await historyOf(url, dir);
  const sequence = h.pending.map((p) => ({ version: p.version, checksum: p.checksum }));
  const migration = await runnerFor(t, 'migration-apply', url, REALM_Y, {
    PTAH_ARTIFACT_DIR: migrationsMount, PTAH_EXPECTED_ARTIFACT_DIGEST: artifactDigest(GATED), PTAH_EXPECTED_MIGRATION_SEQUENCE: JSON.stringify(sequence),
    PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST: expectedSequenceDigest(sequence), PTAH_EXPECTED_HISTORY_FINGERPRINT: h.fingerprint,
  });

  // A schema plan, as the controller would have published it for realm Y: the same database, another realm.
  const planned = await runExecutor<PlanReport>('plan', { dbUrl: url, artifactDir: artifactDir(t, { 'schema.sql': 'CREATE TABLE p (x int);' }) });
  const plan = planned.plan as SchemaPlanDocument;
  const planMount = join(ws.root, 'schema-plan');
  await mountConfigMap(planMount, { '000.plan': canonicalJson(plan) });
  const schema = await runnerFor(t, 'apply', url, REALM_Y, { PTAH_PLAN_DIR: planMount, PTAH_EXPECTED_PLAN_CONTENT_DIGEST: digest(plan) });

  for (const [name, { result, termination }] of [['migration-apply', migration], ['apply', schema]] as const) {
    t.equal(result.error?.code, 'database_held_by_other_realm', `${name}: the executor's code, carried through`);
    t.ok(result.error?.message.includes(REALM_X), `${name}: naming the realm that holds the database`);
    t.equal(result.childExitCode, 1, `${name}: the executor ran`);
    t.same([result.mutationStarted, result.uncertain], [false, false], `${name}: and changed nothing`);
    t.equal(result.physicalIdentityDigest, planned.physicalIdentityDigest, `${name}: the frame carries the physical identity`);
    t.equal(result.physicalIdentityKind, 'system-identifier');
    const summary = parseSummaryFor(termination, result.operation, result.operationId);
    t.same([summary.errorCode, summary.mutationStarted, summary.uncertain, summary.physicalIdentityDigest],
      ['database_held_by_other_realm', false, false, planned.physicalIdentityDigest], `${name}: so does the summary`);
  }
  t.equal((migration.result as RunnerResult<'migration-apply'>).migrationRun?.outcome, 'failed');
  t.equal((schema.result as RunnerResult<'apply'>).statementsExecuted, 0);

  await release();
  t.equal((await holder).report.outcome, 'applied');
  t.notOk(await exists(db.url, 'public.p'), 'the refused schema apply changed nothing');
  t.same((await historyRows(db.url)).map((r) => r.operation_id), [holderEnv.operationId]);
});

