// Reading the supported object set from the catalog. Callers run this inside a transaction after
// qualifyNames(), so every printed name is schema-qualified. The managed schemas are all schemas except the
// system ones and the executor's own bookkeeping schema; objects an extension owns are left to the extension.
import { BOOKKEEPING_SCHEMA } from '../bookkeeping.js';
import { quoteIdent, type Db } from '../db.js';
import type {
  Collation, Column, Comment, CompositeType, Constraint, ConstraintKind, Domain, EnumType, Extension, Grant, Index, Operator, PartitionIndex, Policy, Routine,
  SchemaModel,
  Sequence, SequenceOptions, Table, Trigger, View,
} from './model.js';

/** SQL condition on a pg_namespace row aliased `n`: is it a schema the executor manages? */
export const MANAGED_NAMESPACE = `(n.nspname NOT IN ('pg_catalog', 'information_schema', '${BOOKKEEPING_SCHEMA}') AND n.nspname NOT LIKE 'pg\\_%')`;

/** SQL condition: the object `oid` of catalog `catalog` is not a member of an extension. */
export const notExtensionMember = (catalog: string, oid: string) =>
  `NOT EXISTS (SELECT 1 FROM pg_depend ext WHERE ext.classid = '${catalog}'::regclass AND ext.objid = ${oid} AND ext.deptype = 'e')`;

/** SQL expression quoting an identifier always, as quoteIdent does. */
const q = (expr: string) => `('"' || replace(${expr}, '"', '""') || '"')`;
const qualified = (schema: string, name: string) => `(${q(schema)} || '.' || ${q(name)})`;

export const relationKey = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;

const CONSTRAINT_KINDS: Record<string, ConstraintKind> = { p: 'primary_key', u: 'unique', c: 'check', f: 'foreign_key', x: 'exclusion' };
const ROUTINE_KINDS: Record<string, Routine['kind']> = { f: 'function', p: 'procedure', a: 'aggregate' };

/**
 * SQL condition on a pg_proc row aliased `p`: a function, a procedure or an ordinary aggregate. Ordered-set and
 * hypothetical-set aggregates and window functions are refused (unsupported.ts).
 */
const MODELLED_ROUTINE = (p: string) =>
  `(${p}.prokind IN ('f', 'p') OR (${p}.prokind = 'a' AND (SELECT g.aggkind FROM pg_aggregate g WHERE g.aggfnoid = ${p}.oid) = 'n'))`;

const functionOf = (column: string) => `(SELECT ${column}::regproc::text WHERE ${column} <> 0)`;
const MODIFY = (column: string) => `CASE ${column} WHEN 's' THEN 'SHAREABLE' WHEN 'w' THEN 'READ_WRITE' END`;
/**
 * An aggregate's CREATE OR REPLACE AGGREGATE, built from pg_aggregate (the server prints none), for a pg_proc row
 * aliased `p` (with its namespace `n`). Options left at their defaults are not written; a support function is
 * named as regproc prints it under an empty search_path (schema-qualified unless it is pg_catalog's and unique).
 */
