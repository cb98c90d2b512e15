// The real runner, run as a child process with fake executors (test/fixtures/runner/fake-executor.mjs): exit
// codes, stdout, stderr and the termination message are the ones a Pod would produce.
import t, { type Test } from 'tap';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { writeFile, symlink, rm, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { artifactDigest } from '../../src/shared/artifact.js';
import type { RunnerOperation } from '../../src/shared/runner-env.js';
import {
  FRAME_END_MARKER, FRAME_MARKER, parseResultFor, parseSummaryFor, RUNNER_ERROR, type RunnerResult,
} from '../../src/shared/runner-protocol.js';
import {
  ARTIFACT_FILES, COORDINATION, DB_URL, mountConfigMap, OPERATION_ID, PASSWORD, PLAN, PLAN_BYTES, PLAN_DIGEST, REPORTS,
  runRunner, SEQUENCE, TARGET, validEnv, workspace, type RunnerOutcome, type Scenario, type Workspace,
} from '../fixtures/runner/harness.js';

const past = () => new Date(Date.now() - 60_000).toISOString();
const other = (c: string) => `sha256:${c.repeat(64)}`;

function frameOf<O extends RunnerOperation>(outcome: RunnerOutcome, operation: O): RunnerResult<O> {
  return parseResultFor(outcome.log ?? outcome.stdout, operation, OPERATION_ID);
}

/** Every run that frames: exit 0, the frame is stdout's last write, and the summary names that frame. */
function framed<O extends RunnerOperation>(tt: Test, outcome: RunnerOutcome, operation: O): RunnerResult<O> {
  tt.equal(outcome.code, 0, 'the runner exits 0 after framing');
  tt.ok(outcome.stdout.endsWith(`${FRAME_END_MARKER}\n`), 'the frame is the last thing on stdout');
  tt.equal(outcome.stdout.split(FRAME_MARKER).length, 2, 'stdout holds exactly one frame');
  const result = frameOf(outcome, operation);
  const summary = parseSummaryFor(outcome.termination, operation, OPERATION_ID);
  const header = /PTAH_RUNNER_RESULT_V1 \d+ ([0-9a-f]{64})/.exec(outcome.stdout);
  tt.equal(summary.frameDigest, `sha256:${header?.[1]}`, 'the summary names the frame by its digest');
  tt.equal(summary.errorCode, result.error?.code, 'the summary carries the frame\'s error code');
  tt.equal(summary.mutationStarted, result.mutationStarted);
  tt.equal(summary.uncertain, result.uncertain);
  return result;
}

interface RefusalCase {
  name: string;
  operation: Exclude<RunnerOperation, 'resolve'>;
  code: string;
  change: (env: Record<string, string>, ws: Workspace) => void | Promise<void>;
  args?: string[];
  check?: (tt: Test, result: RunnerResult, outcome: RunnerOutcome) => void;
}

const refusals: RefusalCase[] = [
  {
    name: 'protocol version missing', operation: 'apply', code: RUNNER_ERROR.protocolMismatch,
    change: (env) => void delete env.PTAH_RUNNER_PROTOCOL_VERSION,
    check: (tt, result) => tt.same(Object.keys(result).sort(), ['childExitCode', 'error', 'operation', 'operationId', 'protocolVersion'], 'the cross-version refusal has its one fixed shape'),
  },
  { name: 'protocol version of another runner', operation: 'observe', code: RUNNER_ERROR.protocolMismatch, change: (env) => void (env.PTAH_RUNNER_PROTOCOL_VERSION = '2') },
  {
    name: 'executor identity missing', operation: 'migration-apply', code: RUNNER_ERROR.executorIdentityMismatch,
    change: (env) => void delete env.PTAH_EXECUTOR_IDENTITY,
    check: (tt, result) => {
      tt.match(result.error?.message, /PTAH_EXECUTOR_IDENTITY is not set/);
      tt.match(result, { mutationStarted: false, uncertain: false, childExitCode: -1 }, 'nothing was started');
    },
  },
  {
    name: 'another executor than this image carries', operation: 'apply', code: RUNNER_ERROR.executorIdentityMismatch,
    change: (env) => void (env.PTAH_EXECUTOR_IDENTITY = other('e')),
    check: (tt, result) => {
      tt.match(result.error?.message, new RegExp(`names executor ${other('e')}, but this image carries ${ownExecutorIdentity()}; nothing was run`));
      tt.match(result, { mutationStarted: false, uncertain: false, childExitCode: -1 }, 'nothing was started');
    },
  },
  { name: 'database URL missing', operation: 'observe', code: RUNNER_ERROR.missingInput, change: (env) => void delete env.PTAH_DB_URL },
  { name: 'expected target identity missing for apply', operation: 'apply', code: RUNNER_ERROR.missingInput, change: (env) => void delete env.PTAH_EXPECTED_TARGET_IDENTITY_DIGEST },
  {
    name: 'lock timeout not whole milliseconds', operation: 'migration-apply', code: RUNNER_ERROR.invalidInput,
    change: (env) => void (env.PTAH_LOCK_TIMEOUT_MS = '5m'),
    check: (tt, result) => tt.match(result.error?.message, /PTAH_LOCK_TIMEOUT_MS must be a whole number of milliseconds from 1 to 3600000/),
  },
  { name: 'deadline not RFC 3339 UTC', operation: 'apply', code: RUNNER_ERROR.invalidInput, change: (env) => void (env.PTAH_DISPATCH_NOT_AFTER = '2030-01-01T00:00:00+01:00') },
  {
    name: 'database URL naming two hosts', operation: 'observe', code: RUNNER_ERROR.invalidTarget,
    change: (env) => void (env.PTAH_DB_URL = `postgresql://app:${encodeURIComponent(PASSWORD)}@h1:5432,h2:5432/app`),
    check: (tt, result) => tt.match(result.error?.message, /more than one host/),
  },
  {
    name: 'coordination binding', operation: 'apply', code: RUNNER_ERROR.coordinationBindingMismatch,
    change: (env) => void (env.PTAH_EXPECTED_COORDINATION_DIGEST = other('b')),
    check: (tt, result) => tt.equal(result.coordinationDigest, COORDINATION, 'the frame still echoes the realm it was given'),
  },
  {
    name: 'target binding', operation: 'migration-apply', code: RUNNER_ERROR.targetBindingMismatch,
    change: (env) => void (env.PTAH_EXPECTED_TARGET_IDENTITY_DIGEST = other('b')),
    check: (tt, result) => tt.equal(result.targetIdentityDigest, TARGET, 'the frame says which database the URL names'),
  },
  {
    name: 'target binding of a read-only run, when given', operation: 'observe', code: RUNNER_ERROR.targetBindingMismatch,
    change: (env) => void (env.PTAH_EXPECTED_TARGET_IDENTITY_DIGEST = other('b')),
  },
  {
    name: 'dispatch deadline passed', operation: 'apply', code: RUNNER_ERROR.dispatchDeadlineExpired,
    change: (env) => {
      env.PTAH_DISPATCH_NOT_AFTER = past();
      env.PTAH_EXECUTION_NOT_AFTER = past();
    },
    check: (tt, result) => tt.match(result.error?.message, /before preparing/),
  },
  {
    name: 'execution deadline passed', operation: 'observe', code: RUNNER_ERROR.executionDeadlineExpired,
    change: (env) => void (env.PTAH_EXECUTION_NOT_AFTER = past()),
  },
  {
    name: 'plan bytes not the approved plan', operation: 'apply', code: RUNNER_ERROR.planDigestMismatch,
    change: (env) => void (env.PTAH_EXPECTED_PLAN_CONTENT_DIGEST = other('9')),
  },
  {
    name: 'plan file linking outside its directory', operation: 'apply', code: RUNNER_ERROR.invalidPlan,
    change: async (_env, ws) => {
      await writeFile(join(ws.root, 'outside.plan'), 'x');
      await symlink(join(ws.root, 'outside.plan'), join(ws.planDir, '002.plan'));
    },
    check: (tt, result) => tt.match(result.error?.message, /links outside/),
  },
  {
    name: 'artifact files not the pinned artifact', operation: 'migration-history', code: RUNNER_ERROR.artifactDigestMismatch,
    change: (env) => void (env.PTAH_EXPECTED_ARTIFACT_DIGEST = artifactDigest({ ...ARTIFACT_FILES, 'extra.sql': '' })),
  },
  {
    name: 'migration sequence not the approved one', operation: 'migration-apply', code: RUNNER_ERROR.migrationSequenceDigestMismatch,
    change: (env) => void (env.PTAH_EXPECTED_MIGRATION_SEQUENCE = JSON.stringify(SEQUENCE.slice(0, 1))),
  },
  {
    name: 'a deadline passing between preparation and the start', operation: 'apply', code: RUNNER_ERROR.dispatchDeadlineExpired,
    change: (env) => {
      env.PTAH_RUNNER_TEST_HOOKS = '1';
      env.PTAH_RUNNER_TEST_CLOCK_BEFORE_EXEC = new Date(Date.parse(env.PTAH_DISPATCH_NOT_AFTER) + 1000).toISOString();
    },
    check: (tt, result) => tt.match(result.error?.message, /immediately before starting the executor/, 'refused by the second check, not the first'),
  },
  {
    name: 'a stop request during preparation', operation: 'migration-apply', code: RUNNER_ERROR.runnerTerminated,
    change: (env) => {
      env.PTAH_RUNNER_TEST_HOOKS = '1';
      env.PTAH_RUNNER_TEST_SIGTERM_BEFORE_EXEC = '1';
    },
  },
];

t.test('every refusal is framed before the executor starts', async (t) => {
  for (const c of refusals) {
    await t.test(c.name, async (tt) => {
      const ws = await workspace(tt);
      const env = validEnv(ws, c.operation);
      await c.change(env, ws);
      const outcome = await runRunner(ws, { operation: c.operation, env, args: c.args, scenario: { report: REPORTS[c.operation] } });
      const result = framed(tt, outcome, c.operation);
      tt.equal(result.error?.code, c.code);
      tt.equal(result.childExitCode, -1);
      tt.notOk(outcome.executorStarted, 'the executor never ran');
      tt.notOk(result.mutationStarted);
      tt.notOk(result.uncertain);
      tt.match(outcome.stderr, new RegExp(`refused \\(${c.code}\\)`), 'the refusal is on stderr too');
      c.check?.(tt, result, outcome);
    });
  }
});

t.test('test hooks are inert unless enabled', async (t) => {
  const ws = await workspace(t);
  const env = validEnv(ws, 'apply');
  env.PTAH_RUNNER_TEST_CLOCK_BEFORE_EXEC = new Date(Date.parse(env.PTAH_DISPATCH_NOT_AFTER) + 1000).toISOString();
  env.PTAH_RUNNER_TEST_SIGTERM_BEFORE_EXEC = '1';
  const result = framed(t, await runRunner(ws, { operation: 'apply', env, scenario: { report: REPORTS.apply } }), 'apply');
  t.equal(result.error, undefined);
});

t.test('nothing is framable without a usable operation ID or operation', async (t) => {
  const ws = await workspace(t);
  const env = validEnv(ws, 'observe');
  for (const [name, change, rawArgs] of [
    ['no operation ID', (e: Record<string, string>) => void delete e.PTAH_OPERATION_ID, undefined],
    ['an unknown operation', () => undefined, ['--operation', 'migrate']],
    ['an unknown flag', () => undefined, ['--operation', 'observe', '--shell', 'sh']],
  ] as const) {
    const e = { ...env };
    change(e);
    const outcome = await runRunner(ws, { env: e, rawArgs: rawArgs ? [...rawArgs] : undefined, scenario: { report: REPORTS.observe } });
    t.equal(outcome.code, 2, `${name}: exit 2`);
    t.equal(outcome.stdout, '', `${name}: no frame`);
  }
});

t.test('a successful run per operation carries the executor report and keeps the executor to its inputs', async (t) => {
  for (const operation of ['observe', 'plan', 'apply', 'migration-history', 'migration-apply'] as const) {
    await t.test(operation, async (tt) => {
      const ws = await workspace(tt);
      const env = { ...validEnv(ws, operation), PTAH_DEV_URL: 'postgresql://dev:devpw@dev.internal/scratch', PTAH_LOCK_TIMEOUT_MS: '5000', PTAH_MIGRATION_FORMAT: 'goose',
        PTAH_MIGRATION_ADOPTION: '{"from":"goose"}' };
      const outcome = await runRunner(ws, { operation, env, scenario: { report: REPORTS[operation] } });
      const result = framed(tt, outcome, operation);
      tt.equal(result.error, undefined);
      tt.equal(result.childExitCode, 0);
      tt.equal(result.coordinationDigest, COORDINATION);
      tt.equal(result.targetIdentityDigest, TARGET);
      const invocation = outcome.invocation!;
      tt.same(invocation.argv, [operation], 'the executor is told its operation');
      const allowed = ['PATH', 'HOME', 'TMPDIR', 'PTAH_DB_URL', 'PTAH_OPERATION_ID', 'PTAH_COORDINATION_DIGEST', 'PTAH_ARTIFACT_DIR', 'PTAH_PLAN_FILE',
        'PTAH_EXPECTED_SEQUENCE_FILE', 'PTAH_EXPECTED_HISTORY_FINGERPRINT', 'PTAH_LOCK_TIMEOUT_MS', 'PTAH_DEV_URL', 'PTAH_MIGRATION_FORMAT', 'PTAH_MIGRATION_ADOPTION'];
      // tap's process tracking injects its own variables into every process it sees spawned; they are not the runner's.
      const injectedByTap = (k: string) => k.startsWith('_TAPJS_') || (k === 'NODE_OPTIONS' && invocation.env[k].includes('@tapjs/processinfo'));
      tt.same(Object.keys(invocation.env).filter((k) => !allowed.includes(k) && !injectedByTap(k)), [], 'no runner-only variable reaches the executor');
      tt.equal(invocation.env.PTAH_DEV_URL !== undefined, operation === 'plan', 'only plan gets the scratch database');
      const takesRealmLock = operation === 'apply' || operation === 'migration-apply';
      tt.equal(invocation.env.PTAH_LOCK_TIMEOUT_MS, takesRealmLock ? '5000' : undefined, 'only the runs that take the realm lock get its timeout');
      tt.equal(invocation.env.PTAH_ARTIFACT_DIR !== undefined, operation !== 'apply', 'apply runs the plan alone');
      tt.equal(invocation.env.PTAH_MIGRATION_FORMAT, operation.startsWith('migration-') ? 'goose' : undefined, 'only the migration runs get the directory format');
      tt.equal(invocation.env.PTAH_MIGRATION_ADOPTION, operation.startsWith('migration-') ? '{"from":"goose"}' : undefined, 'only the migration runs get the adoption');
      if (invocation.env.PTAH_ARTIFACT_DIR) tt.not(invocation.env.PTAH_ARTIFACT_DIR, ws.artifactDir, 'the executor reads a verified private copy');
      switch (result.operation) {
        case 'observe':
          tt.strictSame(result, {
            protocolVersion: 1, operation, operationId: OPERATION_ID, childExitCode: 0, coordinationDigest: COORDINATION, targetIdentityDigest: TARGET,
            dialect: 'postgresql', drift: true, driftDigest: REPORTS.observe.driftDigest, findings: REPORTS.observe.findings,
            actualStateFingerprint: REPORTS.observe.actualStateFingerprint,
          }, 'the frame is exactly the report\'s content and the bindings');
          break;
        case 'plan':
          tt.equal(result.planOutcome, 'Changes');
          tt.same(result.plan, PLAN);
          tt.equal(result.planContentDigest, PLAN_DIGEST);
          break;
        case 'apply':
          tt.equal(invocation.files.PTAH_PLAN_FILE, PLAN_BYTES.toString('utf8'), 'the executor gets the verified plan bytes');
          tt.equal(result.mutationStarted, true);
          tt.equal(result.uncertain, false);
          tt.equal(result.statementsExecuted, 2);
          break;
        case 'migration-history':
          tt.same(result.migrationHistory, (REPORTS['migration-history'] as { history: unknown }).history);
          break;
        case 'migration-apply': {
          tt.same(JSON.parse(invocation.files.PTAH_EXPECTED_SEQUENCE_FILE), SEQUENCE, 'the executor is held to the approved sequence');
          tt.equal(result.mutationStarted, true);
          tt.equal(result.uncertain, false);
          tt.equal(result.migrationRun?.outcome, 'applied');
          const summary = parseSummaryFor(outcome.termination, operation, OPERATION_ID);
          tt.same(summary.migration, { outcome: 'applied', appliedCount: 2, firstApplied: '0001', lastApplied: '0002' });
          break;
        }
      }
    });
  }
});

interface AfterStartCase {
  name: string;
  operation: RunnerOperation;
  scenario: Scenario;
  args?: string[];
  expect: Partial<Record<'code' | 'childExitCode' | 'mutationStarted' | 'uncertain', unknown>>;
  check?: (tt: Test, result: RunnerResult, outcome: RunnerOutcome) => void;
}

const migrationReport = (outcome: string, applied: number, error?: { code: string; message: string }) => ({
  command: 'migration-apply', outcome, planned: SEQUENCE, ...(error ? { error } : {}),
  applied: SEQUENCE.slice(0, applied).map((s, i) => ({ ...s, name: Object.keys(ARTIFACT_FILES)[i] })),
});

const afterStart: AfterStartCase[] = [
  {
    name: 'a schema apply error is uncertain', operation: 'apply',
    scenario: { report: { command: 'apply', outcome: 'failed', error: { code: 'statement_failed', message: 'relation exists' }, planContentDigest: PLAN_DIGEST, statementsExecuted: 0 }, exitCode: 1 },
    expect: { code: 'statement_failed', childExitCode: 1, mutationStarted: true, uncertain: true },
  },
  {
    name: 'a read-only error carries no content and no flags', operation: 'observe',
    scenario: { report: { command: 'observe', error: { code: 'connection_failed', message: 'no route' } }, exitCode: 1 },
    expect: { code: 'connection_failed', childExitCode: 1, mutationStarted: undefined, uncertain: undefined },
  },
  {
    name: 'an executor killed by a signal (schema apply)', operation: 'apply',
    scenario: { killSelf: 'SIGKILL' },
    expect: { code: RUNNER_ERROR.executorKilled, childExitCode: 137, mutationStarted: true, uncertain: true },
  },
  {
    name: 'an executor killed by a signal after a migration report: the report decides', operation: 'migration-apply',
    scenario: { report: migrationReport('applied', 2), killSelf: 'SIGKILL' },
    expect: { code: undefined, childExitCode: 137, mutationStarted: true, uncertain: false },
  },
  {
    name: 'a result too large for any frame is replaced by one that says so', operation: 'migration-history',
    scenario: {
      report: {
        command: 'migration-history',
        history: {
          applied: [], dirty: [], modified: [], outOfOrder: [], missing: [], fingerprint: `sha256:${'f'.repeat(64)}`,
          pending: Array.from({ length: 120_000 }, (_, i) => ({ version: String(i + 1), name: `${'n'.repeat(60)}.up.sql`, checksum: `sha256:${'1'.repeat(64)}` })),
        },
      },
    },
    expect: { code: RUNNER_ERROR.resultTooLarge, childExitCode: 0 },
    check: (tt, result) => tt.equal(result.operation === 'migration-history' && result.migrationHistory, undefined, 'the fallback carries no content'),
  },
  {
    name: 'megabytes on stderr: a bounded tail, the frame still parsed', operation: 'observe',
    scenario: { floodStderrBytes: 3 * 1024 * 1024, report: REPORTS.observe },
    expect: { code: undefined, childExitCode: 0 },
    check: (tt, result, outcome) => {
      tt.equal(result.truncation?.stderr, true);
      tt.ok((result.truncation?.stderrBytesDropped ?? 0) >= 3 * 1024 * 1024 - 64 * 1024, 'the dropped bytes are counted');
      tt.ok(outcome.stderr.length < 200 * 1024, 'the log holds only the tail');
    },
  },
  {
    name: 'megabytes on stdout: the report is cut off, the frame still parsed', operation: 'apply', args: ['--max-report-bytes', '1048576'],
    scenario: { floodStdoutBytes: 3 * 1024 * 1024, report: REPORTS.apply },
    expect: { code: RUNNER_ERROR.reportTruncated, mutationStarted: true, uncertain: true },
    check: (tt, result, outcome) => {
      tt.equal(result.truncation?.stdout, true);
      tt.ok((result.truncation?.stdoutBytesDropped ?? 0) >= 2 * 1024 * 1024);
      tt.ok(outcome.stdout.length < 64 * 1024, 'the executor\'s stdout is never copied to the log');
    },
  },
];

t.test('what the executor did decides the frame', async (t) => {
  for (const c of afterStart) {
    await t.test(c.name, async (tt) => {
      const ws = await workspace(tt);
      const outcome = await runRunner(ws, { operation: c.operation, env: validEnv(ws, c.operation), args: c.args, scenario: c.scenario });
      const result = framed(tt, outcome, c.operation);
      tt.ok(outcome.executorStarted);
      tt.equal(result.error?.code, c.expect.code, 'error code');
      for (const key of ['childExitCode', 'mutationStarted', 'uncertain'] as const) {
        if (key in c.expect) tt.equal(result[key], c.expect[key], key);
      }
      c.check?.(tt, result, outcome);
    });
  }
});

t.test('SIGTERM mid-run: the executor gets SIGTERM, then SIGKILL, and the frame is still written', async (t) => {
  const ws = await workspace(t);
  const env = validEnv(ws, 'apply');
  env.PTAH_TERMINATION_GRACE_PERIOD_SECONDS = '2';
  const outcome = await runRunner(ws, {
    operation: 'apply', env, scenario: { onSigterm: 'ignore', hang: true },
    whileExecutorRuns: async (runner) => {
      runner.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 300));
      runner.kill('SIGTERM');
      runner.kill('SIGINT');
    },
  });
  const result = framed(t, outcome, 'apply');
  t.ok(outcome.executorGotSigterm, 'the executor was asked to stop');
  t.equal(result.childExitCode, 137, 'it ignored SIGTERM and was killed');
  t.equal(result.error?.code, RUNNER_ERROR.runnerTerminated);
  t.equal(result.mutationStarted, true);
  t.equal(result.uncertain, true);
});

