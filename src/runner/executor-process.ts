// Running the executor as the runner's child: its environment, its bounded output, and how it is stopped. At
// the execution deadline or on a stop request it gets SIGTERM, and SIGKILL `stopDelayMs` later if still alive.
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { EXECUTOR_ENV, type RunnerOperation } from '../shared/runner-env.js';
import { BoundedTail } from './bounded-tail.js';
import type { RunnerInputs } from './contract.js';
import type { PreparedRun } from './prepare.js';
import type { StopRequests } from './stop-requests.js';

/** The executor's stderr is diagnostics: its last 64 KiB are plenty and keep the Pod log small. */
export const STDERR_TAIL_BYTES = 64 * 1024;
/** After the executor exits, how long its pipes may stay open (held by a process it left behind). */
const PIPE_DRAIN_MS = 1000;
/** setTimeout's largest delay; longer waits are chained. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Process variables the executor may need that say nothing about the work. */
const INHERITED = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ'] as const;

export interface ExecutorCommand {
  file: string;
  args: string[];
}

/** `executor <operation>`: the real one (src/executor/main.ts under tsx, or its build beside this module) unless a script is given. */
export function executorCommand(operation: RunnerOperation, script?: string): ExecutorCommand {
  // The executor is whatever this module is: .ts from source, .js from the build in dist/.
  const own = import.meta.url.endsWith('.ts') ? 'main.ts' : 'main.js';
  const path = script ?? fileURLToPath(new URL(`../executor/${own}`, import.meta.url));
  const loader = path.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [];
  return { file: process.execPath, args: [...loader, path, operation] };
}

/** Only EXECUTOR_ENV reaches the executor, pointing at the verified copies; no runner-only variable does. */
export function executorEnvironment(inputs: RunnerInputs, prepared: PreparedRun, env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of INHERITED) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  const set = (name: string, value: string | undefined) => {
    if (value !== undefined) out[name] = value;
  };
  set(EXECUTOR_ENV.dbUrl, inputs.dbUrl);
  set(EXECUTOR_ENV.devUrl, inputs.devUrl);
  set(EXECUTOR_ENV.operationId, inputs.operationId);
  set(EXECUTOR_ENV.coordinationDigest, inputs.coordinationDigest);
  set(EXECUTOR_ENV.artifactDir, prepared.artifactDir);
  set(EXECUTOR_ENV.planFile, prepared.planFile);
  set(EXECUTOR_ENV.expectedSequenceFile, prepared.expectedSequenceFile);
  set(EXECUTOR_ENV.expectedHistoryFingerprint, inputs.migrationSequence?.expectedHistoryFingerprint);
  set(EXECUTOR_ENV.lockTimeoutMs, inputs.lockTimeoutMs?.toString());
  set(EXECUTOR_ENV.migrationFormat, inputs.migrationFormat);
  set(EXECUTOR_ENV.migrationAdoption, inputs.migrationAdoption);
  return out;
}

export interface ExecutorRun {
  /** Whether the process was created; if not, nothing ran. */
  started: boolean;
  startError?: string;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the runner stopped it. */
  stoppedBy?: 'deadline' | 'stop-request';
  stdout: BoundedTail;
  stderr: BoundedTail;
}

export interface ExecutorRunOptions {
  command: ExecutorCommand;
  env: Record<string, string>;
  maxStdoutBytes: number;
  /** Milliseconds since the epoch, on `now`'s clock. */
  deadline?: number;
  now: () => number;
  stopDelayMs: number;
  stops: StopRequests;
}

export function runExecutor(options: ExecutorRunOptions): Promise<ExecutorRun> {
  const run: ExecutorRun = {
    started: false,
    exitCode: null,
    signal: null,
    stdout: new BoundedTail(options.maxStdoutBytes),
    stderr: new BoundedTail(STDERR_TAIL_BYTES),
  };
  return new Promise((resolve) => {
    // Its own process group, so a stop reaches anything the executor started as well.
    const child = spawn(options.command.file, options.command.args, { env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const unsubscribe = options.stops.onRequest(() => stop('stop-request'));
    const timers: NodeJS.Timeout[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      timers.forEach(clearTimeout);
      unsubscribe();
      child.stdout.destroy();
      child.stderr.destroy();
      resolve(run);
    };
    const signalGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone: the executor and everything it started have exited.
      }
    };
    const stop = (reason: NonNullable<ExecutorRun['stoppedBy']>) => {
      if (run.stoppedBy || !run.started || run.exitCode !== null || run.signal !== null) return;
      run.stoppedBy = reason;
      signalGroup('SIGTERM');
      timers.push(setTimeout(() => signalGroup('SIGKILL'), options.stopDelayMs));
    };

    child.stdout.on('data', (chunk: Buffer) => run.stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => run.stderr.push(chunk));
    child.once('spawn', () => {
      run.started = true;
      if (options.deadline !== undefined) scheduleAt(options.deadline, options.now, timers, () => stop('deadline'));
      if (options.stops.requested) stop('stop-request');
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (run.started) return;
      run.startError = error.code ?? 'error';
      finish();
    });
    child.once('exit', (code, signal) => {
      run.exitCode = code;
      run.signal = signal;
      timers.push(setTimeout(finish, PIPE_DRAIN_MS));
    });
    child.once('close', finish);
  });
}

function scheduleAt(at: number, now: () => number, timers: NodeJS.Timeout[], fire: () => void): void {
  const wait = at - now();
  if (wait <= 0) {
    fire();
    return;
  }
  timers.push(setTimeout(() => (wait > MAX_TIMER_MS ? scheduleAt(at, now, timers, fire) : fire()), Math.min(wait, MAX_TIMER_MS)));
}

/** The frame's childExitCode: the exit status, 128 + signal number for a signal, -1 if it never ran. */
export function childExitCode(run: ExecutorRun): number {
  if (!run.started) return -1;
  if (run.exitCode !== null) return run.exitCode;
  const number = run.signal === null ? undefined : osConstants.signals[run.signal];
  return 128 + (number ?? 0);
}