const AGGREGATE_DEFINITION = `(SELECT 'CREATE OR REPLACE AGGREGATE ' || ${qualified('n.nspname', 'p.proname')}
    || '(' || CASE WHEN p.pronargs = 0 THEN '*' ELSE pg_get_function_arguments(p.oid) END || ') (' || concat_ws(', ',
      'SFUNC = ' || g.aggtransfn::regproc::text, 'STYPE = ' || format_type(g.aggtranstype, NULL), 'SSPACE = ' || nullif(g.aggtransspace, 0),
      'FINALFUNC = ' || ${functionOf('g.aggfinalfn')}, CASE WHEN g.aggfinalextra THEN 'FINALFUNC_EXTRA' END,
      'FINALFUNC_MODIFY = ' || ${MODIFY('g.aggfinalmodify')}, 'COMBINEFUNC = ' || ${functionOf('g.aggcombinefn')},
      'SERIALFUNC = ' || ${functionOf('g.aggserialfn')}, 'DESERIALFUNC = ' || ${functionOf('g.aggdeserialfn')}, 'INITCOND = ' || quote_literal(g.agginitval),
      'MSFUNC = ' || ${functionOf('g.aggmtransfn')}, 'MINVFUNC = ' || ${functionOf('g.aggminvtransfn')},
      'MSTYPE = ' || (SELECT format_type(g.aggmtranstype, NULL) WHERE g.aggmtranstype <> 0), 'MSSPACE = ' || nullif(g.aggmtransspace, 0),
      'MFINALFUNC = ' || ${functionOf('g.aggmfinalfn')}, CASE WHEN g.aggmfinalextra THEN 'MFINALFUNC_EXTRA' END,
      'MFINALFUNC_MODIFY = ' || ${MODIFY('g.aggmfinalmodify')}, 'MINITCOND = ' || quote_literal(g.aggminitval),
      'SORTOP = ' || (SELECT 'OPERATOR(' || ${q('o.nspname')} || '.' || o.oprname || ')'
                        FROM (SELECT op.oprname, opn.nspname FROM pg_operator op JOIN pg_namespace opn ON opn.oid = op.oprnamespace WHERE op.oid = g.aggsortop) o),
      'PARALLEL = ' || CASE p.proparallel WHEN 's' THEN 'SAFE' WHEN 'r' THEN 'RESTRICTED' END) || ')'
   FROM pg_aggregate g WHERE g.aggfnoid = p.oid)`;

/**
 * A column of a pg_collation row aliased `co` that not every server has (read through its JSON form, so one query
 * serves PostgreSQL 14–17): the ICU locale is `colliculocale` on 15 and 16, `colllocale` from 17 (on 14, collcollate);
 * ICU tailoring rules (`collicurules`) exist from 16.
 */
export const collationColumn = (name: string) => `(to_jsonb(co) ->> '${name}')`;
/**
 * A collation's CREATE COLLATION, built from pg_collation for a row aliased `co` (with its namespace `n`): a libc
 * collation by its two locales, any other by its locale, and whether it is deterministic, always written. A copy of
 * `"C"` or `"POSIX"` (`FROM "C"`) serves every encoding, as they do, which no list of options makes: it is copied.
 */
const COLLATION_DEFINITION = `'CREATE COLLATION ' || ${qualified('n.nspname', 'co.collname')} || CASE
    WHEN co.collprovider = 'c' AND co.collencoding = -1 AND co.collcollate = co.collctype THEN ' FROM pg_catalog.' || quote_ident(co.collcollate)
    ELSE ' (' || concat_ws(', ',
      'PROVIDER = ' || CASE co.collprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' WHEN 'b' THEN 'builtin' END,
      CASE WHEN co.collprovider = 'c' THEN 'LC_COLLATE = ' || quote_literal(co.collcollate) || ', LC_CTYPE = ' || quote_literal(co.collctype)
           ELSE 'LOCALE = ' || quote_literal(coalesce(${collationColumn('colllocale')}, ${collationColumn('colliculocale')}, co.collcollate)) END,
      'RULES = ' || quote_literal(${collationColumn('collicurules')}),
      'DETERMINISTIC = ' || CASE WHEN co.collisdeterministic THEN 'true' ELSE 'false' END) || ')' END`;

/** Object ids as text: they are unsigned 32-bit and overflow int4. */
type Oid = string;
interface RelationRow { oid: Oid; schema: string; name: string }
interface SequenceRow {
  start: string; increment: string; min: string; max: string; cache: string; cycle: boolean;
}

