// Turning a diff into ordered SQL. The order is fixed by what PostgreSQL refuses otherwise: what reads a
// changing object (policies, triggers, views) goes first and comes back last; foreign keys leave before the
// keys they reference change and return after; extensions, collations, types and routines exist before the tables
// that use them; what is dropped for good goes only once nothing uses it; comments and grants come last, when
// every object they name exists. Each statement says, per statement kind and never by matching text, whether
// it can lose data (destructive), changes who may do what (privilege), or rewrites, scans or blocks a table.
import { canonicalJson, sha256Digest } from '../../shared/canonical.js';
import { quoteIdent } from '../db.js';
import { diffModels, type Delta, type ModelDiff, type TableDelta } from './diff.js';
import type { Column, Constraint, Grant, Identity, Index, RelationKey, Routine, SchemaModel, SequenceOptions, Table, View } from './model.js';
import { createOperator, dropOperator, planOperators } from './operators.js';
import { commentTargets, grantTargets, indexTarget, isRecreatedTarget, operatorTarget, routineTarget, type Recreated } from './targets.js';

export type DestructiveReason =
  | 'drop_schema' | 'drop_table' | 'drop_column' | 'drop_view' | 'drop_sequence' | 'change_column_type'
  | 'drop_extension' | 'drop_type' | 'drop_attribute' | 'remove_enum_value' | 'drop_routine';

/** What a person should know before approving: the statement rewrites the table, scans it, or blocks writes while it builds. */
export type LockingReason = 'table_rewrite' | 'full_table_scan' | 'blocking_index_build';

export interface PlannedStatement {
  sql: string;
  destructive?: DestructiveReason;
  locking?: LockingReason;
  /** Changes privileges: a grant, a revoke, a policy or row-level security. */
  privilege?: true;
  /** The same index built without blocking writes, when this statement may run outside a transaction. */
  concurrently?: string;
}

interface Classification {
  destructive?: DestructiveReason;
  locking?: LockingReason;
  privilege?: true;
  concurrently?: string;
}
type Emit = (sql: string, c?: Classification) => void;

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const isForeignKey = (c: Constraint) => c.kind === 'foreign_key';
const providesUniqueness = (c: Constraint) => c.kind === 'primary_key' || c.kind === 'unique';
/** A key or an exclusion constraint is backed by an index of its own name, built with it and dropped with it. */
const hasIndex = (c: Constraint) => providesUniqueness(c) || c.kind === 'exclusion';
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;
const changedFrom = <T>(d: Delta<T>) => d.changed.map((x) => x.from);
const changedTo = <T>(d: Delta<T>) => d.changed.map((x) => x.to);

