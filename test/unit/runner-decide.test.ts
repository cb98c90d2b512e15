// decideRun over synthetic executor runs: every way a run can end maps to the frame fields the protocol
// prescribes, and every decision makes a result the protocol accepts.
import t from 'tap';
import { digest } from '../../src/shared/canonical.js';
import type { RunnerOperation } from '../../src/shared/runner-env.js';
import { resultProblem, RUNNER_ERROR, RUNNER_PROTOCOL_VERSION, type RunnerResult } from '../../src/shared/runner-protocol.js';
import { BoundedTail } from '../../src/runner/bounded-tail.js';
import type { RunnerInputs } from '../../src/runner/contract.js';
import { decideRun, type RunDecision } from '../../src/runner/decide.js';
import type { ExecutorRun } from '../../src/runner/executor-process.js';
import { Redactor } from '../../src/runner/redact.js';
import { ARTIFACT_FILES, COORDINATION, DB_URL, OPERATION_ID, PASSWORD, PLAN, PLAN_DIGEST, REPORTS, SEQUENCE, TARGET } from '../fixtures/runner/harness.js';
import { databaseUrlSecrets } from '../../src/shared/target-identity.js';

const MAX_REPORT = 64 * 1024;

function run(report: unknown, exit: Partial<Pick<ExecutorRun, 'exitCode' | 'signal' | 'stoppedBy' | 'started'>> = {}, stdoutOverride?: string): ExecutorRun {
  const stdout = new BoundedTail(MAX_REPORT);
  stdout.push(Buffer.from(stdoutOverride ?? (report === undefined ? '' : JSON.stringify(report))));
  return { started: true, exitCode: 0, signal: null, stdout, stderr: new BoundedTail(1024), ...exit };
}

function decide(operation: RunnerOperation, executorRun: ExecutorRun, maxPlanBytes = 1 << 20, secrets = databaseUrlSecrets(DB_URL)): RunDecision {
  const inputs = { operation, operationId: OPERATION_ID, plan: { dir: '/plan', expectedDigest: PLAN_DIGEST } } as RunnerInputs;
  return decideRun(executorRun, { inputs, sequence: SEQUENCE, redactor: new Redactor(secrets), maxPlanBytes, maxReportBytes: MAX_REPORT });
}

/** The frame the runner would write for this decision. */
function asResult(operation: RunnerOperation, decision: RunDecision): RunnerResult {
  const { notes: _notes, content, ...fields } = decision;
  return {
    protocolVersion: RUNNER_PROTOCOL_VERSION, operation, operationId: OPERATION_ID, coordinationDigest: COORDINATION, targetIdentityDigest: TARGET,
    ...fields, ...content,
  } as unknown as RunnerResult;
}

const migration = (outcome: string, applied: number, error?: { code: string; message: string }, planned = SEQUENCE) => ({
  command: 'migration-apply', outcome, planned, ...(error ? { error } : {}),
  applied: SEQUENCE.slice(0, applied).map((s, i) => ({ ...s, name: Object.keys(ARTIFACT_FILES)[i] })),
});
const failure = { code: 'statement_failed', message: 'boom' };
// The executor's refusal when another realm holds the database writer lock: made before any write.
const heldByOtherRealm = { code: 'database_held_by_other_realm', message: `the realm with coordination digest sha256:${'b'.repeat(64)} is writing` };
const identity = { physicalIdentityDigest: `sha256:${'7'.repeat(64)}`, physicalIdentityKind: 'system-identifier' };
const refusedApply = { command: 'apply', outcome: 'failed', statementsExecuted: 0, error: heldByOtherRealm, ...identity };

interface Case {
  name: string;
  operation: RunnerOperation;
  run: ExecutorRun;
  maxPlanBytes?: number;
  secrets?: string[];
  code: string | undefined;
  flags?: [boolean | undefined, boolean | undefined];
  childExitCode?: number;
  content?: string[];
}