t.test('the execution deadline stops the executor; a migration report written on the way out still decides', async (t) => {
  for (const [name, scenario, expect] of [
    ['rolled back on SIGTERM', { onSigterm: 'report', hang: true, sigtermReport: migrationReport('failed', 0, { code: 'canceled', message: 'canceled by signal' }) },
      { code: 'canceled', mutationStarted: false, uncertain: false, childExitCode: 1 }],
    ['ignored SIGTERM and was killed', { onSigterm: 'ignore', hang: true },
      { code: RUNNER_ERROR.executionDeadlineReached, mutationStarted: true, uncertain: true, childExitCode: 137 }],
  ] as const) {
    await t.test(name, async (tt) => {
      const ws = await workspace(tt);
      const env = validEnv(ws, 'migration-apply');
      env.PTAH_TERMINATION_GRACE_PERIOD_SECONDS = '1';
      env.PTAH_RUNNER_TEST_HOOKS = '1';
      // The runner's clock reads five seconds before the deadline when the executor starts: the fake executor must
      // have its SIGTERM handler in place when the deadline comes, or SIGTERM's default action ends it (143) and
      // neither scenario is what runs. With one second, a CI run under load started node too slowly for that.
      env.PTAH_RUNNER_TEST_CLOCK_BEFORE_EXEC = new Date(Date.parse(env.PTAH_EXECUTION_NOT_AFTER) - 5000).toISOString();
      const outcome = await runRunner(ws, { operation: 'migration-apply', env, scenario: { ...scenario } as Scenario });
      const result = framed(tt, outcome, 'migration-apply');
      tt.ok(outcome.executorGotSigterm, 'the executor got SIGTERM at the deadline');
      tt.equal(result.error?.code, expect.code);
      tt.equal(result.mutationStarted, expect.mutationStarted);
      tt.equal(result.uncertain, expect.uncertain);
      tt.equal(result.childExitCode, expect.childExitCode);
      if (expect.code === 'canceled') tt.match(result.error?.message, /execution deadline/);
    });
  }
});