/** The statements that take a database whose modelled state is `actual` to `desired`. */
export function planStatements(actual: SchemaModel, desired: SchemaModel): PlannedStatement[] {
  const diff = diffModels(actual, desired);
  const out: PlannedStatement[] = [];
  const emit: Emit = (sql, c = {}) => out.push({ sql, ...c });
  const recreated: Recreated = { targets: new Set(), relations: new Set() };

  const droppedTables = new Set(diff.tables.removed.map((t) => t.key));
  const removedColumns = new Set(diff.tables.altered.flatMap((t) => t.columns.removed.map((c) => `${t.to.key}.${quoteIdent(c.name)}`)));
  const desiredTables = new Map(desired.tables.map((t) => [t.key, t]));
  const desiredViews = new Map(desired.views.map((v) => [v.key, v]));
  const existingTables = new Set(actual.tables.map((t) => t.key));
  const actualEnums = new Set(actual.enums.map((e) => e.key));

  // Routines whose signature holds but whose result or argument names change cannot be replaced in place.
  const routinesRecreated = diff.routines.changed.filter((r) => r.from.header !== r.to.header).map((r) => r.to);
  const routinesGoing = new Set([...diff.routines.removed, ...routinesRecreated].map((r) => r.key));
  const enumsRecreated = diff.enums.changed.filter((e) => !isOrderedSubset(e.from.values, e.to.values));
  const recreatedEnumKeys = new Set(enumsRecreated.map((e) => e.to.key));
  const enumColumns = desired.tables.filter((t) => existingTables.has(t.key) && t.partitionOf === null).flatMap((t) =>
    t.columns.filter((c) => recreatedEnumKeys.has(c.type.replace(/\[\]$/, ''))).map((column) => ({ table: t, column })));

  // Views reading anything that is dropped, re-typed or redefined leave (step 2). A routine goes with what it needs,
  // since PostgreSQL drops neither under it: a leaving view whose row type its signature uses, a routine it calls (an
  // aggregate's support function) that goes; and in turn the views that call it. It is made again after them.
  const viewsReading = (going: Iterable<string>) => viewsReadingChanges(actual.views, diff.tables.altered, [
    ...droppedTables,
    ...diff.views.removed.map((v) => v.key),
    ...changedFrom(diff.views).map((v) => v.key),
    ...diff.sequences.removed.map((s) => s.key),
    ...going,
    ...enumColumns.map((c) => c.table.key),
  ]);
  let viewsToDrop = viewsReading(routinesGoing);
  const takenDown = (r: Routine) => r.viewRowTypes.some((v) => viewsToDrop.has(v)) || r.calls.some((c) => routinesGoing.has(c));
  for (let more = actual.routines.filter((r) => !routinesGoing.has(r.key) && takenDown(r)); more.length > 0;
    more = actual.routines.filter((r) => !routinesGoing.has(r.key) && takenDown(r))) {
    for (const r of more) routinesGoing.add(r.key);
    viewsToDrop = viewsReading(routinesGoing);
  }
  const routinesTakenDown = actual.routines.filter((r) => routinesGoing.has(r.key) && takenDown(r));
  const takenDownFirst = new Set(routinesTakenDown.map((r) => r.key));
  const operators = planOperators(actual, desired, diff, routinesGoing);
  // An operator removed with its routine goes before the routine; any other goes last, once nothing uses it.
  const operatorsDroppedLast = diff.operators.removed.filter((o) => !routinesGoing.has(o.routine));

  const needsNoBodyCheck = diff.routines.added.length + diff.routines.changed.length > 0;
  if (needsNoBodyCheck) emit('SET LOCAL check_function_bodies = off');

  // 1. Policies and triggers that go, change, or run a routine that goes.
  // What lives on a table that is dropped and made again (a partitioning change) must be made again too.
  const onRemade = <T extends { table: string }>(items: readonly T[], before: readonly T[]) =>
    items.filter((i) => droppedTables.has(i.table) && before.some((b) => b.table === i.table && same(b, i)));
  const policiesToRestore = onRemade(desired.policies, actual.policies);
  for (const p of [...diff.policies.removed, ...changedFrom(diff.policies)]) {
    if (droppedTables.has(p.table)) continue;
    emit(`DROP POLICY ${quoteIdent(p.name)} ON ${p.table}`, { privilege: true });
    recreated.targets.add(`POLICY ${quoteIdent(p.name)} ON ${p.table}`);
  }
  const triggersToRestore = [
    ...desired.triggers.filter((t) => !droppedTables.has(t.table) && routinesGoing.has(t.routine) && actual.triggers.some((a) => a.table === t.table && a.name === t.name)),
    ...onRemade(desired.triggers, actual.triggers),
  ];
  for (const t of [...diff.triggers.removed, ...changedFrom(diff.triggers), ...triggersToRestore]) {
    if (droppedTables.has(t.table)) continue;
    emit(`DROP TRIGGER ${quoteIdent(t.name)} ON ${t.table}`);
    recreated.targets.add(`TRIGGER ${quoteIdent(t.name)} ON ${t.table}`);
  }

  // 2. Those views leave first, dependents before what they read, with the routines taken down (above), callers first.
  const leaving = [
    ...actual.views.filter((v) => viewsToDrop.has(v.key)).map((view) => ({ key: view.key, dependsOn: view.dependsOn, view })),
    ...routinesTakenDown.map(routineNode),
  ];
  for (const node of dependencyOrder<{ key: string; dependsOn: readonly string[]; view?: View; routine?: Routine }>(leaving).reverse()) {
    if (node.routine) {
      const stays = desired.routines.some((d) => d.key === node.routine!.key);
      emit(dropRoutine(node.routine), stays ? {} : { destructive: 'drop_routine' });
      recreated.targets.add(routineTarget(node.routine));
      continue;
    }
    const view = node.view!;
    emit(`DROP ${view.materialized ? 'MATERIALIZED VIEW' : 'VIEW'} ${view.key}`, desiredViews.has(view.key) ? {} : { destructive: 'drop_view' });
    recreated.relations.add(view.key);
    for (const i of view.indexes) recreated.targets.add(indexTarget(view.schema, i.name));
  }
  // A view's own triggers (INSTEAD OF) went with it: those that stay are made again once it is back.
  const triggersOnRemadeViews = desired.triggers.filter((t) => viewsToDrop.has(t.table) && actual.triggers.some((a) => same(a, t)));
  for (const t of triggersOnRemadeViews) recreated.targets.add(`TRIGGER ${quoteIdent(t.name)} ON ${t.table}`);

  // 3. Foreign keys that go, change, or reference a key that is about to change.
  const uniquenessChanges = new Set(diff.tables.altered.filter(changesUniqueness).map((t) => t.to.key));
  const foreignKeysToRestore: { table: Table; constraint: Constraint }[] = [];
  for (const table of actual.tables) {
    // A table that is dropped and made again gets all its keys anew.
    const kept = droppedTables.has(table.key) ? undefined : desiredTables.get(table.key);
    for (const fk of table.constraints.filter(isForeignKey)) {
      if (!kept) {
        // A dropped table's own keys go with it, except one into another dropped table, which would block that drop.
        if (fk.references !== null && fk.references !== table.key && droppedTables.has(fk.references)) emit(dropConstraint(table.key, fk));
        continue;
      }
      const wanted = kept.constraints.find((c) => c.name === fk.name);
      const unchanged = wanted !== undefined && same(wanted, fk);
      const referenceChanges = fk.references !== null && (uniquenessChanges.has(fk.references) || droppedTables.has(fk.references));
      if (unchanged && !referenceChanges) continue;
      emit(dropConstraint(table.key, fk));
      recreated.targets.add(constraintTarget(table.key, fk));
      if (unchanged) foreignKeysToRestore.push({ table: kept, constraint: wanted });
    }
  }

  // 4. Tables that stay leave the parents they no longer have (or have out of order): what they held through one
  // becomes their own and may be dropped below, and a parent that goes holds no child that stays. Then other
  // constraints and indexes that go or change, on tables that stay.
  for (const t of diff.tables.altered) for (const p of t.parents.detach) emit(`ALTER TABLE ${t.to.key} NO INHERIT ${p}`);
  for (const t of diff.tables.altered) {
    for (const c of [...t.constraints.removed, ...changedFrom(t.constraints)]) {
      if (isForeignKey(c)) continue;
      emit(dropConstraint(t.to.key, c));
      recreated.targets.add(constraintTarget(t.to.key, c));
      // The key's index, named as the key, goes with it.
      if (hasIndex(c)) recreated.targets.add(indexTarget(t.to.schema, c.name));
    }
    for (const i of [...t.indexes.removed, ...rebuilt(t.indexes).map((x) => x.from)]) {
      emit(`DROP INDEX ${indexName(t.to.schema, i)}`);
      recreated.targets.add(indexTarget(t.to.schema, i.name));
    }
  }

  // 5. A sequence changing owner is released first, so dropping its old column does not drop it.
  for (const { from, to } of diff.sequences.changed) {
    if (from.ownedBy !== null && !same(from.ownedBy, to.ownedBy)) emit(`ALTER SEQUENCE ${from.key} OWNED BY NONE`);
  }

  // 6. Tables that go (their indexes, constraints, triggers, policies and owned sequences go with them), partitions and
  // children before their parents.
  for (const t of partitionsFirst(diff.tables.removed)) {
    emit(`DROP TABLE ${t.key}`, { destructive: 'drop_table' });
    recreated.relations.add(t.key);
    for (const i of t.indexes) recreated.targets.add(indexTarget(t.schema, i.name));
  }

  // 7. Operators made again (nothing reads them any more) or going with their routine, then routines whose signature
  // holds but whose header changes.
  for (const o of [...operators.recreated, ...diff.operators.removed.filter((o) => routinesGoing.has(o.routine))]) {
    emit(dropOperator(o), desired.operators.some((d) => d.key === o.key) ? {} : { destructive: 'drop_routine' });
    recreated.targets.add(operatorTarget(o));
  }
  for (const r of routinesRecreated.filter((r) => !takenDownFirst.has(r.key))) emit(dropRoutine(r));
  for (const r of routinesRecreated) recreated.targets.add(routineTarget(r));

  // 8. New schemas and extensions, extensions that move or change version, then collations, which domains, columns
  // and indexes name.
  for (const s of diff.schemas.added) emit(`CREATE SCHEMA ${quoteIdent(s)}`);
  for (const x of diff.extensions.added) emit(`CREATE EXTENSION ${quoteIdent(x.name)} WITH SCHEMA ${quoteIdent(x.schema)} VERSION ${literal(x.version)}`);
  for (const { from, to } of diff.extensions.changed) {
    if (from.schema !== to.schema) emit(`ALTER EXTENSION ${quoteIdent(to.name)} SET SCHEMA ${quoteIdent(to.schema)}`);
    if (from.version !== to.version) emit(`ALTER EXTENSION ${quoteIdent(to.name)} UPDATE TO ${literal(to.version)}`);
  }
  planCollations(diff, emit, recreated);

  // 9. Types: enums, then domains (which may be over an enum), then composite types (which may hold either).
  for (const e of diff.enums.added) emit(`CREATE TYPE ${e.key} AS ENUM (${e.values.map(literal).join(', ')})`);
  for (const { from, to } of diff.enums.changed) {
    if (recreatedEnumKeys.has(to.key)) {
      emit(`ALTER TYPE ${to.key} RENAME TO ${quoteIdent(oldEnum(to.key))}`, { destructive: 'remove_enum_value' });
      emit(`CREATE TYPE ${to.key} AS ENUM (${to.values.map(literal).join(', ')})`);
      recreated.targets.add(`TYPE ${to.key}`);
      continue;
    }
    for (const [i, value] of to.values.entries()) {
      if (from.values.includes(value)) continue;
      const position = i > 0 ? ` AFTER ${literal(to.values[i - 1]!)}` : from.values.length > 0 ? ` BEFORE ${literal(from.values[0]!)}` : '';
      emit(`ALTER TYPE ${to.key} ADD VALUE ${literal(value)}${position}`);
    }
  }
  planDomains(diff, emit, recreated);
  planComposites(diff, emit);

  // 10. Routines that need no table or view (bodies not parsed at creation, no row type in the signature, nor in the
  // routines they call), so tables may use them and they may name tables yet to come; each after the routines it calls.
  const unchangedButDropped = desired.routines.filter((r) => takenDownFirst.has(r.key) && !changedTo(diff.routines).some((c) => c.key === r.key));
  const routinesToCreate = [...diff.routines.added, ...changedTo(diff.routines), ...unchangedButDropped];
  const phaseOf = routinePhases(desired.routines);
  const createInPhase = (phase: RoutinePhase) => {
    for (const { routine } of dependencyOrder(routinesToCreate.filter((r) => phaseOf(r) === phase).map(routineNode))) emit(routine.definition);
  };
  createInPhase('before_tables');
  const desiredOperators = new Map(desired.operators.map((o) => [o.key, o]));
  const afterTables = (routine: string) => desired.routines.some((r) => r.key === routine && phaseOf(r) !== 'before_tables');
  for (const o of operators.created.filter((o) => !afterTables(o.routine))) emit(createOperator(o, desiredOperators));

  // 11. New sequences and tables (columns only; keys come once every table exists), parents before partitions and
  // children.
  for (const s of diff.sequences.added) emit(`CREATE SEQUENCE ${s.key} AS ${s.type} ${sequenceOptionsSql(s.options)}`);
  for (const t of parentsFirst(diff.tables.added)) {
    emit(createTable(t));
    setColumnStatistics(t.key, t.columns.map((to) => ({ to })), emit);
  }

  // 12. Columns of tables that stay, and columns moving to a recreated enum.
  for (const t of diff.tables.altered) {
    for (const c of t.columns.removed) emit(`ALTER TABLE ${t.to.key} DROP COLUMN ${quoteIdent(c.name)}`, { destructive: 'drop_column' });
    for (const c of t.columns.added) {
      emit(`ALTER TABLE ${t.to.key} ADD COLUMN ${columnDefinition(c)}`, c.generated !== null || c.identity !== null ? { locking: 'table_rewrite' } : {});
    }
    for (const { from, to } of t.columns.changed) alterColumn(t.to.key, from, to, actualEnums, emit);
    setColumnStatistics(t.to.key, [...t.columns.added.map((to) => ({ to })), ...t.columns.changed], emit);
    if (t.storage) alterTableStorage(t.from, t.to, emit);
  }
  for (const { table, column } of enumColumns) {
    const alter = (action: string, c?: Classification) => emit(`ALTER TABLE ${table.key} ALTER COLUMN ${quoteIdent(column.name)} ${action}`, c);
    if (column.default !== null) alter('DROP DEFAULT');
    alter(`TYPE ${column.type} USING ${castThroughText(column.name, column.type)}`,
      { locking: 'table_rewrite' });
    if (column.default !== null) alter(`SET DEFAULT ${column.default}`);
  }
  for (const e of enumsRecreated) emit(`DROP TYPE ${quoteIdent(e.to.schema)}.${quoteIdent(oldEnum(e.to.key))}`);

  // 13. Sequences that go (unless a dropped table or column took them along), and sequences that change.
  for (const s of diff.sequences.removed) {
    const ownerGone = s.ownedBy !== null && (droppedTables.has(s.ownedBy.table) || removedColumns.has(`${s.ownedBy.table}.${quoteIdent(s.ownedBy.column)}`));
    if (!ownerGone) emit(`DROP SEQUENCE ${s.key}`, { destructive: 'drop_sequence' });
  }
  for (const { from, to } of diff.sequences.changed) {
    if (from.type !== to.type || !same(from.options, to.options)) emit(`ALTER SEQUENCE ${to.key} AS ${to.type} ${sequenceOptionsSql(to.options)}`);
  }

  // 14. Keys and indexes: primary/unique/check first, then indexes, then foreign keys, which need the others.
  const newTables = diff.tables.added;
  const newConstraints = [
    ...newTables.flatMap((t) => t.constraints.map((constraint) => ({ table: t, constraint }))),
    ...diff.tables.altered.flatMap((t) => [...t.constraints.added, ...changedTo(t.constraints)].map((constraint) => ({ table: t.to, constraint }))),
  ];
  const addKey = ({ table, constraint }: { table: Table; constraint: Constraint }) =>
    emit(addConstraint(table.key, constraint), existingTables.has(table.key) && !droppedTables.has(table.key) ? { locking: hasIndex(constraint) ? 'blocking_index_build' : 'full_table_scan' } : {});
  for (const c of newConstraints) if (!isForeignKey(c.constraint)) addKey(c);
  // Parents taken, in order, now that the child holds every column and check of theirs that it declares.
  for (const t of diff.tables.altered) for (const p of t.parents.attach) emit(`ALTER TABLE ${t.to.key} INHERIT ${p}`);
  const indexesBuilt = [
    ...newTables.flatMap((t) => t.indexes.map((index) => ({ table: t, index, existing: false }))),
    ...diff.tables.altered.flatMap((t) => [...t.indexes.added, ...rebuilt(t.indexes).map((x) => x.to)].map((index) => ({ table: t.to, index, existing: true }))),
  ];
  planPartitionIndexes(actual, desired, new Set(indexesBuilt.map((b) => indexName(b.table.schema, b.index))), emit);
  for (const { table, index, existing } of indexesBuilt) {
    const sql = indexDefinition(table, index);
    if (!existing) emit(sql);
    else emit(sql, table.partitionBy === null ? { locking: 'blocking_index_build', concurrently: sql.replace(/^CREATE (UNIQUE )?INDEX /, 'CREATE $1INDEX CONCURRENTLY ') } : { locking: 'blocking_index_build' });
    setIndexStatistics(table.schema, index, [], emit);
  }
  for (const t of diff.tables.altered) {
    for (const { from, to } of t.indexes.changed.filter((x) => !rebuilds(x))) setIndexStatistics(t.to.schema, to, from.statistics, emit);
  }
  for (const c of [...newConstraints, ...foreignKeysToRestore]) if (isForeignKey(c.constraint)) addKey(c);

  // 15. Ownership, now that the owning columns exist.
  for (const s of [...diff.sequences.added, ...diff.sequences.changed.filter((x) => !same(x.from.ownedBy, x.to.ownedBy)).map((x) => x.to)]) {
    if (s.ownedBy !== null) emit(`ALTER SEQUENCE ${s.key} OWNED BY ${s.ownedBy.table}.${quoteIdent(s.ownedBy.column)}`);
  }

  // 16. Routines that need the tables: SQL-standard bodies, parsed now that the tables they read exist, signatures
  // that use a table's row type, and the routines (aggregates) calling either.
  createInPhase('after_tables');
  for (const o of operators.created.filter((o) => afterTables(o.routine))) emit(createOperator(o, desiredOperators));

  // 17. Views and materialized views, each after the views and routines it reads, with a materialized view's indexes,
  // in one order with the routines whose signature uses a view's row type (each after those views).
  const viewsToCreate = new Set([...diff.views.added.map((v) => v.key), ...changedTo(diff.views).map((v) => v.key), ...viewsToDrop]);
  const viewNodes = desired.views.filter((v) => viewsToCreate.has(v.key)).map((view) => ({ key: view.key, dependsOn: view.dependsOn, view }));
  const routineNodes = routinesToCreate.filter((r) => phaseOf(r) === 'with_views').map(routineNode);
  for (const node of dependencyOrder<{ key: string; dependsOn: readonly string[]; view?: View; routine?: Routine }>([...viewNodes, ...routineNodes])) {
    if (node.routine) {
      emit(node.routine.definition);
      continue;
    }
    const view = node.view!;
    emit(view.materialized ? `CREATE MATERIALIZED VIEW ${view.key} AS\n${view.definition}\nWITH ${view.populated ? '' : 'NO '}DATA` : `CREATE VIEW ${view.key} AS\n${view.definition}`);
    for (const i of view.indexes) {
      emit(i.definition);
      setIndexStatistics(view.schema, i, [], emit);
    }
  }

  // 18. Triggers, once their tables, views and routines exist.
  for (const t of [...diff.triggers.added, ...changedTo(diff.triggers), ...triggersToRestore, ...triggersOnRemadeViews]) emit(t.definition);

  // 19. Row-level security and policies.
  for (const t of [...newTables, ...diff.tables.altered.filter((x) => x.rowSecurity).map((x) => x.to)]) {
    const from = droppedTables.has(t.key) ? undefined : actual.tables.find((a) => a.key === t.key);
    if ((from?.rowSecurity ?? false) !== t.rowSecurity) emit(`ALTER TABLE ${t.key} ${t.rowSecurity ? 'ENABLE' : 'DISABLE'} ROW LEVEL SECURITY`, { privilege: true });
    if ((from?.forceRowSecurity ?? false) !== t.forceRowSecurity) emit(`ALTER TABLE ${t.key} ${t.forceRowSecurity ? '' : 'NO '}FORCE ROW LEVEL SECURITY`, { privilege: true });
  }
  for (const p of [...diff.policies.added, ...changedTo(diff.policies), ...policiesToRestore]) emit(p.definition, { privilege: true });

  // 20. What goes for good once nothing uses it: operators, routines, types, collations, extensions, then the schemas, now empty.
  for (const o of operatorsDroppedLast) emit(dropOperator(o), { destructive: 'drop_routine' });
  for (const r of diff.routines.removed.filter((r) => !takenDownFirst.has(r.key))) emit(dropRoutine(r), { destructive: 'drop_routine' });
  for (const c of diff.composites.removed) emit(`DROP TYPE ${c.key}`, { destructive: 'drop_type' });
  for (const d of diff.domains.removed) emit(`DROP DOMAIN ${d.key}`, { destructive: 'drop_type' });
  for (const e of diff.enums.removed) emit(`DROP TYPE ${e.key}`, { destructive: 'drop_type' });
  for (const c of diff.collations.removed) emit(`DROP COLLATION ${c.key}`, { destructive: 'drop_type' });
  for (const x of diff.extensions.removed) emit(`DROP EXTENSION ${quoteIdent(x.name)}`, { destructive: 'drop_extension' });
  for (const s of diff.schemas.removed) emit(`DROP SCHEMA ${quoteIdent(s)}`, { destructive: 'drop_schema' });

  planComments(actual, desired, recreated, emit);
  planGrants(actual, desired, recreated, routinesToCreate.filter((r) => !actual.routines.some((a) => a.key === r.key) || routinesGoing.has(r.key)), emit);
  return out;
}

