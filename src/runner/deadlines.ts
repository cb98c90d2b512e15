// Check 4 (and again immediately before the executor starts): a mutating run never starts at or after its
// dispatch deadline, nor once its execution deadline has passed.
import { RUNNER_ENV } from '../shared/runner-env.js';
import { RUNNER_ERROR } from '../shared/runner-protocol.js';
import type { RunnerInputs } from './contract.js';
import { RunnerRefusal } from './refusal.js';

export type DeadlineMoment = 'before preparing' | 'immediately before starting the executor';

export function checkDeadlines(inputs: RunnerInputs, now: number, moment: DeadlineMoment): void {
  if (inputs.dispatchNotAfter !== undefined && now >= inputs.dispatchNotAfter) {
    throw new RunnerRefusal(
      RUNNER_ERROR.dispatchDeadlineExpired,
      `the dispatch deadline (${RUNNER_ENV.dispatchNotAfter}) had passed ${moment}; the executor was not started`,
    );
  }
  if (inputs.executionNotAfter !== undefined && now >= inputs.executionNotAfter) {
    throw new RunnerRefusal(
      RUNNER_ERROR.executionDeadlineExpired,
      `the execution deadline (${RUNNER_ENV.executionNotAfter}) had passed ${moment}; the executor was not started`,
    );
  }
}
