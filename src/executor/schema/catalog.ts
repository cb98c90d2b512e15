// The catalog witness: what the managed schemas hold, read straight from the system catalogs as text facts,
// independently of the model (model.ts, introspect.ts). A plan that finds no changes, and an Apply that ran, are
// believed only when the target's facts equal those of the scratch database built from the desired schema, so a
// property the model does not capture can never be reported converged (docs/executor.md, "The catalog witness").
//
// Every fact names objects by their schema-qualified names (printed under an empty search_path), never by OID, so
// two databases built alike read alike. Deliberately left out, each for a stated reason: owners (the executor
// creates what it creates under its own role and never changes owners; a desired schema that hands an object to
// another role is refused), whether a materialized view is populated (that is its data, which the application
// refreshes; pg_dump --schema-only does not print it either), the physical order of columns (a column added later comes last; the engine never
// rebuilds a table to reorder it), the inheritance bookkeeping of a partition's columns and constraints (attislocal and
// its kin: pg_dump prints a partition as PARTITION OF, whether it was attached or made so), and objects that live outside any
// schema (publications, subscriptions, event triggers, roles): they belong to the database, not to a schema.
import { sha256Digest } from '../../shared/canonical.js';
import type { Db } from '../db.js';
import { ExecutorFailure } from '../failure.js';
import { MANAGED_NAMESPACE, collationColumn, notExtensionMember } from './introspect.js';

const NAMESPACES = `(SELECT n.oid FROM pg_namespace n WHERE ${MANAGED_NAMESPACE})`;
const RELATIONS = `(SELECT c.oid FROM pg_class c WHERE c.relnamespace IN ${NAMESPACES} AND c.relkind <> 't' AND ${notExtensionMember('pg_class', 'c.oid')})`;
const describe = (catalog: string, oid: string, sub = '0') => `pg_describe_object('${catalog}'::regclass, ${oid}, ${sub})`;
/** Privileges held by anyone but the owner, one fact each (an owner's own entry follows from who owns it). */
const grants = (object: string, acl: string, owner: string) =>
  `(SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END || ':' || a.privilege_type
                      || CASE WHEN a.is_grantable THEN '*' ELSE '' END, ',' ORDER BY 1)
      FROM aclexplode(coalesce(${acl}, acldefault(${object}, ${owner}))) a WHERE a.grantee <> ${owner})`;
/** Storage parameters in name order: the order they were written in means nothing. */
const sortedOptions = (options: string) => `(SELECT string_agg(o, ',' ORDER BY o) FROM unnest(${options}) o)`;
/**
 * A key's or exclusion constraint's index, printed from pg_index alone: pg_get_indexdef takes a lock on the table
 * (to name its columns), which would make every reading wait behind anyone holding the table exclusively, where the
 * model's own reading does not. Its constraint's fact (pg_get_constraintdef) prints the rest.
 */
const KEY_INDEX = `'backs ' || quote_ident(con.conname) || ' method ' || (SELECT amname FROM pg_am WHERE oid = (SELECT relam FROM pg_class WHERE oid = i.indexrelid))
  || ' unique ' || i.indisunique::text || ' key columns ' || i.indnkeyatts
  || ' columns ' || coalesce((SELECT string_agg(coalesce(quote_ident(a.attname), 'expression'), ',' ORDER BY k.n)
                               FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                               LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum), '-')
  || ' opclasses ' || coalesce((SELECT string_agg(quote_ident(o.opcname), ',' ORDER BY k.n)
                                 FROM unnest(i.indclass::oid[]) WITH ORDINALITY k(opclass, n) JOIN pg_opclass o ON o.oid = k.opclass), '-')
  || ' collations ' || coalesce((SELECT string_agg(CASE WHEN k.coll = 0 THEN '-' ELSE k.coll::regcollation::text END, ',' ORDER BY k.n)
                                  FROM unnest(i.indcollation::oid[]) WITH ORDINALITY k(coll, n)), '-')
  || ' options ' || i.indoption::text || ' nulls not distinct ' || i.indnullsnotdistinct::text`;
/**
 * Whether a member of table `c` (column or constraint) is its own and how many parents give it: pg_dump prints a
 * child's own members and leaves the rest to INHERITS. Not for a partition (see above) nor an index.
 */
const INHERITANCE = (c: string, local: string, count: string) =>
  `CASE WHEN ${c}.relkind IN ('r', 'p') AND NOT ${c}.relispartition THEN ' local ' || ${local}::text || ' inherited ' || ${count} ELSE '' END`;
const relationAclKind = (c: string) => `CASE ${c}.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char"`;