/** A recreated enum's old type, renamed aside (a name unique to the type) while its columns move to the new one. */
const oldEnum = (key: string) => `ptah_replaced_${sha256Digest(key).slice(7, 23)}`;

/** Whether `from` appears in `to` in the same order, so each new value can be added in place. */
function isOrderedSubset(from: readonly string[], to: readonly string[]): boolean {
  let at = 0;
  for (const value of to) if (at < from.length && from[at] === value) at += 1;
  return at === from.length && from.every((v) => to.includes(v));
}

/**
 * Collations are made before anything can name them. Nothing of one but its name can be altered, so a changed one is
 * dropped and made again, which PostgreSQL refuses while anything uses it (the proof says so: a known limit).
 */
function planCollations(diff: ModelDiff, emit: Emit, recreated: Recreated): void {
  for (const { from, to } of diff.collations.changed) {
    emit(`DROP COLLATION ${from.key}`, { destructive: 'drop_type' });
    emit(to.definition);
    recreated.targets.add(`COLLATION ${to.key}`);
  }
  for (const c of diff.collations.added) emit(c.definition);
}

function planDomains(diff: ModelDiff, emit: Emit, recreated: Recreated): void {
  const create = (d: ModelDiff['domains']['added'][number]) => {
    emit(`CREATE DOMAIN ${d.key} AS ${d.type}${collateSql(d)}${d.default !== null ? ` DEFAULT ${d.default}` : ''}${d.notNull ? ' NOT NULL' : ''}`);
    for (const c of d.checks) emit(`ALTER DOMAIN ${d.key} ADD CONSTRAINT ${quoteIdent(c.name)} ${c.definition}`);
  };
  for (const d of diff.domains.added) create(d);
  for (const { from, to } of diff.domains.changed) {
    if (from.type !== to.type || from.collation !== to.collation) {
      // A domain's base type or collation cannot change in place; anything using it blocks the drop (and the proof says so).
      emit(`DROP DOMAIN ${from.key}`, { destructive: 'drop_type' });
      create(to);
      recreated.targets.add(`DOMAIN ${to.key}`);
      continue;
    }
    if (from.default !== to.default) emit(`ALTER DOMAIN ${to.key} ${to.default === null ? 'DROP DEFAULT' : `SET DEFAULT ${to.default}`}`);
    if (from.notNull !== to.notNull) emit(`ALTER DOMAIN ${to.key} ${to.notNull ? 'SET' : 'DROP'} NOT NULL`, to.notNull ? { locking: 'full_table_scan' } : {});
    const checks = deltaByName(from.checks, to.checks);
    for (const c of [...checks.removed, ...changedFrom(checks)]) emit(`ALTER DOMAIN ${to.key} DROP CONSTRAINT ${quoteIdent(c.name)}`);
    for (const c of [...checks.added, ...changedTo(checks)]) {
      emit(`ALTER DOMAIN ${to.key} ADD CONSTRAINT ${quoteIdent(c.name)} ${c.definition}`, { locking: 'full_table_scan' });
      recreated.targets.add(`CONSTRAINT ${quoteIdent(c.name)} ON DOMAIN ${to.key}`);
    }
  }
}

