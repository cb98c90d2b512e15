// Adopting a database another tool migrated (spec.adoption): which of the artifact's files that tool's history
// table says are applied, so they are recorded and never run again. Only reads: the caller holds the transaction.
// Anything the table does not say plainly (a failed or dirty run, a version with no file, an edited file, a row
// of a kind the executor cannot mirror) refuses the whole adoption; nothing is ever adopted in part.
import {
  DEFAULT_HISTORY_TABLES, adoptionProblem, type HistoryTool, type MigrationAdoption,
} from '../../shared/migration-adoption.js';
import { quoteIdent, type Db } from '../db.js';
import { ADOPTION_REFUSED } from '../../shared/executor-report.js';
import { ExecutorFailure } from '../failure.js';
import { listed, type MigrationSource } from './files.js';
import { flywayIntegerVersion } from './formats/flyway.js';

const refusal = (message: string) => new ExecutorFailure(ADOPTION_REFUSED, message);

/** The artifact's files the adoption counts as applied, in version order; throws ExecutorFailure('adoption_refused', …) */
export async function readAdoptable(client: Db, adoption: MigrationAdoption, sources: readonly MigrationSource[]): Promise<MigrationSource[]> {
  const problem = adoptionProblem(adoption);
  if (problem) throw refusal(`spec.adoption ${problem}: correct spec.adoption`);
  if (adoption.from === 'baseline') return atOrBelow(sources, BigInt(adoption.baselineVersion!));
  const tool = adoption.from;
  const table = await findHistoryTable(client, tool, adoption.table ?? DEFAULT_HISTORY_TABLES[tool]);
  await assertToolColumns(client, tool, table);
  return READERS[tool](client, table, sources);
}

/** A history table found in the database: `sql` to name it in a statement, `shown` to name it to a person. */
interface HistoryTable {
  sql: string;
  shown: string;
}

type HistoryReader = (client: Db, table: HistoryTable, sources: readonly MigrationSource[]) => Promise<MigrationSource[]>;

const atOrBelow = (sources: readonly MigrationSource[], head: bigint) => sources.filter((s) => s.order <= head);

// ---- finding the table ---------------------------------------------------------------------------------------

/**
 * The table, found as PostgreSQL finds the unquoted name: a qualified name in its schema, an unqualified one in
 * the first schema of the session's configured search_path that holds it. The configured (reset) value is the one
 * the tool saw when it connected, and stays right when the caller has narrowed search_path to read the catalog.
 */
async function findHistoryTable(client: Db, tool: HistoryTool, name: string): Promise<HistoryTable> {
  const [schema, table] = name.includes('.') ? name.toLowerCase().split('.') : [undefined, name.toLowerCase()];
  const schemas = schema === undefined ? await configuredSearchPath(client) : [schema];
  const { rows: [found] } = await client.query<HistoryTable>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS sql, n.nspname || '.' || c.relname AS shown
       FROM unnest($1::text[]) WITH ORDINALITY AS candidate(name, rank)
       JOIN pg_class c ON c.oid = to_regclass(candidate.name) JOIN pg_namespace n ON n.oid = c.relnamespace
      ORDER BY candidate.rank LIMIT 1`,
    [schemas.map((s) => `${quoteIdent(s)}.${quoteIdent(table!)}`)]);
  if (found) return found;
  const where = schema === undefined ? `in the search_path (${schemas.join(', ') || 'empty'})` : `in schema ${schema}`;
  throw refusal(`no table ${name} ${where}: ${tool} keeps its history there, and nothing by that name exists, so there is nothing ` +
    'to adopt; check spec.adoption.table or remove spec.adoption');
}

/** The schemas of the session's configured search_path, in order, `$user` read as the current user. */
async function configuredSearchPath(client: Db): Promise<string[]> {
  const { rows: [row] } = await client.query<{ setting: string; user: string }>(
    `SELECT reset_val AS setting, current_user AS user FROM pg_settings WHERE name = 'search_path'`);
  const items = row!.setting.match(/"(?:[^"]|"")*"|[^,\s]+/g) ?? [];
  return items.map((item) => {
    if (item === '$user' || item === '"$user"') return row!.user;
    return item.startsWith('"') ? item.slice(1, -1).replace(/""/g, '"') : item.toLowerCase();
  });
}

// ---- the tool's columns ----------------------------------------------------------------------------------------

/** Each tool's history columns as `name type` (format_type without modifiers), sorted. */
const TOOL_COLUMNS: Record<HistoryTool, readonly string[]> = {
  'golang-migrate': ['dirty boolean', 'version bigint'],
  goose: ['id integer', 'is_applied boolean', 'tstamp timestamp without time zone', 'version_id bigint'],
  dbmate: ['version character varying'],
  flyway: [
    'checksum integer', 'description character varying', 'execution_time integer', 'installed_by character varying',
    'installed_on timestamp without time zone', 'installed_rank integer', 'script character varying', 'success boolean',
    'type character varying', 'version character varying',
  ],
};

/** Refuses a table whose columns are not the tool's; golang-migrate and dbmate even share the default name. */
async function assertToolColumns(client: Db, tool: HistoryTool, table: HistoryTable): Promise<void> {
  const { rows } = await client.query<{ column: string }>(
    `SELECT attname || ' ' || format_type(atttypid, NULL) AS column FROM pg_attribute
      WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY 1`, [table.sql]);
  const columns = rows.map((r) => r.column).join(', ');
  if (columns === TOOL_COLUMNS[tool].join(', ')) return;
  const lookalike = (Object.keys(TOOL_COLUMNS) as HistoryTool[]).find((other) => TOOL_COLUMNS[other].join(', ') === columns);
  throw refusal(`${table.shown} is not ${tool}'s history table: its columns are (${columns}), and ${tool} writes ` +
    `(${TOOL_COLUMNS[tool].join(', ')}); ` + (lookalike
    ? `it looks like ${lookalike}'s: if ${lookalike} migrated this database, set spec.adoption.from: ${lookalike}`
    : `point spec.adoption.table at the table ${tool} wrote`));
}

