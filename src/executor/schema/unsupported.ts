// The census of everything in the managed schemas that the model does not capture. Anything it finds is
// refused (unsupported_object), in the desired schema and in the target alike, because a diff that cannot see
// an object would silently drop, keep or mis-order it.
import type { Db } from '../db.js';
import { ExecutorFailure } from '../failure.js';
import { MANAGED_NAMESPACE } from './introspect.js';

export interface UnsupportedKind {
  kind: string;
  count: number;
}

const NAMESPACES = `(SELECT n.oid FROM pg_namespace n WHERE ${MANAGED_NAMESPACE})`;
const RELATIONS = `(SELECT c.oid FROM pg_class c WHERE c.relnamespace IN ${NAMESPACES})`;
const TABLES = `(SELECT c.oid FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace IN ${NAMESPACES})`;
const COLUMNS = `pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid IN ${TABLES} AND a.attnum > 0 AND NOT a.attisdropped`;

// One row per offending object, each labelled with the kind a person reads in the error.
const CENSUS = `
  SELECT CASE c.relkind WHEN 'm' THEN 'materialized_view' WHEN 'p' THEN 'partitioned_table' WHEN 'f' THEN 'foreign_table'
                        WHEN 'c' THEN 'composite_type' WHEN 'I' THEN 'partitioned_index' ELSE 'relation_kind_' || c.relkind::text END AS kind
    FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind NOT IN ('r', 'v', 'S', 'i')
  UNION ALL SELECT 'unlogged_object' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relpersistence = 'u'
  UNION ALL SELECT 'row_level_security' FROM pg_class c WHERE c.oid IN ${TABLES} AND (c.relrowsecurity OR c.relforcerowsecurity)
  UNION ALL SELECT 'storage_parameter' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind IN ('r', 'v', 'S') AND c.reloptions IS NOT NULL
  UNION ALL SELECT 'tablespace' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.reltablespace <> 0
  UNION ALL SELECT 'table_access_method' FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.oid IN ${TABLES} AND am.amname <> 'heap'
  UNION ALL SELECT 'replica_identity' FROM pg_class c WHERE c.oid IN ${TABLES} AND c.relreplident <> 'd'
  UNION ALL SELECT 'typed_table' FROM pg_class c WHERE c.oid IN ${TABLES} AND c.reloftype <> 0
  UNION ALL SELECT 'table_inheritance' FROM pg_inherits i WHERE i.inhrelid IN ${RELATIONS} OR i.inhparent IN ${RELATIONS}
  UNION ALL SELECT 'privilege' FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relacl IS NOT NULL
  UNION ALL SELECT 'privilege' FROM pg_namespace n WHERE ${MANAGED_NAMESPACE} AND n.nspname <> 'public' AND n.nspacl IS NOT NULL
  UNION ALL SELECT 'column_privilege' FROM ${COLUMNS} AND a.attacl IS NOT NULL
  UNION ALL SELECT 'default_privilege' FROM pg_default_acl
  UNION ALL SELECT 'generated_column' FROM ${COLUMNS} AND a.attgenerated <> ''
  UNION ALL SELECT 'column_collation' FROM ${COLUMNS} AND a.attcollation <> t.typcollation
  UNION ALL SELECT 'column_statistics_target' FROM ${COLUMNS} AND a.attstattarget >= 0
  UNION ALL SELECT 'column_storage' FROM ${COLUMNS} AND a.attstorage <> t.typstorage
  UNION ALL SELECT 'column_compression' FROM ${COLUMNS} AND a.attcompression <> ''
  UNION ALL SELECT 'column_option' FROM ${COLUMNS} AND a.attoptions IS NOT NULL
  UNION ALL SELECT 'row_type_column' FROM ${COLUMNS} AND t.typrelid <> 0
  UNION ALL SELECT 'view_column_default' FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid WHERE c.oid IN ${RELATIONS} AND c.relkind = 'v'
  UNION ALL SELECT 'exclusion_constraint' FROM pg_constraint con WHERE con.conrelid IN ${TABLES} AND con.contype = 'x'
  UNION ALL SELECT 'constraint_trigger' FROM pg_constraint con WHERE con.conrelid IN ${TABLES} AND con.contype = 't'
  UNION ALL SELECT 'trigger' FROM pg_trigger tg WHERE tg.tgrelid IN ${RELATIONS} AND NOT tg.tgisinternal
  UNION ALL SELECT 'rule' FROM pg_rewrite r WHERE r.ev_class IN ${RELATIONS} AND r.rulename <> '_RETURN'
  UNION ALL SELECT 'policy' FROM pg_policy p WHERE p.polrelid IN ${RELATIONS}
  UNION ALL SELECT CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' ELSE 'function' END
    FROM pg_proc p WHERE p.pronamespace IN ${NAMESPACES}
  UNION ALL SELECT CASE t.typtype WHEN 'e' THEN 'enum' WHEN 'd' THEN 'domain' WHEN 'r' THEN 'range_type' WHEN 'm' THEN 'multirange_type'
                                  ELSE 'type' END
    FROM pg_type t WHERE t.typnamespace IN ${NAMESPACES} AND t.typrelid = 0
     AND NOT (t.typelem <> 0 AND EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid))
  UNION ALL SELECT 'extended_statistics' FROM pg_statistic_ext s WHERE s.stxnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'collation' FROM pg_collation x WHERE x.collnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'conversion' FROM pg_conversion x WHERE x.connamespace IN ${NAMESPACES}
  UNION ALL SELECT 'operator' FROM pg_operator x WHERE x.oprnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'operator_class' FROM pg_opclass x WHERE x.opcnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'operator_family' FROM pg_opfamily x WHERE x.opfnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'text_search_configuration' FROM pg_ts_config x WHERE x.cfgnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'text_search_dictionary' FROM pg_ts_dict x WHERE x.dictnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'text_search_parser' FROM pg_ts_parser x WHERE x.prsnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'text_search_template' FROM pg_ts_template x WHERE x.tmplnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'extension' FROM pg_extension x WHERE x.extname <> 'plpgsql'
  UNION ALL SELECT 'comment' FROM pg_description d
   WHERE (d.classoid = 'pg_class'::regclass AND d.objoid IN ${RELATIONS})
      OR (d.classoid = 'pg_constraint'::regclass AND d.objoid IN (SELECT con.oid FROM pg_constraint con WHERE con.connamespace IN ${NAMESPACES}))
      OR (d.classoid = 'pg_namespace'::regclass AND d.objoid IN ${NAMESPACES}
          AND NOT (d.description = 'standard public schema' AND d.objoid = (SELECT oid FROM pg_namespace WHERE nspname = 'public')))
  UNION ALL SELECT 'security_label' FROM pg_seclabel l WHERE l.objoid IN ${RELATIONS} OR l.objoid IN ${NAMESPACES}`;

// In the desired schema only: ownership is not managed, so an object handed to another role would silently
// be created under the executor's role instead.
const FOREIGN_OWNERSHIP = `
  SELECT 'ownership' AS kind FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind IN ('r', 'v', 'S') AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
  UNION ALL SELECT 'ownership' FROM pg_namespace n WHERE ${MANAGED_NAMESPACE} AND n.nspname <> 'public' AND n.nspowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)`;

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
  throw new ExecutorFailure('unsupported_object',
    `${source} objects outside the supported set: ${what}. Supported: schemas, tables, columns (type, nullability, default, identity), ` +
    'primary-key/unique/check/foreign-key constraints, indexes, views and sequences; see docs/executor.md');
}