export async function introspect(client: Db): Promise<SchemaModel> {
  const rows = async <T extends object>(sql: string, params?: unknown[]) => (await client.query<T & Record<string, unknown>>(sql, params)).rows as T[];
  const schemas = (await rows<{ name: string }>(`SELECT n.nspname AS name FROM pg_namespace n WHERE ${MANAGED_NAMESPACE}`)).map((r) => r.name);
  const relations = await rows<RelationRow & {
    kind: string; rls: boolean; force_rls: boolean; unlogged: boolean; options: string[]; partition_by: string | null; parent: Oid | null; bound: string | null;
    parents: Oid[];
  }>(
    `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name, c.relkind AS kind, c.relrowsecurity AS rls, c.relforcerowsecurity AS force_rls,
            c.relpersistence = 'u' AS unlogged,
            ARRAY(SELECT o FROM unnest(c.reloptions) o UNION ALL SELECT 'toast.' || o FROM pg_class t, unnest(t.reloptions) o WHERE t.oid = c.reltoastrelid
                  ORDER BY 1) AS options,
            CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END AS partition_by,
            (SELECT i.inhparent::text FROM pg_inherits i WHERE i.inhrelid = c.oid AND c.relispartition) AS parent,
            CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound,
            ARRAY(SELECT i.inhparent::text FROM pg_inherits i WHERE i.inhrelid = c.oid AND NOT c.relispartition ORDER BY i.inhseqno) AS parents
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${MANAGED_NAMESPACE} AND c.relkind IN ('r', 'p', 'v', 'm', 'S') AND ${notExtensionMember('pg_class', 'c.oid')}`);
  const keyOf = new Map(relations.map((r) => [r.oid, relationKey(r.schema, r.name)]));
  const tableRows = relations.filter((r) => r.kind === 'r' || r.kind === 'p');
  const tableOids = tableRows.map((r) => r.oid);

  const columns = await readColumns(client, tableOids);
  const constraints = await readConstraints(client, tableOids, keyOf);
  const indexes = await readIndexes(client, relations.filter((r) => r.kind !== 'v' && r.kind !== 'S').map((r) => r.oid));
  const partitionIndexes = await readPartitionIndexes(client, tableRows.filter((r) => r.parent !== null).map((r) => r.oid));
  const tables: Table[] = tableRows.map((r) => ({
    key: keyOf.get(r.oid)!,
    schema: r.schema,
    name: r.name,
    columns: columns.get(r.oid) ?? [],
    constraints: constraints.get(r.oid) ?? [],
    indexes: indexes.get(r.oid) ?? [],
    rowSecurity: r.rls,
    forceRowSecurity: r.force_rls,
    unlogged: r.unlogged,
    options: r.options,
    partitionBy: r.partition_by,
    partitionOf: r.parent !== null && r.bound !== null && keyOf.has(r.parent) ? { parent: keyOf.get(r.parent)!, bound: r.bound } : null,
    partitionIndexes: partitionIndexes.get(r.oid) ?? [],
    // A parent outside the managed schemas is refused (unsupported.ts), so every parent has a key.
    inherits: r.parents.map((p) => keyOf.get(p)!),
  }));
  const views = await readViews(client, relations.filter((r) => r.kind === 'v' || r.kind === 'm'), keyOf, indexes);
  const sequences = await readSequences(client, keyOf);

  const extensions = await rows<Extension>(
    `SELECT x.extname AS name, n.nspname AS schema, x.extversion AS version FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
      WHERE x.extname <> 'plpgsql'`);
  const collations = await rows<Collation>(
    `SELECT ${qualified('n.nspname', 'co.collname')} AS key, ${COLLATION_DEFINITION} AS definition
       FROM pg_collation co JOIN pg_namespace n ON n.oid = co.collnamespace
      WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_collation', 'co.oid')}`);
  const enums = await rows<EnumType>(
    `SELECT t.oid::regtype::text AS key, n.nspname AS schema, array_agg(e.enumlabel::text ORDER BY e.enumsortorder) AS values
       FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
      WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_type', 't.oid')} GROUP BY 1, 2`);
  const domains = await rows<Domain>(
    `SELECT t.oid::regtype::text AS key, format_type(t.typbasetype, t.typtypmod) AS type, t.typnotnull AS "notNull",
            CASE WHEN t.typcollation <> (SELECT b.typcollation FROM pg_type b WHERE b.oid = t.typbasetype) THEN t.typcollation::regcollation::text END AS collation,
            t.typdefault AS default,
            coalesce((SELECT json_agg(json_build_object('name', c.conname, 'definition', pg_get_constraintdef(c.oid)) ORDER BY c.conname)
                        FROM pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c'), '[]') AS checks
       FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
      WHERE t.typtype = 'd' AND ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_type', 't.oid')}`);
  const composites = await rows<CompositeType>(
    `SELECT c.reltype::regtype::text AS key,
            coalesce((SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod)) ORDER BY a.attnum)
                        FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '[]') AS attributes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind = 'c' AND ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_type', 'c.reltype')}`);
  const routines = (await rows<Omit<Routine, 'kind'> & { kind: string }>(
    `SELECT p.oid::regprocedure::text AS key, p.prokind AS kind,
            p.prokind::text || ' ' || coalesce(pg_get_function_result(p.oid), '') || ' (' || pg_get_function_arguments(p.oid) || ')' AS header,
            CASE WHEN p.prokind = 'a' THEN ${AGGREGATE_DEFINITION} ELSE pg_get_functiondef(p.oid) END AS definition,
            p.prosqlbody IS NOT NULL OR EXISTS (
              SELECT 1 FROM pg_depend d JOIN pg_type t ON t.oid = d.refobjid JOIN pg_class r ON r.oid = t.typrelid
               WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.refclassid = 'pg_type'::regclass AND r.relkind IN ('r', 'p')) AS "afterTables",
            ARRAY(SELECT DISTINCT ${qualified('rn.nspname', 'r.relname')} FROM pg_depend d JOIN pg_type t ON t.oid = d.refobjid JOIN pg_class r ON r.oid = t.typrelid
                    JOIN pg_namespace rn ON rn.oid = r.relnamespace
                   WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.refclassid = 'pg_type'::regclass AND r.relkind IN ('v', 'm')
                   ORDER BY 1) AS "viewRowTypes",
            ARRAY(SELECT DISTINCT d.refobjid::regprocedure::text FROM pg_depend d
                   WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.refclassid = 'pg_proc'::regclass AND d.deptype = 'n'
                   ORDER BY 1) AS calls
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE ${MANAGED_NAMESPACE} AND ${MODELLED_ROUTINE('p')} AND ${notExtensionMember('pg_proc', 'p.oid')}`))
    .map((r): Routine => ({ ...r, kind: ROUTINE_KINDS[r.kind] ?? 'function', definition: r.definition.trim() }));
  const operators = await rows<Operator>(OPERATORS);
  const triggers = (await rows<{ table: Oid; name: string; definition: string; routine: string }>(
    `SELECT tg.tgrelid::text AS table, tg.tgname AS name, pg_get_triggerdef(tg.oid) AS definition, tg.tgfoid::regprocedure::text AS routine
       FROM pg_trigger tg WHERE tg.tgrelid = ANY($1::oid[]) AND NOT tg.tgisinternal AND tg.tgparentid = 0`,
    [[...tableOids, ...relations.filter((r) => r.kind === 'v').map((r) => r.oid)]]))
    .map((r): Trigger => ({ ...r, table: keyOf.get(r.table)! }));
  const policies = (await rows<{ table: Oid; name: string; definition: string }>(
    `SELECT p.polrelid::text AS table, p.polname AS name,
            'CREATE POLICY ' || ${q('p.polname')} || ' ON ' || ${qualified('n.nspname', 'c.relname')}
            || ' AS ' || CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END
            || ' FOR ' || CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END
            || ' TO ' || (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE ${q('pg_get_userbyid(r)')} END, ', ' ORDER BY r) FROM unnest(p.polroles) r)
            || coalesce(' USING (' || pg_get_expr(p.polqual, p.polrelid) || ')', '')
            || coalesce(' WITH CHECK (' || pg_get_expr(p.polwithcheck, p.polrelid) || ')', '') AS definition
       FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE p.polrelid = ANY($1::oid[])`, [tableOids]))
    .map((r): Policy => ({ ...r, table: keyOf.get(r.table)! }));
  const comments = await rows<Comment>(COMMENTS);
  const grants = await rows<Grant>(GRANTS);
  return { schemas, extensions, collations, enums, domains, composites, routines, operators, tables, views, sequences, triggers, policies, comments, grants };
}