// One row per fact; the union covers every catalog that holds a property of an object in a schema.
const FACTS = `
  SELECT 'object ' || o.type || ' ' || o.identity
    FROM pg_depend d, pg_identify_object(d.classid, d.objid, 0) o
   WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid IN ${NAMESPACES} AND d.deptype = 'n'
     AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = d.classid AND e.objid = d.objid AND e.deptype = 'e')
  UNION ALL SELECT 'schema ' || quote_ident(n.nspname) || ' grants ' || coalesce(${grants("'n'", 'n.nspacl', 'n.nspowner')}, '-')
    FROM pg_namespace n WHERE ${MANAGED_NAMESPACE}
  UNION ALL SELECT 'extension ' || x.extname || ' ' || x.extversion || ' in ' || quote_ident(n.nspname)
    FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
  UNION ALL SELECT 'relation ' || c.oid::regclass::text || ' kind ' || c.relkind::text || ' persistence ' || c.relpersistence::text
         || ' options ' || coalesce(${sortedOptions('c.reloptions')}, '-')
         || ' toast options ' || coalesce((SELECT ${sortedOptions('t.reloptions')} FROM pg_class t WHERE t.oid = c.reltoastrelid), '-')
         || ' replica identity ' || c.relreplident::text || ' access method ' || coalesce((SELECT amname FROM pg_am WHERE oid = c.relam), '-')
         || ' tablespace ' || coalesce((SELECT spcname FROM pg_tablespace WHERE oid = c.reltablespace), '-')
         || ' typed ' || CASE WHEN c.reloftype = 0 THEN '-' ELSE c.reloftype::regtype::text END
         || ' rls ' || c.relrowsecurity::text || ' forced ' || c.relforcerowsecurity::text
         || ' partition key ' || coalesce(pg_get_partkeydef(c.oid), '-') || ' bound ' || coalesce(pg_get_expr(c.relpartbound, c.oid), '-')
         || ' parents ' || coalesce((SELECT string_agg(i.inhparent::regclass::text, ',' ORDER BY i.inhseqno) FROM pg_inherits i WHERE i.inhrelid = c.oid), '-')
         || CASE WHEN c.relkind IN ('i', 'I') THEN '' ELSE ' grants ' || coalesce(${grants(relationAclKind('c'), 'c.relacl', 'c.relowner')}, '-') END
    FROM pg_class c WHERE c.oid IN ${RELATIONS}
  UNION ALL SELECT 'column ' || c.oid::regclass::text || '.' || CASE WHEN c.relkind IN ('i', 'I') THEN '#' || a.attnum ELSE quote_ident(a.attname) END
         || ' ' || format_type(a.atttypid, a.atttypmod) || ' not null ' || a.attnotnull::text
         || ' default ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '-') || ' identity ' || a.attidentity::text || ' generated ' || a.attgenerated::text
         || ' collation ' || CASE WHEN a.attcollation = 0 THEN '-' ELSE a.attcollation::regcollation::text END
         || ' statistics ' || coalesce(a.attstattarget::text, '-') || ' storage ' || a.attstorage::text || ' compression ' || a.attcompression::text
         || ' options ' || coalesce(${sortedOptions('a.attoptions')}, '-')
         || ' grants ' || coalesce(${grants(`'c'`, 'a.attacl', 'c.relowner')}, '-')
         || ${INHERITANCE('c', 'a.attislocal', 'a.attinhcount')}
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
   WHERE c.oid IN ${RELATIONS}
  UNION ALL SELECT 'index ' || i.indexrelid::regclass::text || ' on ' || i.indrelid::regclass::text || ' '
         || CASE WHEN con.oid IS NULL THEN pg_get_indexdef(i.indexrelid) ELSE ${KEY_INDEX} END
         || ' valid ' || i.indisvalid::text || ' clustered ' || i.indisclustered::text || ' replica identity ' || i.indisreplident::text
         || ' attached to ' || coalesce((SELECT h.inhparent::regclass::text FROM pg_inherits h WHERE h.inhrelid = i.indexrelid), '-')
    FROM pg_index i LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.contype IN ('p', 'u', 'x')
   WHERE i.indexrelid IN ${RELATIONS}
  UNION ALL SELECT 'constraint ' || ${describe('pg_constraint', 'con.oid')} || ' ' || pg_get_constraintdef(con.oid)
         || ' index ' || CASE WHEN con.conindid = 0 THEN '-' ELSE con.conindid::regclass::text END
         || coalesce((SELECT ${INHERITANCE('c', 'con.conislocal', 'con.coninhcount')} FROM pg_class c WHERE c.oid = con.conrelid), '')
    FROM pg_constraint con WHERE con.connamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_constraint', 'con.oid')}
  UNION ALL SELECT 'sequence ' || s.seqrelid::regclass::text || ' ' || format_type(s.seqtypid, NULL) || ' start ' || s.seqstart || ' increment ' || s.seqincrement
         || ' min ' || s.seqmin || ' max ' || s.seqmax || ' cache ' || s.seqcache || ' cycle ' || s.seqcycle::text
         || ' owned by ' || coalesce((SELECT d.refobjid::regclass::text || '.' || quote_ident(a.attname) || ' ' || d.deptype::text
                                       FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                                      WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid AND d.refclassid = 'pg_class'::regclass
                                        AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')), '-')
    FROM pg_sequence s WHERE s.seqrelid IN ${RELATIONS}
  UNION ALL SELECT 'view ' || c.oid::regclass::text || ' ' || pg_get_viewdef(c.oid) FROM pg_class c WHERE c.oid IN ${RELATIONS} AND c.relkind IN ('v', 'm')
  UNION ALL SELECT 'rule ' || pg_get_ruledef(r.oid) || ' enabled ' || r.ev_enabled::text FROM pg_rewrite r WHERE r.ev_class IN ${RELATIONS} AND r.rulename <> '_RETURN'
  UNION ALL SELECT 'trigger ' || pg_get_triggerdef(tg.oid) || ' enabled ' || tg.tgenabled::text
    FROM pg_trigger tg WHERE tg.tgrelid IN ${RELATIONS} AND NOT tg.tgisinternal
  UNION ALL SELECT 'policy ' || ${describe('pg_policy', 'p.oid')} || ' permissive ' || p.polpermissive::text || ' command ' || p.polcmd::text
         || ' roles ' || (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r)) END, ',' ORDER BY 1) FROM unnest(p.polroles) r)
         || ' using ' || coalesce(pg_get_expr(p.polqual, p.polrelid), '-') || ' check ' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '-')
    FROM pg_policy p WHERE p.polrelid IN ${RELATIONS}
  UNION ALL SELECT 'routine ' || CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid)
                                      ELSE p.oid::regprocedure::text || ' kind ' || p.prokind::text || ' returns ' || format_type(p.prorettype, NULL) END
         || ' grants ' || coalesce(${grants("'f'", 'p.proacl', 'p.proowner')}, '-')
    FROM pg_proc p WHERE p.pronamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_proc', 'p.oid')}
  UNION ALL SELECT 'aggregate ' || g.aggfnoid::regprocedure::text || ' kind ' || g.aggkind::text || ' direct args ' || g.aggnumdirectargs
         || ' transition ' || g.aggtransfn::text || ' final ' || g.aggfinalfn::text || ' combine ' || g.aggcombinefn::text
         || ' serial ' || g.aggserialfn::text || ' deserial ' || g.aggdeserialfn::text || ' moving ' || g.aggmtransfn::text || '/' || g.aggminvtransfn::text
         || '/' || g.aggmfinalfn::text || ' extra ' || g.aggfinalextra::text || '/' || g.aggmfinalextra::text
         || ' modify ' || g.aggfinalmodify::text || '/' || g.aggmfinalmodify::text || ' sort ' || g.aggsortop::regoperator::text
         || ' state ' || format_type(g.aggtranstype, NULL) || ' ' || g.aggtransspace || ' moving state ' || format_type(g.aggmtranstype, NULL)
         || ' ' || g.aggmtransspace || ' initial ' || coalesce(g.agginitval, '-') || ' moving initial ' || coalesce(g.aggminitval, '-')
    FROM pg_aggregate g JOIN pg_proc p ON p.oid = g.aggfnoid WHERE p.pronamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_proc', 'p.oid')}
  UNION ALL SELECT 'type ' || t.oid::regtype::text || ' kind ' || t.typtype::text || ' base ' || format_type(t.typbasetype, t.typtypmod)
         || ' not null ' || t.typnotnull::text || ' default ' || coalesce(t.typdefault, '-')
         || ' collation ' || CASE WHEN t.typcollation = 0 THEN '-' ELSE t.typcollation::regcollation::text END
         || ' labels ' || coalesce((SELECT string_agg(quote_literal(e.enumlabel), ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '-')
         || ' range ' || coalesce((SELECT format_type(r.rngsubtype, NULL) || ' ' || r.rngsubopc::regclass::text || ' ' || r.rngcanonical::text
                                          || ' ' || r.rngsubdiff::text || ' ' || r.rngcollation::text FROM pg_range r WHERE r.rngtypid = t.oid), '-')
         || ' io ' || t.typinput::text || '/' || t.typoutput::text || '/' || t.typreceive::text || '/' || t.typsend::text
         || ' grants ' || coalesce(${grants("'T'", 't.typacl', 't.typowner')}, '-')
    FROM pg_type t WHERE t.typnamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_type', 't.oid')}
     AND (t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
  UNION ALL SELECT 'operator ' || o.oid::regoperator::text || ' returns ' || format_type(o.oprresult, NULL) || ' code ' || o.oprcode::text
         || ' commutator ' || o.oprcom::regoperator::text || ' negator ' || o.oprnegate::regoperator::text || ' restrict ' || o.oprrest::text
         || ' join ' || o.oprjoin::text || ' hashes ' || o.oprcanhash::text || ' merges ' || o.oprcanmerge::text
    FROM pg_operator o WHERE o.oprnamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_operator', 'o.oid')}
  UNION ALL SELECT 'collation ' || co.oid::regcollation::text || ' provider ' || co.collprovider::text || ' deterministic ' || co.collisdeterministic::text
         || ' encoding ' || co.collencoding || ' collate ' || coalesce(co.collcollate, '-') || ' ctype ' || coalesce(co.collctype, '-')
         || ' locale ' || coalesce(${collationColumn('colllocale')}, ${collationColumn('colliculocale')}, '-')
         || ' rules ' || coalesce(${collationColumn('collicurules')}, '-')
    FROM pg_collation co WHERE co.collnamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_collation', 'co.oid')}
  UNION ALL SELECT 'statistics ' || pg_get_statisticsobjdef(x.oid) FROM pg_statistic_ext x
   WHERE x.stxnamespace IN ${NAMESPACES} AND ${notExtensionMember('pg_statistic_ext', 'x.oid')}
  UNION ALL SELECT 'default privileges ' || quote_ident(pg_get_userbyid(d.defaclrole)) || ' in ' || coalesce(d.defaclnamespace::regnamespace::text, '-')
         || ' on ' || d.defaclobjtype::text || ' ' || array_to_string(d.defaclacl, ',')
    FROM pg_default_acl d WHERE d.defaclnamespace = 0 OR d.defaclnamespace IN ${NAMESPACES}
  UNION ALL SELECT 'comment ' || pg_describe_object(d.classoid, d.objoid, d.objsubid) || ' = ' || d.description
    FROM pg_description d WHERE d.classoid <> 'pg_extension'::regclass
     AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = d.classoid AND e.objid = d.objoid AND e.deptype = 'e')
     AND (CASE WHEN d.classoid = 'pg_namespace'::regclass THEN d.objoid IN ${NAMESPACES}
               ELSE coalesce((pg_identify_object(d.classoid, d.objoid, d.objsubid)).schema IN (SELECT nspname FROM pg_namespace WHERE oid IN ${NAMESPACES}), false) END)
  UNION ALL SELECT 'security label ' || pg_describe_object(l.classoid, l.objoid, l.objsubid) || ' ' || l.provider || ' = ' || l.label
    FROM pg_seclabel l WHERE l.objoid IN ${RELATIONS} OR l.objoid IN ${NAMESPACES}`;

