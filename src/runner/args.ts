// The runner's command line. Flags only select the operation and tighten bounds; all work comes from the
// environment (src/runner/contract.ts). Misuse is not framable and exits 2.
import { parseArgs } from 'node:util';
import { PLAN_MAX_BYTES } from '../shared/planstore.js';
import { isRunnerOperation, RUNNER_OPERATIONS, type RunnerOperation } from '../shared/runner-env.js';

/** The executor's report may hold an 8 MiB plan; JSON escaping can grow it. */
export const DEFAULT_MAX_REPORT_BYTES = 32 * 1024 * 1024;

export interface RunnerArgs {
  operation: RunnerOperation;
  /** A Node script run instead of the real executor (tests use fakes from test/fixtures/runner/). */
  executor?: string;
  maxReportBytes: number;
  maxPlanBytes: number;
}

export class ArgsError extends Error {
  override name = 'ArgsError';
}

export function parseRunnerArgs(argv: readonly string[]): RunnerArgs {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        operation: { type: 'string' },
        executor: { type: 'string' },
        'max-report-bytes': { type: 'string' },
        'max-plan-bytes': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new ArgsError((error as Error).message);
  }
  const operation = values.operation;
  if (!isRunnerOperation(operation)) throw new ArgsError(`--operation must be one of ${RUNNER_OPERATIONS.join(', ')}`);
  if (values.executor === '') throw new ArgsError('--executor must name a script');
  return {
    operation,
    executor: values.executor,
    maxReportBytes: bound(values['max-report-bytes'], '--max-report-bytes', DEFAULT_MAX_REPORT_BYTES),
    maxPlanBytes: bound(values['max-plan-bytes'], '--max-plan-bytes', PLAN_MAX_BYTES),
  };
}

/** A bound may only be tightened: a positive integer no larger than the contract's maximum. */
function bound(raw: string | undefined, flag: string, max: number): number {
  if (raw === undefined) return max;
  const value = /^[1-9][0-9]*$/.test(raw) ? Number(raw) : NaN;
  if (!(value <= max)) throw new ArgsError(`${flag} must be a positive integer of at most ${max}`);
  return value;
}
