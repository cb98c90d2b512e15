// The supported object set, as the executor models it (docs/executor.md). Every text (types, defaults,
// definitions) is printed by the catalog with an empty search_path, so names are fully qualified and two
// databases print equal objects equally. Objects an extension owns are the extension's and never appear here.
import { digest } from '../../shared/canonical.js';

/** `"schema"."name"`: the identity of a relation or type, and the form SQL uses to name it. */
export type RelationKey = string;

export interface SequenceOptions {
  start: string;
  increment: string;
  min: string;
  max: string;
  cache: string;
  cycle: boolean;
}

export interface Identity {
  generation: 'always' | 'by_default';
  /** The identity sequence, `"schema"."name"`: whatever names it (a grant, a setval) needs its exact name. */
  sequence: RelationKey;
  options: SequenceOptions;
}

export interface Column {
  name: string;
  type: string;
  notNull: boolean;
  default: string | null;
  identity: Identity | null;
  /** GENERATED ALWAYS AS (expression) STORED. */
  generated: string | null;
  /** A collation other than its type's (`pg_catalog."C"`). */
  collation: string | null;
  /** A statistics target set on the column (`ALTER COLUMN … SET STATISTICS`). */
  statistics: number | null;
}

export type ConstraintKind = 'primary_key' | 'unique' | 'check' | 'foreign_key' | 'exclusion';

export interface Constraint {
  name: string;
  kind: ConstraintKind;
  definition: string;
  /** The referenced table of a foreign key. */
  references: RelationKey | null;
}

export interface Index {
  name: string;
  /** pg_get_indexdef: names the index, its table and everything else about it. */
  definition: string;
  unique: boolean;
  /** Columns (by position) whose statistics target is set (`ALTER INDEX … ALTER COLUMN n SET STATISTICS t`). */
  statistics: { column: number; target: number }[];
}

/** A partition's index attached to an index of its parent: it comes with the parent's, under a name of its own. */
export interface PartitionIndex {
  name: string;
  /** The parent's index, `"schema"."name"`. */
  parent: string;
  /** pg_get_indexdef of the partition's own index: made first under this name, the parent's build attaches it. */
  definition: string;
}

export interface Table {
  key: RelationKey;
  schema: string;
  name: string;
  /**
   * In physical order (used when creating); compared by name. The table's own (attislocal): a column it holds only
   * through a parent is the parent's, as pg_dump prints it; one both declared and inherited is its own.
   */
  columns: Column[];
  /** Its own constraints (conislocal): a check held only through a parent is the parent's. */
  constraints: Constraint[];
  indexes: Index[];
  rowSecurity: boolean;
  forceRowSecurity: boolean;
  /** `CREATE UNLOGGED TABLE`: not written to the WAL, emptied after a crash. */
  unlogged: boolean;
  /** Storage parameters (`fillfactor=70`, `autovacuum_enabled=false`, `toast.autovacuum_enabled=false`), sorted. */
  options: string[];
  /** A partitioned table's key (`RANGE (created_at)`). */
  partitionBy: string | null;
  /** A partition's parent and bound (`FOR VALUES …`); its columns are the parent's. */
  partitionOf: { parent: RelationKey; bound: string } | null;
  /** A partition's indexes attached to its parent's (not those of the parent's keys). */
  partitionIndexes: PartitionIndex[];
  /** The parents of table inheritance other than partitioning (`INHERITS (…)`), in their order (inhseqno). */
  inherits: RelationKey[];
}

export interface View {
  key: RelationKey;
  schema: string;
  name: string;
  materialized: boolean;
  /**
   * Whether a materialized view holds data: it is created as the desired schema creates it, and never compared
   * (whether it holds data is the application's to change, by REFRESH).
   */
  populated: boolean;
  definition: string;
  /** A materialized view's indexes (a view has none). */
  indexes: Index[];
  /** Relations and routines the view reads; drives drop and create order. */
  dependsOn: string[];
}

export interface Sequence {
  key: RelationKey;
  schema: string;
  name: string;
  type: string;
  options: SequenceOptions;
  /** OWNED BY: a column whose drop drops the sequence. */
  ownedBy: { table: RelationKey; column: string } | null;
}

export interface Extension {
  name: string;
  schema: string;
  version: string;
}

export interface EnumType {
  key: RelationKey;
  schema: string;
  values: string[];
}

export interface Domain {
  key: RelationKey;
  type: string;
  /** A collation other than its base type's (`COLLATE`). */
  collation: string | null;
  notNull: boolean;
  default: string | null;
  checks: { name: string; definition: string }[];
}

/**
 * A collation of a managed schema. Nothing of it but its name can be altered, so it is compared by its whole
 * definition.
 */
export interface Collation {
  /** `"schema"."name"`. */
  key: RelationKey;
  /** A CREATE COLLATION built from pg_collation (provider, locales, ICU rules, deterministic; introspect.ts). */
  definition: string;
}

/** An operator of a managed schema (not a shell: those are refused). */
export interface Operator {
  /** `schema.name(left,right)` as regoperator prints it (`NONE` for a prefix operator's left). */
  key: string;
  /** `"schema".name`, as OPERATOR(…) and CREATE OPERATOR take it. */
  name: string;
  /** CREATE OPERATOR's options (function, argument types, RESTRICT, JOIN, HASHES, MERGES, itself as commutator). */
  options: string;
  /** Its commutator other than itself and its negator (operator keys): links its partner records too. */
  commutator: string | null;
  negator: string | null;
  /** The routine it runs (`pg_catalog` or a Routine key), as regprocedure prints it. */
  routine: string;
}

