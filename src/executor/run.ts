// The executor's commands and the one place that turns any failure into the command's error report.
import type { ExecutorError, ExecutorReport } from '../shared/executor-report.js';
import { failureCode } from './db.js';
import type { Env } from './env.js';
import { ExecutorFailure, errorMessage } from './failure.js';
import { migrationApply, migrationHistory } from './migrations/commands.js';
import { physicalIdentityFields, type CommandContext } from './physical-identity.js';
import { apply, observe, plan } from './schema/commands.js';

const COMMANDS = {
  observe,
  plan,
  apply,
  'migration-history': migrationHistory,
  'migration-apply': migrationApply,
} satisfies Record<ExecutorReport['command'], (env: Env, context: CommandContext) => Promise<ExecutorReport>>;

export type ExecutorCommand = keyof typeof COMMANDS;
export const EXECUTOR_COMMANDS = Object.keys(COMMANDS) as ExecutorCommand[];

export function isExecutorCommand(value: unknown): value is ExecutorCommand {
  return typeof value === 'string' && Object.hasOwn(COMMANDS, value);
}

/**
 * Runs one command; every failure becomes the command's error report, so only a crash escapes. Once the target
 * was opened, the report carries its physical identity, an error report too.
 */
export async function runCommand(command: ExecutorCommand, env: Env): Promise<ExecutorReport> {
  const context: CommandContext = {};
  let report: ExecutorReport;
  try {
    report = await COMMANDS[command](env, context);
  } catch (err) {
    const error: ExecutorError = err instanceof ExecutorFailure
      ? err.toReport()
      : { code: failureCode(err, 'database_error'), message: `unexpected failure: ${errorMessage(err)}` };
    report = errorReport(command, error);
  }
  return { ...report, ...physicalIdentityFields(context.physicalIdentity) };
}

function errorReport(command: ExecutorCommand, error: ExecutorError): ExecutorReport {
  switch (command) {
    case 'apply':
      return { command, error, outcome: 'failed', statementsExecuted: 0 };
    case 'migration-apply':
      // migrationApply reports every failure after reading the approved sequence itself, naming it: here it could not be read.
      return { command, error, outcome: 'failed', applied: [], planned: [] };
    default:
      return { command, error };
  }
}
