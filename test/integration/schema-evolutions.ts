// Seeded random schemas and evolutions over the kinds the engine models, for the generated corpus
// (executor-evolutions.test.ts) and its benchmark (bench/schema-evolutions.ts). A schema is a plain description
// rendered to SQL; an evolution is a handful of random changes to it, each one PostgreSQL accepts on a database
// holding no rows. Nothing here knows the engine: the SQL is what a person would write.
import { performance } from 'node:perf_hooks';
import { canonicalJson } from '../../src/shared/canonical.js';
import type { ApplyReport, PlanReport } from '../../src/shared/executor-report.js';
import { sharedPostgresUrl } from '../../tools/stack/postgres.js';
import {
  COORDINATION_DIGEST, artifactDir, builtFrom, catalogFacts, jsonFile, operationId, queryOnce, roleDatabase, runExecutor, schemaDump, type Teardown,
} from './executor-helpers.js';

/** mulberry32: small, seeded, the same sequence everywhere. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Rng = () => number;
const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;
const chance = (rng: Rng, p: number) => rng() < p;

const TYPES = ['integer', 'bigint', 'text', 'varchar(40)', 'numeric(12,2)', 'boolean', 'timestamptz', 'jsonb', 'date', 'status'] as const;
/** Type changes PostgreSQL makes without a USING clause. */
const WIDER: Record<string, string> = { integer: 'bigint', 'varchar(40)': 'text', 'numeric(12,2)': 'numeric(14,2)', date: 'timestamptz' };
const DEFAULTS: Record<string, string[]> = {
  integer: ['0', '42'], bigint: ['0', '7'], text: [`''`, `'n/a'`], 'varchar(40)': [`'x'`], 'numeric(12,2)': ['0', '1.50'], 'numeric(14,2)': ['0'],
  boolean: ['false', 'true'], timestamptz: ['now()'], jsonb: [`'{}'::jsonb`], date: ['CURRENT_DATE'], status: [`'new'`],
};

export interface GenColumn { name: string; type: string; notNull: boolean; default: string | null; statistics: number | null }
export interface GenIndex { name: string; unique: boolean; columns: string[]; where: string | null; lower: boolean }
export interface GenTable {
  name: string;
  columns: GenColumn[];
  checks: { name: string; column: string }[];
  references: { name: string; column: string; table: string }[];
  indexes: GenIndex[];
  fillfactor: number | null;
  comment: string | null;
}
export interface GenSchema { statuses: string[]; tables: GenTable[]; views: { name: string; table: string; columns: string[] }[]; counter: number }

const next = (s: GenSchema, prefix: string) => `${prefix}${(s.counter += 1)}`;

function newColumn(rng: Rng, s: GenSchema): GenColumn {
  const type = pick(rng, TYPES);
  return {
    name: next(s, 'c'), type,
    notNull: chance(rng, 0.3),
    default: chance(rng, 0.4) ? pick(rng, DEFAULTS[type]!) : null,
    statistics: chance(rng, 0.1) ? pick(rng, [100, 500, 2000]) : null,
  };
}

function newTable(rng: Rng, s: GenSchema): GenTable {
  const columns = Array.from({ length: 1 + Math.floor(rng() * 5) }, () => newColumn(rng, s));
  const table: GenTable = { name: next(s, 't'), columns, checks: [], references: [], indexes: [], fillfactor: null, comment: null };
  const others = s.tables;
  if (others.length > 0 && chance(rng, 0.5)) {
    const column = newColumn(rng, s);
    column.type = 'bigint';
    column.default = null;
    table.columns.push(column);
    table.references.push({ name: next(s, 'fk'), column: column.name, table: pick(rng, others).name });
  }
  if (chance(rng, 0.3)) addIndex(rng, s, table);
  return table;
}

function addIndex(rng: Rng, s: GenSchema, t: GenTable): void {
  const column = pick(rng, t.columns);
  const text = column.type === 'text' || column.type === 'varchar(40)';
  t.indexes.push({ name: next(s, 'i'), unique: chance(rng, 0.3), columns: [column.name], where: chance(rng, 0.2) ? `${q(column.name)} IS NOT NULL` : null, lower: text && chance(rng, 0.4) });
}

export function initialSchema(rng: Rng): GenSchema {
  const s: GenSchema = { statuses: ['new', 'done'], tables: [], views: [], counter: 0 };
  for (let i = 0; i < 2 + Math.floor(rng() * 3); i++) s.tables.push(newTable(rng, s));
  return s;
}

/** Every table that references `name`, by a foreign key. */
const referencing = (s: GenSchema, name: string) => s.tables.filter((t) => t.references.some((r) => r.table === name));