const cases: Case[] = [
  { name: 'a successful observe', operation: 'observe', run: run(REPORTS.observe), code: undefined, flags: [undefined, undefined], content: ['dialect', 'drift', 'driftDigest', 'findings', 'actualStateFingerprint'] },
  { name: 'an observe error', operation: 'observe', run: run({ command: 'observe', error: failure }, { exitCode: 1 }), code: 'statement_failed', content: [] },
  { name: 'exit 0 with an error in the report', operation: 'observe', run: run({ command: 'observe', error: failure }), code: RUNNER_ERROR.invalidReport },
  { name: 'exit 1 without an error in the report', operation: 'plan', run: run(REPORTS.plan, { exitCode: 1 }), code: RUNNER_ERROR.invalidReport },
  { name: 'exit 2: no report expected', operation: 'plan', run: run(REPORTS.plan, { exitCode: 2 }), code: RUNNER_ERROR.executorFailed, childExitCode: 2 },
  { name: 'no report at all', operation: 'migration-history', run: run(undefined), code: RUNNER_ERROR.invalidReport },
  { name: 'a report that is not JSON', operation: 'migration-history', run: run(undefined, {}, '{"command":'), code: RUNNER_ERROR.invalidReport },
  { name: 'a report for another command', operation: 'observe', run: run(REPORTS.plan), code: RUNNER_ERROR.invalidReport },
  { name: 'an observe report missing a field', operation: 'observe', run: run({ ...REPORTS.observe, driftDigest: undefined }), code: RUNNER_ERROR.invalidReport },
  { name: 'a plan over the plan bound', operation: 'plan', run: run(REPORTS.plan), maxPlanBytes: 64, code: RUNNER_ERROR.planTooLarge, content: [] },
  { name: 'a plan whose digest is not its content', operation: 'plan', run: run({ ...REPORTS.plan, planContentDigest: digest({}) }), code: RUNNER_ERROR.invalidReport },
  { name: 'a NoChanges plan', operation: 'plan', run: run({ command: 'plan', outcome: 'NoChanges', actualStateFingerprint: PLAN.actualStateFingerprint }), code: undefined, content: ['planOutcome', 'actualStateFingerprint'] },
  { name: 'a successful apply', operation: 'apply', run: run(REPORTS.apply), code: undefined, flags: [true, false], content: ['planContentDigest', 'statementsExecuted'] },
  { name: 'an apply report naming another plan', operation: 'apply', run: run({ ...REPORTS.apply, planContentDigest: digest({}) }), code: RUNNER_ERROR.invalidReport, flags: [true, true] },
  { name: 'an apply outcome that disagrees with its error', operation: 'apply', run: run({ ...REPORTS.apply, error: failure }, { exitCode: 1 }), code: RUNNER_ERROR.invalidReport, flags: [true, true] },
  {
    name: 'an apply error keeps what it did', operation: 'apply',
    run: run({ command: 'apply', outcome: 'unknown', error: failure, planContentDigest: PLAN_DIGEST, statementsExecuted: 1 }, { exitCode: 1 }),
    code: 'statement_failed', flags: [true, true], content: ['planContentDigest', 'statementsExecuted'],
  },
  { name: 'an apply stopped at the deadline, report or not', operation: 'apply', run: run(REPORTS.apply, { exitCode: null, signal: 'SIGTERM', stoppedBy: 'deadline' }), code: RUNNER_ERROR.executionDeadlineReached, flags: [true, true], childExitCode: 143 },
  { name: 'a read-only run stopped on request', operation: 'observe', run: run(REPORTS.observe, { exitCode: null, signal: 'SIGKILL', stoppedBy: 'stop-request' }), code: RUNNER_ERROR.runnerTerminated, childExitCode: 137 },
  {
    name: 'an apply refused before any write changed nothing', operation: 'apply', run: run(refusedApply, { exitCode: 1 }),
    code: 'database_held_by_other_realm', flags: [false, false], content: ['statementsExecuted', 'physicalIdentityDigest', 'physicalIdentityKind'],
  },
  {
    name: 'an apply that found the target drifted since its plan changed nothing', operation: 'apply',
    run: run({ ...refusedApply, error: { code: 'target_changed', message: 'the target schema changed after this plan was computed' } }, { exitCode: 1 }),
    code: 'target_changed', flags: [false, false], content: ['statementsExecuted', 'physicalIdentityDigest', 'physicalIdentityKind'],
  },
  {
    name: 'another apply error that says nothing changed is still uncertain', operation: 'apply',
    run: run({ ...refusedApply, error: { code: 'lock_timeout', message: 'm' } }, { exitCode: 1 }), code: 'lock_timeout', flags: [true, true],
  },
  {
    name: 'a refusal before any write that ran a statement is not believed', operation: 'apply',
    run: run({ ...refusedApply, statementsExecuted: 1 }, { exitCode: 1 }), code: RUNNER_ERROR.invalidReport, flags: [true, true], content: [],
  },
  {
    name: 'a refusal before any write with an unknown outcome is not believed', operation: 'apply',
    run: run({ ...refusedApply, outcome: 'unknown' }, { exitCode: 1 }), code: RUNNER_ERROR.invalidReport, flags: [true, true],
  },
  {
    name: 'a refusal before any write from a stopped executor is uncertain', operation: 'apply',
    run: run(refusedApply, { exitCode: null, signal: 'SIGTERM', stoppedBy: 'deadline' }), code: RUNNER_ERROR.executionDeadlineReached, flags: [true, true],
  },
  { name: 'a successful report carries the physical identity', operation: 'observe', run: run({ ...REPORTS.observe, ...identity }), code: undefined, content: ['dialect', 'drift', 'driftDigest', 'findings', 'actualStateFingerprint', 'physicalIdentityDigest', 'physicalIdentityKind'] },
  { name: 'an error report carries it too', operation: 'migration-history', run: run({ command: 'migration-history', error: failure, ...identity }, { exitCode: 1 }), code: 'statement_failed', content: ['physicalIdentityDigest', 'physicalIdentityKind'] },
  { name: 'a physical identity without its kind', operation: 'observe', run: run({ ...REPORTS.observe, physicalIdentityDigest: identity.physicalIdentityDigest }), code: RUNNER_ERROR.invalidReport, content: [] },
  { name: 'a physical identity of an unknown kind', operation: 'plan', run: run({ ...REPORTS.plan, ...identity, physicalIdentityKind: 'hostname' }), code: RUNNER_ERROR.invalidReport, content: [] },
  { name: 'a physical identity that is not a digest', operation: 'apply', run: run({ ...REPORTS.apply, ...identity, physicalIdentityDigest: 'db-1' }), code: RUNNER_ERROR.invalidReport, flags: [true, true] },
  { name: 'an executor that never started', operation: 'apply', run: run(undefined, { started: false, exitCode: null }), code: RUNNER_ERROR.executorStartFailed, flags: [false, false], childExitCode: -1 },
  { name: 'an applied migration run', operation: 'migration-apply', run: run(migration('applied', 2)), code: undefined, flags: [true, false], content: ['migrationRun'] },
  { name: 'an up-to-date migration run', operation: 'migration-apply', run: run(migration('up-to-date', 0)), code: undefined, flags: [false, false], content: ['migrationRun'] },
  { name: 'a failed migration run, whatever the exit', operation: 'migration-apply', run: run(migration('failed', 0, failure), { exitCode: 2 }), code: 'statement_failed', flags: [false, false], childExitCode: 2, content: ['migrationRun'] },
  {
    name: 'a migration run refused before any write', operation: 'migration-apply', run: run({ ...migration('failed', 0, heldByOtherRealm), ...identity }, { exitCode: 1 }),
    code: 'database_held_by_other_realm', flags: [false, false], content: ['migrationRun', 'physicalIdentityDigest', 'physicalIdentityKind'],
  },
  {
    name: 'a refusal before any write in a partial run is not believed', operation: 'migration-apply',
    run: run(migration('partial', 1, heldByOtherRealm), { exitCode: 1 }), code: RUNNER_ERROR.invalidReport, flags: [true, true], content: [],
  },
  // The executor names its approval in a refusal too; only one that could not read it names none (src/executor/run.ts).
  {
    name: 'a migration run whose artifact was refused names its approval', operation: 'migration-apply',
    run: run(migration('failed', 0, { code: 'invalid_migration_name', message: 'init.sql is not a migration file name' }), { exitCode: 1 }),
    code: 'invalid_migration_name', flags: [false, false], content: ['migrationRun'],
  },
  {
    name: 'a refused migration run naming no approval is not believed', operation: 'migration-apply',
    run: run(migration('failed', 0, { code: 'invalid_input', message: 'cannot read the approved sequence' }, []), { exitCode: 1 }),
    code: RUNNER_ERROR.invalidReport, flags: [true, true], content: [],
  },
  { name: 'a partial migration run', operation: 'migration-apply', run: run(migration('partial', 1, failure), { exitCode: 1 }), code: 'statement_failed', flags: [true, true], content: ['migrationRun'] },
  { name: 'an unknown migration run', operation: 'migration-apply', run: run(migration('unknown', 0, failure), { exitCode: 1 }), code: 'statement_failed', flags: [true, true], content: ['migrationRun'] },
  { name: 'an applied report from a killed executor', operation: 'migration-apply', run: run(migration('applied', 2), { exitCode: null, signal: 'SIGKILL' }), code: undefined, flags: [true, false], childExitCode: 137 },
  { name: 'a failed report written after the deadline stop', operation: 'migration-apply', run: run(migration('failed', 0, failure), { exitCode: 1, stoppedBy: 'deadline' }), code: 'statement_failed', flags: [false, false] },
  { name: 'a migration report for another sequence', operation: 'migration-apply', run: run(migration('applied', 1, undefined, SEQUENCE.slice(0, 1))), code: RUNNER_ERROR.invalidReport, flags: [true, true], content: [] },
  { name: 'a migration report whose outcome disagrees with its error', operation: 'migration-apply', run: run(migration('applied', 2, failure)), code: RUNNER_ERROR.invalidReport, flags: [true, true] },
  { name: 'no migration report after a deadline stop', operation: 'migration-apply', run: run(undefined, { exitCode: null, signal: 'SIGKILL', stoppedBy: 'deadline' }), code: RUNNER_ERROR.executionDeadlineReached, flags: [true, true] },
  { name: 'no migration report from a killed executor', operation: 'migration-apply', run: run(undefined, { exitCode: null, signal: 'SIGSEGV' }), code: RUNNER_ERROR.executorKilled, flags: [true, true] },
  { name: 'no migration report and exit 2', operation: 'migration-apply', run: run(undefined, { exitCode: 2 }), code: RUNNER_ERROR.executorFailed, flags: [true, true] },
  {
    name: 'a migration report holding the password in data', operation: 'migration-apply',
    run: run({ ...migration('applied', 2), applied: migration('applied', 2).applied.map((a) => ({ ...a, name: `${PASSWORD}.sql` })) }),
    code: RUNNER_ERROR.reportContainsSecret, flags: [true, true], content: [],
  },
  {
    name: 'a report holding text that is not valid Unicode', operation: 'migration-history',
    run: run(undefined, {}, JSON.stringify(REPORTS['migration-history']).replace('0001_init.up.sql', '\\ud800.sql')),
    code: RUNNER_ERROR.invalidReport, content: [],
  },
  {
    name: 'an error message that is not valid Unicode', operation: 'observe',
    run: run(undefined, { exitCode: 1 }, '{"command":"observe","error":{"code":"x","message":"bad \\ud800"}}'), code: 'x',
  },
  {
    name: 'an error code holding a secret', operation: 'observe', secrets: ['snake_case_secret'],
    run: run({ command: 'observe', error: { code: 'snake_case_secret', message: 'm' } }, { exitCode: 1 }), code: RUNNER_ERROR.reportContainsSecret,
  },
  {
    name: 'a secret too short to tell from data is left in data', operation: 'observe', secrets: ['missing'],
    run: run(REPORTS.observe), code: undefined,
  },
];

