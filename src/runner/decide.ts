// What a finished executor run says, as frame fields. The report decides, never the exit status alone:
// - schema apply: once started, the database may have changed; every error is uncertain, except a refusal the
//   executor makes before its first write (REFUSED_BEFORE_WRITING), read from a report that agrees it ran nothing.
// - migration-apply: the run report's outcome decides the flags (migrationRunFlags), even when the runner
//   stopped the executor; without a readable report the run is uncertain.
// - read-only operations: a report is read only from an executor that exited 0 (success) or 1 (its error).
import { canonicalJson } from '../shared/canonical.js';
import { isRefusedBeforeWriting, type ExecutorError } from '../shared/executor-report.js';
import {
  expectedSequenceDigest, migrationRunFlags, RUNNER_ERROR, type ExpectedMigration, type OutputTruncation, type RunnerError,
} from '../shared/runner-protocol.js';
import type { RunnerInputs } from './contract.js';
import { childExitCode, type ExecutorRun } from './executor-process.js';
import { sanitizeText, type Redactor } from './redact.js';
import { readReport, ReportProblem, type ReadReport } from './report.js';

export interface RunDecision {
  childExitCode: number;
  error?: RunnerError;
  mutationStarted?: boolean;
  uncertain?: boolean;
  truncation?: OutputTruncation;
  /** The operation's content fields of the frame. */
  content: Record<string, unknown>;
  /** Diagnostics for the runner's stderr. */
  notes: string[];
}

export interface DecideContext {
  inputs: RunnerInputs;
  /** The approved sequence of a migration Apply. */
  sequence?: readonly ExpectedMigration[];
  redactor: Redactor;
  maxPlanBytes: number;
  maxReportBytes: number;
}

export function decideRun(run: ExecutorRun, context: DecideContext): RunDecision {
  const operation = context.inputs.operation;
  const base = { childExitCode: childExitCode(run), truncation: truncationOf(run), notes: [] as string[] };
  if (!run.started) {
    const notStarted = operation === 'apply' || operation === 'migration-apply' ? { mutationStarted: false, uncertain: false } : {};
    const message = `the executor could not be started (${run.startError ?? 'error'}); nothing was run`;
    return { ...base, ...notStarted, error: { code: RUNNER_ERROR.executorStartFailed, message }, content: {} };
  }
  if (operation === 'migration-apply') return { ...base, ...decideMigrationApply(run, context, base.notes) };
  const { error, content, refusedBeforeWriting } = decideFromReport(run, context);
  const flags = operation !== 'apply' ? {}
    : refusedBeforeWriting ? { mutationStarted: false, uncertain: false }
    : { mutationStarted: true, uncertain: error !== undefined };
  return { ...base, ...flags, error, content };
}

function truncationOf(run: ExecutorRun): OutputTruncation | undefined {
  if (run.stdout.dropped === 0 && run.stderr.dropped === 0) return undefined;
  return { stdout: run.stdout.dropped > 0, stdoutBytesDropped: run.stdout.dropped, stderr: run.stderr.dropped > 0, stderrBytesDropped: run.stderr.dropped };
}

/** Why a run has no report worth reading, if it has none; `reason` says what reading it found. */
function unusableRun(run: ExecutorRun, context: DecideContext, reason?: string): RunnerError | undefined {
  const why = reason ? `; ${reason}` : '';
  if (run.stoppedBy === 'deadline') return { code: RUNNER_ERROR.executionDeadlineReached, message: `the runner stopped the executor at the execution deadline${why}` };
  if (run.stoppedBy === 'stop-request') return { code: RUNNER_ERROR.runnerTerminated, message: `the runner was asked to stop and stopped the executor${why}` };
  if (run.signal !== null) return { code: RUNNER_ERROR.executorKilled, message: `the executor was killed by ${run.signal}${why}` };
  if (run.stdout.dropped > 0) {
    return { code: RUNNER_ERROR.reportTruncated, message: `the executor's report was longer than ${context.maxReportBytes} bytes and was cut off` };
  }
  if (run.exitCode !== 0 && run.exitCode !== 1) return { code: RUNNER_ERROR.executorFailed, message: `the executor exited ${run.exitCode} without a usable report${why}` };
  return undefined;
}

function read(run: ExecutorRun, context: DecideContext): ReadReport | ReportProblem {
  try {
    return readReport(context.inputs.operation, run.stdout.bytes().toString('utf8'), context.redactor);
  } catch (error) {
    if (error instanceof ReportProblem) return error;
    throw error;
  }
}

