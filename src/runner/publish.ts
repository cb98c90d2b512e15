// The runner's last acts: the termination summary into the termination-message file, then the frame as the last
// write to stdout, in one write. A result the protocol would refuse is replaced by an internal_error frame that
// keeps what is known about the start, so a frame is always written when one can be.
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { MUTATING_RUNNER_OPERATIONS } from '../shared/runner-env.js';
import {
  encodeFrame, encodeSummary, FrameError, RUNNER_ERROR, summaryFor, type RunnerResult,
} from '../shared/runner-protocol.js';
import type { Diagnostics } from './diagnostics.js';

/** Writes summary and frame; true when the frame was written. */
export async function publish(result: RunnerResult, terminationMessagePath: string, diagnostics: Diagnostics): Promise<boolean> {
  const framed = frameOrFallback(result, diagnostics);
  if (!framed) return false;
  writeTerminationMessage(terminationMessagePath, framed.result, diagnostics);
  await diagnostics.flush();
  return writeFrame(framed.frame, diagnostics);
}

function frameOrFallback(result: RunnerResult, diagnostics: Diagnostics): { result: RunnerResult; frame: string } | undefined {
  try {
    return { result, frame: encodeFrame(result) };
  } catch (error) {
    const tooLarge = error instanceof FrameError && error.kind === 'too-large';
    diagnostics.note(`the result could not be framed (${(error as Error).message}); framing ${tooLarge ? RUNNER_ERROR.resultTooLarge : RUNNER_ERROR.internalError} instead`);
    const fallback = fallbackResult(result, tooLarge);
    try {
      return { result: fallback, frame: encodeFrame(fallback) };
    } catch (again) {
      diagnostics.note(`not even the fallback result could be framed: ${(again as Error).message}`);
      return undefined;
    }
  }
}

/** Only what the run's start settles: a mutating run that started is uncertain. */
function fallbackResult(result: RunnerResult, tooLarge: boolean): RunnerResult {
  const started = result.childExitCode !== -1;
  return {
    protocolVersion: result.protocolVersion,
    operation: result.operation,
    operationId: result.operationId,
    childExitCode: result.childExitCode,
    coordinationDigest: result.coordinationDigest,
    targetIdentityDigest: result.targetIdentityDigest,
    ...(MUTATING_RUNNER_OPERATIONS.has(result.operation) ? { mutationStarted: started, uncertain: started } : {}),
    error: {
      code: tooLarge ? RUNNER_ERROR.resultTooLarge : RUNNER_ERROR.internalError,
      message: tooLarge ? 'the result was larger than a frame may be' : 'the runner produced a result the protocol refuses; see the runner\'s stderr',
    },
  } as RunnerResult;
}

/** The file must exist (the kubelet provides it); it is never created. */
function writeTerminationMessage(path: string, result: RunnerResult, diagnostics: Diagnostics): void {
  let line: string;
  try {
    line = encodeSummary(summaryFor(result));
  } catch (error) {
    diagnostics.note(`no termination summary written: ${(error as Error).message}`);
    return;
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_TRUNC);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    diagnostics.note(code === 'ENOENT'
      ? `${path} does not exist; no termination summary written`
      : `${path} cannot be opened (${code ?? 'error'}); no termination summary written`);
    return;
  }
  try {
    writeSync(fd, line);
  } catch (error) {
    diagnostics.note(`the termination summary could not be written to ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  } finally {
    closeSync(fd);
  }
}

function writeFrame(frame: string, diagnostics: Diagnostics): Promise<boolean> {
  return new Promise((resolve) => {
    process.stdout.once('error', (error: NodeJS.ErrnoException) => {
      diagnostics.note(`the result frame could not be written to stdout (${error.code ?? 'error'})`);
      resolve(false);
    });
    process.stdout.write(frame, (error) => resolve(!error));
  });
}