// Operators other than shells (refused), each with its options as CREATE OPERATOR takes them. Its links to other
// operators are read apart: the two of a pair both record them (operators.ts).
const OPERATORS = `
  SELECT o.oid::regoperator::text AS key, ${q('n.nspname')} || '.' || o.oprname AS name,
         concat_ws(', ', 'FUNCTION = ' || o.oprcode::regproc::text, 'LEFTARG = ' || (SELECT format_type(o.oprleft, NULL) WHERE o.oprleft <> 0),
           'RIGHTARG = ' || format_type(o.oprright, NULL),
           CASE WHEN o.oprcom = o.oid THEN 'COMMUTATOR = OPERATOR(' || ${q('n.nspname')} || '.' || o.oprname || ')' END,
           'RESTRICT = ' || ${functionOf('o.oprrest')}, 'JOIN = ' || ${functionOf('o.oprjoin')},
           CASE WHEN o.oprcanhash THEN 'HASHES' END, CASE WHEN o.oprcanmerge THEN 'MERGES' END) AS options,
         (SELECT o.oprcom::regoperator::text WHERE o.oprcom NOT IN (0, o.oid)) AS commutator,
         (SELECT o.oprnegate::regoperator::text WHERE o.oprnegate <> 0) AS negator,
         o.oprcode::regprocedure::text AS routine
    FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
   WHERE ${MANAGED_NAMESPACE} AND o.oprcode <> 0 AND ${notExtensionMember('pg_operator', 'o.oid')}`;