// ---- reading each tool's rows ------------------------------------------------------------------------------------

/** The files for exactly the versions a tool recorded as applied; a version without a file refuses. */
function filesForVersions(tool: HistoryTool, table: HistoryTable, versions: readonly string[], sources: readonly MigrationSource[]): MigrationSource[] {
  const orders = new Set(sources.map((s) => s.order));
  const missing = versions.filter((v) => !orders.has(BigInt(v)));
  if (missing.length > 0) {
    throw refusal(`${tool} recorded ${missing.length === 1 ? 'version' : `${missing.length} versions`} ${listed(missing)} applied in ${table.shown}, ` +
      `but the artifact has no file for ${missing.length === 1 ? 'it' : 'them'}: add the files ${tool} ran to the artifact (every applied ` +
      'migration must be in it), or, if they never ran on this database, remove their rows first');
  }
  const applied = new Set(versions.map((v) => BigInt(v)));
  return sources.filter((s) => applied.has(s.order));
}

/** One row at most: the version every file at or below it has reached; dirty means that run failed part way. */
const golangMigrate: HistoryReader = async (client, table, sources) => {
  const { rows } = await client.query<{ version: string; dirty: boolean }>(`SELECT version::text AS version, dirty FROM ${table.sql} ORDER BY version`);
  if (rows.length > 1) {
    throw refusal(`${table.shown} holds ${rows.length} rows (versions ${listed(rows.map((r) => r.version))}), and golang-migrate keeps exactly ` +
      'one: check that spec.adoption.table names the table golang-migrate wrote, and leave it the one row of the version reached');
  }
  const [head] = rows;
  if (!head) return [];
  if (head.dirty) {
    throw refusal(`${table.shown} records version ${head.version} as dirty: golang-migrate's run of it failed part way, so what it changed ` +
      'is unknown; repair the database by hand and record the version it really reached with `migrate force <version>` first');
  }
  filesForVersions('golang-migrate', table, [head.version], sources);
  return atOrBelow(sources, BigInt(head.version));
};

/** The newest row of each version decides; version 0 is the row goose writes when it creates the table. */
const goose: HistoryReader = async (client, table, sources) => {
  const { rows } = await client.query<{ version: string }>(
    `SELECT version_id::text AS version FROM (SELECT DISTINCT ON (version_id) version_id, is_applied FROM ${table.sql} ORDER BY version_id, id DESC) newest
      WHERE is_applied AND version_id <> 0 ORDER BY version_id`);
  return filesForVersions('goose', table, rows.map((r) => r.version), sources);
};

/** A row per applied file, its version the file name's leading digits as text. */
const dbmate: HistoryReader = async (client, table, sources) => {
  const { rows } = await client.query<{ version: string }>(`SELECT version FROM ${table.sql} ORDER BY version`);
  const versions = rows.map((r) => r.version);
  const notDigits = versions.filter((v) => !/^[0-9]+$/.test(v));
  if (notDigits.length > 0) {
    throw refusal(`${table.shown} holds ${notDigits.length === 1 ? 'a version' : `${notDigits.length} versions`} that ${notDigits.length === 1 ? 'is' : 'are'} ` +
      `not digits: ${listed(notDigits.map((v) => JSON.stringify(v)))}; dbmate records a file name's leading digits, so these rows are not ` +
      'from a migration file: remove them, or check spec.adoption.table');
  }
  return filesForVersions('dbmate', table, versions, sources);
};