function planComposites(diff: ModelDiff, emit: Emit): void {
  for (const c of diff.composites.added) emit(`CREATE TYPE ${c.key} AS (${c.attributes.map((a) => `${quoteIdent(a.name)} ${a.type}`).join(', ')})`);
  for (const { from, to } of diff.composites.changed) {
    const attributes = deltaByName(from.attributes, to.attributes);
    for (const a of attributes.removed) emit(`ALTER TYPE ${to.key} DROP ATTRIBUTE ${quoteIdent(a.name)}`, { destructive: 'drop_attribute' });
    for (const a of attributes.added) emit(`ALTER TYPE ${to.key} ADD ATTRIBUTE ${quoteIdent(a.name)} ${a.type}`);
    for (const { to: a } of attributes.changed) emit(`ALTER TYPE ${to.key} ALTER ATTRIBUTE ${quoteIdent(a.name)} TYPE ${a.type}`, { destructive: 'change_column_type' });
  }
}

function deltaByName<T extends { name: string }>(from: readonly T[], to: readonly T[]): Delta<T> {
  const result: Delta<T> = { added: [], removed: [], changed: [] };
  for (const item of to) {
    const old = from.find((f) => f.name === item.name);
    if (old === undefined) result.added.push(item);
    else if (!same(old, item)) result.changed.push({ from: old, to: item });
  }
  for (const item of from) if (!to.some((t) => t.name === item.name)) result.removed.push(item);
  return result;
}

