// `migration-history` and `migration-apply`. Apply holds the writer locks (writer-lock.ts) for the whole run, re-reads
// the history under it and changes nothing unless the pending files are exactly the approved sequence on the
// approved history; then each file commits together with its history row.
import { readFileSync } from 'node:fs';
import { isDigest } from '../../shared/canonical.js';
import type {
  ExecutorError, MigrationFile, MigrationHistory, MigrationHistoryReport, MigrationRunOutcome, MigrationRunReport,
} from '../../shared/executor-report.js';
import { EXECUTOR_ENV } from '../../shared/runner-env.js';
import { HISTORY_TABLE, ensureBookkeeping } from '../bookkeeping.js';
import { connect, describeSqlError, disconnect, failureCode, isStatementError, sqlErrorLine, withReadOnlySnapshot, type Db } from '../db.js';
import { lockTimeoutMs, migrationAdoption, migrationFormat, requireDigestEnv, requireEnv, requireOperationId, type Env } from '../env.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { connectTarget, type CommandContext } from '../physical-identity.js';
import { splitSqlStatements, type SplitOptions } from '../sql-split.js';
import { acquireWriterLocks, connectWriter } from '../writer-lock.js';
import { assertRunnable, readMigrationSources, type MigrationSource } from './files.js';
import { computeHistory, orderOf, pendingSources, readApplied, toMigrationFile, type Adopted } from './history.js';
import type { MigrationAdoption } from '../../shared/migration-adoption.js';
import { isRepairResolution, type MigrationRepair } from '../../shared/migration-repair.js';
import { sequenceEntry, sequenceRepair, sequenceShapeProblem, type ExpectedMigration } from '../../shared/runner-protocol.js';
import { refuseUnlessRepairable, repairDirtyRow, type ApprovedRepair } from './repair.js';

type ApprovedStep = ExpectedMigration;

export async function migrationHistory(env: Env, context: CommandContext): Promise<MigrationHistoryReport> {
  const sources = readMigrationSources(requireEnv(env, 'artifactDir'), migrationFormat(env));
  const adoption = migrationAdoption(env);
  const client = await connectTarget(requireEnv(env, 'dbUrl'), context);
  try {
    const { applied, lexing } = await withReadOnlySnapshot(client, async () =>
      ({ applied: await readApplied(client, sources, adoption), lexing: await sessionLexing(client) }));
    // Pending files are judged before anyone approves them; applied files are history, judged when they ran.
    for (const source of pendingSources(sources, applied)) assertRunnable(source, lexing);
    return { command: 'migration-history', history: computeHistory(sources, applied) };
  } finally {
    await disconnect(client);
  }
}

/** How this session's server reads string literals, so that a file is split as the server will read it. */
async function sessionLexing(client: Db): Promise<SplitOptions> {
  const { rows: [setting] } = await client.query<{ standard_conforming_strings: string }>('SHOW standard_conforming_strings');
  return { standardConformingStrings: setting?.standard_conforming_strings !== 'off' };
}

export async function migrationApply(env: Env, context: CommandContext): Promise<MigrationRunReport> {
  // Read first, so that every report below, a refusal too, names the approval it was held to; a sequence that
  // cannot be read is run.ts's error report, with no approval to name.
  const planned = readApprovedSequence(requireEnv(env, 'expectedSequenceFile'));
  const report: Reporter = (outcome, applied, error, failedVersion, repaired) => ({
    command: 'migration-apply', outcome, applied, planned,
    ...(error ? { error } : {}), ...(failedVersion ? { failedVersion } : {}), ...(repaired ? { repaired } : {}),
  });
  // Everything that throws below happens before the first file starts, so a thrown failure changed nothing.
  try {
    return await applyUnderLock(applyRun(env, planned, report), context);
  } catch (err) {
    return report('failed', [], (err instanceof ExecutorFailure ? err
      : new ExecutorFailure(failureCode(err, 'database_error'), `the run failed before applying anything: ${errorMessage(err)}`)).toReport());
  }
}

/** The run's inputs besides the approved sequence; throws ExecutorFailure for an unset or invalid one, or an unreadable artifact. */
function applyRun(env: Env, planned: ApprovedStep[], report: Reporter): ApplyRun {
  return {
    dbUrl: requireEnv(env, 'dbUrl'),
    operationId: requireOperationId(env),
    coordinationDigest: requireDigestEnv(env, 'coordinationDigest'),
    expectedFingerprint: requireDigestEnv(env, 'expectedHistoryFingerprint'),
    timeoutMs: lockTimeoutMs(env),
    sources: readMigrationSources(requireEnv(env, 'artifactDir'), migrationFormat(env)),
    adoption: migrationAdoption(env),
    planned,
    report,
  };
}