/** The changes an evolution picks from; each leaves a schema PostgreSQL accepts. */
const CHANGES: ((rng: Rng, s: GenSchema) => void)[] = [
  (rng, s) => s.tables.push(newTable(rng, s)),
  (rng, s) => {
    const droppable = s.tables.filter((t) => referencing(s, t.name).length === 0 && !s.views.some((v) => v.table === t.name));
    if (droppable.length > 0) s.tables.splice(s.tables.indexOf(pick(rng, droppable)), 1);
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) t.columns.push(newColumn(rng, s)); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const free = t?.columns.filter((c) => !usedColumn(s, t, c.name)) ?? [];
    if (t && free.length > 1) t.columns.splice(t.columns.indexOf(pick(rng, free)), 1);
  },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const c = t && pick(rng, t.columns.filter((x) => WIDER[x.type] && !usedColumn(s, t, x.name)));
    if (c) {
      c.type = WIDER[c.type]!;
      c.default = null;
    }
  },
  (rng, s) => { const t = pick(rng, s.tables); const c = t && pick(rng, t.columns); if (c) c.notNull = !c.notNull; },
  (rng, s) => { const t = pick(rng, s.tables); const c = t && pick(rng, t.columns); if (c) c.default = c.default === null ? pick(rng, DEFAULTS[c.type] ?? ['NULL']) : null; },
  (rng, s) => { const t = pick(rng, s.tables); const c = t && pick(rng, t.columns); if (c) c.statistics = c.statistics === null ? pick(rng, [100, 800]) : null; },
  (rng, s) => { const t = pick(rng, s.tables); if (t) addIndex(rng, s, t); },
  (rng, s) => { const t = pick(rng, s.tables); if (t && t.indexes.length > 0) t.indexes.splice(Math.floor(rng() * t.indexes.length), 1); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const c = t && pick(rng, t.columns.filter((x) => x.type === 'integer' || x.type === 'bigint'));
    if (t && c) t.checks.push({ name: next(s, 'ck'), column: c.name });
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t && t.checks.length > 0) t.checks.splice(0, 1); },
  (rng, s) => { const t = pick(rng, s.tables); if (t) t.fillfactor = t.fillfactor === null ? pick(rng, [70, 80, 90]) : null; },
  (rng, s) => { const t = pick(rng, s.tables); if (t) t.comment = t.comment === null ? `table ${t.name}` : null; },
  (rng, s) => { s.statuses.push(next(s, 'st')); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    if (t) s.views.push({ name: next(s, 'v'), table: t.name, columns: [pick(rng, t.columns).name] });
  },
  (rng, s) => {
    const v = pick(rng, s.views);
    const t = v && s.tables.find((x) => x.name === v.table);
    if (v && t) v.columns = [...new Set([...v.columns, pick(rng, t.columns).name])];
  },
  (rng, s) => { if (s.views.length > 0) s.views.splice(Math.floor(rng() * s.views.length), 1); },
];

/** A column a key, check, index or view names cannot be dropped or re-typed by a random change. */
function usedColumn(s: GenSchema, t: GenTable, column: string): boolean {
  return t.references.some((r) => r.column === column) || t.checks.some((c) => c.column === column) ||
    t.indexes.some((i) => i.columns.includes(column)) || s.views.some((v) => v.table === t.name && v.columns.includes(column));
}

/** `tables` new random tables added to a copy of `s`: growth towards a large schema. */
export function grow(rng: Rng, s: GenSchema, tables: number): GenSchema {
  const copy = structuredClone(s);
  for (let i = 0; i < tables; i++) copy.tables.push(newTable(rng, copy));
  return copy;
}

/** `changes` random changes applied to a copy of `s`. */
export function evolve(rng: Rng, s: GenSchema, changes: number): GenSchema {
  const copy = structuredClone(s);
  for (let i = 0; i < changes; i++) pick(rng, CHANGES)(rng, copy);
  return copy;
}

const q = (name: string) => `"${name}"`;

