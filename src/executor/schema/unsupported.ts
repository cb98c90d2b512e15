// The census of everything in the managed schemas that the model does not capture. Anything it finds is
// refused (unsupported_object), in the desired schema and in the target alike, because a diff that cannot see
// an object would silently drop, keep or mis-order it.
import { SCHEMA_READING_REFUSALS } from '../../shared/executor-report.js';
import type { Db } from '../db.js';
import { ExecutorFailure } from '../failure.js';
import { MANAGED_NAMESPACE, notExtensionMember } from './introspect.js';

export interface UnsupportedKind {
  kind: string;
  count: number;
}

const NAMESPACES = `(SELECT n.oid FROM pg_namespace n WHERE ${MANAGED_NAMESPACE})`;
// An extension's own objects are the extension's: never refused on their own.
const RELATIONS = `(SELECT c.oid FROM pg_class c WHERE c.relnamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_class', 'c.oid')})`;
const TABLES = `(SELECT c.oid FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.oid IN ${RELATIONS})`;
const COLUMNS = `pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid IN ${TABLES} AND a.attnum > 0 AND NOT a.attisdropped`;
/** Objects of `catalog` (aliased x, namespace column `column`) in the managed schemas, not an extension's. */
const ours = (catalog: string, column: string) => `${catalog} x WHERE x.${column} IN ${NAMESPACES} AND ${notExtensionMember(catalog, 'x.oid')}`;

/** An unlogged table's own indexes and sequences (identity, serial) are unlogged with it: they are the table's. */
const UNLOGGED_WITH_TABLE = `(c.relkind = 'r' OR (c.relkind = 'i' AND EXISTS (SELECT 1 FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
    WHERE i.indexrelid = c.oid AND t.relpersistence = 'u' AND t.relkind = 'r'))
  OR (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d JOIN pg_class t ON t.oid = d.refobjid
    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') AND t.relpersistence = 'u')))`;

// One row per offending object, each labelled with the kind a person reads in the error.
const CENSUS = `
  SELECT CASE c.relkind WHEN 'f' THEN 'foreign_table' ELSE 'relation_kind_' || c.relkind::text END AS kind
    FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind NOT IN ('r', 'p', 'v', 'm', 'S', 'i', 'I', 'c')
  UNION ALL SELECT 'unlogged_object' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relpersistence = 'u' AND NOT ${UNLOGGED_WITH_TABLE}
  UNION ALL SELECT 'storage_parameter' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind IN ('v', 'm', 'S') AND c.reloptions IS NOT NULL
  UNION ALL SELECT 'tablespace' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.reltablespace <> 0
  UNION ALL SELECT 'table_access_method' FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.oid IN ${TABLES} AND am.amname <> 'heap'
  UNION ALL SELECT 'replica_identity' FROM pg_class c WHERE c.oid IN ${TABLES} AND c.relreplident <> 'd'
  UNION ALL SELECT 'typed_table' FROM pg_class c WHERE c.oid IN ${TABLES} AND c.reloftype <> 0
  UNION ALL SELECT 'inheritance_from_unmanaged_table' FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE NOT c.relispartition AND (i.inhrelid IN ${RELATIONS}) <> (i.inhparent IN ${RELATIONS})
  UNION ALL SELECT 'partition_of_unmanaged_table' FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE c.relkind IN ('r', 'p') AND c.relispartition AND (i.inhrelid IN ${RELATIONS}) <> (i.inhparent IN ${RELATIONS})
  UNION ALL SELECT 'column_privilege' FROM ${COLUMNS} AND a.attacl IS NOT NULL
  UNION ALL SELECT 'type_privilege' FROM ${ours('pg_type', 'typnamespace')} AND x.typacl IS NOT NULL
  UNION ALL SELECT 'default_privilege' FROM pg_default_acl
  UNION ALL SELECT 'composite_attribute_collation' FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid JOIN pg_class c ON c.oid = a.attrelid
   WHERE c.oid IN ${RELATIONS} AND c.relkind = 'c' AND a.attnum > 0 AND NOT a.attisdropped AND a.attcollation <> t.typcollation
  UNION ALL SELECT 'column_storage' FROM ${COLUMNS} AND a.attstorage <> t.typstorage
  UNION ALL SELECT 'column_compression' FROM ${COLUMNS} AND a.attcompression <> ''
  UNION ALL SELECT 'column_option' FROM ${COLUMNS} AND a.attoptions IS NOT NULL
  UNION ALL SELECT 'row_type_column' FROM ${COLUMNS} AND t.typrelid <> 0 AND (SELECT r.relkind FROM pg_class r WHERE r.oid = t.typrelid) <> 'c'
  UNION ALL SELECT 'view_column_default' FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid WHERE c.oid IN ${RELATIONS} AND c.relkind IN ('v', 'm')
  UNION ALL SELECT 'constraint_trigger' FROM pg_constraint con WHERE con.conrelid IN ${TABLES} AND con.contype = 't'
  UNION ALL SELECT CASE WHEN c.relkind NOT IN ('r', 'p', 'v') THEN 'trigger_on_' || c.relkind::text ELSE 'disabled_trigger' END
    FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
   WHERE tg.tgrelid IN ${RELATIONS} AND NOT tg.tgisinternal AND (c.relkind NOT IN ('r', 'p', 'v') OR tg.tgenabled <> 'O')
  UNION ALL SELECT 'rule' FROM pg_rewrite r WHERE r.ev_class IN ${RELATIONS} AND r.rulename <> '_RETURN'
  UNION ALL SELECT 'window_function' FROM ${ours('pg_proc', 'pronamespace')} AND x.prokind = 'w'
  UNION ALL SELECT CASE g.aggkind WHEN 'o' THEN 'ordered_set_aggregate' ELSE 'hypothetical_set_aggregate' END
    FROM pg_aggregate g, ${ours('pg_proc', 'pronamespace')} AND x.oid = g.aggfnoid AND g.aggkind <> 'n'
  UNION ALL SELECT CASE x.typtype WHEN 'r' THEN 'range_type' WHEN 'm' THEN 'multirange_type' ELSE 'type' END
    FROM ${ours('pg_type', 'typnamespace')} AND x.typrelid = 0 AND x.typtype NOT IN ('e', 'd')
     AND NOT (x.typelem <> 0 AND EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = x.oid))
  UNION ALL SELECT 'extended_statistics' FROM ${ours('pg_statistic_ext', 'stxnamespace')}
  UNION ALL SELECT 'conversion' FROM ${ours('pg_conversion', 'connamespace')}
  UNION ALL SELECT 'shell_operator' FROM ${ours('pg_operator', 'oprnamespace')} AND x.oprcode = 0
  UNION ALL SELECT 'operator_class' FROM ${ours('pg_opclass', 'opcnamespace')}
  UNION ALL SELECT 'operator_family' FROM ${ours('pg_opfamily', 'opfnamespace')}
  UNION ALL SELECT 'text_search_configuration' FROM ${ours('pg_ts_config', 'cfgnamespace')}
  UNION ALL SELECT 'text_search_dictionary' FROM ${ours('pg_ts_dict', 'dictnamespace')}
  UNION ALL SELECT 'text_search_parser' FROM ${ours('pg_ts_parser', 'prsnamespace')}
  UNION ALL SELECT 'text_search_template' FROM ${ours('pg_ts_template', 'tmplnamespace')}
  UNION ALL SELECT 'security_label' FROM pg_seclabel l WHERE l.objoid IN ${RELATIONS} OR l.objoid IN ${NAMESPACES}`;