// Comments on the modelled objects, each with the target COMMENT ON takes. The stock comment on `public` is the
// server's, and an extension's objects (and the extension itself) carry the extension's comments.
const COMMENTS = `
  SELECT target, d.description AS text FROM pg_description d JOIN (
    SELECT 'pg_class'::regclass AS classid, c.oid AS objid, 0 AS objsubid,
           CASE c.relkind WHEN 'v' THEN 'VIEW ' WHEN 'm' THEN 'MATERIALIZED VIEW ' WHEN 'S' THEN 'SEQUENCE ' WHEN 'i' THEN 'INDEX '
                          WHEN 'I' THEN 'INDEX ' ELSE 'TABLE ' END || ${qualified('n.nspname', 'c.relname')} AS target
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE ${MANAGED_NAMESPACE} AND c.relkind <> 'c' AND ${notExtensionMember('pg_class', 'c.oid')}
    UNION ALL SELECT 'pg_class'::regclass, c.oid, a.attnum, CASE WHEN c.relkind = 'c' THEN 'COLUMN ' || c.reltype::regtype::text ELSE 'COLUMN ' || ${qualified('n.nspname', 'c.relname')} END || '.' || ${q('a.attname')}
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_class', 'c.oid')}
    UNION ALL SELECT 'pg_constraint'::regclass, con.oid, 0,
           'CONSTRAINT ' || ${q('con.conname')} || ' ON ' || CASE WHEN con.contypid <> 0 THEN 'DOMAIN ' || con.contypid::regtype::text
                                                              ELSE ${qualified('n.nspname', 'c.relname')} END
      FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace LEFT JOIN pg_class c ON c.oid = con.conrelid
     WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_constraint', 'con.oid')}
    UNION ALL SELECT 'pg_proc'::regclass, p.oid, 0, CASE p.prokind WHEN 'p' THEN 'PROCEDURE ' ELSE 'FUNCTION ' END || p.oid::regprocedure::text
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_proc', 'p.oid')}
    UNION ALL SELECT 'pg_type'::regclass, t.oid, 0, CASE t.typtype WHEN 'd' THEN 'DOMAIN ' ELSE 'TYPE ' END || t.oid::regtype::text
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_type', 't.oid')}
    UNION ALL SELECT 'pg_namespace'::regclass, n.oid, 0, 'SCHEMA ' || ${q('n.nspname')} FROM pg_namespace n WHERE ${MANAGED_NAMESPACE}
    UNION ALL SELECT 'pg_operator'::regclass, o.oid, 0, 'OPERATOR ' || o.oid::regoperator::text
      FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_operator', 'o.oid')}
    UNION ALL SELECT 'pg_collation'::regclass, co.oid, 0, 'COLLATION ' || ${qualified('n.nspname', 'co.collname')}
      FROM pg_collation co JOIN pg_namespace n ON n.oid = co.collnamespace WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_collation', 'co.oid')}
    UNION ALL SELECT 'pg_trigger'::regclass, tg.oid, 0, 'TRIGGER ' || ${q('tg.tgname')} || ' ON ' || ${qualified('n.nspname', 'c.relname')}
      FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE ${MANAGED_NAMESPACE}
    UNION ALL SELECT 'pg_policy'::regclass, p.oid, 0, 'POLICY ' || ${q('p.polname')} || ' ON ' || ${qualified('n.nspname', 'c.relname')}
      FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE ${MANAGED_NAMESPACE}
  ) o ON o.classid = d.classoid AND o.objid = d.objoid AND o.objsubid = d.objsubid
  WHERE NOT (d.classoid = 'pg_namespace'::regclass AND target = 'SCHEMA "public"' AND d.description = 'standard public schema')
  ORDER BY target`;

