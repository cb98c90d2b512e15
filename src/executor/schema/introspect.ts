// Reading the supported object set from the catalog. Callers run this inside a transaction after
// qualifyNames(), so every printed name is schema-qualified. The managed schemas are all schemas except the
// system ones and the executor's own bookkeeping schema.
import { BOOKKEEPING_SCHEMA } from '../bookkeeping.js';
import { quoteIdent, type Db } from '../db.js';
import type { Column, Constraint, ConstraintKind, Index, SchemaModel, Sequence, SequenceOptions, Table, View } from './model.js';

/** SQL condition on a pg_namespace row aliased `n`: is it a schema the executor manages? */
export const MANAGED_NAMESPACE = `(n.nspname NOT IN ('pg_catalog', 'information_schema', '${BOOKKEEPING_SCHEMA}') AND n.nspname NOT LIKE 'pg\\_%')`;

export const relationKey = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;

const CONSTRAINT_KINDS: Record<string, ConstraintKind> = { p: 'primary_key', u: 'unique', c: 'check', f: 'foreign_key' };

/** Object ids as text: they are unsigned 32-bit and overflow int4. */
type Oid = string;
interface RelationRow { oid: Oid; schema: string; name: string }
interface SequenceRow {
  start: string; increment: string; min: string; max: string; cache: string; cycle: boolean;
}

export async function introspect(client: Db): Promise<SchemaModel> {
  const schemas = (await client.query<{ name: string }>(`SELECT n.nspname AS name FROM pg_namespace n WHERE ${MANAGED_NAMESPACE}`)).rows.map((r) => r.name);
  const relations = (await client.query<RelationRow & { kind: string }>(
    `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name, c.relkind AS kind
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${MANAGED_NAMESPACE} AND c.relkind IN ('r', 'v', 'S')`)).rows;
  const keyOf = new Map(relations.map((r) => [r.oid, relationKey(r.schema, r.name)]));
  const tableRows = relations.filter((r) => r.kind === 'r');
  const tableOids = tableRows.map((r) => r.oid);

  const columns = await readColumns(client, tableOids);
  const constraints = await readConstraints(client, tableOids, keyOf);
  const indexes = await readIndexes(client, tableOids);
  const tables: Table[] = tableRows.map((r) => ({
    key: keyOf.get(r.oid)!,
    schema: r.schema,
    name: r.name,
    columns: columns.get(r.oid) ?? [],
    constraints: constraints.get(r.oid) ?? [],
    indexes: indexes.get(r.oid) ?? [],
  }));
  const views = await readViews(client, relations.filter((r) => r.kind === 'v'), keyOf);
  const sequences = await readSequences(client, keyOf);
  return { schemas, tables, views, sequences };
}

const sequenceOptionColumns = (s: string) =>
  `${s}.seqstart::text AS start, ${s}.seqincrement::text AS increment, ${s}.seqmin::text AS min, ${s}.seqmax::text AS max, ${s}.seqcache::text AS cache, ${s}.seqcycle AS cycle`;

const sequenceOptions = (r: SequenceRow): SequenceOptions =>
  ({ start: r.start, increment: r.increment, min: r.min, max: r.max, cache: r.cache, cycle: r.cycle });

async function readColumns(client: Db, tableOids: Oid[]): Promise<Map<Oid, Column[]>> {
  const { rows } = await client.query<SequenceRow & {
    table_oid: Oid; name: string; type: string; not_null: boolean; default: string | null; identity: string; has_sequence: boolean;
  }>(
    `SELECT a.attrelid::text AS table_oid, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
            pg_get_expr(d.adbin, d.adrelid) AS default, a.attidentity AS identity, s.seqrelid IS NOT NULL AS has_sequence,
            ${sequenceOptionColumns('s')}
       FROM pg_attribute a
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       LEFT JOIN pg_depend dep ON a.attidentity <> '' AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid
            AND dep.refobjsubid = a.attnum AND dep.classid = 'pg_class'::regclass AND dep.deptype = 'i'
       LEFT JOIN pg_sequence s ON s.seqrelid = dep.objid
      WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY a.attrelid, a.attnum`, [tableOids]);
  const out = new Map<Oid, Column[]>();
  for (const r of rows) {
    const identity = r.identity === '' || !r.has_sequence ? null
      : { generation: r.identity === 'a' ? 'always' as const : 'by_default' as const, options: sequenceOptions(r) };
    push(out, r.table_oid, { name: r.name, type: r.type, notNull: r.not_null, default: r.default, identity });
  }
  return out;
}