/**
 * Comments last: every object exists. A recreated object lost its comment, so it is set again; a comment on an
 * object that is gone went with it.
 */
function planComments(actual: SchemaModel, desired: SchemaModel, recreated: Recreated, emit: Emit): void {
  // A target the desired schema comments on exists there, even one the model does not list (a key's index).
  const listed = commentTargets(desired);
  const commented = new Set(desired.comments.map((c) => c.target));
  const exists = (target: string) => listed(target) || commented.has(target);
  const before = new Map(actual.comments.filter((c) => exists(c.target) && !isRecreatedTarget(recreated, c.target)).map((c) => [c.target, c.text]));
  for (const c of desired.comments) if (before.get(c.target) !== c.text) emit(`COMMENT ON ${c.target} IS ${literal(c.text)}`);
  for (const target of before.keys()) if (!desired.comments.some((c) => c.target === target)) emit(`COMMENT ON ${target} IS NULL`);
}

/**
 * Grants last, against what each object holds once the plan has made it: a new or recreated object holds its
 * defaults (EXECUTE for PUBLIC on a routine, nothing else), an untouched one what it holds now.
 */
function planGrants(actual: SchemaModel, desired: SchemaModel, recreated: Recreated, freshRoutines: readonly Routine[], emit: Emit): void {
  const exists = grantTargets(desired);
  const fresh = new Set(freshRoutines.map(routineTarget));
  const keep = (g: Grant) => exists.has(g.target) && !fresh.has(g.target) && !isRecreatedTarget(recreated, g.target);
  const before: Grant[] = [
    ...actual.grants.filter(keep),
    ...[...fresh].map((target) => ({ target, grantee: 'PUBLIC', privilege: 'EXECUTE', grantable: false })),
  ];
  const id = (g: Grant) => `${g.target} ${g.grantee} ${g.privilege}`;
  const was = new Map(before.map((g) => [id(g), g]));
  for (const g of desired.grants) {
    const old = was.get(id(g));
    if (old?.grantable === g.grantable) continue;
    if (old?.grantable === true) emit(`REVOKE GRANT OPTION FOR ${g.privilege} ON ${g.target} FROM ${g.grantee}`, { privilege: true });
    else emit(`GRANT ${g.privilege} ON ${g.target} TO ${g.grantee}${g.grantable ? ' WITH GRANT OPTION' : ''}`, { privilege: true });
  }
  const wanted = new Set(desired.grants.map(id));
  for (const g of before) if (!wanted.has(id(g))) emit(`REVOKE ${g.privilege} ON ${g.target} FROM ${g.grantee}`, { privilege: true });
}

