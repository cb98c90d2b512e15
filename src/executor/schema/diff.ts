// The difference between two models of the supported set, object by object. The same diff feeds drift
// findings (observe) and statements (plan), so the two can never disagree about what differs.
import { canonicalJson, digest } from '../../shared/canonical.js';
import type { DriftFinding } from '../../shared/executor-report.js';
import {
  grantId, memberId, type Collation, type Column, type Comment, type CompositeType, type Constraint, type Domain, type EnumType, type Extension, type Grant,
  type Index, type Operator, type Policy, type Routine, type SchemaModel, type Sequence, type Table, type Trigger, type View,
} from './model.js';

export interface Delta<T> {
  /** Present in the desired model only. */
  added: T[];
  /** Present in the actual model only. */
  removed: T[];
  changed: { from: T; to: T }[];
}

export interface TableDelta {
  from: Table;
  to: Table;
  columns: Delta<Column>;
  constraints: Delta<Constraint>;
  indexes: Delta<Index>;
  /** ENABLE/FORCE ROW LEVEL SECURITY differs. */
  rowSecurity: boolean;
  /** Logging or storage parameters differ. */
  storage: boolean;
}

export interface ModelDiff {
  schemas: Delta<string>;
  extensions: Delta<Extension>;
  collations: Delta<Collation>;
  enums: Delta<EnumType>;
  domains: Delta<Domain>;
  composites: Delta<CompositeType>;
  routines: Delta<Routine>;
  operators: Delta<Operator>;
  tables: { added: Table[]; removed: Table[]; altered: TableDelta[] };
  views: Delta<View>;
  sequences: Delta<Sequence>;
  triggers: Delta<Trigger>;
  policies: Delta<Policy>;
  comments: Delta<Comment>;
  grants: Delta<Grant>;
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const withoutDependencies = (v: View) => ({ key: v.key, materialized: v.materialized, definition: v.definition, indexes: [...v.indexes].sort((a, b) => (a.name < b.name ? -1 : 1)) });
const routineContent = (r: Routine) => ({ kind: r.kind, definition: r.definition });
const triggerContent = (t: Trigger) => t.definition;

/**
 * Columns are matched by name, except that a generated column whose expression changes, or a column that
 * becomes or stops being generated, is a new column: PostgreSQL 15 cannot alter a generation expression.
 */
const columnId = (c: Column) => (c.generated === null ? c.name : `${c.name} GENERATED ${c.generated}`);

function delta<T>(from: readonly T[], to: readonly T[], id: (item: T) => string, equal: (a: T, b: T) => boolean = same): Delta<T> {
  const before = new Map(from.map((item) => [id(item), item]));
  const after = new Map(to.map((item) => [id(item), item]));
  const result: Delta<T> = { added: [], removed: [], changed: [] };
  for (const [key, item] of after) {
    const old = before.get(key);
    if (old === undefined) result.added.push(item);
    else if (!equal(old, item)) result.changed.push({ from: old, to: item });
  }
  for (const [key, item] of before) if (!after.has(key)) result.removed.push(item);
  return result;
}

/** `actual` → `desired`. Tables present in both are compared member by member (column order is not compared). */
export function diffModels(actual: SchemaModel, desired: SchemaModel): ModelDiff {
  // Every table present on both sides is a candidate; its members decide whether it changed.
  const tables = delta(actual.tables, desired.tables, (t) => t.key, () => false);
  const altered: TableDelta[] = [];
  for (const { from, to } of tables.changed) {
    // A table cannot become partitioned, or change its partition key or bound, in place: it is made again.
    if (from.partitionBy !== to.partitionBy || !same(from.partitionOf, to.partitionOf)) {
      tables.removed.push(from);
      tables.added.push(to);
      continue;
    }
    const table: TableDelta = {
      from,
      to,
      // A partition's columns are its parent's: they change with the parent.
      columns: to.partitionOf !== null ? delta([], [], columnId) : delta(from.columns, to.columns, columnId),
      constraints: delta(from.constraints, to.constraints, (c) => c.name),
      indexes: delta(from.indexes, to.indexes, (i) => i.name),
      rowSecurity: from.rowSecurity !== to.rowSecurity || from.forceRowSecurity !== to.forceRowSecurity,
      storage: from.unlogged !== to.unlogged || !same(from.options, to.options),
    };
    if (isEmptyDelta(table.columns) && isEmptyDelta(table.constraints) && isEmptyDelta(table.indexes) && !table.rowSecurity && !table.storage) continue;
    altered.push(table);
  }
  return {
    schemas: delta(actual.schemas, desired.schemas, (s) => s),
    extensions: delta(actual.extensions, desired.extensions, (x) => x.name),
    collations: delta(actual.collations, desired.collations, (c) => c.key),
    enums: delta(actual.enums, desired.enums, (e) => e.key),
    domains: delta(actual.domains, desired.domains, (d) => d.key),
    composites: delta(actual.composites, desired.composites, (c) => c.key),
    routines: delta(actual.routines, desired.routines, (r) => r.key, (a, b) => same(routineContent(a), routineContent(b))),
    operators: delta(actual.operators, desired.operators, (o) => o.key),
    tables: { added: tables.added, removed: tables.removed, altered },
    views: delta(actual.views, desired.views, (v) => v.key, (a, b) => same(withoutDependencies(a), withoutDependencies(b))),
    sequences: delta(actual.sequences, desired.sequences, (s) => s.key),
    triggers: delta(actual.triggers, desired.triggers, memberId, (a, b) => triggerContent(a) === triggerContent(b)),
    policies: delta(actual.policies, desired.policies, memberId),
    comments: delta(actual.comments, desired.comments, (c) => c.target),
    grants: delta(actual.grants, desired.grants, grantId),
  };
}

function isEmptyDelta<T>(d: Delta<T>): boolean {
  return d.added.length === 0 && d.removed.length === 0 && d.changed.length === 0;
}

interface DriftEntry {
  category: string;
  object: string;
  from: string | null;
  to: string | null;
}

/** Every difference, with object identities and content digests: private detail, never reported as such. */
function driftEntries(diff: ModelDiff): DriftEntry[] {
  const entries: DriftEntry[] = [];
  const add = <T>(kind: string, d: Delta<T>, id: (item: T) => string, scope = '') => {
    for (const item of d.added) entries.push({ category: `missing_${kind}`, object: scope + id(item), from: null, to: digest(item) });
    for (const item of d.removed) entries.push({ category: `extra_${kind}`, object: scope + id(item), from: digest(item), to: null });
    for (const { from, to } of d.changed) entries.push({ category: `changed_${kind}`, object: scope + id(from), from: digest(from), to: digest(to) });
  };
  add('schema', diff.schemas, (s) => s);
  add('table', { added: diff.tables.added, removed: diff.tables.removed, changed: [] }, (t) => t.key);
  for (const t of diff.tables.altered) {
    add('column', t.columns, (c) => c.name, `${t.to.key}.`);
    add('constraint', t.constraints, (c) => c.name, `${t.to.key}.`);
    add('index', t.indexes, (i) => i.name, `${t.to.key}.`);
    if (t.rowSecurity) add('row_security', { added: [], removed: [], changed: [{ from: t.from.rowSecurity, to: t.to.rowSecurity }] }, () => t.to.key);
    if (t.storage) add('table_storage', { added: [], removed: [], changed: [{ from: [t.from.unlogged, t.from.options], to: [t.to.unlogged, t.to.options] }] }, () => t.to.key);
  }
  add('view', diff.views, (v) => v.key);
  add('sequence', diff.sequences, (s) => s.key);
  add('extension', diff.extensions, (x) => x.name);
  add('collation', diff.collations, (c) => c.key);
  add('enum', diff.enums, (e) => e.key);
  add('domain', diff.domains, (d) => d.key);
  add('composite_type', diff.composites, (c) => c.key);
  add('routine', diff.routines, (r) => r.key);
  add('operator', diff.operators, (o) => o.key);
  add('trigger', diff.triggers, memberId);
  add('policy', diff.policies, memberId);
  add('comment', diff.comments, (c) => c.target);
  add('grant', diff.grants, grantId);
  return entries.sort((a, b) => (a.category + a.object < b.category + b.object ? -1 : 1));
}

export interface Drift {
  drift: boolean;
  /** Categories and counts only. */
  findings: DriftFinding[];
  /** Digest of the full detail: equal drift, equal digest. */
  driftDigest: string;
}

export function summarizeDrift(diff: ModelDiff): Drift {
  const entries = driftEntries(diff);
  const counts = new Map<string, number>();
  for (const e of entries) counts.set(e.category, (counts.get(e.category) ?? 0) + 1);
  return {
    drift: entries.length > 0,
    findings: [...counts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([category, count]) => ({ category, count })),
    driftDigest: digest({ formatVersion: 1, entries }),
  };
}
