// Turning a diff into ordered SQL. The order is fixed by what PostgreSQL refuses otherwise: views that read a
// changing object go first and come back last; foreign keys leave before the keys they reference change and
// return after; sequences exist before the defaults that call them; schemas are dropped only once empty.
// Each statement that can lose data or an object says so (its destructive reason), decided here, per
// statement kind, never by matching text.
import { canonicalJson } from '../../shared/canonical.js';
import { quoteIdent } from '../db.js';
import { diffModels, type TableDelta } from './diff.js';
import type { Column, Constraint, SchemaModel, SequenceOptions, Table, View } from './model.js';

export type DestructiveReason = 'drop_schema' | 'drop_table' | 'drop_column' | 'drop_view' | 'drop_sequence' | 'change_column_type';

export interface PlannedStatement {
  sql: string;
  destructive?: DestructiveReason;
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const isForeignKey = (c: Constraint) => c.kind === 'foreign_key';
const providesUniqueness = (c: Constraint) => c.kind === 'primary_key' || c.kind === 'unique';

/** The statements that take a database whose supported set is `actual` to `desired`. */
export function planStatements(actual: SchemaModel, desired: SchemaModel): PlannedStatement[] {
  const diff = diffModels(actual, desired);
  const out: PlannedStatement[] = [];
  const emit = (sql: string, destructive?: DestructiveReason) => out.push(destructive ? { sql, destructive } : { sql });

  const droppedTables = new Set(diff.tables.removed.map((t) => t.key));
  const removedColumns = new Set(diff.tables.altered.flatMap((t) => t.columns.removed.map((c) => `${t.to.key}.${quoteIdent(c.name)}`)));
  const desiredTables = new Map(desired.tables.map((t) => [t.key, t]));
  const desiredViews = new Map(desired.views.map((v) => [v.key, v]));

  // 1. Views reading anything that is dropped, re-typed or redefined leave first, dependents before what they read.
  const viewsToDrop = viewsReadingChanges(actual.views, diff.tables.altered, [
    ...droppedTables,
    ...diff.views.removed.map((v) => v.key),
    ...diff.views.changed.map((c) => c.from.key),
    ...diff.sequences.removed.map((s) => s.key),
  ]);
  for (const view of dependencyOrder(actual.views.filter((v) => viewsToDrop.has(v.key))).reverse()) {
    emit(`DROP VIEW ${view.key}`, desiredViews.has(view.key) ? undefined : 'drop_view');
  }

  // 2. Foreign keys that go, change, or reference a key that is about to change.
  const uniquenessChanges = new Set(diff.tables.altered.filter(changesUniqueness).map((t) => t.to.key));
  const foreignKeysToRestore: { table: Table; constraint: Constraint }[] = [];
  for (const table of actual.tables) {
    const kept = desiredTables.get(table.key);
    for (const fk of table.constraints.filter(isForeignKey)) {
      if (!kept) {
        // A dropped table's own keys go with it, except one into another dropped table, which would block that drop.
        if (fk.references !== null && fk.references !== table.key && droppedTables.has(fk.references)) emit(dropConstraint(table.key, fk));
        continue;
      }
      const wanted = kept.constraints.find((c) => c.name === fk.name);
      const unchanged = wanted !== undefined && same(wanted, fk);
      const referenceChanges = fk.references !== null && uniquenessChanges.has(fk.references);
      if (unchanged && !referenceChanges) continue;
      emit(dropConstraint(table.key, fk));
      if (unchanged) foreignKeysToRestore.push({ table: kept, constraint: wanted });
    }
  }

  // 3-4. Other constraints and indexes that go or change, on tables that stay.
  for (const t of diff.tables.altered) {
    for (const c of [...t.constraints.removed, ...t.constraints.changed.map((x) => x.from)]) {
      if (!isForeignKey(c)) emit(dropConstraint(t.to.key, c));
    }
  }
  for (const t of diff.tables.altered) {
    for (const i of [...t.indexes.removed, ...t.indexes.changed.map((x) => x.from)]) emit(`DROP INDEX ${quoteIdent(t.to.schema)}.${quoteIdent(i.name)}`);
  }

  // 5. A sequence changing owner is released first, so dropping its old column does not drop it.
  for (const { from, to } of diff.sequences.changed) {
    if (from.ownedBy !== null && !same(from.ownedBy, to.ownedBy)) emit(`ALTER SEQUENCE ${from.key} OWNED BY NONE`);
  }

  // 6. Tables that go (their indexes, constraints and owned sequences go with them).
  for (const t of diff.tables.removed) emit(`DROP TABLE ${t.key}`, 'drop_table');

  // 7-9. New schemas, sequences and tables (columns only; keys come once every table exists).
  for (const s of diff.schemas.added) emit(`CREATE SCHEMA ${quoteIdent(s)}`);
  for (const s of diff.sequences.added) emit(`CREATE SEQUENCE ${s.key} AS ${s.type} ${sequenceOptionsSql(s.options)}`);
  for (const t of diff.tables.added) emit(`CREATE TABLE ${t.key} (${t.columns.map((c) => `\n  ${columnDefinition(c)}`).join(',')}${t.columns.length ? '\n' : ''})`);

  // 10. Columns of tables that stay.
  for (const t of diff.tables.altered) {
    for (const c of t.columns.removed) emit(`ALTER TABLE ${t.to.key} DROP COLUMN ${quoteIdent(c.name)}`, 'drop_column');
    for (const c of t.columns.added) emit(`ALTER TABLE ${t.to.key} ADD COLUMN ${columnDefinition(c)}`);
    for (const { from, to } of t.columns.changed) alterColumn(t.to.key, from, to, emit);
  }

  // 11-12. Sequences that go (unless a dropped table or column took them along), and sequences that change.
  for (const s of diff.sequences.removed) {
    const ownerGone = s.ownedBy !== null && (droppedTables.has(s.ownedBy.table) || removedColumns.has(`${s.ownedBy.table}.${quoteIdent(s.ownedBy.column)}`));
    if (!ownerGone) emit(`DROP SEQUENCE ${s.key}`, 'drop_sequence');
  }
  for (const { from, to } of diff.sequences.changed) {
    if (from.type !== to.type || !same(from.options, to.options)) emit(`ALTER SEQUENCE ${to.key} AS ${to.type} ${sequenceOptionsSql(to.options)}`);
  }

  // 13-15. Keys and indexes: primary/unique/check first, then indexes, then foreign keys, which need the others.
  const newConstraints = [
    ...diff.tables.added.flatMap((t) => t.constraints.map((constraint) => ({ table: t, constraint }))),
    ...diff.tables.altered.flatMap((t) => [...t.constraints.added, ...t.constraints.changed.map((x) => x.to)].map((constraint) => ({ table: t.to, constraint }))),
  ];
  for (const { table, constraint } of newConstraints) if (!isForeignKey(constraint)) emit(addConstraint(table.key, constraint));
  for (const t of diff.tables.added) for (const i of t.indexes) emit(i.definition);
  for (const t of diff.tables.altered) for (const i of [...t.indexes.added, ...t.indexes.changed.map((x) => x.to)]) emit(i.definition);
  for (const { table, constraint } of [...newConstraints, ...foreignKeysToRestore]) if (isForeignKey(constraint)) emit(addConstraint(table.key, constraint));

  // 16. Ownership, now that the owning columns exist.
  for (const s of [...diff.sequences.added, ...diff.sequences.changed.filter((x) => !same(x.from.ownedBy, x.to.ownedBy)).map((x) => x.to)]) {
    if (s.ownedBy !== null) emit(`ALTER SEQUENCE ${s.key} OWNED BY ${s.ownedBy.table}.${quoteIdent(s.ownedBy.column)}`);
  }

  // 17. Views, each after the views it reads.
  const viewsToCreate = new Set([...diff.views.added.map((v) => v.key), ...diff.views.changed.map((c) => c.to.key), ...viewsToDrop]);
  for (const view of dependencyOrder(desired.views.filter((v) => viewsToCreate.has(v.key)))) emit(`CREATE VIEW ${view.key} AS\n${view.definition}`);

  // 18. Schemas that go, now empty.
  for (const s of diff.schemas.removed) emit(`DROP SCHEMA ${quoteIdent(s)}`, 'drop_schema');
  return out;
}

function changesUniqueness(t: TableDelta): boolean {
  return [...t.constraints.removed, ...t.constraints.changed.map((x) => x.from)].some(providesUniqueness) ||
    [...t.indexes.removed, ...t.indexes.changed.map((x) => x.from)].some((i) => i.unique);
}

/** Views (by key) that read, directly or through other views, a changed relation or a table losing or re-typing a column. */
function viewsReadingChanges(views: readonly View[], altered: readonly TableDelta[], changedRelations: readonly string[]): Set<string> {
  const changed = new Set(changedRelations);
  for (const t of altered) {
    if (t.columns.removed.length > 0 || t.columns.changed.some((c) => c.from.type !== c.to.type)) changed.add(t.to.key);
  }
  const result = new Set<string>();
  for (let grew = true; grew;) {
    grew = false;
    for (const v of views) {
      if (!result.has(v.key) && (changed.has(v.key) || v.dependsOn.some((d) => changed.has(d)))) {
        result.add(v.key);
        changed.add(v.key);
        grew = true;
      }
    }
  }
  return result;
}

/** Views ordered so each comes after every view it reads (dependencies outside the list are ignored). */
function dependencyOrder(views: readonly View[]): View[] {
  const byKey = new Map(views.map((v) => [v.key, v]));
  const ordered: View[] = [];
  const visited = new Set<string>();
  const visit = (v: View) => {
    if (visited.has(v.key)) return;
    visited.add(v.key);
    for (const d of v.dependsOn) {
      const dependency = byKey.get(d);
      if (dependency) visit(dependency);
    }
    ordered.push(v);
  };
  for (const v of [...views].sort((a, b) => (a.key < b.key ? -1 : 1))) visit(v);
  return ordered;
}

function alterColumn(table: string, from: Column, to: Column, emit: (sql: string, destructive?: DestructiveReason) => void): void {
  const alter = (action: string, destructive?: DestructiveReason) => emit(`ALTER TABLE ${table} ALTER COLUMN ${quoteIdent(to.name)} ${action}`, destructive);
  if (from.identity && !to.identity) alter('DROP IDENTITY');
  if (from.default !== null && from.default !== to.default) alter('DROP DEFAULT');
  if (from.type !== to.type) alter(`TYPE ${to.type} USING ${quoteIdent(to.name)}::${to.type}`, 'change_column_type');
  if (from.notNull && !to.notNull) alter('DROP NOT NULL');
  if (!from.notNull && to.notNull) alter('SET NOT NULL');
  if (to.default !== null && from.default !== to.default) alter(`SET DEFAULT ${to.default}`);
  if (!from.identity && to.identity) alter(`ADD ${identitySql(to.identity.generation)} (${sequenceOptionsSql(to.identity.options)})`);
  if (from.identity && to.identity) {
    if (from.identity.generation !== to.identity.generation) alter(`SET ${identitySql(to.identity.generation).replace(/ AS IDENTITY$/, '')}`);
    if (!same(from.identity.options, to.identity.options)) alter(identityOptionsSql(to.identity.options));
  }
}

function columnDefinition(c: Column): string {
  return [
    `${quoteIdent(c.name)} ${c.type}`,
    c.identity ? ` ${identitySql(c.identity.generation)} (${sequenceOptionsSql(c.identity.options)})` : '',
    c.default !== null ? ` DEFAULT ${c.default}` : '',
    c.notNull ? ' NOT NULL' : '',
  ].join('');
}

const identitySql = (generation: 'always' | 'by_default') => `GENERATED ${generation === 'always' ? 'ALWAYS' : 'BY DEFAULT'} AS IDENTITY`;

function sequenceOptionsSql(o: SequenceOptions): string {
  return `START WITH ${o.start} INCREMENT BY ${o.increment} MINVALUE ${o.min} MAXVALUE ${o.max} CACHE ${o.cache} ${o.cycle ? 'CYCLE' : 'NO CYCLE'}`;
}

function identityOptionsSql(o: SequenceOptions): string {
  return `SET START WITH ${o.start} SET INCREMENT BY ${o.increment} SET MINVALUE ${o.min} SET MAXVALUE ${o.max} SET CACHE ${o.cache} SET ${o.cycle ? 'CYCLE' : 'NO CYCLE'}`;
}

const dropConstraint = (table: string, c: Constraint) => `ALTER TABLE ${table} DROP CONSTRAINT ${quoteIdent(c.name)}`;
const addConstraint = (table: string, c: Constraint) => `ALTER TABLE ${table} ADD CONSTRAINT ${quoteIdent(c.name)} ${c.definition}`;

