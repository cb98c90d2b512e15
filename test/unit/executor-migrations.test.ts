import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256Digest } from '../../src/shared/canonical.js';
import { ExecutorFailure } from '../../src/executor/failure.js';
import { assertNoTransactionControl, readMigrationSources, type MigrationSource } from '../../src/executor/migrations/files.js';
import { computeHistory, historyFingerprint, pendingSources, type HistoryRow } from '../../src/executor/migrations/history.js';
import { readApprovedSequence, refuseUnlessApproved } from '../../src/executor/migrations/commands.js';
import { runCommand } from '../../src/executor/run.js';
import type { MigrationRunReport } from '../../src/shared/executor-report.js';
import { EXECUTOR_ENV } from '../../src/shared/runner-env.js';

function artifact(t: Test, files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'ptah-mig-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

function failureCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof ExecutorFailure ? err.code : `not an ExecutorFailure: ${String(err)}`;
  }
  return undefined;
}

t.test('reads files in numeric version order with checksums and the no-transaction directive', async (t) => {
  const dir = artifact(t, {
    '10_ten.up.sql': 'select 10;',
    '9_nine.up.sql': '-- ptah:no-transaction  \r\ncreate index concurrently i on t (a);',
    '0001_first.up.sql': 'create table t (a int);',
    '9_nine.down.sql': 'drop index i;',
  });
  mkdirSync(join(dir, '..data'));
  symlinkSync(join(dir, '10_ten.up.sql'), join(dir, '.hidden'));
  const sources = readMigrationSources(dir);
  t.same(sources.map((s) => [s.version, s.name, s.transactional]), [['0001', 'first', true], ['9', 'nine', false], ['10', 'ten', true]]);
  t.equal(sources[2]!.checksum, sha256Digest('select 10;'));
});

t.test('refuses bad names and duplicate versions with the file names', async (t) => {
  const cases: { name: string; files: Record<string, string>; code: string }[] = [
    { name: 'missing .up', files: { '001_init.sql': '' }, code: 'invalid_migration_name' },
    { name: 'no name', files: { '001.up.sql': '' }, code: 'invalid_migration_name' },
    { name: 'letters in version', files: { 'v1_init.up.sql': '' }, code: 'invalid_migration_name' },
    { name: 'space in name', files: { '001_my init.up.sql': '' }, code: 'invalid_migration_name' },
    { name: 'stray file', files: { '001_a.up.sql': '', 'README.md': '' }, code: 'invalid_migration_name' },
    { name: 'same number twice', files: { '001_a.up.sql': '', '1_b.up.sql': '' }, code: 'duplicate_migration_version' },
  ];
  for (const c of cases) t.equal(failureCode(() => readMigrationSources(artifact(t, c.files))), c.code, c.name);
  t.equal(failureCode(() => readMigrationSources(join(tmpdir(), 'ptah-does-not-exist'))), 'artifact_unreadable', 'missing directory');
  t.throws(() => readMigrationSources(artifact(t, { 'README.md': '' })), /README\.md/, 'the error names the file');
});

t.test('refuses a file that controls transactions itself', async (t) => {
  const source = (sql: string): MigrationSource =>
    ({ version: '1', order: 1n, name: 'x', fileName: '1_x.up.sql', checksum: sha256Digest(sql), sql, transactional: true, transactionAdvice: '', format: 'ptah' });
  t.equal(failureCode(() => assertNoTransactionControl(source('create table t (a int);\ncommit;'))), 'migration_invalid');
  t.equal(failureCode(() => assertNoTransactionControl(source("create table t (a int); insert into t values (1); -- commit;"))), undefined);
});

const source = (version: string, checksum = `sha256:${version.padStart(64, '0')}`): MigrationSource =>
  ({ version, order: BigInt(version), name: `m${version}`, fileName: `${version}_m${version}.up.sql`, checksum, sql: '', transactional: true, transactionAdvice: '', format: 'ptah' });
