// Adopting a database another tool migrated (PtahMigration spec.adoption), defined once for the CRD, the Job's
// environment, the runner and the executor: which tool's history table names the files already applied, or a
// baseline version at and below which every file counts as applied. Adoption is only ever proposed in a plan; a
// person's approval of that plan is what lets an Apply record those files as applied without running them.
export const HISTORY_TOOLS = ['golang-migrate', 'goose', 'dbmate', 'flyway'] as const;
export type HistoryTool = (typeof HISTORY_TOOLS)[number];
export const ADOPTION_SOURCES = [...HISTORY_TOOLS, 'baseline'] as const;
export type AdoptionSource = (typeof ADOPTION_SOURCES)[number];

export interface MigrationAdoption {
  from: AdoptionSource;
  /** A history tool's table, `table` or `schema.table`; absent means the tool's default name in current_schema(). */
  table?: string;
  /** from: baseline only: every file whose version is at or below it counts as applied. */
  baselineVersion?: string;
}

/** Each tool's default history table. */
export const DEFAULT_HISTORY_TABLES: Record<HistoryTool, string> = {
  'golang-migrate': 'schema_migrations',
  goose: 'goose_db_version',
  dbmate: 'schema_migrations',
  flyway: 'flyway_schema_history',
};

/** An unquoted PostgreSQL identifier, optionally schema-qualified: what a tool's table option accepts here. */
export const HISTORY_TABLE_PATTERN = '^[A-Za-z_][A-Za-z0-9_$]{0,62}(\\.[A-Za-z_][A-Za-z0-9_$]{0,62})?$';
export const BASELINE_VERSION_PATTERN = '^[0-9]{1,30}$';

/** Why `value` is not a well-formed adoption, or undefined when it is. */
export function adoptionProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'is not an object';
  const { from, table, baselineVersion, ...rest } = value as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) return `has an unknown field ${extra[0]}`;
  if (typeof from !== 'string' || !(ADOPTION_SOURCES as readonly string[]).includes(from)) return `from must be one of ${ADOPTION_SOURCES.join(', ')}`;
  if (from === 'baseline') {
    if (typeof baselineVersion !== 'string' || !new RegExp(BASELINE_VERSION_PATTERN).test(baselineVersion)) return 'from: baseline needs baselineVersion (digits)';
    if (table !== undefined) return 'from: baseline reads no history table, so it takes no table';
    return undefined;
  }
  if (baselineVersion !== undefined) return `baselineVersion belongs to from: baseline, not ${from}`;
  if (table !== undefined && (typeof table !== 'string' || !new RegExp(HISTORY_TABLE_PATTERN).test(table))) {
    return 'table must be an unquoted identifier, optionally schema-qualified (schema.table)';
  }
  return undefined;
}

/** The adoption as the Job's environment carries it: canonical JSON of exactly the fields set. */
export function adoptionEnvValue(adoption: MigrationAdoption): string {
  const { from, table, baselineVersion } = adoption;
  return JSON.stringify({ from, ...(table !== undefined ? { table } : {}), ...(baselineVersion !== undefined ? { baselineVersion } : {}) });
}

/** Parses the environment's value; throws an Error whose message says what is wrong. */
export function parseAdoption(text: string): MigrationAdoption {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('is not JSON');
  }
  const problem = adoptionProblem(value);
  if (problem) throw new Error(problem);
  return value as MigrationAdoption;
}