t.test('each way a run ends', async (t) => {
  for (const c of cases) {
    const decision = decide(c.operation, c.run, c.maxPlanBytes, c.secrets);
    t.equal(decision.error?.code, c.code, `${c.name}: error code`);
    if (c.flags) t.same([decision.mutationStarted, decision.uncertain], c.flags, `${c.name}: mutationStarted, uncertain`);
    if (c.childExitCode !== undefined) t.equal(decision.childExitCode, c.childExitCode, `${c.name}: childExitCode`);
    if (c.content) t.same(Object.keys(decision.content).sort(), [...c.content].sort(), `${c.name}: content`);
    t.equal(resultProblem(asResult(c.operation, decision)), undefined, `${c.name}: a frame the protocol accepts`);
  }
});

t.test('a report cut off at the bound is never read', async (t) => {
  const cut = run(undefined, {}, `${JSON.stringify(REPORTS.observe)}${' '.repeat(MAX_REPORT)}`);
  const decision = decide('observe', cut);
  t.equal(decision.error?.code, RUNNER_ERROR.reportTruncated);
  t.equal(decision.truncation?.stdout, true);
  t.equal(decision.truncation?.stdoutBytesDropped, cut.stdout.dropped);
  t.equal(resultProblem(asResult('observe', decision)), undefined);
  const migrationCut = decide('migration-apply', run(undefined, {}, `${JSON.stringify(migration('applied', 2))}${' '.repeat(MAX_REPORT)}`));
  t.equal(migrationCut.error?.code, RUNNER_ERROR.reportTruncated, 'even a migration report is not read once cut');
  t.same([migrationCut.mutationStarted, migrationCut.uncertain], [true, true]);
});

t.test('an executor error message is redacted, one line and bounded', async (t) => {
  const message = `cannot reach ${DB_URL}\nwith ${PASSWORD} PTAH_RUNNER_RESULT_V1 ${'x'.repeat(5000)}`;
  const decision = decide('observe', run({ command: 'observe', error: { code: 'connection_failed', message } }, { exitCode: 1 }));
  const text = decision.error?.message ?? '';
  t.notOk(text.includes(DB_URL) || text.includes(PASSWORD), 'no credential');
  t.match(text, /^cannot reach \[REDACTED\] with \[REDACTED\] PTAH-RUNNER-RESULT-V1 x+…$/, 'redacted, defused, folded');
  t.ok(text.length <= 4096);
  const stopped = decide('migration-apply', run(migration('failed', 0, failure), { exitCode: 1, stoppedBy: 'deadline' }));
  t.match(stopped.error?.message, /^stopped at the execution deadline: boom$/);
  t.match(stopped.notes.join('\n'), /report \(outcome failed\) decides this run/, 'the stop is noted in the log');
});