/** The catalog's facts about the managed schemas, sorted. The caller has set an empty search_path (qualifyNames). */
export async function readCatalogFacts(client: Db): Promise<string[]> {
  const { rows } = await client.query<{ fact: string | null }>(`SELECT fact FROM (${FACTS}) facts(fact) ORDER BY fact COLLATE "C"`);
  // A fact that printed as NULL would hide whatever it describes: refuse to judge rather than judge blind.
  if (rows.some((r) => r.fact === null)) throw new ExecutorFailure('catalog_unreadable', 'a catalog fact of the managed schemas could not be printed; nothing is judged converged (a defect of the executor)');
  return rows.map((r) => r.fact!);
}

/** The digest a plan carries of the facts it promises. */
export const catalogDigest = (facts: readonly string[]): string => sha256Digest(facts.join('\n'));

/** How many facts each side holds that the other does not, with a few of each for the message. */
export function catalogDifference(actual: readonly string[], desired: readonly string[], shown = 3): string | undefined {
  const want = new Set(desired);
  const have = new Set(actual);
  const extra = actual.filter((f) => !want.has(f));
  const missing = desired.filter((f) => !have.has(f));
  if (extra.length === 0 && missing.length === 0) return undefined;
  const clip = (fact: string) => (fact.length > 200 ? `${fact.slice(0, 200)}…` : fact);
  const list = (facts: string[]) => facts.slice(0, shown).map((f) => JSON.stringify(clip(f))).join('; ') + (facts.length > shown ? '; …' : '');
  return [
    extra.length > 0 ? `${extra.length} fact(s) only in the target (${list(extra)})` : '',
    missing.length > 0 ? `${missing.length} fact(s) only in the desired schema (${list(missing)})` : '',
  ].filter(Boolean).join(' and ');
}
