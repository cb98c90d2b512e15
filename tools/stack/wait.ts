// Polling with a deadline, for states the harness waits on (a server turning ready, an object appearing).
import type { ManagedProcess } from './processes.js';

export interface WaitOptions {
  /** What is awaited, for the timeout message, e.g. "kube-apiserver /readyz". */
  what: string;
  timeoutMs: number;
  intervalMs?: number;
  /** A process whose exit means the wait can never succeed. */
  process?: ManagedProcess;
}

/** Calls `probe` until it returns a value other than undefined; its last error goes into the timeout message. */
export async function waitFor<T>(probe: () => Promise<T | undefined>, options: WaitOptions): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let last = 'no answer yet';
  for (;;) {
    const exit = options.process?.exit;
    if (exit) {
      throw new Error(`${options.process?.name} exited (${exit.code ?? exit.signal}) while waiting for ${options.what}; ` +
        `last lines of ${options.process?.logFile}:\n${options.process?.logTail()}`);
    }
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) {
      const tail = options.process ? `; last lines of ${options.process.logFile}:\n${options.process.logTail()}` : '';
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${options.what} (last: ${last})${tail}`);
    }
    await sleep(options.intervalMs ?? 200);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