async function readConstraints(client: Db, tableOids: Oid[], keyOf: Map<Oid, string>): Promise<Map<Oid, Constraint[]>> {
  const { rows } = await client.query<{ table_oid: Oid; name: string; type: string; definition: string; references: Oid }>(
    `SELECT con.conrelid::text AS table_oid, con.conname AS name, con.contype AS type, pg_get_constraintdef(con.oid) AS definition,
            con.confrelid::text AS references
       FROM pg_constraint con
      WHERE con.conrelid = ANY($1::oid[]) AND con.contype IN ('p', 'u', 'c', 'f')`, [tableOids]);
  const out = new Map<Oid, Constraint[]>();
  for (const r of rows) {
    push(out, r.table_oid, {
      name: r.name,
      kind: CONSTRAINT_KINDS[r.type]!,
      definition: r.definition,
      references: r.type === 'f' ? keyOf.get(r.references) ?? null : null,
    });
  }
  return out;
}

/** Indexes other than the ones that back a primary-key, unique or exclusion constraint. */
async function readIndexes(client: Db, tableOids: Oid[]): Promise<Map<Oid, Index[]>> {
  const { rows } = await client.query<{ table_oid: Oid; name: string; definition: string; unique: boolean }>(
    `SELECT i.indrelid::text AS table_oid, ic.relname AS name, pg_get_indexdef(i.indexrelid) AS definition, i.indisunique AS unique
       FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
      WHERE i.indrelid = ANY($1::oid[])
        AND NOT EXISTS (SELECT 1 FROM pg_constraint con
                         WHERE con.conrelid = i.indrelid AND con.conindid = i.indexrelid AND con.contype IN ('p', 'u', 'x'))`, [tableOids]);
  const out = new Map<Oid, Index[]>();
  for (const r of rows) push(out, r.table_oid, { name: r.name, definition: r.definition, unique: r.unique });
  return out;
}

async function readViews(client: Db, viewRows: RelationRow[], keyOf: Map<Oid, string>): Promise<View[]> {
  const oids = viewRows.map((r) => r.oid);
  const definitions = new Map((await client.query<{ oid: Oid; definition: string }>(
    'SELECT c.oid::text AS oid, pg_get_viewdef(c.oid) AS definition FROM pg_class c WHERE c.oid = ANY($1::oid[])', [oids])).rows
    .map((r) => [r.oid, r.definition.trim().replace(/;$/, '')]));
  const dependencies = (await client.query<{ view: Oid; ref: Oid }>(
    `SELECT DISTINCT r.ev_class::text AS view, d.refobjid::text AS ref
       FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
      WHERE r.ev_class = ANY($1::oid[]) AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> r.ev_class`, [oids])).rows;
  return viewRows.map((r) => ({
    key: keyOf.get(r.oid)!,
    schema: r.schema,
    name: r.name,
    definition: definitions.get(r.oid)!,
    dependsOn: dependencies.filter((d) => d.view === r.oid && keyOf.has(d.ref)).map((d) => keyOf.get(d.ref)!).sort(),
  }));
}

/** Free-standing and column-owned sequences; identity sequences belong to their column. */
async function readSequences(client: Db, keyOf: Map<Oid, string>): Promise<Sequence[]> {
  const { rows } = await client.query<SequenceRow & RelationRow & { type: string; owner_table: Oid | null; owner_column: string | null }>(
    `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name, format_type(s.seqtypid, NULL) AS type, ${sequenceOptionColumns('s')},
            owner.refobjid::text AS owner_table, a.attname AS owner_column
       FROM pg_sequence s
       JOIN pg_class c ON c.oid = s.seqrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_depend owner ON owner.classid = 'pg_class'::regclass AND owner.objid = c.oid
            AND owner.refclassid = 'pg_class'::regclass AND owner.refobjsubid > 0 AND owner.deptype = 'a'
       LEFT JOIN pg_attribute a ON a.attrelid = owner.refobjid AND a.attnum = owner.refobjsubid
      WHERE ${MANAGED_NAMESPACE}
        AND NOT EXISTS (SELECT 1 FROM pg_depend i WHERE i.classid = 'pg_class'::regclass AND i.objid = c.oid AND i.deptype = 'i')`);
  return rows.map((r) => ({
    key: keyOf.get(r.oid)!,
    schema: r.schema,
    name: r.name,
    type: r.type,
    options: sequenceOptions(r),
    ownedBy: r.owner_table !== null && r.owner_column !== null && keyOf.has(r.owner_table)
      ? { table: keyOf.get(r.owner_table)!, column: r.owner_column }
      : null,
  }));
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
