// A repair sequence (spec.repair, approved in a repair plan): under the writer locks, the one dirty row the plan
// names is marked finished or removed, together with its record in ptah_migrations.repairs, in one transaction.
// Nothing changes unless the history is still the one the plan was read from and that row is its only dirty one,
// with the checksum the plan shows; no migration runs.
import type { MigrationHistory } from '../../shared/executor-report.js';
import type { MigrationRepair } from '../../shared/migration-repair.js';
import { HISTORY_TABLE, REPAIRS_TABLE, ensureBookkeeping } from '../bookkeeping.js';
import { isStatementError, type Db } from '../db.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { orderOf } from './history.js';

/** The repair the plan approved: the row's version and checksum, and the resolution. */
export interface ApprovedRepair extends MigrationRepair {
  checksum: string;
}

export type RepairResult = { kind: 'repaired' } | { kind: 'uncertain'; error: ExecutorFailure };

/** Throws ExecutorFailure (nothing changed) unless the history still holds exactly the dirty row the plan names. */
export function refuseUnlessRepairable(history: MigrationHistory, repair: ApprovedRepair, expectedFingerprint: string): void {
  const row = history.applied.find((a) => orderOf(a.version) === orderOf(repair.version));
  const dirty = history.dirty.map(orderOf);
  if (!row || !dirty.includes(orderOf(repair.version))) {
    throw new ExecutorFailure('repair_refused', `migration ${repair.version} has no dirty row to repair` +
      `${row ? ' (its row is finished)' : ''}; the history moved since the repair was approved; nothing was changed`);
  }
  if (row.checksum !== repair.checksum) {
    throw new ExecutorFailure('repair_refused', `migration ${repair.version}'s dirty row has checksum ${row.checksum}, not ${repair.checksum} as approved; nothing was changed`);
  }
  if (dirty.length > 1) {
    throw new ExecutorFailure('repair_refused', `migrations ${history.dirty.join(', ')} are dirty; a repair plan repairs one row only when it is the only dirty one; nothing was changed`);
  }
  if (history.fingerprint !== expectedFingerprint) {
    throw new ExecutorFailure('history_moved', 'the migration history changed after this repair was approved; read the history and approve a new plan; nothing was changed');
  }
}

/**
 * Marks the row finished, or removes it, and records the repair, in one transaction; the row is matched on its
 * version, its checksum and its dirty flag again, so a row that changed under the locks is never touched.
 */
export async function repairDirtyRow(client: Db, repair: ApprovedRepair, operationId: string): Promise<RepairResult> {
  try {
    await client.query('BEGIN');
    await ensureBookkeeping(client);
    const where = 'version_order = $1::numeric AND checksum = $2 AND dirty';
    const { rows } = await client.query<{ operation_id: string; started_at: Date }>(repair.resolution === 'finished'
      ? `UPDATE ${HISTORY_TABLE} SET dirty = false, finished_at = clock_timestamp() WHERE ${where} RETURNING operation_id, started_at`
      : `DELETE FROM ${HISTORY_TABLE} WHERE ${where} RETURNING operation_id, started_at`, [repair.version, repair.checksum]);
    if (rows.length !== 1) throw new ExecutorFailure('repair_refused', `migration ${repair.version} has no dirty row with checksum ${repair.checksum}; nothing was changed`);
    await client.query(`INSERT INTO ${REPAIRS_TABLE} (operation_id, version, checksum, resolution, row_operation_id, row_started_at) VALUES ($1, $2, $3, $4, $5, $6)`,
      [operationId, repair.version, repair.checksum, repair.resolution, rows[0]!.operation_id, rows[0]!.started_at]);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (err instanceof ExecutorFailure) throw err;
    throw new ExecutorFailure('bookkeeping_failed', `could not repair migration ${repair.version}'s row: ${errorMessage(err)}; nothing was changed`);
  }
  try {
    await client.query('COMMIT');
    return { kind: 'repaired' };
  } catch (err) {
    if (isStatementError(err)) throw new ExecutorFailure('bookkeeping_failed', `the repair of migration ${repair.version} failed at commit: ${errorMessage(err)}; nothing was changed`);
    return { kind: 'uncertain', error: new ExecutorFailure('commit_unknown', `the connection failed while the repair of migration ${repair.version} committed; whether it was made is unknown: ${errorMessage(err)}`) };
  }
}