// Privileges held by anyone but the owner, defaults made explicit (a function's EXECUTE for PUBLIC, a table's
// nothing), so an untouched object and one granted and revoked back read alike.
const GRANTS = `
  SELECT DISTINCT o.target, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE ${q('pg_get_userbyid(a.grantee)')} END AS grantee,
         a.privilege_type AS privilege, a.is_grantable AS grantable
    FROM (
      SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END || ${qualified('n.nspname', 'c.relname')} AS target, c.relowner AS owner,
             coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner)) AS acl
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE ${MANAGED_NAMESPACE} AND c.relkind IN ('r', 'p', 'v', 'm', 'S') AND ${notExtensionMember('pg_class', 'c.oid')}
      UNION ALL SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE ' ELSE 'FUNCTION ' END || p.oid::regprocedure::text, p.proowner,
             coalesce(p.proacl, acldefault('f', p.proowner))
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE ${MANAGED_NAMESPACE} AND ${MODELLED_ROUTINE('p')} AND ${notExtensionMember('pg_proc', 'p.oid')}
      UNION ALL SELECT 'SCHEMA ' || ${q('n.nspname')}, n.nspowner, coalesce(n.nspacl, acldefault('n', n.nspowner))
        FROM pg_namespace n WHERE ${MANAGED_NAMESPACE}
    ) o, aclexplode(o.acl) a
   WHERE a.grantee <> o.owner
   ORDER BY 1, 2, 3`;

const sequenceOptionColumns = (s: string) =>
  `${s}.seqstart::text AS start, ${s}.seqincrement::text AS increment, ${s}.seqmin::text AS min, ${s}.seqmax::text AS max, ${s}.seqcache::text AS cache, ${s}.seqcycle AS cycle`;