export function render(s: GenSchema): string {
  const out = [`CREATE TYPE public.status AS ENUM (${s.statuses.map((v) => `'${v}'`).join(', ')})`];
  for (const t of s.tables) {
    const columns = [`id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY`, ...t.columns.map((c) =>
      `${q(c.name)} ${c.type === 'status' ? 'public.status' : c.type}${c.notNull ? ' NOT NULL' : ''}${c.default !== null ? ` DEFAULT ${c.default}` : ''}`)];
    for (const c of t.checks) columns.push(`CONSTRAINT ${q(c.name)} CHECK (${q(c.column)} >= 0)`);
    for (const r of t.references) columns.push(`CONSTRAINT ${q(r.name)} FOREIGN KEY (${q(r.column)}) REFERENCES public.${q(r.table)} (id)`);
    out.push(`CREATE TABLE public.${q(t.name)} (\n  ${columns.join(',\n  ')}\n)${t.fillfactor !== null ? ` WITH (fillfactor = ${t.fillfactor})` : ''}`);
    for (const c of t.columns) if (c.statistics !== null) out.push(`ALTER TABLE public.${q(t.name)} ALTER COLUMN ${q(c.name)} SET STATISTICS ${c.statistics}`);
    for (const i of t.indexes) {
      const column = i.lower ? `lower(${q(i.columns[0]!)})` : i.columns.map(q).join(', ');
      out.push(`CREATE ${i.unique ? 'UNIQUE ' : ''}INDEX ${q(i.name)} ON public.${q(t.name)} (${column})${i.where ? ` WHERE ${i.where}` : ''}`);
    }
    if (t.comment !== null) out.push(`COMMENT ON TABLE public.${q(t.name)} IS '${t.comment}'`);
  }
  for (const v of s.views) {
    if (!s.tables.some((t) => t.name === v.table)) continue;
    out.push(`CREATE VIEW public.${q(v.name)} AS SELECT id, ${v.columns.map(q).join(', ')} FROM public.${q(v.table)}`);
  }
  return `${out.join(';\n')};\n`;
}

/** One step of a generated evolution, as it ran. */
export interface EvolutionStep {
  seed: number;
  step: number;
  sql: string;
  /** Changes (with its statement count), NoChanges, or the error it failed with. */
  outcome: string;
  statements: number;
  planMs: number;
  applyMs: number;
  /** Each must be true: applied, a second plan found nothing, and both witnesses read the target as a database built from the SQL. */
  applied: boolean;
  secondPlanEmpty: boolean;
  catalogEqual: boolean;
  dumpEqual: boolean;
}

/**
 * Runs `steps` evolutions of seed `seed` against one fresh target: the first step from empty, each later one made by
 * `next` (one to three random changes by default); every step plans, applies, plans again, and is held to the catalog and to pg_dump.
 */
export async function runEvolutions(t: Teardown, seed: number, steps: number, onStep: (s: EvolutionStep) => void,
  next: (rng: Rng, s: GenSchema) => GenSchema = (rng, s) => evolve(rng, s, 1 + Math.floor(rng() * 3))): Promise<void> {
  const rng = random(seed);
  const db = await roleDatabase(t, 'evolution');
  let schema = initialSchema(rng);
  for (let step = 0; step < steps; step++) {
    if (step > 0) schema = next(rng, schema);
    const sql = render(schema);
    const env = { dbUrl: db.url, artifactDir: artifactDir(t, { 'schema.sql': sql }) };
    const started = performance.now();
    const planned = await runExecutor<PlanReport>('plan', env);
    const planMs = performance.now() - started;
    const result: EvolutionStep = {
      seed, step, sql, outcome: planned.outcome ?? `error ${planned.error?.code}: ${planned.error?.message}`, statements: planned.plan?.statementCount ?? 0,
      planMs, applyMs: 0, applied: planned.outcome === 'NoChanges', secondPlanEmpty: false, catalogEqual: false, dumpEqual: false,
    };
    if (planned.outcome === 'Changes') {
      const applyStarted = performance.now();
      const applied = await runExecutor<ApplyReport>('apply',
        { dbUrl: db.url, planFile: jsonFile(t, planned.plan), operationId: operationId(`evolution-${seed}-${step}`), coordinationDigest: COORDINATION_DIGEST });
      result.applyMs = performance.now() - applyStarted;
      result.applied = applied.outcome === 'applied';
      if (!result.applied) result.outcome = `apply ${applied.outcome}: ${applied.error?.code} ${applied.error?.message}`;
    }
    if (result.applied) {
      result.secondPlanEmpty = (await runExecutor<PlanReport>('plan', env)).outcome === 'NoChanges';
      const witness = await builtFrom(db, `w${step}`, sql);
      result.catalogEqual = canonicalJson(await catalogFacts(db.url)) === canonicalJson(await catalogFacts(witness));
      result.dumpEqual = canonicalJson(await schemaDump(db.url)) === canonicalJson(await schemaDump(witness));
      await queryOnce(sharedPostgresUrl(), `DROP DATABASE "${new URL(witness).pathname.slice(1)}"`);
    }
    onStep(result);
    if (!result.applied) return;
  }
}