/** DROP AGGREGATE writes an aggregate of no arguments `(*)`. */
const dropRoutine = (r: Routine) => `DROP ${r.kind.toUpperCase()} ${r.kind === 'aggregate' ? r.key.replace(/\(\)$/, '(*)') : r.key}`;
/** A routine in a dependency order: after the views whose row type its signature uses and the routines it calls. */
const routineNode = (routine: Routine) => ({ key: routine.key, dependsOn: [...routine.viewRowTypes, ...routine.calls], routine });

type RoutinePhase = 'before_tables' | 'after_tables' | 'with_views';
const PHASES: readonly RoutinePhase[] = ['before_tables', 'after_tables', 'with_views'];

/**
 * When each routine is made: with the views when its signature uses a view's row type, after the tables when its body
 * is parsed at creation or its signature uses a table's row type, else before the tables; never before a routine it
 * calls (an aggregate over a support function made after the tables comes after them too).
 */
function routinePhases(routines: readonly Routine[]): (r: Routine) => RoutinePhase {
  const byKey = new Map(routines.map((r) => [r.key, r]));
  const ranks = new Map<string, number>();
  const rank = (r: Routine): number => {
    const known = ranks.get(r.key);
    if (known !== undefined) return known;
    ranks.set(r.key, 0); // a cycle of calls, which PostgreSQL cannot create, ends here
    const callees = r.calls.flatMap((c) => { const callee = byKey.get(c); return callee ? [rank(callee)] : []; });
    const own = r.viewRowTypes.length > 0 ? 2 : r.afterTables ? 1 : 0;
    ranks.set(r.key, Math.max(own, ...callees));
    return ranks.get(r.key)!;
  };
  return (r) => PHASES[rank(r)]!;
}

const constraintTarget = (table: string, c: Constraint) => `CONSTRAINT ${quoteIdent(c.name)} ON ${table}`;
const indexName = (schema: string, i: Index) => `${quoteIdent(schema)}.${quoteIdent(i.name)}`;

/** An index change that is more than its statistics targets rebuilds it; the targets alone are set in place. */
const rebuilds = (x: { from: Index; to: Index }) => !same({ ...x.from, statistics: [] }, { ...x.to, statistics: [] });
const rebuilt = (d: Delta<Index>) => d.changed.filter(rebuilds);

/** Sets each column's statistics target that differs from `before` (-1 puts a column back to the default). */
function setIndexStatistics(schema: string, index: Index, before: Index['statistics'], emit: Emit): void {
  const target = (list: Index['statistics'], column: number) => list.find((s) => s.column === column)?.target ?? -1;
  const columns = [...new Set([...before, ...index.statistics].map((s) => s.column))].sort((a, b) => a - b);
  for (const column of columns) {
    if (target(before, column) === target(index.statistics, column)) continue;
    emit(`ALTER INDEX ${indexName(schema, index)} ALTER COLUMN ${column} SET STATISTICS ${target(index.statistics, column)}`);
  }
}

