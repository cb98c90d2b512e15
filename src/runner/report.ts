// Reading the executor's JSON report (src/shared/executor-report.ts) into what a frame may carry. Fields the
// frame does not define are dropped; the documents a frame carries whole (plan, history, run) are checked
// strictly; data holding a credential is refused rather than edited.
import { isRefusedBeforeWriting, type ExecutorError, type MigrationRunOutcome, type PhysicalIdentityFields } from '../shared/executor-report.js';
import type { RunnerOperation } from '../shared/runner-env.js';
import {
  applyContentProblem, isErrorCode, RUNNER_ERROR, migrationHistoryProblem, migrationRunProblem, observeContentProblem, physicalIdentityProblem,
  planContentProblem,
  type ApplyContent, type MigrationHistoryContent, type MigrationRun, type ObserveContent, type PlanContent,
} from '../shared/runner-protocol.js';
import type { Redactor } from './redact.js';

export type ExecutorReportContent =
  | { operation: 'observe'; content: ObserveContent }
  | { operation: 'plan'; content: PlanContent }
  | { operation: 'apply'; content: ApplyContent }
  | { operation: 'migration-history'; content: MigrationHistoryContent }
  | { operation: 'migration-apply'; content: { migrationRun: MigrationRun } };

/**
 * A report as the frame will carry it: the error (unredacted yet), on success the content, and, error or not, the
 * physical identity of the database the executor opened.
 */
export type ReadReport = ExecutorReportContent & { error?: ExecutorError; identity: PhysicalIdentityFields };

export class ReportProblem extends Error {
  override name = 'ReportProblem';
  constructor(
    message: string,
    readonly code: string = RUNNER_ERROR.invalidReport,
  ) {
    super(message);
  }
}

type JsonObject = Record<string, unknown>;

const APPLY_OUTCOMES = new Set(['applied', 'failed', 'unknown']);
const SUCCESSFUL_MIGRATION_OUTCOMES: ReadonlySet<MigrationRunOutcome> = new Set(['applied', 'up-to-date']);

/** Throws ReportProblem, whose message names fields and never their values. */
export function readReport(operation: RunnerOperation, stdout: string, redactor: Redactor): ReadReport {
  let value: unknown;
  try {
    value = JSON.parse(stdout);
  } catch {
    throw new ReportProblem(stdout.trim() === '' ? 'the executor printed no report' : 'the executor report is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ReportProblem('the executor report is not a JSON object');
  const report = value as JsonObject;
  if (report.command !== operation) throw new ReportProblem(`the executor report is not for ${operation}`);
  const error = readError(report.error);
  if (error && redactor.holdsSecret(error.code)) {
    throw new ReportProblem('the executor report holds a credential in error.code; it was not framed', RUNNER_ERROR.reportContainsSecret);
  }
  const read = readContent(operation, report, error);
  const identity = pick<PhysicalIdentityFields>(report, ['physicalIdentityDigest', 'physicalIdentityKind']);
  check(physicalIdentityProblem(identity));
  const leak = stringPath(read.content, 'report', (text) => redactor.holdsSecret(text));
  if (leak) throw new ReportProblem(`the executor report holds a credential in ${leak}; it was not framed`, RUNNER_ERROR.reportContainsSecret);
  const broken = stringPath(read.content, 'report', (text) => LONE_SURROGATE.test(text));
  if (broken) throw new ReportProblem(`the executor report holds text that is not valid Unicode in ${broken}`);
  return { ...read, error, identity };
}

function readError(value: unknown): ExecutorError | undefined {
  if (value === undefined) return undefined;
  const error = value as JsonObject;
  if (typeof value !== 'object' || value === null || !isErrorCode(error.code) || typeof error.message !== 'string') {
    throw new ReportProblem('the executor report has an error without a snake_case code and a message');
  }
  return { code: error.code, message: error.message };
}

function check(problem: string | undefined): void {
  if (problem) throw new ReportProblem(`the executor report is inconsistent: ${problem}`);
}

function readContent(operation: RunnerOperation, report: JsonObject, error: ExecutorError | undefined): ExecutorReportContent {
  const failed = error !== undefined;
  switch (operation) {
    case 'observe': {
      const content = failed ? {} : pick<ObserveContent>(report, ['dialect', 'drift', 'driftDigest', 'findings', 'actualStateFingerprint']);
      check(failed ? undefined : observeContentProblem(content, true));
      return { operation, content };
    }
    case 'plan': {
      const content = failed ? {} : pick<PlanContent>(
        { ...report, planOutcome: report.outcome },
        ['planOutcome', 'plan', 'planContentDigest', 'actualStateFingerprint'],
      );
      check(failed ? undefined : planContentProblem(content, true));
      return { operation, content };
    }
    case 'apply': {
      if (!APPLY_OUTCOMES.has(report.outcome as string)) throw new ReportProblem('the executor report has no apply outcome');
      if ((report.outcome === 'applied') === failed) throw new ReportProblem('the executor report\'s apply outcome disagrees with its error');
      const content = pick<ApplyContent>(report, ['planContentDigest', 'statementsExecuted']);
      check(applyContentProblem(content, !failed));
      if (isRefusedBeforeWriting(error?.code) && (report.outcome !== 'failed' || content.statementsExecuted !== 0)) {
        throw new ReportProblem(`the executor report refuses with ${error!.code} but says it ran something`);
      }
      return { operation, content };
    }
    case 'migration-history': {
      const content = failed ? {} : { migrationHistory: report.history } as MigrationHistoryContent;
      if (!failed) check(content.migrationHistory === undefined ? 'a history report needs history' : migrationHistoryProblem(content.migrationHistory));
      return { operation, content };
    }
    case 'migration-apply': {
      const migrationRun = pick<MigrationRun>(report, ['outcome', 'applied', 'planned', 'failedVersion', 'repaired']);
      check(migrationRunProblem(migrationRun));
      if (SUCCESSFUL_MIGRATION_OUTCOMES.has(migrationRun.outcome) === failed) {
        throw new ReportProblem('the executor report\'s migration outcome disagrees with its error');
      }
      if (isRefusedBeforeWriting(error?.code) && migrationRun.outcome !== 'failed') {
        throw new ReportProblem(`the executor report refuses with ${error!.code} but its run is ${migrationRun.outcome}`);
      }
      return { operation, content: { migrationRun } };
    }
    case 'resolve':
      // The runner resolves in-process (src/runner/resolve.ts); no executor report can be one.
      throw new ReportProblem('resolve runs no executor, so no executor report is read for it');
  }
}

function pick<T extends object>(source: JsonObject, keys: readonly (keyof T & string)[]): T {
  const out: JsonObject = {};
  for (const key of keys) if (source[key] !== undefined) out[key] = source[key];
  return out as T;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The path of the first string in `value` that `matches`, if any. */
function stringPath(value: unknown, path: string, matches: (text: string) => boolean): string | undefined {
  if (typeof value === 'string') return matches(value) ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = stringPath(value[i], `${path}[${i}]`, matches);
      if (found) return found;
    }
    return undefined;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const found = stringPath(item, `${path}.${key}`, matches);
      if (found) return found;
    }
  }
  return undefined;
}
