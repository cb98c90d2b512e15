// The difference between two models of the supported set, object by object. The same diff feeds drift
// findings (observe) and statements (plan), so the two can never disagree about what differs.
import { canonicalJson, digest } from '../../shared/canonical.js';
import type { DriftFinding } from '../../shared/executor-report.js';
import {
  grantId, memberId, type Collation, type Column, type Comment, type CompositeType, type Constraint, type Domain, type EnumType, type Extension, type Grant,
  type Index, type Operator, type Policy, type RelationKey, type Routine, type SchemaModel, type Sequence, type Table, type Trigger, type View,
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
  /** Parents left (`NO INHERIT`), then parents taken (`INHERIT`), in order; see parentChange. */
  parents: ParentChange;
}

export interface ParentChange {
  detach: RelationKey[];
  attach: RelationKey[];
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

/**
 * PostgreSQL appends a parent taken by `INHERIT` after the others and cannot reorder them. The table keeps the longest
 * start of its desired parents that it already has in that order, leaves the others, and takes the rest in order.
 */
export function parentChange(from: Table, to: Table): ParentChange {
  let kept = 0;
  for (let at = 0; kept < to.inherits.length; kept += 1) {
    at = from.inherits.indexOf(to.inherits[kept]!, at) + 1;
    if (at === 0) break;
  }
  const keep = to.inherits.slice(0, kept);
  return { detach: from.inherits.filter((p) => !keep.includes(p)), attach: to.inherits.slice(kept) };
}

/** A check a child inherits: any but one declared `NO INHERIT`. */
const isInheritedCheck = (c: Constraint) => c.kind === 'check' && !c.definition.endsWith(' NO INHERIT');

/** The columns and checks, by name, a table holds through `parents`: theirs and what they inherit in turn. */
function inheritedMembers(tables: ReadonlyMap<string, Table>, parents: readonly RelationKey[]): { columns: Map<string, Column>; checks: Map<string, Constraint> } {
  const columns = new Map<string, Column>();
  const checks = new Map<string, Constraint>();
  for (const key of parents) {
    // Every parent is a table of the same model: one outside the managed schemas is refused (unsupported.ts).
    const parent = tables.get(key)!;
    const above = inheritedMembers(tables, parent.inherits);
    for (const c of [...above.columns.values(), ...parent.columns]) if (!columns.has(c.name)) columns.set(c.name, c);
    for (const c of [...above.checks.values(), ...parent.constraints.filter(isInheritedCheck)]) if (!checks.has(c.name)) checks.set(c.name, c);
  }
  return { columns, checks };
}

/**
 * A table's own members compared across a change of parents. What it held only through a parent it leaves becomes
 * its own (PostgreSQL keeps it), so it is compared as such; what it holds through a parent it keeps, or will hold
 * through the desired parents, is never added or dropped on the child (PostgreSQL refuses both).
 */
function memberDelta<T extends { name: string }>(own: readonly T[], freed: ReadonlyMap<string, T>, kept: ReadonlyMap<string, T>, wanted: readonly T[],
  stillInherited: ReadonlyMap<string, T>, id: (item: T) => string): Delta<T> {
  const before = [...own, ...[...freed.values()].filter((m) => !own.some((o) => o.name === m.name) && !kept.has(m.name))];
  const d = delta(before, wanted, id);
  return { added: d.added.filter((m) => !kept.has(m.name)), removed: d.removed.filter((m) => !stillInherited.has(m.name)), changed: d.changed };
}

/** `actual` → `desired`. Tables present in both are compared member by member (column order is not compared). */
export function diffModels(actual: SchemaModel, desired: SchemaModel): ModelDiff {
  // Every table present on both sides is a candidate; its members decide whether it changed.
  const tables = delta(actual.tables, desired.tables, (t) => t.key, () => false);
  const actualTables = new Map(actual.tables.map((t) => [t.key, t]));
  const desiredTables = new Map(desired.tables.map((t) => [t.key, t]));
  const altered: TableDelta[] = [];
  for (const { from, to } of tables.changed) {
    // A table cannot become partitioned, or change its partition key or bound, in place: it is made again.
    if (from.partitionBy !== to.partitionBy || !same(from.partitionOf, to.partitionOf)) {
      tables.removed.push(from);
      tables.added.push(to);
      continue;
    }
    const parents = parentChange(from, to);
    const kept = inheritedMembers(actualTables, from.inherits.filter((p) => !parents.detach.includes(p)));
    const freed = inheritedMembers(actualTables, parents.detach);
    const stillInherited = inheritedMembers(desiredTables, to.inherits);
    const table: TableDelta = {
      from,
      to,
      // A partition's columns are its parent's: they change with the parent.
      columns: to.partitionOf !== null ? delta([], [], columnId)
        : memberDelta(from.columns, freed.columns, kept.columns, to.columns, stillInherited.columns, columnId),
      constraints: memberDelta(from.constraints, freed.checks, kept.checks, to.constraints, stillInherited.checks, (c) => c.name),
      indexes: delta(from.indexes, to.indexes, (i) => i.name),
      rowSecurity: from.rowSecurity !== to.rowSecurity || from.forceRowSecurity !== to.forceRowSecurity,
      storage: from.unlogged !== to.unlogged || !same(from.options, to.options),
      parents,
    };
    if (isEmptyDelta(table.columns) && isEmptyDelta(table.constraints) && isEmptyDelta(table.indexes) && !table.rowSecurity && !table.storage
      && parents.detach.length + parents.attach.length === 0) continue;
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
    if (t.parents.detach.length + t.parents.attach.length > 0) {
      add('table_parents', { added: [], removed: [], changed: [{ from: t.from.inherits, to: t.to.inherits }] }, () => t.to.key);
    }
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
