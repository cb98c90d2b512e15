// The supported object set, as the executor models it (docs/executor.md): schemas, tables, columns (type,
// nullability, default, identity), primary-key/unique/check/foreign-key constraints, indexes, views and
// sequences. Every text (types, defaults, definitions) is printed by the catalog with an empty search_path,
// so names are fully qualified and two databases print equal objects equally.
import { digest } from '../../shared/canonical.js';

/** `"schema"."name"`: the identity of a relation, and the form SQL uses to name it. */
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
  options: SequenceOptions;
}

export interface Column {
  name: string;
  type: string;
  notNull: boolean;
  default: string | null;
  identity: Identity | null;
}

export type ConstraintKind = 'primary_key' | 'unique' | 'check' | 'foreign_key';

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
}

export interface Table {
  key: RelationKey;
  schema: string;
  name: string;
  /** In physical order (used when creating); compared by name. */
  columns: Column[];
  constraints: Constraint[];
  indexes: Index[];
}

export interface View {
  key: RelationKey;
  schema: string;
  name: string;
  definition: string;
  /** Relations (tables, views, sequences) the view reads; drives drop and create order. */
  dependsOn: RelationKey[];
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

export interface SchemaModel {
  schemas: string[];
  tables: Table[];
  views: View[];
  sequences: Sequence[];
}

const byName = <T extends { name: string }>(items: readonly T[]) => [...items].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
const byKey = <T extends { key: string }>(items: readonly T[]) => [...items].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));

/** The state a fingerprint covers: everything modelled, order-independent, without derived data. */
export function comparableState(model: SchemaModel): unknown {
  return {
    formatVersion: 1,
    schemas: [...model.schemas].sort(),
    tables: byKey(model.tables).map((t) => ({
      key: t.key,
      columns: byName(t.columns),
      constraints: byName(t.constraints),
      indexes: byName(t.indexes),
    })),
    views: byKey(model.views).map((v) => ({ key: v.key, definition: v.definition })),
    sequences: byKey(model.sequences).map((s) => ({ key: s.key, type: s.type, options: s.options, ownedBy: s.ownedBy })),
  };
}

export function stateFingerprint(model: SchemaModel): string {
  return digest(comparableState(model));
}
