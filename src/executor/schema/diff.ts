// The difference between two models of the supported set, object by object. The same diff feeds drift
// findings (observe) and statements (plan), so the two can never disagree about what differs.
import { canonicalJson, digest } from '../../shared/canonical.js';
import type { DriftFinding } from '../../shared/executor-report.js';
import type { Column, Constraint, Index, SchemaModel, Sequence, Table, View } from './model.js';

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
}

export interface ModelDiff {
  schemas: Delta<string>;
  tables: { added: Table[]; removed: Table[]; altered: TableDelta[] };
  views: Delta<View>;
  sequences: Delta<Sequence>;
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const withoutDependencies = (v: View) => ({ key: v.key, definition: v.definition });

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
    const table: TableDelta = {
      from,
      to,
      columns: delta(from.columns, to.columns, (c) => c.name),
      constraints: delta(from.constraints, to.constraints, (c) => c.name),
      indexes: delta(from.indexes, to.indexes, (i) => i.name),
    };
    if (isEmptyDelta(table.columns) && isEmptyDelta(table.constraints) && isEmptyDelta(table.indexes)) continue;
    altered.push(table);
  }
  return {
    schemas: delta(actual.schemas, desired.schemas, (s) => s),
    tables: { added: tables.added, removed: tables.removed, altered },
    views: delta(actual.views, desired.views, (v) => v.key, (a, b) => same(withoutDependencies(a), withoutDependencies(b))),
    sequences: delta(actual.sequences, desired.sequences, (s) => s.key),
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
  }
  add('view', diff.views, (v) => v.key);
  add('sequence', diff.sequences, (s) => s.key);
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