const sequenceOptions = (r: SequenceRow): SequenceOptions =>
  ({ start: r.start, increment: r.increment, min: r.min, max: r.max, cache: r.cache, cycle: r.cycle });

/** A table's own columns (those it holds only through a parent are the parent's); a partition's, all of them. */
async function readColumns(client: Db, tableOids: Oid[]): Promise<Map<Oid, Column[]>> {
  const { rows } = await client.query<SequenceRow & {
    table_oid: Oid; name: string; type: string; not_null: boolean; default: string | null; identity: string; generated: string; sequence: string | null;
    collation: string | null; statistics: number | null;
  }>(
    `SELECT a.attrelid::text AS table_oid, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
            pg_get_expr(d.adbin, d.adrelid) AS default, a.attidentity AS identity, a.attgenerated AS generated,
            CASE WHEN a.attcollation <> (SELECT typcollation FROM pg_type WHERE oid = a.atttypid) THEN a.attcollation::regcollation::text END AS collation,
            CASE WHEN a.attstattarget >= 0 THEN a.attstattarget::int END AS statistics,
            (SELECT ${qualified('sn.nspname', 'sc.relname')} FROM pg_class sc JOIN pg_namespace sn ON sn.oid = sc.relnamespace WHERE sc.oid = s.seqrelid) AS sequence,
            ${sequenceOptionColumns('s')}
       FROM pg_attribute a
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       LEFT JOIN pg_depend dep ON a.attidentity <> '' AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid
            AND dep.refobjsubid = a.attnum AND dep.classid = 'pg_class'::regclass AND dep.deptype = 'i'
       LEFT JOIN pg_sequence s ON s.seqrelid = dep.objid
      WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
        AND (a.attislocal OR (SELECT c.relispartition FROM pg_class c WHERE c.oid = a.attrelid))
      ORDER BY a.attrelid, a.attnum`, [tableOids]);
  const out = new Map<Oid, Column[]>();
  for (const r of rows) {
    const identity = r.identity === '' || r.sequence === null ? null
      : { generation: r.identity === 'a' ? 'always' as const : 'by_default' as const, sequence: r.sequence, options: sequenceOptions(r) };
    const generated = r.generated === 's' ? r.default : null;
    push(out, r.table_oid, {
      name: r.name, type: r.type, notNull: r.not_null, default: generated === null ? r.default : null, identity, generated, collation: r.collation, statistics: r.statistics,
    });
  }
  return out;
}

