// The executor's own records in the target database, in one schema that drift detection never looks at:
// the migration history, the repairs of its dirty rows, and which operation applied which schema plan and when it
// ran (from taking the writer locks to its record), so two runs that overlapped on one database can be told from
// the database alone.
import { realmLockKey } from '../shared/realm-lock-key.js';
import type { Db } from './db.js';

export const BOOKKEEPING_SCHEMA = 'ptah_migrations';
export const HISTORY_TABLE = `${BOOKKEEPING_SCHEMA}.history`;
export const SCHEMA_APPLIES_TABLE = `${BOOKKEEPING_SCHEMA}.schema_applies`;
export const REPAIRS_TABLE = `${BOOKKEEPING_SCHEMA}.repairs`;

// Two realms on one database each hold their own realm lock, so creating the tables takes one more, shared key.
const BOOTSTRAP_LOCK_KEY = realmLockKey('ptah-bookkeeping-bootstrap');

/** Creates the bookkeeping schema and tables when missing. Must run inside a transaction. */
export async function ensureBookkeeping(client: Db): Promise<void> {
  const { rows } = await client.query<{ ready: boolean }>(
    `SELECT to_regclass($1) IS NOT NULL AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($2) AND attname = 'started_at')
       AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'adopted_from')
       AND to_regclass($3) IS NOT NULL AS ready`,
    [HISTORY_TABLE, SCHEMA_APPLIES_TABLE, REPAIRS_TABLE]);
  if (rows[0]?.ready) return;
  await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [BOOTSTRAP_LOCK_KEY]);
  await client.query(`
    CREATE SCHEMA IF NOT EXISTS ${BOOKKEEPING_SCHEMA};
    CREATE TABLE IF NOT EXISTS ${HISTORY_TABLE} (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      version text NOT NULL,
      version_order numeric NOT NULL UNIQUE,
      name text NOT NULL,
      checksum text NOT NULL,
      transactional boolean NOT NULL,
      operation_id text NOT NULL,
      started_at timestamptz NOT NULL,
      finished_at timestamptz,
      dirty boolean NOT NULL
    );
    CREATE TABLE IF NOT EXISTS ${SCHEMA_APPLIES_TABLE} (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      operation_id text NOT NULL,
      plan_content_digest text NOT NULL,
      desired_schema_digest text NOT NULL,
      statement_count integer NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    -- Tables an earlier executor created lack it; their rows keep NULL (start not recorded).
    ALTER TABLE ${SCHEMA_APPLIES_TABLE} ADD COLUMN IF NOT EXISTS started_at timestamptz;
    -- The tool whose history a row was adopted from (spec.adoption), NULL for a file this executor ran.
    ALTER TABLE ${HISTORY_TABLE} ADD COLUMN IF NOT EXISTS adopted_from text;
    -- Each approved repair of a dirty row (spec.repair): which operation made it, to which row, and how.
    CREATE TABLE IF NOT EXISTS ${REPAIRS_TABLE} (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      operation_id text NOT NULL,
      version text NOT NULL,
      checksum text NOT NULL,
      resolution text NOT NULL CHECK (resolution IN ('finished', 'undone')),
      row_operation_id text NOT NULL,
      row_started_at timestamptz NOT NULL,
      repaired_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );`);
}

/** Whether a bookkeeping table exists yet; reads must not create it. */
export async function bookkeepingTableExists(client: Db, table: string): Promise<boolean> {
  const { rows } = await client.query<{ exists: boolean }>('SELECT to_regclass($1) IS NOT NULL AS exists', [table]);
  return rows[0]?.exists === true;
}
