// The runner's checks before the executor starts, in process: inputs, protocol, preparation of verified copies,
// and the output helpers (bounded tail, redaction).
import t, { type Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { artifactDigest } from '../../src/shared/artifact.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { expectedSequenceDigest, RUNNER_ERROR } from '../../src/shared/runner-protocol.js';
import { BoundedTail } from '../../src/runner/bounded-tail.js';
import { checkProtocolVersion, parseUtcInstant, readInputs, type RunnerInputs } from '../../src/runner/contract.js';
import { prepareRun } from '../../src/runner/prepare.js';
import { REDACTED, Redactor, sanitizeText } from '../../src/runner/redact.js';
import { RunnerRefusal } from '../../src/runner/refusal.js';
import { ARTIFACT_FILES, mountConfigMap, OPERATION_ID, PLAN, PLAN_BYTES, PLAN_DIGEST, SEQUENCE, validEnv, workspace, type Workspace } from '../fixtures/runner/harness.js';

async function refusal(tt: Test, fn: () => unknown, code: string, what: string): Promise<void> {
  try {
    await fn();
    tt.fail(`${what}: expected a refusal`);
  } catch (error) {
    tt.equal(error instanceof RunnerRefusal ? error.code : String(error), code, what);
  }
}

t.test('inputs: what each operation requires, and their formats', async (t) => {
  const ws = await workspace(t);
  const cases: [string, 'observe' | 'apply' | 'migration-history' | 'migration-apply', (env: Record<string, string>) => void, string][] = [
    ['coordination digest missing', 'observe', (e) => void delete e.PTAH_COORDINATION_DIGEST, RUNNER_ERROR.missingInput],
    ['coordination digest malformed', 'observe', (e) => void (e.PTAH_COORDINATION_DIGEST = 'sha256:xyz'), RUNNER_ERROR.invalidInput],
    ['artifact digest missing', 'observe', (e) => void delete e.PTAH_EXPECTED_ARTIFACT_DIGEST, RUNNER_ERROR.missingInput],
    ['expected coordination missing for a mutating run', 'apply', (e) => void delete e.PTAH_EXPECTED_COORDINATION_DIGEST, RUNNER_ERROR.missingInput],
    ['dispatch deadline missing for a mutating run', 'migration-apply', (e) => void delete e.PTAH_DISPATCH_NOT_AFTER, RUNNER_ERROR.missingInput],
    ['execution deadline before dispatch', 'apply', (e) => void (e.PTAH_EXECUTION_NOT_AFTER = '2000-01-01T00:00:00Z'), RUNNER_ERROR.invalidInput],
    ['a deadline with an offset', 'apply', (e) => void (e.PTAH_EXECUTION_NOT_AFTER = '2999-01-01T00:00:00+00:00'), RUNNER_ERROR.invalidInput],
    ['grace missing for a mutating run', 'migration-apply', (e) => void delete e.PTAH_TERMINATION_GRACE_PERIOD_SECONDS, RUNNER_ERROR.missingInput],
    ['grace zero', 'apply', (e) => void (e.PTAH_TERMINATION_GRACE_PERIOD_SECONDS = '0'), RUNNER_ERROR.invalidInput],
    ['grace over 300', 'observe', (e) => void (e.PTAH_TERMINATION_GRACE_PERIOD_SECONDS = '301'), RUNNER_ERROR.invalidInput],
    ['plan digest missing', 'apply', (e) => void delete e.PTAH_EXPECTED_PLAN_CONTENT_DIGEST, RUNNER_ERROR.missingInput],
    ['sequence missing', 'migration-apply', (e) => void delete e.PTAH_EXPECTED_MIGRATION_SEQUENCE, RUNNER_ERROR.missingInput],
    ['history fingerprint missing', 'migration-apply', (e) => void delete e.PTAH_EXPECTED_HISTORY_FINGERPRINT, RUNNER_ERROR.missingInput],
    ['sequence digest malformed', 'migration-apply', (e) => void (e.PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST = 'x'), RUNNER_ERROR.invalidInput],
    ['a migration format no reader reads', 'migration-history', (e) => void (e.PTAH_MIGRATION_FORMAT = 'liquibase'), RUNNER_ERROR.invalidInput],
    ['a migration format spelled otherwise', 'migration-apply', (e) => void (e.PTAH_MIGRATION_FORMAT = 'Goose'), RUNNER_ERROR.invalidInput],
    ['an adoption that is not JSON', 'migration-history', (e) => void (e.PTAH_MIGRATION_ADOPTION = 'goose'), RUNNER_ERROR.invalidInput],
    ['an adoption from an unknown tool', 'migration-apply', (e) => void (e.PTAH_MIGRATION_ADOPTION = '{"from":"liquibase"}'), RUNNER_ERROR.invalidInput],
    ['a baseline without its version', 'migration-apply', (e) => void (e.PTAH_MIGRATION_ADOPTION = '{"from":"baseline"}'), RUNNER_ERROR.invalidInput],
    ['an adoption table that is not an identifier', 'migration-history', (e) => void (e.PTAH_MIGRATION_ADOPTION = '{"from":"goose","table":"x; DROP TABLE y"}'), RUNNER_ERROR.invalidInput],
    ...['5m', '0', '-1', '1.5', '0100', ' 100', '3600001', '99999999'].map((value): (typeof cases)[number] =>
      [`lock timeout ${JSON.stringify(value)}`, 'apply', (e) => void (e.PTAH_LOCK_TIMEOUT_MS = value), RUNNER_ERROR.invalidInput]),
  ];
  for (const [name, operation, change, code] of cases) {
    const env = validEnv(ws, operation);
    change(env);
    await refusal(t, () => readInputs(operation, OPERATION_ID, env), code, name);
  }
  const observe = validEnv(ws, 'observe');
  delete observe.PTAH_ARTIFACT_DIR;
  const inputs = readInputs('observe', OPERATION_ID, observe);
  t.equal(inputs.terminationGraceSeconds, 30, 'read-only runs default to 30 s of grace');
  t.equal(inputs.artifact?.dir, '/artifact', 'the artifact directory defaults to the Job\'s mount');
  t.equal(inputs.dispatchNotAfter, undefined, 'read-only runs need no deadline');
  const apply = readInputs('apply', OPERATION_ID, { ...validEnv(ws, 'apply'), PTAH_PLAN_DIR: '' });
  t.equal(apply.plan?.dir, '/plan');
  t.equal(apply.artifact, undefined, 'apply reads no artifact');
  t.equal(readInputs('observe', OPERATION_ID, { ...observe, PTAH_DEV_URL: 'postgresql://d/x' }).devUrl, undefined, 'only plan takes a scratch database');
  t.equal(apply.lockTimeoutMs, undefined, 'no lock timeout given: the executor\'s default applies');
  for (const [operation, value] of [['apply', '1'], ['migration-apply', '45000'], ['apply', '3600000']] as const) {
    t.equal(readInputs(operation, OPERATION_ID, { ...validEnv(ws, operation), PTAH_LOCK_TIMEOUT_MS: value }).lockTimeoutMs, Number(value), `${operation}: lock timeout ${value} ms`);
  }
  t.equal(readInputs('observe', OPERATION_ID, { ...observe, PTAH_LOCK_TIMEOUT_MS: '5m' }).lockTimeoutMs, undefined, 'a read-only run takes no realm lock, so neither reads nor checks its timeout');
  for (const operation of ['migration-history', 'migration-apply'] as const) {
    t.equal(readInputs(operation, OPERATION_ID, { ...validEnv(ws, operation), PTAH_MIGRATION_FORMAT: 'flyway' }).migrationFormat, 'flyway', `${operation}: the declared format`);
    t.equal(readInputs(operation, OPERATION_ID, validEnv(ws, operation)).migrationFormat, undefined, `${operation}: none declared, the executor's default`);
  }
  t.equal(readInputs('observe', OPERATION_ID, { ...observe, PTAH_MIGRATION_FORMAT: 'liquibase' }).migrationFormat, undefined, 'a schema run reads no migration format');
  for (const operation of ['migration-history', 'migration-apply'] as const) {
    t.equal(readInputs(operation, OPERATION_ID, { ...validEnv(ws, operation), PTAH_MIGRATION_ADOPTION: '{ "table": "t", "from": "dbmate" }' }).migrationAdoption,
      '{"from":"dbmate","table":"t"}', `${operation}: the declared adoption, passed on canonical`);
    t.equal(readInputs(operation, OPERATION_ID, validEnv(ws, operation)).migrationAdoption, undefined, `${operation}: none declared`);
  }
  t.equal(readInputs('observe', OPERATION_ID, { ...observe, PTAH_MIGRATION_ADOPTION: 'x' }).migrationAdoption, undefined, 'a schema run reads no adoption');
});

t.test('the protocol version is checked exactly', async (t) => {
  for (const value of [undefined, '', '0', '01', '1.0', ' 1', '2', '999999999999']) {
    await refusal(t, () => checkProtocolVersion({ PTAH_RUNNER_PROTOCOL_VERSION: value }), RUNNER_ERROR.protocolMismatch, `${JSON.stringify(value)}`);
  }
  t.doesNotThrow(() => checkProtocolVersion({ PTAH_RUNNER_PROTOCOL_VERSION: '1' }));
});

t.test('RFC 3339 UTC instants', async (t) => {
  t.equal(parseUtcInstant('2030-01-02T03:04:05Z'), Date.UTC(2030, 0, 2, 3, 4, 5));
  t.equal(parseUtcInstant('2030-01-02T03:04:05.123999999Z'), Date.UTC(2030, 0, 2, 3, 4, 5, 123), 'sub-millisecond digits only move it earlier');
  for (const bad of ['2030-02-30T00:00:00Z', '2030-01-02 03:04:05Z', '2030-01-02T03:04:05', '2030-01-02T03:04:05.Z', '2030-01-02T24:00:00Z']) {
    t.equal(parseUtcInstant(bad), undefined, bad);
  }
});

function inputsFor(ws: Workspace, operation: 'observe' | 'apply' | 'migration-apply', change: (env: Record<string, string>) => void = () => undefined): RunnerInputs {
  const env = validEnv(ws, operation);
  change(env);
  return readInputs(operation, OPERATION_ID, env);
}

t.test('preparation hands the executor verified private copies', async (t) => {
  const ws = await workspace(t);
  const applyRun = await prepareRun(inputsFor(ws, 'apply'), 1 << 20);
  t.equal(await readFile(applyRun.planFile!, 'utf8'), PLAN_BYTES.toString('utf8'));
  const migrationRun = await prepareRun(inputsFor(ws, 'migration-apply'), 1 << 20);
  t.strictSame(JSON.parse(await readFile(migrationRun.expectedSequenceFile!, 'utf8')), SEQUENCE);
  t.strictSame(migrationRun.sequence, SEQUENCE);
  t.strictSame(await readFile(join(migrationRun.artifactDir!, '0001_init.up.sql'), 'utf8'), ARTIFACT_FILES['0001_init.up.sql']);
  await migrationRun.cleanup();
  t.notOk(existsSync(migrationRun.workDir), 'cleanup removes the copies');
  await applyRun.cleanup();
});

t.test('the plan directory', async (t) => {
  const cases: [string, (ws: Workspace, env: Record<string, string>) => Promise<void>, string, number?][] = [
    ['chunks in the wrong order', async (ws) => {
      await rm(ws.planDir, { recursive: true });
      await mountConfigMap(ws.planDir, { '001.plan': PLAN_BYTES.subarray(0, 100), '000.plan': PLAN_BYTES.subarray(100) });
    }, RUNNER_ERROR.planDigestMismatch],
    ['an empty directory', async (ws) => {
      await rm(ws.planDir, { recursive: true });
      await mkdir(ws.planDir);
    }, RUNNER_ERROR.invalidPlan],
    ['a missing directory', async (ws) => void (await rm(ws.planDir, { recursive: true })), RUNNER_ERROR.invalidPlan],
    ['over the size bound', async () => undefined, RUNNER_ERROR.invalidPlan, 64],
    ['bytes that are not JSON', async (ws, env) => {
      await rm(ws.planDir, { recursive: true });
      await mountConfigMap(ws.planDir, { '000.plan': 'not json' });
      env.PTAH_EXPECTED_PLAN_CONTENT_DIGEST = sha256Digest('not json');
    }, RUNNER_ERROR.invalidPlan],
    ['JSON that is not a plan document', async (ws, env) => {
      await rm(ws.planDir, { recursive: true });
      await mountConfigMap(ws.planDir, { '000.plan': '{"formatVersion":1}' });
      env.PTAH_EXPECTED_PLAN_CONTENT_DIGEST = sha256Digest('{"formatVersion":1}');
    }, RUNNER_ERROR.invalidPlan],
    ['a plan that is not in canonical form', async (ws, env) => {
      const pretty = JSON.stringify(PLAN, null, 1);
      await rm(ws.planDir, { recursive: true });
      await mountConfigMap(ws.planDir, { '000.plan': pretty });
      env.PTAH_EXPECTED_PLAN_CONTENT_DIGEST = sha256Digest(pretty);
    }, RUNNER_ERROR.invalidPlan],
    ['a FIFO among the chunks', async (ws) => void execFileSync('mkfifo', [join(ws.planDir, '002.plan')]), RUNNER_ERROR.invalidPlan],
  ];
  for (const [name, setup, code, maxPlanBytes] of cases) {
    await t.test(name, async (tt) => {
      const ws = await workspace(tt);
      const env = validEnv(ws, 'apply');
      await setup(ws, env);
      await refusal(tt, () => prepareRun(readInputs('apply', OPERATION_ID, env), maxPlanBytes ?? 1 << 20), code, name);
    });
  }
  await t.test('dot-entries are not plan bytes', async (tt) => {
    const ws = await workspace(tt);
    await writeFile(join(ws.planDir, '.hidden'), 'junk');
    const prepared = await prepareRun(inputsFor(ws, 'apply'), 1 << 20);
    tt.equal(sha256Digest(await readFile(prepared.planFile!)), PLAN_DIGEST);
    await prepared.cleanup();
  });
});

t.test('the artifact directory', async (t) => {
  const outsideLink = async (ws: Workspace) => {
    await writeFile(join(ws.root, 'secret.txt'), 'x');
    await symlink(join(ws.root, 'secret.txt'), join(ws.artifactDir, 'escape.sql'));
  };
  const cases: [string, (ws: Workspace) => Promise<void>, string][] = [
    ['a symlink leaving the directory', outsideLink, RUNNER_ERROR.invalidArtifact],
    ['a relative symlink climbing out', async (ws) => {
      await writeFile(join(ws.root, 'up.sql'), 'x');
      await symlink('../up.sql', join(ws.artifactDir, 'up.sql'));
    }, RUNNER_ERROR.invalidArtifact],
    ['a subdirectory', async (ws) => void (await mkdir(join(ws.artifactDir, 'nested'))), RUNNER_ERROR.invalidArtifact],
    ['an extra file', async (ws) => void (await writeFile(join(ws.artifactDir, 'extra.sql'), '')), RUNNER_ERROR.artifactDigestMismatch],
  ];
  for (const [name, setup, code] of cases) {
    await t.test(name, async (tt) => {
      const ws = await workspace(tt);
      await setup(ws);
      await refusal(tt, () => prepareRun(inputsFor(ws, 'observe'), 1 << 20), code, name);
    });
  }
  await t.test('the same files laid out plainly give the same digest', async (tt) => {
    const ws = await workspace(tt);
    await rm(ws.artifactDir, { recursive: true });
    await mkdir(ws.artifactDir);
    for (const [name, text] of Object.entries(ARTIFACT_FILES)) await writeFile(join(ws.artifactDir, name), text);
    const prepared = await prepareRun(inputsFor(ws, 'observe'), 1 << 20);
    tt.ok(prepared.artifactDir);
    await prepared.cleanup();
  });
});

t.test('the approved migration sequence', async (t) => {
  const ws = await workspace(t);
  const cases: [string, unknown, string][] = [
    ['not JSON', '[', RUNNER_ERROR.invalidMigrationSequence],
    ['not a list', { version: '1', checksum: 'c' }, RUNNER_ERROR.invalidMigrationSequence],
    ['an extra field', [{ ...SEQUENCE[0], name: 'x' }], RUNNER_ERROR.invalidMigrationSequence],
    ['a version that is not digits', [{ version: 'v1', checksum: 'c' }], RUNNER_ERROR.invalidMigrationSequence],
    ['a repeated version', [SEQUENCE[0], SEQUENCE[0]], RUNNER_ERROR.invalidMigrationSequence],
    ['another order than approved', [SEQUENCE[1], SEQUENCE[0]], RUNNER_ERROR.migrationSequenceDigestMismatch],
    ['a repair that is no resolution', [{ ...SEQUENCE[0], repair: 'forced' }], RUNNER_ERROR.invalidMigrationSequence],
    ['a repair beside another entry', [{ ...SEQUENCE[0], repair: 'finished' }, SEQUENCE[1]], RUNNER_ERROR.invalidMigrationSequence],
    ['a repair where the approval holds the file', [{ ...SEQUENCE[0], repair: 'undone' }], RUNNER_ERROR.migrationSequenceDigestMismatch],
  ];
  for (const [name, sequence, code] of cases) {
    const inputs = inputsFor(ws, 'migration-apply', (env) => void (env.PTAH_EXPECTED_MIGRATION_SEQUENCE = typeof sequence === 'string' ? sequence : JSON.stringify(sequence)));
    await refusal(t, () => prepareRun(inputs, 1 << 20), code, name);
  }
  const spaced = inputsFor(ws, 'migration-apply', (env) => void (env.PTAH_EXPECTED_MIGRATION_SEQUENCE = JSON.stringify(SEQUENCE, null, 2)));
  const prepared = await prepareRun(spaced, 1 << 20);
  t.equal(expectedSequenceDigest(prepared.sequence!), spaced.migrationSequence?.expectedDigest, 'the digest is over the sequence, not its spelling');
  await prepared.cleanup();
  t.equal(artifactDigest(ARTIFACT_FILES), inputsFor(ws, 'migration-apply').artifact?.expectedDigest);

  // A repair sequence (spec.repair's plan) is its one entry with the resolution, bound by the digest like any other.
  const repairSequence = [{ ...SEQUENCE[0]!, repair: 'undone' as const }];
  const repairing = inputsFor(ws, 'migration-apply', (env) => {
    env.PTAH_EXPECTED_MIGRATION_SEQUENCE = JSON.stringify(repairSequence);
    env.PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST = expectedSequenceDigest(repairSequence);
  });
  const repair = await prepareRun(repairing, 1 << 20);
  t.strictSame(repair.sequence, repairSequence, 'a repair sequence is handed on with its resolution');
  t.strictSame(JSON.parse(await readFile(repair.expectedSequenceFile!, 'utf8')), repairSequence, 'and so is the executor\'s copy');
  t.not(expectedSequenceDigest(repairSequence), expectedSequenceDigest([SEQUENCE[0]!]), 'the resolution is part of the digest');
  await repair.cleanup();
});

t.test('preparation that cannot write its copies is refused', async (t) => {
  const ws = await workspace(t);
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = join(ws.terminationLog, 'not-a-directory');
  t.teardown(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  });
  await refusal(t, () => prepareRun(inputsFor(ws, 'observe'), 1 << 20), RUNNER_ERROR.preparationFailed, 'no work directory');
});