/** A partition's constraints cloned from its parent, and a check held only through inheritance, belong to the parent. */
async function readConstraints(client: Db, tableOids: Oid[], keyOf: Map<Oid, string>): Promise<Map<Oid, Constraint[]>> {
  const { rows } = await client.query<{ table_oid: Oid; name: string; type: string; definition: string; references: Oid }>(
    `SELECT con.conrelid::text AS table_oid, con.conname AS name, con.contype AS type, pg_get_constraintdef(con.oid) AS definition,
            con.confrelid::text AS references
       FROM pg_constraint con
      WHERE con.conrelid = ANY($1::oid[]) AND con.contype IN ('p', 'u', 'c', 'f', 'x') AND con.conparentid = 0 AND con.conislocal`, [tableOids]);
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

/**
 * Indexes other than the ones that back a primary-key, unique or exclusion constraint, and other than a
 * partition's index attached to its parent's (readPartitionIndexes).
 */
async function readIndexes(client: Db, relationOids: Oid[]): Promise<Map<Oid, Index[]>> {
  const { rows } = await client.query<{ table_oid: Oid; name: string; definition: string; unique: boolean; statistics: Index['statistics'] }>(
    `SELECT i.indrelid::text AS table_oid, ic.relname AS name, pg_get_indexdef(i.indexrelid) AS definition, i.indisunique AS unique,
            coalesce((SELECT json_agg(json_build_object('column', a.attnum, 'target', a.attstattarget) ORDER BY a.attnum)
                        FROM pg_attribute a WHERE a.attrelid = i.indexrelid AND a.attstattarget >= 0), '[]') AS statistics
       FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
      WHERE i.indrelid = ANY($1::oid[]) AND NOT ic.relispartition
        AND NOT EXISTS (SELECT 1 FROM pg_constraint con
                         WHERE con.conrelid = i.indrelid AND con.conindid = i.indexrelid AND con.contype IN ('p', 'u', 'x'))`, [relationOids]);
  const out = new Map<Oid, Index[]>();
  for (const r of rows) push(out, r.table_oid, { name: r.name, definition: r.definition, unique: r.unique, statistics: r.statistics });
  return out;
}

/** A partition's indexes attached to a parent's index that backs no key (a key's indexes go with the key). */
async function readPartitionIndexes(client: Db, partitionOids: Oid[]): Promise<Map<Oid, PartitionIndex[]>> {
  const { rows } = await client.query<{ table_oid: Oid } & PartitionIndex>(
    `SELECT i.indrelid::text AS table_oid, ic.relname AS name, pg_get_indexdef(i.indexrelid) AS definition,
            ${qualified('pn.nspname', 'pc.relname')} AS parent
       FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
       JOIN pg_inherits h ON h.inhrelid = i.indexrelid JOIN pg_class pc ON pc.oid = h.inhparent JOIN pg_namespace pn ON pn.oid = pc.relnamespace
      WHERE i.indrelid = ANY($1::oid[]) AND ic.relispartition
        AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = h.inhparent AND con.contype IN ('p', 'u', 'x'))`, [partitionOids]);
  const out = new Map<Oid, PartitionIndex[]>();
  for (const r of rows) push(out, r.table_oid, { name: r.name, parent: r.parent, definition: r.definition });
  return out;
}

async function readViews(client: Db, viewRows: (RelationRow & { kind: string })[], keyOf: Map<Oid, string>, indexes: Map<Oid, Index[]>): Promise<View[]> {
  const oids = viewRows.map((r) => r.oid);
  const definitions = new Map((await client.query<{ oid: Oid; definition: string }>(
    'SELECT c.oid::text AS oid, pg_get_viewdef(c.oid) AS definition FROM pg_class c WHERE c.oid = ANY($1::oid[])', [oids])).rows
    .map((r) => [r.oid, r.definition.trim().replace(/;$/, '')]));
  const populated = new Set((await client.query<{ oid: Oid }>('SELECT c.oid::text AS oid FROM pg_class c WHERE c.oid = ANY($1::oid[]) AND c.relispopulated', [oids])).rows.map((r) => r.oid));
  const dependencies = (await client.query<{ view: Oid; ref: Oid | null; routine: string | null }>(
    `SELECT DISTINCT r.ev_class::text AS view,
            CASE WHEN d.refclassid = 'pg_class'::regclass THEN d.refobjid::text END AS ref,
            CASE WHEN d.refclassid = 'pg_proc'::regclass THEN d.refobjid::regprocedure::text END AS routine
       FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
      WHERE r.ev_class = ANY($1::oid[]) AND d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass) AND d.refobjid <> r.ev_class`, [oids])).rows;
  return viewRows.map((r) => ({
    key: keyOf.get(r.oid)!,
    schema: r.schema,
    name: r.name,
    materialized: r.kind === 'm',
    populated: populated.has(r.oid),
    definition: definitions.get(r.oid)!,
    indexes: indexes.get(r.oid) ?? [],
    dependsOn: dependencies.filter((d) => d.view === r.oid).flatMap((d) =>
      d.ref !== null && keyOf.has(d.ref) ? [keyOf.get(d.ref)!] : d.routine !== null ? [d.routine] : []).sort(),
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
      WHERE ${MANAGED_NAMESPACE} AND ${notExtensionMember('pg_class', 'c.oid')}
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