const row = (version: string, extra: Partial<HistoryRow> = {}): HistoryRow => ({
  version, name: `m${version}`, checksum: `sha256:${version.padStart(64, '0')}`, operationId: 'op', startedAt: new Date(0), finishedAt: new Date(1), dirty: false, ...extra,
});

t.test('history classifies applied, pending, dirty, modified, out-of-order and missing', async (t) => {
  const sources = [source('1'), source('2', 'sha256:' + 'f'.repeat(64)), source('3'), source('5'), source('6')];
  const rows = [row('01'), row('2'), row('4'), row('5', { dirty: true, finishedAt: null })];
  const h = computeHistory(sources, { rows });
  t.same(h.applied.map((a) => a.version), ['01', '2', '4', '5']);
  t.same(h.pending.map((p) => p.version), ['3', '6']);
  t.same(h.dirty, ['5']);
  t.same(h.modified, ['2']);
  t.same(h.outOfOrder, ['3']);
  t.same(h.missing, ['4']);
  t.equal(h.fingerprint, historyFingerprint({ rows }));
  t.equal(h.applied[3]!.appliedAt, new Date(0).toISOString(), 'an unfinished row is dated by its start');
});

t.test('the history fingerprint moves with every row change and nothing else', async (t) => {
  const base = [row('1'), row('2')];
  const fp = historyFingerprint({ rows: base });
  t.equal(historyFingerprint({ rows: [row('1', { operationId: 'other', finishedAt: new Date(9) }), row('2')] }), fp, 'timestamps and operation IDs do not count');
  t.not(historyFingerprint({ rows: [row('1')] }), fp);
  t.not(historyFingerprint({ rows: [row('2'), row('1')] }), fp, 'order counts');
  t.not(historyFingerprint({ rows: [row('1'), row('2', { dirty: true })] }), fp);
  t.not(historyFingerprint({ rows: [row('1'), row('2', { checksum: 'sha256:' + 'a'.repeat(64) })] }), fp);
  t.equal(historyFingerprint({ rows: [] }), computeHistory([], { rows: [] }).fingerprint);
});

t.test('an adoption counts its files as applied: never pending, the highest of them orders the rest, and the fingerprint binds them', async (t) => {
  const sources = [source('1'), source('2'), source('3'), source('4'), source('5')];
  const adopted = { from: 'goose' as const, sources: [sources[0]!, sources[1]!, sources[3]!] };
  const h = computeHistory(sources, { rows: [], adopted });
  t.same(h.pending.map((p) => p.version), ['3', '5'], 'the adopted files are not pending');
  t.same(h.outOfOrder, ['3'], 'a file below the highest adopted one is out of order, as below the highest applied');
  t.same(h.applied, [], 'nothing is recorded yet');
  t.same(h.adoptable, { from: 'goose', files: [sources[0], sources[1], sources[3]].map(({ version, name, checksum }) => ({ version, name, checksum })) });
  t.same(pendingSources(sources, { rows: [], adopted }).map((p) => p.version), ['3', '5']);
  const fp = h.fingerprint;
  t.not(fp, historyFingerprint({ rows: [] }), 'an adoption is another history than none');
  t.not(historyFingerprint({ rows: [], adopted: { ...adopted, sources: adopted.sources.slice(0, 2) } }), fp, 'one file fewer adopted');
  t.not(historyFingerprint({ rows: [], adopted: { ...adopted, from: 'dbmate' } }), fp, 'the same files from another tool');
  t.not(historyFingerprint({ rows: [], adopted: { ...adopted, sources: [sources[0]!, sources[1]!, source('4', `sha256:${'c'.repeat(64)}`)] } }), fp, 'another checksum');
  t.equal(computeHistory(sources, { rows: [] }).adoptable, undefined, 'no adoption, no adoptable files');
  t.equal(historyFingerprint({ rows: [row('1')] }), computeHistory(sources, { rows: [row('1')] }).fingerprint, 'without an adoption, the fingerprint readings always had');
});