interface FlywayRow {
  installed_rank: number;
  version: string | null;
  type: string;
  script: string;
  checksum: number | null;
  success: boolean;
}

/** Flyway's row types the executor can mirror; every other (JDBC, SCRIPT, UNDO_SQL, …) ran something it cannot. */
const FLYWAY_TYPES = new Set(['SQL', 'BASELINE', 'SQL_BASELINE', 'SCHEMA', 'DELETE']);

/** Rows in installed_rank order: SQL applies a version, DELETE unapplies one, a baseline covers every file at or below it. */
const flyway: HistoryReader = async (client, table, sources) => {
  const { rows } = await client.query<FlywayRow>(
    `SELECT installed_rank, version, type, script, checksum, success FROM ${table.sql} ORDER BY installed_rank`);
  refuseFlywayRows(table, rows.filter((r) => !r.success), 'recorded as failed (success = false): a migration that ran outside a ' +
    'transaction failed part way, so what it changed is unknown; repair the database by hand and run `flyway repair` first');
  refuseFlywayRows(table, rows.filter((r) => !FLYWAY_TYPES.has(r.type)), 'of a type the executor cannot adopt (it adopts SQL migrations ' +
    'and baselines): migrate this database with Flyway past them, or adopt it with from: baseline instead');
  refuseFlywayRows(table, rows.filter((r) => r.version !== null && flywayIntegerVersion(r.version) === undefined), 'with a dotted version; ' +
    'the executor records integer versions, so only the first part may be non-zero: adopt with from: baseline instead');
  refuseFlywayRows(table, rows.filter((r) => /BASELINE$/.test(r.type) && r.version === null), 'that is a baseline without a version, which Flyway never writes: check spec.adoption.table');
  const { applied, baseline } = flywayApplied(rows);
  const adopted = filesForVersions('flyway', table, [...applied.keys()].map(String), sources);
  refuseChangedFiles(table, adopted.flatMap((file) => changedSince(file, applied.get(file.order)!)));
  return sources.filter((s) => s.order <= baseline || applied.has(s.order));
};

function refuseFlywayRows(table: HistoryTable, rows: readonly FlywayRow[], why: string): void {
  if (rows.length === 0) return;
  const described = rows.map((r) => `rank ${r.installed_rank} (${r.type} ${r.version ?? 'no version'}, ${r.script})`);
  throw refusal(`${table.shown} holds ${rows.length === 1 ? 'a row' : `${rows.length} rows`} ${why}: ${listed(described)}`);
}

/** The SQL row of each applied version (by integer version) and the highest baseline, replaying the rows in rank order. */
function flywayApplied(rows: readonly FlywayRow[]): { applied: Map<bigint, FlywayRow>; baseline: bigint } {
  const applied = new Map<bigint, FlywayRow>();
  let baseline = -1n;
  for (const row of rows) {
    // A NULL version is a repeatable migration's or a marker's: nothing the executor applies.
    if (row.version === null || row.type === 'SCHEMA') continue;
    const version = BigInt(flywayIntegerVersion(row.version)!);
    if (row.type === 'SQL') applied.set(version, row);
    else if (row.type === 'DELETE') applied.delete(version);
    else if (version > baseline) baseline = version;
  }
  return { applied, baseline };
}

/** A file whose text is not what Flyway checksummed; files not read as flyway carry no checksum to compare. */
function changedSince(file: MigrationSource, row: FlywayRow): string[] {
  if (row.checksum === null || file.flywayChecksum === undefined || file.flywayChecksum === row.checksum) return [];
  return [`${file.fileName} (recorded ${row.checksum}, computed ${file.flywayChecksum})`];
}

function refuseChangedFiles(table: HistoryTable, changed: readonly string[]): void {
  if (changed.length === 0) return;
  throw refusal(`the file changed since Flyway applied it, by the checksums in ${table.shown}: ${listed(changed)}; restore the text ` +
    'Flyway ran, or, if the edit is deliberate and already in the database, record it with `flyway repair` first');
}

const READERS: Record<HistoryTool, HistoryReader> = { 'golang-migrate': golangMigrate, goose, dbmate, flyway };