type Reporter = (outcome: MigrationRunOutcome, applied: MigrationFile[], error?: ExecutorError, failedVersion?: string, repaired?: MigrationRepair) => MigrationRunReport;

interface ApplyRun {
  dbUrl: string;
  operationId: string;
  coordinationDigest: string;
  expectedFingerprint: string;
  timeoutMs: number;
  sources: MigrationSource[];
  adoption: MigrationAdoption | undefined;
  planned: ApprovedStep[];
  report: Reporter;
}

/**
 * The runner's stop request (SIGTERM: its execution deadline, or its Pod deleted by a drain or an eviction): no
 * further file starts, and the SQL of a transactional file that is running is cancelled, so its transaction rolls
 * back and the report says exactly what committed instead of the process dying without one. A cancel is sent only
 * while a file's own SQL runs and is waited for before anything else is sent, so it never reaches a history row or
 * a COMMIT, whose outcome it could make unknown; a no-transaction file is never cancelled. A second SIGTERM, or
 * the runner's SIGKILL, ends the process as before.
 */
class StopRequest {
  requested = false;
  #cancel: (() => Promise<void>) | undefined;
  #cancelling: Promise<void> | undefined;
  readonly #onTerm = (): void => {
    this.requested = true;
    this.#cancelling = this.#cancel?.();
  };

  constructor() {
    process.once('SIGTERM', this.#onTerm);
  }

  dispose(): void {
    process.off('SIGTERM', this.#onTerm);
  }

  /** Runs `work`, cancelled by `cancel` if a stop is requested while it runs. */
  async cancellable<T>(cancel: () => Promise<void>, work: () => Promise<T>): Promise<T> {
    this.#cancel = cancel;
    try {
      return await work();
    } finally {
      this.#cancel = undefined;
      await this.#cancelling;
    }
  }
}

/** Cancels what the backend `pid` runs, from a connection of its own (the cancelled one is busy). */
function cancelBackend(url: string, pid: number): () => Promise<void> {
  return async () => {
    try {
      const canceller = await connect(url, 'target');
      try {
        await canceller.query('SELECT pg_cancel_backend($1)', [pid]);
      } finally {
        await disconnect(canceller);
      }
    } catch (err) {
      process.stderr.write(`executor: the stop request could not cancel the running migration: ${errorMessage(err)}\n`);
    }
  };
}

async function applyUnderLock(run: ApplyRun, context: CommandContext): Promise<MigrationRunReport> {
  const { operationId, sources, report } = run;
  const stop = new StopRequest();
  const client = await connectWriter(run.dbUrl, run.coordinationDigest, context).catch((err: unknown) => {
    stop.dispose();
    throw err;
  });
  try {
    const lock = await acquireWriterLocks(client, run.coordinationDigest, run.timeoutMs);
    try {
      const recorded = await readApplied(client, sources, run.adoption);
      const repair = sequenceRepair(run.planned);
      if (repair) return await repairUnderLock(client, { ...repair, checksum: run.planned[0]!.checksum }, computeHistory(sources, recorded), run);
      const pending = pendingSources(sources, recorded);
      // The fingerprint covers the adopted files, so an adoption that moved since the approval is refused here.
      refuseUnlessApproved(computeHistory(sources, recorded), pending, run);
      if (pending.length === 0) return report('up-to-date', []);
      const approved = pending.slice(0, run.planned.length);
      // migration-history refused these already; an approval must never make an unrunnable file run.
      const lexing = await sessionLexing(client);
      for (const source of approved) assertRunnable(source, lexing);

      const { rows: [backend] } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const cancel = cancelBackend(run.dbUrl, backend!.pid);
      const applied: MigrationFile[] = [];
      for (const source of approved) {
        // The adoption is recorded with the first file, so the two commit or roll back together.
        const adopt = applied.length === 0 ? recorded.adopted : undefined;
        const result = stop.requested
          ? { kind: 'not-applied' as const, error: new ExecutorFailure('stop_requested', `stopped on request before migration ${source.fileName} started`) }
          : source.transactional
            ? await applyInOneTransaction(client, source, { operationId, adopt }, (work) => stop.cancellable(cancel, work))
            : await applyStatementByStatement(client, source, { operationId, adopt }, lexing);
        if (result.kind === 'committed') {
          applied.push(toMigrationFile(source));
          continue;
        }
        // The runner says it stopped the executor; the code says the file was rolled back because of it.
        const error = stop.requested && result.kind === 'not-applied' ? new ExecutorFailure('stop_requested', result.error.message) : result.error;
        const outcome = result.kind === 'uncertain' ? 'unknown' : applied.length > 0 ? 'partial' : 'failed';
        return report(outcome, applied, error.toReport(), source.version);
      }
      return report('applied', applied);
    } finally {
      await lock.release();
    }
  } finally {
    stop.dispose();
    await disconnect(client);
  }
}

/** A repair sequence's run: the dirty row's repair, and no migration (repair.ts). */
async function repairUnderLock(client: Db, repair: ApprovedRepair, history: MigrationHistory, run: ApplyRun): Promise<MigrationRunReport> {
  refuseUnlessRepairable(history, repair, run.expectedFingerprint);
  const result = await repairDirtyRow(client, repair, run.operationId);
  const made = { version: repair.version, resolution: repair.resolution };
  return result.kind === 'repaired' ? run.report('applied', [], undefined, undefined, made) : run.report('unknown', [], result.error.toReport(), repair.version);
}

/** What a run was approved for, as refuseUnlessApproved holds it to the history. */
export type Approval = Pick<ApplyRun, 'planned' | 'expectedFingerprint' | 'operationId'>;

const listVersions = (versions: readonly string[]) => versions.slice(0, 10).join(', ') + (versions.length > 10 ? ', …' : '');

/** Every refusal that must come before anything changes; throws ExecutorFailure (outcome `failed`). */
export function refuseUnlessApproved(history: MigrationHistory, pending: readonly MigrationSource[], approval: Approval): void {
  const { planned } = approval;
  if (history.dirty.length > 0) {
    throw new ExecutorFailure('dirty_history', `migration ${listVersions(history.dirty)} started without finishing (a no-transaction file failed or was interrupted); ` +
      `repair the database and its ${HISTORY_TABLE} row by hand before applying more; nothing was changed`);
  }
  if (history.modified.length > 0) {
    throw new ExecutorFailure('modified_migration', `applied migration ${listVersions(history.modified)} no longer has the checksum it was applied with; ` +
      'restore the original file (applied files must never change); nothing was changed');
  }
  if (history.missing.length > 0) {
    throw new ExecutorFailure('missing_migration', `applied migration ${listVersions(history.missing)} is not in the artifact; an artifact must keep every applied file; nothing was changed`);
  }
  if (history.outOfOrder.length > 0) {
    throw new ExecutorFailure('out_of_order', `pending migration ${listVersions(history.outOfOrder)} sorts before the highest applied version; ` +
      'give it a version above every applied one; nothing was changed');
  }
  if (history.fingerprint !== approval.expectedFingerprint) throw historyMoved(history, approval);
  // A plan carries at most MAX_PLANNED_MIGRATIONS files, so an approval may cover the first pending files only: the
  // run applies exactly those, in order, and the files after them wait for a plan of their own.
  const approvedPrefix = (planned.length > 0 || pending.length === 0) && planned.length <= pending.length &&
    planned.every((p, i) => BigInt(pending[i]!.version) === BigInt(p.version) && pending[i]!.checksum === p.checksum);
  if (!approvedPrefix) {
    throw new ExecutorFailure('sequence_mismatch', `the pending migrations (${pending.length}: ${listVersions(pending.map((s) => s.version))}) do not begin with the approved ` +
      `sequence (${planned.length}: ${listVersions(planned.map((p) => p.version))}) with the approved checksums; approve a new plan; nothing was changed`);
  }
}

/**
 * The history moved since the approval: which approved migrations it now records, and by whom. A Job whose earlier
 * Pod applied them carries this run's own operation ID, and is not another run.
 */
function historyMoved(history: MigrationHistory, { planned, operationId }: Approval): ExecutorFailure {
  const recordedBy = new Map(history.applied.map((a) => [orderOf(a.version), a.operationId]));
  const approved = planned.map((p) => ({ version: p.version, by: recordedBy.get(orderOf(p.version)) }));
  const ours = approved.filter((a) => a.by === operationId).map((a) => a.version);
  const theirs = approved.filter((a): a is { version: string; by: string } => a.by !== undefined && a.by !== operationId);
  const notYet = approved.filter((a) => a.by === undefined).map((a) => a.version);
  const byThisOperation = `already recorded as applied by this operation (${operationId}), by an earlier attempt of this same run`;
  if (planned.length > 0 && ours.length === planned.length) {
    return new ExecutorFailure('history_moved', `every approved migration (${planned.length}: ${listVersions(ours)}) is ${byThisOperation}, ` +
      'not by another run; none was run again and nothing was changed');
  }
  const found = [
    ...(ours.length > 0 ? [`approved migration ${listVersions(ours)} is ${byThisOperation}`] : []),
    ...(theirs.length > 0 ? [`another run applied approved migration ${byOperations(theirs)}`] : []),
    ...(notYet.length > 0 && notYet.length < planned.length ? [`approved migration ${listVersions(notYet)} is not applied`] : []),
  ];
  const what = found.length > 0 ? found.join('; ') : 'none of the approved migrations is recorded as applied';
  return new ExecutorFailure('history_moved', `the migration history changed after this run was approved: ${what}; ` +
    'read the history and approve a new plan; nothing was changed');
}

/** "1, 2 (operation a) and 3 (operation b)", for the first 10 versions. */
function byOperations(applied: readonly { version: string; by: string }[]): string {
  const groups = new Map<string, string[]>();
  for (const { version, by } of applied.slice(0, 10)) groups.set(by, [...(groups.get(by) ?? []), version]);
  const named = [...groups].map(([by, versions]) => `${versions.join(', ')} (operation ${by})`).join(' and ');
  return named + (applied.length > 10 ? ` and ${applied.length - 10} more` : '');
}

export function readApprovedSequence(path: string): ApprovedStep[] {
  const name = EXECUTOR_ENV.expectedSequenceFile;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ExecutorFailure('invalid_input', `cannot read the approved sequence (${name}): ${errorMessage(err)}`);
  }
  if (!Array.isArray(parsed)) throw new ExecutorFailure('invalid_input', `the approved sequence (${name}) must be a JSON array of {version, checksum}`);
  const sequence = parsed.map((step: unknown, i): ApprovedStep => {
    const { version, checksum, repair } = (step ?? {}) as Record<string, unknown>;
    if (typeof version !== 'string' || !/^[0-9]{1,30}$/.test(version) || !isDigest(checksum) || (repair !== undefined && !isRepairResolution(repair))) {
      throw new ExecutorFailure('invalid_input', `the approved sequence (${name}) entry ${i} must be {version: digits, checksum: sha256:<hex>}, ` +
        'with repair: finished | undone for a repair');
    }
    return sequenceEntry({ version, checksum, ...(repair === undefined ? {} : { repair }) });
  });
  const shape = sequenceShapeProblem(sequence);
  if (shape) throw new ExecutorFailure('invalid_input', `the approved sequence (${name}) ${shape}`);
  return sequence;
}

