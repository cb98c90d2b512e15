// One runner operation from inputs to result: the checks in contract order, the executor run, and the decision.
// Never throws: every way a run can end is a RunnerResult.
import { ownExecutorIdentity } from '../shared/executor-identity.js';
import { MUTATING_RUNNER_OPERATIONS, REGISTRY_ONLY_RUNNER_OPERATIONS } from '../shared/runner-env.js';
import { RUNNER_ERROR, RUNNER_PROTOCOL_VERSION, type RunnerResult } from '../shared/runner-protocol.js';
import type { RunnerArgs } from './args.js';
import { checkBindings, identifyTarget } from './bindings.js';
import { checkExecutorIdentity, checkProtocolVersion, readInputs, type Env, type RunnerInputs } from './contract.js';
import { checkDeadlines } from './deadlines.js';
import { decideRun } from './decide.js';
import type { Diagnostics } from './diagnostics.js';
import { childExitCode, executorCommand, executorEnvironment, runExecutor, type ExecutorRun } from './executor-process.js';
import { prepareRun, type PreparedRun } from './prepare.js';
import { sanitizeText, type Redactor } from './redact.js';
import { RunnerRefusal } from './refusal.js';
import { resolveRun } from './resolve.js';
import type { StopRequests } from './stop-requests.js';
import type { RunnerClock } from './test-hooks.js';

export interface RunContext {
  args: RunnerArgs;
  operationId: string;
  env: Env;
  stops: StopRequests;
  clock: RunnerClock;
  redactor: Redactor;
  diagnostics: Diagnostics;
  /** The executor identity this image carries; the build's own unless a test gives another. */
  executorIdentity?: () => string;
}

type Frame = Record<string, unknown>;

export async function runOperation(context: RunContext): Promise<RunnerResult> {
  const { args, operationId, env } = context;
  const frame: Frame = { protocolVersion: RUNNER_PROTOCOL_VERSION, operation: args.operation, operationId, childExitCode: -1 };
  try {
    checkProtocolVersion(env);
  } catch (error) {
    // The cross-version refusal keeps one shape forever: nothing else was read, so nothing else is said.
    return refused(frame, error, context);
  }
  if (MUTATING_RUNNER_OPERATIONS.has(args.operation)) Object.assign(frame, { mutationStarted: false, uncertain: false });
  let prepared: PreparedRun | undefined;
  try {
    checkExecutorIdentity(env, context.executorIdentity ?? ownExecutorIdentity);
    // A resolve reads a registry in-process: no database inputs, no executor.
    if (REGISTRY_ONLY_RUNNER_OPERATIONS.has(args.operation)) return { ...frame, ...(await resolveRun(env)) } as unknown as RunnerResult;
    const inputs = readInputs(args.operation, operationId, env);
    frame.coordinationDigest = inputs.coordinationDigest;
    const identity = identifyTarget(inputs);
    frame.targetIdentityDigest = identity;
    checkBindings(inputs, identity);
    checkDeadlines(inputs, context.clock.now(), 'before preparing');
    prepared = await prepareRun(inputs, args.maxPlanBytes);
    await context.clock.afterPreparation();
    if (context.stops.requested) {
      throw new RunnerRefusal(RUNNER_ERROR.runnerTerminated, 'the runner was asked to stop before the executor started; nothing was run');
    }
    checkDeadlines(inputs, context.clock.now(), 'immediately before starting the executor');
    const run = await execute(inputs, prepared, context);
    return { ...frame, ...decided(run, inputs, prepared, context) } as unknown as RunnerResult;
  } catch (error) {
    return refused(frame, error, context);
  } finally {
    await prepared?.cleanup().catch(() => undefined);
  }
}

function execute(inputs: RunnerInputs, prepared: PreparedRun, context: RunContext): Promise<ExecutorRun> {
  const graceMs = inputs.terminationGraceSeconds * 1000;
  return runExecutor({
    command: executorCommand(inputs.operation, context.args.executor),
    env: executorEnvironment(inputs, prepared, context.env),
    maxStdoutBytes: context.args.maxReportBytes,
    deadline: inputs.executionNotAfter,
    now: context.clock.now,
    // Two thirds of the grace period for the executor to stop; the last third is the runner's, to frame.
    stopDelayMs: Math.floor((graceMs * 2) / 3),
    stops: context.stops,
  });
}

/** The frame fields of a finished run. Never throws: a fault in deciding still reports the start truthfully. */
function decided(run: ExecutorRun, inputs: RunnerInputs, prepared: PreparedRun, context: RunContext): Frame {
  try {
    context.diagnostics.executorStderr(run.stderr);
    const { notes, content, ...fields } = decideRun(run, {
      inputs,
      sequence: prepared.sequence,
      redactor: context.redactor,
      maxPlanBytes: context.args.maxPlanBytes,
      maxReportBytes: context.args.maxReportBytes,
    });
    notes.forEach((note) => context.diagnostics.note(note));
    if (fields.error) context.diagnostics.note(`the run ended with ${fields.error.code}: ${fields.error.message}`);
    return { ...fields, ...content };
  } catch (error) {
    context.diagnostics.note(`deciding the run failed: ${(error as Error).message}`);
    return {
      childExitCode: childExitCode(run),
      ...(MUTATING_RUNNER_OPERATIONS.has(inputs.operation) ? { mutationStarted: run.started, uncertain: run.started } : {}),
      error: { code: RUNNER_ERROR.internalError, message: 'the runner could not decide what the executor did; see its stderr' },
    };
  }
}

function refused(frame: Frame, error: unknown, context: RunContext): RunnerResult {
  const refusal = error instanceof RunnerRefusal
    ? error
    : new RunnerRefusal(RUNNER_ERROR.internalError, `the runner failed before starting the executor: ${(error as Error)?.message ?? String(error)}`);
  const message = sanitizeText(refusal.message, context.redactor, { oneLine: true });
  context.diagnostics.note(`refused (${refusal.code}): ${message}`);
  return { ...frame, error: { code: refusal.code, message } } as unknown as RunnerResult;
}