t.test('apply refuses before changing anything unless the pending files begin with the approved sequence', async (t) => {
  const sources = [source('1'), source('2'), source('3')];
  const rows = [row('1')];
  const fp = historyFingerprint({ rows });
  const approved = [{ version: '2', checksum: sources[1]!.checksum }, { version: '3', checksum: sources[2]!.checksum }];
  const refuse = (r: HistoryRow[], planned: { version: string; checksum: string }[], expected: string, s = sources) =>
    failureCode(() => refuseUnlessApproved(computeHistory(s, { rows: r }), pendingSources(s, { rows: r }), { planned, expectedFingerprint: expected, operationId: 'op' }));

  t.equal(refuse(rows, approved, fp), undefined, 'exact match passes');
  t.equal(refuse(rows, [{ version: '002', checksum: sources[1]!.checksum }, approved[1]!], fp), undefined, 'versions compare numerically');
  t.equal(refuse(rows, approved.slice(0, 1), fp), undefined, 'approval covers the first pending files: they alone run');
  t.equal(refuse(rows, approved.slice(1), fp), 'sequence_mismatch', 'approval skips a pending file');
  t.equal(refuse(rows, [], fp), 'sequence_mismatch', 'approval covers nothing while files are pending');
  t.equal(refuse(rows, [...approved, { version: '4', checksum: sources[0]!.checksum }], fp), 'sequence_mismatch', 'approval covers more files');
  t.equal(refuse(rows, [approved[1]!, approved[0]!], fp), 'sequence_mismatch', 'order differs');
  t.equal(refuse(rows, [approved[0]!, { version: '3', checksum: 'sha256:' + 'e'.repeat(64) }], fp), 'sequence_mismatch', 'checksum differs');
  t.equal(refuse(rows, approved, historyFingerprint({ rows: [] })), 'history_moved');
  t.equal(refuse([row('1', { dirty: true })], approved, historyFingerprint({ rows: [row('1', { dirty: true })] })), 'dirty_history');
  t.equal(refuse([row('1', { checksum: 'sha256:' + 'b'.repeat(64) })], approved, historyFingerprint({ rows: [row('1', { checksum: 'sha256:' + 'b'.repeat(64) })] })), 'modified_migration');
  t.equal(refuse([row('1'), row('9')], approved, historyFingerprint({ rows: [row('1'), row('9')] })), 'missing_migration');
  const withNine = [...sources, source('9')];
  const nineApplied = [row('1'), row('9')];
  t.equal(refuse(nineApplied, approved, historyFingerprint({ rows: nineApplied }), withNine), 'out_of_order');
  t.equal(refuse([row('1'), row('2'), row('3')], [], historyFingerprint({ rows: [row('1'), row('2'), row('3')] })), undefined, 'nothing pending, nothing approved');
});