t.test('a bounded tail keeps the last bytes and counts the rest', async (t) => {
  const tail = new BoundedTail(10);
  for (const chunk of ['abcdef', 'ghij', 'klmnopqrstuvwxyz', '12']) tail.push(Buffer.from(chunk));
  t.equal(tail.bytes().toString(), 'stuvwxyz12');
  t.equal(tail.dropped, 18);
  const small = new BoundedTail(10);
  small.push(Buffer.from('abc'));
  t.equal(small.bytes().toString(), 'abc');
  t.equal(small.dropped, 0);
});

t.test('redaction', async (t) => {
  const redactor = new Redactor(['p@ss"word', 'postgresql://u:p@ss"word@h/db']);
  t.equal(redactor.redact('url postgresql://u:p@ss"word@h/db and p@ss"word'), `url ${REDACTED} and ${REDACTED}`, 'the URL goes whole');
  t.equal(redactor.redact('{"pw":"p@ss\\"word"}'), `{"pw":"${REDACTED}"}`, 'so does its JSON-escaped form');
  t.equal(redactor.redactTail('ss"word tail', true), `${REDACTED} tail`, 'the cut-off end of a secret at a tail\'s start');
  t.equal(redactor.redactTail('\uFFFDss"word tail', true), `${REDACTED} tail`, 'after a partial character');
  t.equal(redactor.redactTail('ss"word tail', false), 'ss"word tail', 'an uncut text has no cut-off secret');
  t.ok(redactor.holdsSecret('x p@ss"word x'));
  t.notOk(new Redactor(['short']).holdsSecret('a short word'), 'data is not checked for secrets that are ordinary words');
  t.equal(new Redactor(['short']).redact('a short word'), `a ${REDACTED} word`, 'free text is redacted for every secret');
  const text = sanitizeText('a\nb PTAH_RUNNER_SUMMARY_V1 PTAH_RUNNER_RESULT_END_V1 p@ss"word\t', redactor, { oneLine: true });
  t.equal(text, `a b PTAH-RUNNER-SUMMARY-V1 PTAH-RUNNER-RESULT-END-V1 ${REDACTED}`, 'one line, markers defused, redacted');
  t.equal(sanitizeText('x'.repeat(20), redactor, { oneLine: true, maxLength: 10 }), `${'x'.repeat(9)}…`, 'bounded');
  t.equal(sanitizeText(`${'y'.repeat(8)}\uD83D\uDE00z`, redactor, { oneLine: true, maxLength: 10 }), `${'y'.repeat(8)}\uFFFD…`, 'never half a surrogate pair');
});