// Each file starts from the session's defaults: a SET in one file must not change how the next one runs.
const RESET_SESSION = 'RESET ALL';

type FileResult =
  | { kind: 'committed' }
  /** Nothing of this file is committed. */
  | { kind: 'not-applied'; error: ExecutorFailure }
  /** Part of the file, or its history row, may be committed. */
  | { kind: 'uncertain'; error: ExecutorFailure };

/** Who records a file: the run's operation, and with the run's first file, the adoption it was approved with. */
interface Recording {
  operationId: string;
  adopt: Adopted | undefined;
}

/** Records the adopted files as applied by `operationId`, without running them; inside the first file's transaction. */
async function recordAdoption(client: Db, { operationId, adopt }: Recording): Promise<void> {
  if (!adopt) return;
  await client.query(`INSERT INTO ${HISTORY_TABLE} (version, version_order, name, checksum, transactional, operation_id, started_at, finished_at, dirty, adopted_from)
    SELECT a.version, a.version::numeric, a.name, a.checksum, a.transactional, $2, now(), now(), false, $3
    FROM jsonb_to_recordset($1::jsonb) AS a(version text, name text, checksum text, transactional boolean) ORDER BY a.version::numeric`,
  [JSON.stringify(adopt.sources.map(({ version, name, checksum, transactional }) => ({ version, name, checksum, transactional }))), operationId, adopt.from]);
}

