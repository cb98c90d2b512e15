// The applied history (rows of ptah_migrations.history) held against the artifact's files: what is applied,
// pending, dirty, modified, out of order or missing, and a fingerprint that moves whenever the history does.
import { digest } from '../../shared/canonical.js';
import type { AppliedMigration, MigrationFile, MigrationHistory } from '../../shared/executor-report.js';
import { HISTORY_TABLE, bookkeepingTableExists } from '../bookkeeping.js';
import type { Db } from '../db.js';
import type { MigrationSource } from './files.js';

export interface HistoryRow {
  version: string;
  name: string;
  checksum: string;
  operationId: string;
  startedAt: Date;
  finishedAt: Date | null;
  dirty: boolean;
}

/** The rows in the order they were written; no table yet means an empty history. */
export async function readHistoryRows(client: Db): Promise<HistoryRow[]> {
  if (!(await bookkeepingTableExists(client, HISTORY_TABLE))) return [];
  const { rows } = await client.query<{
    version: string; name: string; checksum: string; operation_id: string; started_at: Date; finished_at: Date | null; dirty: boolean;
  }>(`SELECT version, name, checksum, operation_id, started_at, finished_at, dirty FROM ${HISTORY_TABLE} ORDER BY seq`);
  return rows.map((r) => ({
    version: r.version,
    name: r.name,
    checksum: r.checksum,
    operationId: r.operation_id,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    dirty: r.dirty,
  }));
}

export function historyFingerprint(rows: readonly HistoryRow[]): string {
  return digest({ formatVersion: 1, rows: rows.map((r) => ({ version: r.version, checksum: r.checksum, dirty: r.dirty })) });
}

/** A version's numeric order as a key: `001` and `1` are one version. */
export const orderOf = (version: string) => BigInt(version).toString();

/** Files whose version has no history row, in version order. */
export function pendingSources(sources: readonly MigrationSource[], rows: readonly HistoryRow[]): MigrationSource[] {
  const recorded = new Set(rows.map((r) => orderOf(r.version)));
  return sources.filter((s) => !recorded.has(orderOf(s.version)));
}

export function computeHistory(sources: readonly MigrationSource[], rows: readonly HistoryRow[]): MigrationHistory {
  const byVersion = new Map(sources.map((s) => [orderOf(s.version), s]));
  const pending = pendingSources(sources, rows);
  const highestApplied = rows.reduce<bigint | undefined>((max, r) => {
    const v = BigInt(r.version);
    return max === undefined || v > max ? v : max;
  }, undefined);
  return {
    applied: rows.map((r): AppliedMigration => ({
      version: r.version,
      name: r.name,
      checksum: r.checksum,
      operationId: r.operationId,
      appliedAt: (r.finishedAt ?? r.startedAt).toISOString(),
    })),
    pending: pending.map(toMigrationFile),
    dirty: rows.filter((r) => r.dirty).map((r) => r.version),
    modified: rows.filter((r) => {
      const source = byVersion.get(orderOf(r.version));
      return source !== undefined && source.checksum !== r.checksum;
    }).map((r) => r.version),
    outOfOrder: highestApplied === undefined ? [] : pending.filter((s) => s.order < highestApplied).map((s) => s.version),
    missing: rows.filter((r) => !byVersion.has(orderOf(r.version))).map((r) => r.version),
    fingerprint: historyFingerprint(rows),
  };
}

export function toMigrationFile(source: MigrationSource): MigrationFile {
  return { version: source.version, name: source.name, checksum: source.checksum };
}