/**
 * The names of a partition's indexes attached to its parent's. Where the parent's index is built by this plan, the
 * partition's is made first under its own name, and the parent's build attaches it (PostgreSQL attaches a matching
 * index instead of making one); where both stay, a name that differs is renamed in place, through a temporary name
 * when names are swapped. A partition made now under an index that stays takes the name PostgreSQL gives it.
 */
function planPartitionIndexes(actual: SchemaModel, desired: SchemaModel, parentsBuilt: ReadonlySet<string>, emit: Emit): void {
  const before = new Map(actual.tables.flatMap((t) => t.partitionIndexes.map((i) => [`${t.key} ${i.parent}`, i.name] as const)));
  const renames: { schema: string; from: string; to: string }[] = [];
  for (const t of desired.tables) {
    for (const i of t.partitionIndexes) {
      if (parentsBuilt.has(i.parent)) {
        emit(i.definition);
        continue;
      }
      const was = before.get(`${t.key} ${i.parent}`);
      if (was !== undefined && was !== i.name) renames.push({ schema: t.schema, from: was, to: i.name });
    }
  }
  const taken = new Set(renames.map((r) => `${r.schema}.${r.from}`));
  const swapped = renames.some((r) => taken.has(`${r.schema}.${r.to}`));
  const rename = (schema: string, from: string, to: string) => emit(`ALTER INDEX ${quoteIdent(schema)}.${quoteIdent(from)} RENAME TO ${quoteIdent(to)}`);
  if (swapped) renames.forEach((r, n) => rename(r.schema, r.from, temporaryName(n)));
  renames.forEach((r, n) => rename(r.schema, swapped ? temporaryName(n) : r.from, r.to));
}

const temporaryName = (n: number) => `ptah_renaming_${n}`;

/** A partitioned table's index is printed `ON ONLY` (the parent alone); created, it should reach every partition. */
const indexDefinition = (t: Table, i: Index) => (t.partitionBy !== null ? i.definition.replace(' ON ONLY ', ' ON ') : i.definition);

function createTable(t: Table): string {
  const partitionBy = t.partitionBy !== null ? ` PARTITION BY ${t.partitionBy}` : '';
  // toast.* parameters are set with the table's, in the same list.
  const options = t.options.length > 0 ? ` WITH (${t.options.join(', ')})` : '';
  const create = `CREATE ${t.unlogged ? 'UNLOGGED ' : ''}TABLE ${t.key}`;
  if (t.partitionOf !== null) return `${create} PARTITION OF ${t.partitionOf.parent} ${t.partitionOf.bound}${partitionBy}${options}`;
  const columns = `(${t.columns.map((c) => `\n  ${columnDefinition(c)}`).join(',')}${t.columns.length ? '\n' : ''})`;
  const inherits = t.inherits.length > 0 ? ` INHERITS (${t.inherits.join(', ')})` : '';
  return `${create} ${columns}${inherits}${partitionBy}${options}`;
}

/**
 * Logging and storage parameters of a table that stays: `SET LOGGED/UNLOGGED` rewrites the table (L
 * `table_rewrite`); a parameter is set or reset in place, never by a rebuild.
 */
function alterTableStorage(from: Table, to: Table, emit: Emit): void {
  if (from.unlogged !== to.unlogged) emit(`ALTER TABLE ${to.key} SET ${to.unlogged ? 'UNLOGGED' : 'LOGGED'}`, { locking: 'table_rewrite' });
  const key = (option: string) => option.slice(0, option.indexOf('='));
  const wanted = new Set(to.options.map(key));
  const reset = from.options.map(key).filter((k) => !wanted.has(k));
  const set = to.options.filter((o) => !from.options.includes(o));
  if (reset.length > 0) emit(`ALTER TABLE ${to.key} RESET (${reset.join(', ')})`);
  if (set.length > 0) emit(`ALTER TABLE ${to.key} SET (${set.join(', ')})`);
}

/** The statistics targets the columns of a table made or changed by the plan carry, set after the columns exist. */
function setColumnStatistics(table: string, columns: readonly { from?: Column; to: Column }[], emit: Emit): void {
  for (const { from, to } of columns) {
    if ((from?.statistics ?? null) === to.statistics) continue;
    emit(`ALTER TABLE ${table} ALTER COLUMN ${quoteIdent(to.name)} SET STATISTICS ${to.statistics ?? -1}`);
  }
}

/** How many generations of parents (partitioning or inheritance) a table has among `all`. */
const depth = (t: Table, all: readonly Table[]): number => {
  const parents = all.filter((p) => p.key === t.partitionOf?.parent || t.inherits.includes(p.key));
  return Math.max(0, ...parents.map((p) => 1 + depth(p, all)));
};
const parentsFirst = (tables: readonly Table[]) => [...tables].sort((a, b) => depth(a, tables) - depth(b, tables));
const partitionsFirst = (tables: readonly Table[]) => [...tables].sort((a, b) => depth(b, tables) - depth(a, tables));

function changesUniqueness(t: TableDelta): boolean {
  return [...t.constraints.removed, ...changedFrom(t.constraints)].some(providesUniqueness) ||
    [...t.indexes.removed, ...rebuilt(t.indexes).map((x) => x.from)].some((i) => i.unique);
}