t.test('stderr interleaved with stdout in one log: parseResultFor still finds the frame', async (t) => {
  const ws = await workspace(t);
  const outcome = await runRunner(ws, {
    operation: 'plan', env: validEnv(ws, 'plan'), combined: true,
    scenario: { stderr: 'warning: one\nwarning: two\n', report: REPORTS.plan },
  });
  t.equal(outcome.code, 0);
  t.match(outcome.log, /warning: two/, 'the log holds the executor\'s stderr');
  t.match(outcome.log, /ptah-runner: /, 'and the runner\'s diagnostics');
  const result = frameOf(outcome, 'plan');
  t.equal(result.planContentDigest, PLAN_DIGEST);
});

t.test('no credential reaches the frame, the log or the summary, even when the executor prints it', async (t) => {
  const leaks = [DB_URL, PASSWORD, encodeURIComponent(PASSWORD)];
  const noLeak = (tt: Test, outcome: RunnerOutcome) => {
    for (const [where, text] of [['stdout', outcome.stdout], ['stderr', outcome.stderr], ['summary', outcome.termination]] as const) {
      for (const secret of leaks) tt.notOk(text.includes(secret), `${where} does not hold ${secret === DB_URL ? 'the URL' : 'the password'}`);
    }
  };
  await t.test('in its error message and on stderr', async (tt) => {
    const ws = await workspace(tt);
    const outcome = await runRunner(ws, {
      operation: 'apply', env: validEnv(ws, 'apply'),
      scenario: {
        stderr: 'dialing ${PTAH_DB_URL}\n{"url":"${PTAH_DB_URL}"}\n',
        report: { command: 'apply', outcome: 'failed', statementsExecuted: 0, error: { code: 'connection_failed', message: 'could not connect to ${PTAH_DB_URL} as app' } },
        exitCode: 1,
      },
    });
    const result = framed(tt, outcome, 'apply');
    tt.equal(result.error?.code, 'connection_failed');
    tt.match(result.error?.message, /could not connect to \[REDACTED\] as app/);
    tt.match(outcome.stderr, /dialing \[REDACTED\]/);
    tt.ok(outcome.invocation?.env.PTAH_DB_URL === DB_URL, 'the executor did get the URL (so it really printed it)');
    noLeak(tt, outcome);
  });
  await t.test('in report data', async (tt) => {
    const ws = await workspace(tt);
    const report = { ...REPORTS['migration-history'] } as { history: { pending: { name: string }[] } };
    const leaking = structuredClone(report);
    leaking.history.pending[0].name = 'x-${PTAH_DB_URL}';
    const outcome = await runRunner(ws, { operation: 'migration-history', env: validEnv(ws, 'migration-history'), scenario: { report: leaking } });
    const result = framed(tt, outcome, 'migration-history');
    tt.equal(result.error?.code, RUNNER_ERROR.reportContainsSecret);
    tt.equal(result.migrationHistory, undefined);
    noLeak(tt, outcome);
  });
  await t.test('in a refusal', async (tt) => {
    const ws = await workspace(tt);
    const env = validEnv(ws, 'observe');
    env.PTAH_DB_URL = `postgresql://app:${encodeURIComponent(PASSWORD)}@h1,h2/app`;
    const outcome = await runRunner(ws, { operation: 'observe', env });
    framed(tt, outcome, 'observe');
    for (const text of [outcome.stdout, outcome.stderr, outcome.termination]) tt.notOk(text.includes(PASSWORD) || text.includes(encodeURIComponent(PASSWORD)));
  });
});

t.test('a missing termination-message file is noted and skipped; the frame is still written', async (t) => {
  const ws = await workspace(t);
  const env = { ...validEnv(ws, 'observe'), PTAH_TERMINATION_MESSAGE_PATH: join(ws.root, 'no-such-file') };
  const outcome = await runRunner(ws, { operation: 'observe', env, scenario: { report: REPORTS.observe } });
  t.equal(outcome.code, 0);
  t.equal(frameOf(outcome, 'observe').error, undefined);
  t.match(outcome.stderr, /no-such-file does not exist; no termination summary written/);
});