function executorError(error: ExecutorError, redactor: Redactor): RunnerError {
  return { code: error.code, message: sanitizeText(error.message, redactor, { oneLine: true }) || 'the executor gave no message' };
}

interface ReportDecision {
  error?: RunnerError;
  content: Record<string, unknown>;
  /** The executor's own report refused before any write (report.ts holds it to outcome failed, nothing run). */
  refusedBeforeWriting?: boolean;
}

function decideFromReport(run: ExecutorRun, context: DecideContext): ReportDecision {
  const unusable = unusableRun(run, context);
  if (unusable) return { error: unusable, content: {} };
  const report = read(run, context);
  if (report instanceof ReportProblem) return { error: { code: report.code, message: report.message }, content: {} };
  if ((report.error !== undefined) !== (run.exitCode === 1)) {
    const message = `the executor exited ${run.exitCode} but its report ${report.error ? 'holds an error' : 'holds no error'}`;
    return { error: { code: RUNNER_ERROR.invalidReport, message }, content: {} };
  }
  const mismatch = crossCheck(report, context);
  if (mismatch) return { error: mismatch, content: {} };
  return {
    error: report.error && executorError(report.error, context.redactor),
    content: { ...report.content, ...report.identity },
    refusedBeforeWriting: isRefusedBeforeWriting(report.error?.code),
  };
}

/** What the report must agree with beyond its own shape. */
function crossCheck(report: ReadReport, context: DecideContext): RunnerError | undefined {
  if (report.operation === 'plan' && report.content.plan !== undefined) {
    const size = Buffer.byteLength(canonicalJson(report.content.plan));
    if (size > context.maxPlanBytes) {
      return { code: RUNNER_ERROR.planTooLarge, message: `the plan is ${size} bytes; a plan of at most ${context.maxPlanBytes} bytes can be stored and applied` };
    }
  }
  if (report.operation === 'apply' && report.content.planContentDigest !== undefined && report.content.planContentDigest !== context.inputs.plan?.expectedDigest) {
    return { code: RUNNER_ERROR.invalidReport, message: 'the executor report names another plan than the one it was given' };
  }
  return undefined;
}

function decideMigrationApply(run: ExecutorRun, context: DecideContext, notes: string[]): Omit<RunDecision, 'childExitCode' | 'truncation' | 'notes'> {
  let problem: ReportProblem | undefined;
  let report: ReadReport | undefined;
  if (run.stdout.dropped > 0) {
    problem = new ReportProblem(`its report was longer than ${context.maxReportBytes} bytes and was cut off`);
  } else {
    const outcome = read(run, context);
    if (outcome instanceof ReportProblem) problem = outcome;
    else if (outcome.operation === 'migration-apply' && !sameSequence(outcome.content.migrationRun.planned, context.sequence ?? [])) {
      problem = new ReportProblem('the executor report names another sequence than the approved one');
    } else report = outcome;
  }
  if (report?.operation !== 'migration-apply') {
    const error = unusableRun(run, context, problem?.message) ??
      { code: problem?.code ?? RUNNER_ERROR.invalidReport, message: problem?.message ?? 'the executor report is unreadable' };
    return { error, mutationStarted: true, uncertain: true, content: {} };
  }
  const migrationRun = report.content.migrationRun;
  const expectedExit = report.error ? 1 : 0;
  if (run.stoppedBy !== undefined || run.exitCode !== expectedExit) {
    notes.push(`the executor's report (outcome ${migrationRun.outcome}) decides this run; the executor ${run.stoppedBy ? `was stopped (${run.stoppedBy}) and ` : ''}ended with ${run.signal ?? `exit ${run.exitCode}`}`);
  }
  const error = report.error && executorError(report.error, context.redactor);
  if (error && run.stoppedBy !== undefined) {
    const stop = run.stoppedBy === 'deadline' ? 'stopped at the execution deadline' : 'stopped on the runner\'s stop request';
    error.message = sanitizeText(`${stop}: ${error.message}`, context.redactor, { oneLine: true });
  }
  return { error, ...migrationRunFlags(migrationRun.outcome), content: { migrationRun, ...report.identity } };
}

function sameSequence(planned: readonly ExpectedMigration[], approved: readonly ExpectedMigration[]): boolean {
  return expectedSequenceDigest(planned) === expectedSequenceDigest(approved);
}