const ME = '(SELECT oid FROM pg_roles WHERE rolname = current_user)';

// In the desired schema only: ownership is not managed, so an object handed to another role would silently
// be created under the executor's role instead.
const FOREIGN_OWNERSHIP = `
  SELECT 'ownership' AS kind FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'c') AND c.relowner <> ${ME}
  UNION ALL SELECT 'ownership' FROM pg_namespace n WHERE ${MANAGED_NAMESPACE} AND n.nspname <> 'public' AND n.nspowner <> ${ME}
  UNION ALL SELECT 'ownership' FROM ${ours('pg_proc', 'pronamespace')} AND x.proowner <> ${ME}
  UNION ALL SELECT 'ownership' FROM ${ours('pg_type', 'typnamespace')} AND x.typowner <> ${ME} AND x.typtype IN ('e', 'd')
  UNION ALL SELECT 'ownership' FROM ${ours('pg_collation', 'collnamespace')} AND x.collowner <> ${ME}
  UNION ALL SELECT 'ownership' FROM ${ours('pg_operator', 'oprnamespace')} AND x.oprowner <> ${ME}`;

export async function unsupportedObjects(client: Db, options: { desired: boolean }): Promise<UnsupportedKind[]> {
  const sql = options.desired ? `${CENSUS} UNION ALL ${FOREIGN_OWNERSHIP}` : CENSUS;
  const { rows } = await client.query<{ kind: string; count: number }>(
    `SELECT kind, count(*)::int AS count FROM (${sql}) found GROUP BY kind ORDER BY kind`);
  return rows;
}

/** Refuses, naming the kinds and counts (never object names), when the census found anything. */
export async function refuseUnsupported(client: Db, where: 'desired' | 'target'): Promise<void> {
  const found = await unsupportedObjects(client, { desired: where === 'desired' });
  if (found.length === 0) return;
  const what = found.map((f) => `${f.kind} (${f.count})`).join(', ');
  const source = where === 'desired' ? 'the desired schema holds' : "the target database's managed schemas hold";
  throw new ExecutorFailure(SCHEMA_READING_REFUSALS.unsupported,
    `${source} objects outside the supported set: ${what}. See the table of supported kinds in docs/executor.md`);
}