/** `cancellable` runs the file's own SQL so that a stop request may cancel it (StopRequest). */
async function applyInOneTransaction(client: Db, source: MigrationSource, recording: Recording, cancellable: <T>(work: () => Promise<T>) => Promise<T>): Promise<FileResult> {
  const { operationId } = recording;
  try {
    await client.query(RESET_SESSION);
    await client.query('BEGIN');
    // The bookkeeping tables are created in the first file's transaction, so a run that fails changes nothing.
    await ensureBookkeeping(client);
    await recordAdoption(client, recording);
    await cancellable(() => client.query(source.sql));
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    return {
      kind: 'not-applied',
      error: new ExecutorFailure(failureCode(err, 'migration_failed'),
        `migration ${source.fileName} failed: ${describeSqlError(err, source.sql)}; its transaction was rolled back`),
    };
  }
  try {
    await client.query(`INSERT INTO ${HISTORY_TABLE} (version, version_order, name, checksum, transactional, operation_id, started_at, finished_at, dirty)
      VALUES ($1::text, $1::text::numeric, $2, $3, true, $4, now(), clock_timestamp(), false)`, [source.version, source.name, source.checksum, operationId]);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    return { kind: 'not-applied', error: new ExecutorFailure('bookkeeping_failed', `could not record migration ${source.fileName}: ${errorMessage(err)}; its transaction was rolled back`) };
  }
  try {
    await client.query('COMMIT');
    return { kind: 'committed' };
  } catch (err) {
    if (isStatementError(err)) {
      return { kind: 'not-applied', error: new ExecutorFailure('migration_failed', `migration ${source.fileName} failed at commit: ${errorMessage(err)}; it was rolled back`) };
    }
    return { kind: 'uncertain', error: new ExecutorFailure('commit_unknown', `the connection failed while migration ${source.fileName} committed; whether it applied is unknown: ${errorMessage(err)}`) };
  }
}

