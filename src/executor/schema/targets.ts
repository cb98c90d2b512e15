// The names COMMENT ON and GRANT take for the modelled objects, and which of them a plan makes again (so their
// comments and grants, which go with the old object, must be set again).
import { quoteIdent } from '../db.js';
import type { Operator, Routine, SchemaModel } from './model.js';

export interface Recreated {
  /** Exact targets: `INDEX "s"."i"`, `FUNCTION s.f(integer)`, `CONSTRAINT "c" ON "s"."t"`, … */
  targets: Set<string>;
  /** Relations made again: the relation, its columns and everything `ON` it. */
  relations: Set<string>;
}

/** COMMENT ON and GRANT name an aggregate as a FUNCTION (DROP alone takes AGGREGATE). */
export const routineTarget = (r: Routine) => `${r.kind === 'procedure' ? 'PROCEDURE' : 'FUNCTION'} ${r.key}`;

export const operatorTarget = (o: Operator) => `OPERATOR ${o.key}`;

export const indexTarget = (schema: string, name: string) => `INDEX ${quoteIdent(schema)}.${quoteIdent(name)}`;

export function isRecreatedTarget(r: Recreated, target: string): boolean {
  if (r.targets.has(target)) return true;
  for (const key of r.relations) {
    if (target === `TABLE ${key}` || target === `VIEW ${key}` || target === `MATERIALIZED VIEW ${key}` || target.startsWith(`COLUMN ${key}.`) || target.endsWith(` ON ${key}`)) return true;
  }
  return false;
}

/** Whether a comment target names an object of `model` (a view's or composite type's columns are not modelled one by one). */
export function commentTargets(model: SchemaModel): (target: string) => boolean {
  const exact = new Set<string>([
    ...model.schemas.map((s) => `SCHEMA ${quoteIdent(s)}`),
    ...model.tables.flatMap((t) => [
      `TABLE ${t.key}`,
      ...t.columns.map((c) => `COLUMN ${t.key}.${quoteIdent(c.name)}`),
      ...t.constraints.map((c) => `CONSTRAINT ${quoteIdent(c.name)} ON ${t.key}`),
      ...t.indexes.map((i) => indexTarget(t.schema, i.name)),
    ]),
    ...model.views.flatMap((v) => [`${v.materialized ? 'MATERIALIZED VIEW' : 'VIEW'} ${v.key}`, ...v.indexes.map((i) => indexTarget(v.schema, i.name))]),
    ...model.sequences.map((s) => `SEQUENCE ${s.key}`),
    ...model.routines.map(routineTarget),
    ...model.operators.map(operatorTarget),
    ...model.collations.map((c) => `COLLATION ${c.key}`),
    ...model.enums.map((e) => `TYPE ${e.key}`),
    ...model.composites.map((c) => `TYPE ${c.key}`),
    ...model.domains.flatMap((d) => [`DOMAIN ${d.key}`, ...d.checks.map((c) => `CONSTRAINT ${quoteIdent(c.name)} ON DOMAIN ${d.key}`)]),
    ...model.triggers.map((t) => `TRIGGER ${quoteIdent(t.name)} ON ${t.table}`),
    ...model.policies.map((p) => `POLICY ${quoteIdent(p.name)} ON ${p.table}`),
  ]);
  const columnsOf = [...model.views.map((v) => v.key), ...model.composites.map((c) => c.key)].map((k) => `COLUMN ${k}.`);
  return (target) => exact.has(target) || columnsOf.some((prefix) => target.startsWith(prefix));
}

export function grantTargets(model: SchemaModel): Set<string> {
  return new Set([
    ...model.schemas.map((s) => `SCHEMA ${quoteIdent(s)}`),
    ...[...model.tables, ...model.views].map((t) => `TABLE ${t.key}`),
    ...model.sequences.map((s) => `SEQUENCE ${s.key}`),
    ...model.routines.map(routineTarget),
  ]);
}