t.test('a moved history says which approved migrations it now records, and which operation applied them', async (t) => {
  const THIS = 'sha256:1#this';
  const versions = Array.from({ length: 12 }, (_, i) => String(i + 1));
  const sources = versions.map((v) => source(v));
  const approved = sources.map((s) => ({ version: s.version, checksum: s.checksum }));
  /** The refusal of a run approved for `planned` on the empty history, now that `rows` are recorded. */
  const refusal = (rows: HistoryRow[], planned = approved.slice(0, 2)) => {
    try {
      refuseUnlessApproved(computeHistory(sources, { rows }), pendingSources(sources, { rows }), { planned, expectedFingerprint: historyFingerprint({ rows: [] }), operationId: THIS });
    } catch (err) {
      if (err instanceof ExecutorFailure) return { code: err.code, message: err.message };
      throw err;
    }
    throw new Error('not refused');
  };

  const rerun = refusal([row('1', { operationId: THIS }), row('2', { operationId: THIS })]);
  t.equal(rerun.code, 'history_moved', 'the code stays');
  t.equal(rerun.message, 'every approved migration (2: 1, 2) is already recorded as applied by this operation (sha256:1#this), by an earlier attempt ' +
    'of this same run, not by another run; none was run again and nothing was changed');

  const others = refusal([row('1', { operationId: 'op-a' }), row('2', { operationId: 'op-b' })]);
  t.equal(others.code, 'history_moved');
  t.match(others.message, /another run applied approved migration 1 \(operation op-a\) and 2 \(operation op-b\);/);
  t.notMatch(others.message, /this operation/);

  const halfway = refusal([row('1', { operationId: THIS })]);
  t.match(halfway.message, /approved migration 1 is already recorded as applied by this operation \(sha256:1#this\).*; approved migration 2 is not applied;/);
  t.match(halfway.message, /approve a new plan; nothing was changed$/);

  const many = refusal(versions.map((v) => row(v, { operationId: v === '12' ? 'op-b' : 'op-a' })), approved);
  t.match(many.message, /another run applied approved migration 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 \(operation op-a\) and 2 more;/, 'the first 10 are named');

  const unrelated = refusal([row('1', { operationId: 'op-a' })], approved.slice(1, 3));
  t.match(unrelated.message, /none of the approved migrations is recorded as applied/);
});

t.test('a refused apply reports the approved sequence it was given, or says it could not read it', async (t) => {
  const checksum = `sha256:${'c'.repeat(64)}`;
  const sequence = [{ version: '7', checksum }];
  const dir = artifact(t, { 'seq.json': JSON.stringify(sequence) });
  const env = (values: Partial<Record<keyof typeof EXECUTOR_ENV, string>>) =>
    Object.fromEntries(Object.entries(values).map(([key, value]) => [EXECUTOR_ENV[key as keyof typeof EXECUTOR_ENV], value]));
  const inputs = {
    dbUrl: 'postgresql://nobody@127.0.0.1:1/none', operationId: 'op', coordinationDigest: checksum, expectedHistoryFingerprint: checksum,
    expectedSequenceFile: join(dir, 'seq.json'), artifactDir: join(dir, 'no-such-artifact'),
  };
  const apply = async (values: Partial<Record<keyof typeof EXECUTOR_ENV, string>>) => (await runCommand('migration-apply', env(values))) as MigrationRunReport;

  const unreadableArtifact = await apply(inputs);
  t.equal(unreadableArtifact.error?.code, 'artifact_unreadable');
  t.equal(unreadableArtifact.outcome, 'failed');
  t.same(unreadableArtifact.applied, []);
  t.same(unreadableArtifact.planned, sequence, 'the approval it was given');

  const noOperation = await apply({ ...inputs, operationId: '' });
  t.equal(noOperation.error?.code, 'invalid_input');
  t.same(noOperation.planned, sequence);

  const unreadableSequence = await apply({ ...inputs, expectedSequenceFile: join(dir, 'missing.json') });
  t.equal(unreadableSequence.error?.code, 'invalid_input');
  t.match(unreadableSequence.error?.message, /cannot read the approved sequence/);
  t.same(unreadableSequence.planned, [], 'no approval could be read');
});

t.test('the approved sequence file must be a list of {version, checksum}', async (t) => {
  const file = (content: string) => {
    const dir = artifact(t, { 'seq.json': content });
    return join(dir, 'seq.json');
  };
  const checksum = 'sha256:' + 'c'.repeat(64);
  t.same(readApprovedSequence(file(JSON.stringify([{ version: '7', checksum }]))), [{ version: '7', checksum }]);
  for (const bad of ['not json', '{}', JSON.stringify([{ version: 7, checksum }]), JSON.stringify([{ version: '7', checksum: 'abc' }]), JSON.stringify([null])]) {
    t.equal(failureCode(() => readApprovedSequence(file(bad))), 'invalid_input', bad);
  }
  t.equal(failureCode(() => readApprovedSequence(join(tmpdir(), 'ptah-no-such-file.json'))), 'invalid_input', 'missing file');
});