/** Views (by key) that read, directly or through other views, a changed relation or routine, or a table losing or re-typing a column. */
function viewsReadingChanges(views: readonly View[], altered: readonly TableDelta[], changedObjects: readonly string[]): Set<string> {
  const changed = new Set(changedObjects);
  for (const t of altered) {
    if (t.columns.removed.length > 0 || t.columns.changed.some((c) => c.from.type !== c.to.type || c.from.collation !== c.to.collation)) changed.add(t.to.key);
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

/** Each item after the items of the same list it depends on (by key; others are ignored); ties in key order. */
function dependencyOrder<T extends { key: string; dependsOn: readonly string[] }>(items: readonly T[]): T[] {
  const byKey = new Map(items.map((v) => [v.key, v]));
  const ordered: T[] = [];
  const visited = new Set<string>();
  const visit = (v: T) => {
    if (visited.has(v.key)) return;
    visited.add(v.key);
    for (const d of v.dependsOn) {
      const dependency = byKey.get(d);
      if (dependency) visit(dependency);
    }
    ordered.push(v);
  };
  for (const v of [...items].sort((a, b) => (a.key < b.key ? -1 : 1))) visit(v);
  return ordered;
}

/** An enum converts to anything (another enum included) only through its text: PostgreSQL has no enum-to-enum cast. */
const castThroughText = (column: string, type: string) => `${quoteIdent(column)}::text${type.endsWith('[]') ? '[]' : ''}::${type}`;
const isEnumTyped = (column: Column, enums: ReadonlySet<string>) => enums.has(column.type.replace(/\[\]$/, ''));

function alterColumn(table: string, from: Column, to: Column, enums: ReadonlySet<string>, emit: Emit): void {
  const alter = (action: string, c?: Classification) => emit(`ALTER TABLE ${table} ALTER COLUMN ${quoteIdent(to.name)} ${action}`, c);
  if (from.identity && !to.identity) alter('DROP IDENTITY');
  if (from.default !== null && from.default !== to.default) alter('DROP DEFAULT');
  if (from.type !== to.type) {
    const using = isEnumTyped(from, enums) ? castThroughText(to.name, to.type) : `${quoteIdent(to.name)}::${to.type}`;
    alter(`TYPE ${to.type}${collateSql(to)} USING ${using}`, { destructive: 'change_column_type', locking: 'table_rewrite' });
  } else if (from.collation !== to.collation) {
    // The same type under another collation: no data changes, but its indexes are rebuilt under an exclusive lock.
    alter(`TYPE ${to.type}${collateSql(to)}`, { locking: 'table_rewrite' });
  }
  if (from.notNull && !to.notNull) alter('DROP NOT NULL');
  if (!from.notNull && to.notNull) alter('SET NOT NULL', { locking: 'full_table_scan' });
  if (to.default !== null && from.default !== to.default) alter(`SET DEFAULT ${to.default}`);
  if (!from.identity && to.identity) alter(`ADD ${identitySql(to.identity)}`);
  if (from.identity && to.identity) {
    if (from.identity.generation !== to.identity.generation) alter(`SET ${generatedSql(to.identity.generation)}`);
    if (!same(from.identity.options, to.identity.options)) alter(identityOptionsSql(to.identity.options));
    if (from.identity.sequence !== to.identity.sequence) renameSequence(from.identity.sequence, to.identity.sequence, emit);
  }
}

/** The schema and name of a `"schema"."name"` key. */
function splitKey(key: RelationKey): [string, string] {
  const match = /^"((?:[^"]|"")*)"\."((?:[^"]|"")*)"$/.exec(key);
  if (!match) throw new Error(`not a relation key: ${key}`);
  return [match[1]!.replace(/""/g, '"'), match[2]!.replace(/""/g, '"')];
}

/** Moves and renames a sequence in place (an identity's keeps its column and its value). */
function renameSequence(from: RelationKey, to: RelationKey, emit: Emit): void {
  const [fromSchema, fromName] = splitKey(from);
  const [toSchema, toName] = splitKey(to);
  if (fromSchema !== toSchema) emit(`ALTER SEQUENCE ${from} SET SCHEMA ${quoteIdent(toSchema)}`);
  if (fromName !== toName) emit(`ALTER SEQUENCE ${quoteIdent(toSchema)}.${quoteIdent(fromName)} RENAME TO ${quoteIdent(toName)}`);
}

function columnDefinition(c: Column): string {
  return [
    `${quoteIdent(c.name)} ${c.type}${collateSql(c)}`,
    c.identity ? ` ${identitySql(c.identity)}` : '',
    c.generated !== null ? ` GENERATED ALWAYS AS (${c.generated}) STORED` : '',
    c.default !== null ? ` DEFAULT ${c.default}` : '',
    c.notNull ? ' NOT NULL' : '',
  ].join('');
}

/** A column's or domain's collation when it is not its type's; `pg_catalog.default` puts back the type's. */
const collateSql = (c: { collation: string | null }) => (c.collation !== null ? ` COLLATE ${c.collation}` : '');

const generatedSql = (generation: Identity['generation']) => `GENERATED ${generation === 'always' ? 'ALWAYS' : 'BY DEFAULT'}`;
/** Names the sequence: left to PostgreSQL, it would be named after the table and column, whatever the desired schema said. */
const identitySql = (identity: Identity) => `${generatedSql(identity.generation)} AS IDENTITY (SEQUENCE NAME ${identity.sequence} ${sequenceOptionsSql(identity.options)})`;

function sequenceOptionsSql(o: SequenceOptions): string {
  return `START WITH ${o.start} INCREMENT BY ${o.increment} MINVALUE ${o.min} MAXVALUE ${o.max} CACHE ${o.cache} ${o.cycle ? 'CYCLE' : 'NO CYCLE'}`;
}

function identityOptionsSql(o: SequenceOptions): string {
  return `SET START WITH ${o.start} SET INCREMENT BY ${o.increment} SET MINVALUE ${o.min} SET MAXVALUE ${o.max} SET CACHE ${o.cache} SET ${o.cycle ? 'CYCLE' : 'NO CYCLE'}`;
}

const dropConstraint = (table: string, c: Constraint) => `ALTER TABLE ${table} DROP CONSTRAINT ${quoteIdent(c.name)}`;
const addConstraint = (table: string, c: Constraint) => `ALTER TABLE ${table} ADD CONSTRAINT ${quoteIdent(c.name)} ${c.definition}`;
