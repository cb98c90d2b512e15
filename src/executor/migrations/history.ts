// The applied history (rows of ptah_migrations.history) held against the artifact's files: what is applied,
// pending, dirty, modified, out of order or missing, and a fingerprint that moves whenever the history does. While
// nothing is recorded, a declared adoption (spec.adoption) counts the files another tool applied as applied: they
// are never pending, and the fingerprint covers them, so an approval binds exactly the adoption it was shown.
import { digest } from '../../shared/canonical.js';
import type { AppliedMigration, MigrationFile, MigrationHistory } from '../../shared/executor-report.js';
import type { AdoptionSource, MigrationAdoption } from '../../shared/migration-adoption.js';
import { HISTORY_TABLE, bookkeepingTableExists } from '../bookkeeping.js';
import type { Db } from '../db.js';
import { readAdoptable } from './adoption.js';
import type { MigrationSource } from './files.js';

/** Files an adoption counts as applied, not yet recorded. */
export interface Adopted {
  from: AdoptionSource;
  sources: MigrationSource[];
}

/** What the database says is applied: its recorded rows, and the adoption read while there are none. */
export interface Applied {
  rows: HistoryRow[];
  adopted?: Adopted;
}

/** The recorded rows, and, when there are none and the resource declares an adoption, the files it adopts. */
export async function readApplied(client: Db, sources: readonly MigrationSource[], adoption: MigrationAdoption | undefined): Promise<Applied> {
  const rows = await readHistoryRows(client);
  if (rows.length > 0 || adoption === undefined) return { rows };
  const adopted = await readAdoptable(client, adoption, sources);
  return adopted.length > 0 ? { rows, adopted: { from: adoption.from, sources: adopted } } : { rows };
}

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

/** Moves whenever the rows or the adopted files do; without an adoption, the fingerprint readings always had. */
export function historyFingerprint({ rows, adopted }: Applied): string {
  return digest({
    formatVersion: 1,
    rows: rows.map((r) => ({ version: r.version, checksum: r.checksum, dirty: r.dirty })),
    ...(adopted ? { adopted: { from: adopted.from, files: adopted.sources.map((s) => ({ version: s.version, checksum: s.checksum })) } } : {}),
  });
}

/** A version's numeric order as a key: `001` and `1` are one version. */
export const orderOf = (version: string) => BigInt(version).toString();

/** Files whose version has no history row and no adoption, in version order. */
export function pendingSources(sources: readonly MigrationSource[], { rows, adopted }: Applied): MigrationSource[] {
  const applied = new Set([...rows.map((r) => orderOf(r.version)), ...(adopted?.sources ?? []).map((s) => orderOf(s.version))]);
  return sources.filter((s) => !applied.has(orderOf(s.version)));
}

export function computeHistory(sources: readonly MigrationSource[], applied: Applied): MigrationHistory {
  const { rows, adopted } = applied;
  const byVersion = new Map(sources.map((s) => [orderOf(s.version), s]));
  const pending = pendingSources(sources, applied);
  const highestApplied = [...rows.map((r) => BigInt(r.version)), ...(adopted?.sources ?? []).map((s) => s.order)]
    .reduce<bigint | undefined>((max, v) => (max === undefined || v > max ? v : max), undefined);
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
    fingerprint: historyFingerprint(applied),
    ...(adopted ? { adoptable: { from: adopted.from, files: adopted.sources.map(toMigrationFile) } } : {}),
  };
}

export function toMigrationFile(source: MigrationSource): MigrationFile {
  return { version: source.version, name: source.name, checksum: source.checksum };
}