export interface CompositeType {
  key: RelationKey;
  attributes: { name: string; type: string }[];
}

export interface Routine {
  /** `schema.name(argument types)` as regprocedure prints it: the full signature. */
  key: string;
  kind: 'function' | 'procedure' | 'aggregate';
  /** Result and argument list with names and defaults: what CREATE OR REPLACE cannot change. */
  header: string;
  /**
   * A complete CREATE OR REPLACE statement: pg_get_functiondef, or for an aggregate one built from pg_aggregate
   * (introspect.ts), since the server prints none.
   */
  definition: string;
  /**
   * Made once the tables exist: a SQL-standard body (BEGIN ATOMIC / RETURN) is parsed at creation, and a signature
   * that uses a table's row type (`RETURNS SETOF t`, an argument of type `t`) needs the table.
   */
  afterTables: boolean;
  /** Views (and materialized views) whose row type the signature uses: made in one order with the views. */
  viewRowTypes: RelationKey[];
  /**
   * The routines it needs at creation, as pg_depend records them (Routine keys): an aggregate's support functions,
   * the routines a SQL-standard body calls. Made after them, and taken down before any of them is made again.
   */
  calls: string[];
}

export interface Trigger {
  table: RelationKey;
  name: string;
  definition: string;
  /** The routine it executes (a Routine key). */
  routine: string;
}

export interface Policy {
  table: RelationKey;
  name: string;
  definition: string;
}

/** A `COMMENT ON <target> IS <text>`; the target is written as COMMENT ON takes it. */
export interface Comment {
  target: string;
  text: string;
}

/** One privilege one grantee holds on one object (never the owner's own). */
export interface Grant {
  /** `TABLE "s"."t"`, `SEQUENCE …`, `FUNCTION s.f(int)`, `PROCEDURE …`, `SCHEMA "s"`. */
  target: string;
  /** A quoted role name, or PUBLIC. */
  grantee: string;
  privilege: string;
  grantable: boolean;
}

export interface SchemaModel {
  schemas: string[];
  extensions: Extension[];
  collations: Collation[];
  enums: EnumType[];
  domains: Domain[];
  composites: CompositeType[];
  routines: Routine[];
  operators: Operator[];
  tables: Table[];
  views: View[];
  sequences: Sequence[];
  triggers: Trigger[];
  policies: Policy[];
  comments: Comment[];
  grants: Grant[];
}

export const emptyModel = (): SchemaModel => ({
  schemas: [], extensions: [], collations: [], enums: [], domains: [], composites: [], routines: [], operators: [], tables: [], views: [], sequences: [],
  triggers: [], policies: [], comments: [], grants: [],
});

const sortBy = <T>(items: readonly T[], id: (item: T) => string) => [...items].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0));
const byName = <T extends { name: string }>(items: readonly T[]) => sortBy(items, (i) => i.name);
const byKey = <T extends { key: string }>(items: readonly T[]) => sortBy(items, (i) => i.key);
export const grantId = (g: Grant) => `${g.target} ${g.grantee} ${g.privilege}`;
export const memberId = (m: { table: string; name: string }) => `${m.table} ${m.name}`;

/** The state a fingerprint covers: everything modelled, order-independent, without derived data. */
export function comparableState(model: SchemaModel): unknown {
  return {
    formatVersion: 5,
    schemas: [...model.schemas].sort(),
    extensions: byName(model.extensions),
    collations: byKey(model.collations),
    enums: byKey(model.enums),
    domains: byKey(model.domains).map((d) => ({ ...d, checks: byName(d.checks) })),
    composites: byKey(model.composites),
    routines: byKey(model.routines).map((r) => ({ key: r.key, kind: r.kind, definition: r.definition })),
    operators: byKey(model.operators),
    tables: byKey(model.tables).map((t) => ({
      key: t.key,
      columns: byName(t.columns),
      constraints: byName(t.constraints),
      indexes: byName(t.indexes),
      rowSecurity: t.rowSecurity,
      forceRowSecurity: t.forceRowSecurity,
      unlogged: t.unlogged,
      options: t.options,
      partitionBy: t.partitionBy,
      partitionOf: t.partitionOf,
      partitionIndexes: sortBy(t.partitionIndexes, (i) => i.parent),
      inherits: t.inherits,
    })),
    views: byKey(model.views).map((v) => ({ key: v.key, materialized: v.materialized, definition: v.definition, indexes: byName(v.indexes) })),
    sequences: byKey(model.sequences).map((s) => ({ key: s.key, type: s.type, options: s.options, ownedBy: s.ownedBy })),
    triggers: sortBy(model.triggers, memberId).map((t) => ({ table: t.table, name: t.name, definition: t.definition })),
    policies: sortBy(model.policies, memberId),
    comments: sortBy(model.comments, (c) => c.target),
    grants: sortBy(model.grants, grantId),
  };
}

export function stateFingerprint(model: SchemaModel): string {
  return digest(comparableState(model));
}
