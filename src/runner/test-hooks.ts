// Test-only seams, inert unless PTAH_RUNNER_TEST_HOOKS=1. Both act between preparation and the pre-start checks,
// the one moment a test cannot reach from outside:
//   PTAH_RUNNER_TEST_CLOCK_BEFORE_EXEC=<RFC 3339>  the runner's clock reads this instant there and runs on from it,
//                                                  so a deadline can pass between the two checks, or fall exactly
//                                                  one second into the executor's run, without sleeping;
//   PTAH_RUNNER_TEST_SIGTERM_BEFORE_EXEC=1         the runner sends itself SIGTERM there, as a kubelet stopping
//                                                  the Pod during preparation would.
import { once } from 'node:events';
import { parseUtcInstant } from './contract.js';

export const TEST_HOOKS_ENV = 'PTAH_RUNNER_TEST_HOOKS';
export const TEST_CLOCK_ENV = 'PTAH_RUNNER_TEST_CLOCK_BEFORE_EXEC';
export const TEST_SIGTERM_ENV = 'PTAH_RUNNER_TEST_SIGTERM_BEFORE_EXEC';

export interface RunnerClock {
  now(): number;
  /** Called once, after preparation and before the stop request and the deadlines are checked again. */
  afterPreparation(): Promise<void>;
}

export function runnerClock(env: Readonly<Record<string, string | undefined>>): RunnerClock {
  const enabled = env[TEST_HOOKS_ENV] === '1';
  const setTo = enabled && env[TEST_CLOCK_ENV] !== undefined ? parseUtcInstant(env[TEST_CLOCK_ENV]) : undefined;
  const sigterm = enabled && env[TEST_SIGTERM_ENV] === '1';
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    afterPreparation: async () => {
      if (setTo !== undefined) offset = setTo - Date.now();
      if (sigterm) {
        // Signal watchers do not keep the event loop alive; the timer does until the signal has been handled.
        const keepAlive = setInterval(() => undefined, 1000);
        const delivered = once(process, 'SIGTERM');
        process.kill(process.pid, 'SIGTERM');
        await delivered;
        clearInterval(keepAlive);
      }
    },
  };
}