/**
 * A `-- ptah:no-transaction` file: a dirty history row is committed first, then each statement runs on its own,
 * then the row is marked finished. A failure of the first statement leaves nothing behind, so the row is removed;
 * any later failure leaves the row dirty for a person to resolve.
 */
async function applyStatementByStatement(client: Db, source: MigrationSource, recording: Recording, lexing: SplitOptions): Promise<FileResult> {
  const { operationId } = recording;
  try {
    await client.query(RESET_SESSION);
    await inTransaction(client, async () => {
      await ensureBookkeeping(client);
      await recordAdoption(client, recording);
      await client.query(`INSERT INTO ${HISTORY_TABLE} (version, version_order, name, checksum, transactional, operation_id, started_at, finished_at, dirty)
        VALUES ($1::text, $1::text::numeric, $2, $3, false, $4, clock_timestamp(), NULL, true)`, [source.version, source.name, source.checksum, operationId]);
    });
  } catch (err) {
    const error = new ExecutorFailure('bookkeeping_failed', `could not record the start of migration ${source.fileName}: ${errorMessage(err)}`);
    return isStatementError(err) ? { kind: 'not-applied', error } : { kind: 'uncertain', error };
  }
  const statements = splitSqlStatements(source.sql, lexing);
  for (const [i, statement] of statements.entries()) {
    try {
      await client.query(statement.text);
    } catch (err) {
      const where = `migration ${source.fileName} (no-transaction) failed at statement ${i + 1} of ${statements.length}, ` +
        `line ${statement.line - 1 + (sqlErrorLine(err, statement.text) ?? 1)}: ${errorMessage(err)}`;
      if (i === 0 && isStatementError(err) && (await removeStartMarker(client, source, recording))) {
        return { kind: 'not-applied', error: new ExecutorFailure('migration_failed', `${where}; nothing of it ran`) };
      }
      return {
        kind: 'uncertain',
        error: new ExecutorFailure(failureCode(err, 'migration_failed'),
          `${where}; the statements before it are committed and its history row is left dirty`),
      };
    }
  }
  try {
    await client.query(`UPDATE ${HISTORY_TABLE} SET dirty = false, finished_at = clock_timestamp() WHERE version_order = $1::numeric`, [source.version]);
    return { kind: 'committed' };
  } catch (err) {
    return { kind: 'uncertain', error: new ExecutorFailure('bookkeeping_failed', `migration ${source.fileName} ran but could not be marked finished: ${errorMessage(err)}`) };
  }
}

/** Removes the start marker, and the adoption recorded with it, so that nothing of the run is left. */
async function removeStartMarker(client: Db, source: MigrationSource, { operationId, adopt }: Recording): Promise<boolean> {
  try {
    await inTransaction(client, async () => {
      await client.query(`DELETE FROM ${HISTORY_TABLE} WHERE version_order = $1::numeric AND dirty`, [source.version]);
      if (adopt) await client.query(`DELETE FROM ${HISTORY_TABLE} WHERE operation_id = $1 AND adopted_from IS NOT NULL`, [operationId]);
    });
    return true;
  } catch {
    return false;
  }
}

async function inTransaction(client: Db, fn: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await fn();
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
