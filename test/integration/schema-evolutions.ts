// Seeded random schemas and evolutions over the kinds the engine models, for the generated corpus
// (executor-evolutions.test.ts) and its benchmark (bench/schema-evolutions.ts). A schema is a plain description
// rendered to SQL; an evolution is a handful of random changes to it, each one PostgreSQL accepts on a database
// holding no rows. Nothing here knows the engine: the SQL is what a person would write.
import { randomBytes } from 'node:crypto';
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
/** Runs one of `changes`, picked at random. */
const oneOf = (rng: Rng, changes: readonly (() => void)[]) => pick(rng, changes)();

const TYPES = ['integer', 'bigint', 'text', 'varchar(40)', 'numeric(12,2)', 'boolean', 'timestamptz', 'jsonb', 'date', 'status'] as const;
/** Type changes PostgreSQL makes without a USING clause. */
const WIDER: Record<string, string> = { integer: 'bigint', 'varchar(40)': 'text', 'numeric(12,2)': 'numeric(14,2)', date: 'timestamptz' };
const DEFAULTS: Record<string, string[]> = {
  integer: ['0', '42'], bigint: ['0', '7'], text: [`''`, `'n/a'`], 'varchar(40)': [`'x'`], 'numeric(12,2)': ['0', '1.50'], 'numeric(14,2)': ['0'],
  boolean: ['false', 'true'], timestamptz: ['now()'], jsonb: [`'{}'::jsonb`], date: ['CURRENT_DATE'], status: [`'new'`],
};
const TEXTUAL = new Set(['text', 'varchar(40)']);
/** Storage parameters a table may set, each with the values it takes. */
const PARAMS: Record<string, string[]> = {
  fillfactor: ['70', '80', '90'], autovacuum_enabled: ['false', 'true'], autovacuum_vacuum_scale_factor: ['0.05', '0.2'],
  autovacuum_analyze_threshold: ['100', '5000'], 'toast.autovacuum_enabled': ['false'],
};
/** Operator names a schema may define, one operator each over (integer, integer). */
const OPERATORS = ['#+#', '@#@', '<#>', '&#&', '|#|', '%#%'];
const LOCALES = ['C', 'POSIX'];
const SFUNCS = ['int4larger', 'int4smaller', 'int4pl'];

export interface GenColumn { name: string; type: string; notNull: boolean; default: string | null; statistics: number | null; collation: string | null }
export interface GenIndex { name: string; unique: boolean; columns: string[]; where: string | null; lower: boolean }
export interface GenIdentity { always: boolean; sequence: string | null; increment: number }
export interface GenTrigger { name: string; function: string; timing: 'BEFORE' | 'AFTER'; events: string[] }
export interface GenPolicy { name: string; command: 'ALL' | 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE'; role: string | null; restrictive: boolean }
export interface GenTable {
  name: string;
  columns: GenColumn[];
  identity: GenIdentity;
  unlogged: boolean;
  checks: { name: string; column: string }[];
  references: { name: string; column: string; table: string }[];
  exclusions: { name: string; column: string; method: 'btree' | 'gist' }[];
  indexes: GenIndex[];
  params: Record<string, string>;
  triggers: GenTrigger[];
  rls: { enabled: boolean; forced: boolean };
  policies: GenPolicy[];
  comment: string | null;
}
/** A table partitioned by range on `k`, its partitions each a range of 100 keys, and indexes on the parent. */
export interface GenPartitioned { name: string; columns: GenColumn[]; partitions: { name: string; from: number }[]; hasDefault: boolean; indexes: { name: string; column: string }[] }
export interface GenFunction { name: string; language: 'sql' | 'plpgsql'; returns: 'integer' | 'bigint'; argument: string; body: number; volatility: string }
export interface GenSequence { name: string; type: 'smallint' | 'integer' | 'bigint'; start: number; increment: number; cache: number; cycle: boolean; max: number | null }
export interface GenDomain { name: string; base: 'integer' | 'text'; notNull: boolean; default: string | null; checks: { name: string; expression: string }[] }
export interface GenGrant { kind: 'TABLE' | 'SEQUENCE' | 'FUNCTION'; object: string; role: string; privilege: string; option: boolean }
export interface GenSchema {
  /** Roles that exist on the server for the whole run: grants and policies name them. */
  roles: string[];
  statuses: string[];
  btreeGist: boolean;
  collations: { name: string; locale: string }[];
  domains: GenDomain[];
  composites: { name: string; attributes: { name: string; type: string }[] }[];
  sequences: GenSequence[];
  functions: GenFunction[];
  triggerFunctions: { name: string; body: number }[];
  aggregates: { name: string; sfunc: string; initcond: string | null }[];
  operators: { name: string; function: string }[];
  tables: GenTable[];
  partitioned: GenPartitioned[];
  views: { name: string; table: string; columns: string[] }[];
  matviews: { name: string; table: string; columns: string[]; indexed: boolean; withData: boolean }[];
  grants: GenGrant[];
  counter: number;
}

const next = (s: GenSchema, prefix: string) => `${prefix}${(s.counter += 1)}`;
const q = (name: string) => `"${name}"`;

/** The column types a new column may take: the built-in ones, the schema's domains and its composite types. */
const columnTypes = (s: GenSchema): string[] => [...TYPES, ...s.domains.map((d) => d.name), ...s.composites.map((c) => c.name)];
/** The defaults a column of `type` may take (a domain's are its base type's; a composite type has none here). */
const defaultsOf = (s: GenSchema, type: string): string[] => DEFAULTS[type] ?? DEFAULTS[s.domains.find((d) => d.name === type)?.base ?? ''] ?? [];

function newColumn(rng: Rng, s: GenSchema, types: readonly string[] = columnTypes(s)): GenColumn {
  const type = pick(rng, types);
  const defaults = defaultsOf(s, type);
  return {
    name: next(s, 'c'), type,
    notNull: chance(rng, 0.3),
    default: defaults.length > 0 && chance(rng, 0.4) ? pick(rng, defaults) : null,
    statistics: chance(rng, 0.1) ? pick(rng, [100, 500, 2000]) : null,
    collation: TEXTUAL.has(type) && chance(rng, 0.2) ? pick(rng, collationNames(s)) : null,
  };
}

/** Collations a text column may name: the built-in copies of C and the schema's own. */
const collationNames = (s: GenSchema) => ['pg_catalog."C"', 'pg_catalog."POSIX"', ...s.collations.map((c) => `public.${q(c.name)}`)];

function newTable(rng: Rng, s: GenSchema): GenTable {
  const columns = Array.from({ length: 1 + Math.floor(rng() * 5) }, () => newColumn(rng, s));
  const table: GenTable = {
    name: next(s, 't'), columns, identity: { always: chance(rng, 0.7), sequence: chance(rng, 0.2) ? next(s, 'sq') : null, increment: 1 },
    unlogged: false, checks: [], references: [], exclusions: [], indexes: [], params: {}, triggers: [], rls: { enabled: false, forced: false }, policies: [], comment: null,
  };
  const others = s.tables.filter((t) => !t.unlogged);
  if (others.length > 0 && chance(rng, 0.5)) {
    const column = newColumn(rng, s);
    column.type = 'bigint';
    column.default = null;
    column.collation = null;
    table.columns.push(column);
    table.references.push({ name: next(s, 'fk'), column: column.name, table: pick(rng, others).name });
  } else if (chance(rng, 0.15)) table.unlogged = true;
  if (chance(rng, 0.3)) addIndex(rng, s, table);
  if (chance(rng, 0.2)) setParam(rng, table);
  if (chance(rng, 0.15)) addTrigger(rng, s, table);
  if (chance(rng, 0.1)) addPolicy(rng, s, table);
  return table;
}

function addIndex(rng: Rng, s: GenSchema, t: GenTable): void {
  const column = pick(rng, t.columns.filter((c) => !isComposite(s, c.type)));
  if (!column) return;
  const text = TEXTUAL.has(column.type);
  t.indexes.push({ name: next(s, 'i'), unique: chance(rng, 0.3), columns: [column.name], where: chance(rng, 0.2) ? `${q(column.name)} IS NOT NULL` : null, lower: text && chance(rng, 0.4) });
}

const isComposite = (s: GenSchema, type: string) => s.composites.some((c) => c.name === type);

/** Sets one storage parameter to a value, or resets it when it is set. */
function setParam(rng: Rng, t: GenTable): void {
  const key = pick(rng, Object.keys(PARAMS));
  if (t.params[key] !== undefined && chance(rng, 0.5)) delete t.params[key];
  else t.params[key] = pick(rng, PARAMS[key]!);
}

function addTrigger(rng: Rng, s: GenSchema, t: GenTable): void {
  const fn = pick(rng, s.triggerFunctions);
  if (!fn) return;
  const events = ['INSERT', 'UPDATE', 'DELETE'].filter(() => chance(rng, 0.5));
  t.triggers.push({ name: next(s, 'tg'), function: fn.name, timing: pick(rng, ['BEFORE', 'AFTER'] as const), events: events.length > 0 ? events : ['INSERT'] });
}

function addPolicy(rng: Rng, s: GenSchema, t: GenTable): void {
  t.rls.enabled = true;
  t.policies.push({ name: next(s, 'po'), command: pick(rng, ['ALL', 'SELECT', 'INSERT', 'UPDATE', 'DELETE'] as const), role: chance(rng, 0.7) ? pick(rng, s.roles) : null, restrictive: chance(rng, 0.2) });
}

function newFunction(rng: Rng, s: GenSchema): GenFunction {
  return { name: next(s, 'f'), language: pick(rng, ['sql', 'plpgsql'] as const), returns: pick(rng, ['integer', 'bigint'] as const), argument: 'a', body: 1, volatility: 'IMMUTABLE' };
}

function newSequence(rng: Rng, s: GenSchema): GenSequence {
  return { name: next(s, 'sq'), type: pick(rng, ['smallint', 'integer', 'bigint'] as const), start: pick(rng, [1, 100]), increment: pick(rng, [1, 5]), cache: 1, cycle: false, max: null };
}

function newDomain(rng: Rng, s: GenSchema): GenDomain {
  const base = pick(rng, ['integer', 'text'] as const);
  return { name: next(s, 'd'), base, notNull: chance(rng, 0.3), default: null, checks: [{ name: next(s, 'dk'), expression: DOMAIN_CHECKS[base][0]! }] };
}
const DOMAIN_CHECKS = { integer: ['VALUE >= 0', 'VALUE < 1000000'], text: [`VALUE <> ''`, 'length(VALUE) <= 200'] };

function newPartitioned(rng: Rng, s: GenSchema): GenPartitioned {
  const name = next(s, 'p');
  return { name, columns: [newColumn(rng, s, TYPES)], partitions: [{ name: next(s, 'pt'), from: 0 }], hasDefault: chance(rng, 0.3), indexes: [] };
}

export function initialSchema(rng: Rng, roles: readonly string[]): GenSchema {
  const s: GenSchema = {
    roles: [...roles], statuses: ['new', 'done'], btreeGist: false, collations: [], domains: [], composites: [], sequences: [], functions: [],
    triggerFunctions: [], aggregates: [], operators: [], tables: [], partitioned: [], views: [], matviews: [], grants: [], counter: 0,
  };
  if (chance(rng, 0.5)) s.domains.push(newDomain(rng, s));
  if (chance(rng, 0.5)) s.triggerFunctions.push({ name: next(s, 'tf'), body: 1 });
  if (chance(rng, 0.3)) s.functions.push(newFunction(rng, s));
  if (chance(rng, 0.3)) s.sequences.push(newSequence(rng, s));
  for (let i = 0; i < 2 + Math.floor(rng() * 3); i++) s.tables.push(newTable(rng, s));
  if (chance(rng, 0.3)) s.partitioned.push(newPartitioned(rng, s));
  return s;
}

/** Every table that references `name`, by a foreign key. */
const referencing = (s: GenSchema, name: string) => s.tables.filter((t) => t.references.some((r) => r.table === name));
/** Whether any column, of a table or a partitioned table, has type `type`. */
const typeUsed = (s: GenSchema, type: string) => [...s.tables, ...s.partitioned].some((t) => t.columns.some((c) => c.type === type));
const dropOne = <T>(rng: Rng, items: T[], may: (item: T) => boolean = () => true): T | undefined => {
  const candidates = items.filter(may);
  const item = candidates.length > 0 ? pick(rng, candidates) : undefined;
  if (item !== undefined) items.splice(items.indexOf(item), 1);
  return item;
};

/** Everything a grant may name, by kind: tables, views, materialized views, sequences and routines (by signature). */
function grantable(s: GenSchema): { kind: GenGrant['kind']; object: string; privileges: string[] }[] {
  const relation = ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'];
  return [
    ...[...s.tables, ...s.partitioned].map((t) => ({ kind: 'TABLE' as const, object: `public.${q(t.name)}`, privileges: relation })),
    ...[...s.views, ...s.matviews].map((v) => ({ kind: 'TABLE' as const, object: `public.${q(v.name)}`, privileges: ['SELECT'] })),
    ...s.sequences.map((x) => ({ kind: 'SEQUENCE' as const, object: `public.${q(x.name)}`, privileges: ['USAGE', 'SELECT', 'UPDATE'] })),
    ...[...s.functions, ...s.aggregates].map((f) => ({ kind: 'FUNCTION' as const, object: `public.${q(f.name)}(integer)`, privileges: ['EXECUTE'] })),
  ];
}

/** The changes an evolution picks from; each leaves a schema PostgreSQL accepts. */
const CHANGES: ((rng: Rng, s: GenSchema) => void)[] = [
  (rng, s) => s.tables.push(newTable(rng, s)),
  (rng, s) => {
    dropOne(rng, s.tables, (t) => referencing(s, t.name).length === 0 && ![...s.views, ...s.matviews].some((v) => v.table === t.name));
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
  (rng, s) => {
    const t = pick(rng, s.tables);
    const c = t && pick(rng, t.columns.filter((x) => defaultsOf(s, x.type).length > 0));
    if (c) c.default = c.default === null ? pick(rng, defaultsOf(s, c.type)) : null;
  },
  (rng, s) => { const t = pick(rng, s.tables); const c = t && pick(rng, t.columns); if (c) c.statistics = c.statistics === null ? pick(rng, [100, 800]) : null; },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const c = t && pick(rng, t.columns.filter((x) => TEXTUAL.has(x.type)));
    if (c) c.collation = c.collation === null ? pick(rng, collationNames(s)) : null;
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) addIndex(rng, s, t); },
  (rng, s) => { const t = pick(rng, s.tables); if (t && t.indexes.length > 0) t.indexes.splice(Math.floor(rng() * t.indexes.length), 1); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const c = t && pick(rng, t.columns.filter((x) => x.type === 'integer' || x.type === 'bigint'));
    if (t && c) t.checks.push({ name: next(s, 'ck'), column: c.name });
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t && t.checks.length > 0) t.checks.splice(0, 1); },
  (rng, s) => {
    // An exclusion over gist needs btree_gist's operator classes for integers; one over btree needs nothing.
    const t = pick(rng, s.tables);
    const c = t && pick(rng, t.columns.filter((x) => x.type === 'integer' || x.type === 'bigint'));
    if (!t || !c) return;
    const method = pick(rng, ['btree', 'gist'] as const);
    if (method === 'gist') s.btreeGist = true;
    t.exclusions.push({ name: next(s, 'ex'), column: c.name, method });
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) dropOne(rng, t.exclusions); },
  (rng, s) => {
    if (!s.btreeGist) s.btreeGist = true;
    else if (!s.tables.some((t) => t.exclusions.some((e) => e.method === 'gist'))) s.btreeGist = false;
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) setParam(rng, t); },
  (rng, s) => {
    // PostgreSQL refuses a foreign key between a logged and an unlogged table, so only a table with none changes.
    const t = pick(rng, s.tables.filter((x) => x.references.length === 0 && referencing(s, x.name).length === 0));
    if (t) t.unlogged = !t.unlogged;
  },
  (rng, s) => {
    const i = pick(rng, s.tables)?.identity;
    if (i) oneOf(rng, [() => { i.always = !i.always; }, () => { i.increment = i.increment === 1 ? pick(rng, [2, 10]) : 1; },
      () => { i.sequence = i.sequence === null ? next(s, 'sq') : null; }]);
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) t.comment = t.comment === null ? `table ${t.name}` : null; },
  (rng, s) => { s.statuses.push(next(s, 'st')); },
  (rng, s) => { s.statuses.splice(Math.floor(rng() * (s.statuses.length + 1)), 0, next(s, 'st')); },
  // A value removed makes the enum again; 'new' stays, defaults name it.
  (rng, s) => { dropOne(rng, s.statuses, (v) => v !== 'new'); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    if (t) s.views.push({ name: next(s, 'v'), table: t.name, columns: [pick(rng, t.columns).name] });
  },
  (rng, s) => {
    const v = pick(rng, s.views);
    const t = v && s.tables.find((x) => x.name === v.table);
    if (v && t) v.columns = [...new Set([...v.columns, pick(rng, t.columns).name])];
  },
  (rng, s) => { dropOne(rng, s.views); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    if (t) s.matviews.push({ name: next(s, 'mv'), table: t.name, columns: [pick(rng, t.columns).name], indexed: chance(rng, 0.5), withData: chance(rng, 0.5) });
  },
  (rng, s) => {
    const m = pick(rng, s.matviews);
    const t = m && s.tables.find((x) => x.name === m.table);
    if (!m || !t) return;
    if (chance(rng, 0.5)) m.indexed = !m.indexed;
    else m.columns = [...new Set([...m.columns, pick(rng, t.columns).name])];
  },
  (rng, s) => { dropOne(rng, s.matviews); },
  (rng, s) => { s.collations.push({ name: next(s, 'co'), locale: pick(rng, LOCALES) }); },
  (rng, s) => {
    // PostgreSQL alters nothing of a collation, and the engine makes it again only while nothing uses it (a known limit).
    const c = pick(rng, s.collations.filter((x) => !collationUsed(s, x.name)));
    if (c && chance(rng, 0.5)) c.locale = c.locale === 'C' ? 'POSIX' : 'C';
    else if (c) s.collations.splice(s.collations.indexOf(c), 1);
  },
  (rng, s) => { s.domains.push(newDomain(rng, s)); },
  (rng, s) => {
    const d = pick(rng, s.domains);
    if (d) oneOf(rng, [() => { d.notNull = !d.notNull; }, () => { d.default = d.default === null ? pick(rng, DEFAULTS[d.base]!) : null; },
      () => { d.checks.push({ name: next(s, 'dk'), expression: pick(rng, DOMAIN_CHECKS[d.base]) }); }, () => { dropOne(rng, d.checks); }]);
  },
  (rng, s) => { dropOne(rng, s.domains, (d) => !typeUsed(s, d.name)); },
  (rng, s) => { s.composites.push({ name: next(s, 'ct'), attributes: [{ name: next(s, 'a'), type: pick(rng, ['integer', 'text', 'date']) }] }); },
  (rng, s) => {
    // Changing a composite type a column uses is a known limit (refused by the proof), so only an unused one changes.
    const c = pick(rng, s.composites.filter((x) => !typeUsed(s, x.name)));
    if (!c) return;
    const choice = Math.floor(rng() * 3);
    const integer = c.attributes.find((a) => a.type === 'integer');
    if (choice === 0) c.attributes.push({ name: next(s, 'a'), type: pick(rng, ['integer', 'bigint', 'text']) });
    else if (choice === 1 && integer) integer.type = 'bigint';
    else if (c.attributes.length > 1) dropOne(rng, c.attributes);
  },
  (rng, s) => { dropOne(rng, s.composites, (c) => !typeUsed(s, c.name)); },
  (rng, s) => { s.sequences.push(newSequence(rng, s)); },
  (rng, s) => {
    const x = pick(rng, s.sequences);
    if (x) oneOf(rng, [() => { x.increment = x.increment === 1 ? pick(rng, [3, 10]) : 1; }, () => { x.cache = x.cache === 1 ? 20 : 1; },
      () => { x.cycle = !x.cycle; }, () => { x.max = x.max === null ? 30000 : null; }, () => { x.start = x.start === 1 ? 100 : 1; }]);
  },
  (rng, s) => { dropOne(rng, s.sequences); },
  (rng, s) => { s.functions.push(newFunction(rng, s)); },
  (rng, s) => {
    const f = pick(rng, s.functions);
    if (f) oneOf(rng, [() => { f.body += 1; }, () => { f.volatility = f.volatility === 'IMMUTABLE' ? 'STABLE' : 'IMMUTABLE'; },
      () => { f.returns = f.returns === 'integer' ? 'bigint' : 'integer'; }, () => { f.argument = f.argument === 'a' ? 'b' : 'a'; },
      () => { f.language = f.language === 'sql' ? 'plpgsql' : 'sql'; }]);
  },
  (rng, s) => { dropOne(rng, s.functions); },
  (rng, s) => { s.triggerFunctions.push({ name: next(s, 'tf'), body: 1 }); },
  (rng, s) => { const f = pick(rng, s.triggerFunctions); if (f) f.body += 1; },
  (rng, s) => { dropOne(rng, s.triggerFunctions, (f) => !s.tables.some((t) => t.triggers.some((g) => g.function === f.name))); },
  (rng, s) => { const t = pick(rng, s.tables); if (t) addTrigger(rng, s, t); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const g = t && pick(rng, t.triggers);
    if (g && chance(rng, 0.5)) g.timing = g.timing === 'BEFORE' ? 'AFTER' : 'BEFORE';
    else if (g) g.events = g.events.includes('DELETE') ? g.events.filter((e) => e !== 'DELETE') : [...g.events, 'DELETE'];
    if (g && g.events.length === 0) g.events = ['UPDATE'];
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) dropOne(rng, t.triggers); },
  (rng, s) => { const t = pick(rng, s.tables); if (t) addPolicy(rng, s, t); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    const p = t && pick(rng, t.policies);
    if (p && chance(rng, 0.5)) p.restrictive = !p.restrictive;
    else if (p) p.role = p.role === null ? pick(rng, s.roles) : null;
  },
  (rng, s) => { const t = pick(rng, s.tables); if (t) dropOne(rng, t.policies); },
  (rng, s) => {
    const t = pick(rng, s.tables);
    if (t && chance(rng, 0.5)) t.rls.enabled = !t.rls.enabled;
    else if (t) t.rls.forced = !t.rls.forced;
  },
  (rng, s) => {
    const o = pick(rng, grantable(s));
    if (o) s.grants.push({ kind: o.kind, object: o.object, role: pick(rng, s.roles), privilege: pick(rng, o.privileges), option: chance(rng, 0.3) });
  },
  (rng, s) => { const g = pick(rng, s.grants); if (g) g.option = !g.option; },
  (rng, s) => { dropOne(rng, s.grants); },
  (rng, s) => { s.partitioned.push(newPartitioned(rng, s)); },
  (rng, s) => {
    const p = pick(rng, s.partitioned);
    if (!p) return;
    const choice = Math.floor(rng() * 5);
    const free = [0, 1, 2, 3, 4, 5].map((n) => n * 100).filter((from) => !p.partitions.some((x) => x.from === from));
    if (choice === 0 && free.length > 0) p.partitions.push({ name: next(s, 'pt'), from: pick(rng, free) });
    else if (choice === 1 && p.partitions.length > 1) dropOne(rng, p.partitions);
    else if (choice === 2) p.hasDefault = !p.hasDefault;
    else if (choice === 3) p.columns.push(newColumn(rng, s, TYPES));
    else {
      // One index per column: a partition's index takes a name PostgreSQL derives from its column, numbered on a clash.
      const c = pick(rng, p.columns.filter((x) => !p.indexes.some((i) => i.column === x.name)));
      if (c && chance(rng, 0.7)) p.indexes.push({ name: next(s, 'pi'), column: c.name });
      else dropOne(rng, p.indexes);
    }
  },
  (rng, s) => { dropOne(rng, s.partitioned); },
  (rng, s) => { if (s.aggregates.length < 3) s.aggregates.push({ name: next(s, 'ag'), sfunc: pick(rng, SFUNCS), initcond: pick(rng, ['0', null]) }); },
  (rng, s) => { const a = pick(rng, s.aggregates); if (a) a.sfunc = pick(rng, SFUNCS.filter((f) => f !== a.sfunc)); },
  (rng, s) => { dropOne(rng, s.aggregates); },
  (rng, s) => {
    const name = pick(rng, OPERATORS.filter((o) => !s.operators.some((x) => x.name === o)));
    if (name) s.operators.push({ name, function: pick(rng, ['int4pl', 'int4mi']) });
  },
  (rng, s) => { const o = pick(rng, s.operators); if (o) o.function = o.function === 'int4pl' ? 'int4mul' : 'int4pl'; },
  (rng, s) => { dropOne(rng, s.operators); },
];

/** A column a key, check, exclusion, index or view names cannot be dropped or re-typed by a random change. */
function usedColumn(s: GenSchema, t: GenTable, column: string): boolean {
  return t.references.some((r) => r.column === column) || t.checks.some((c) => c.column === column) || t.exclusions.some((e) => e.column === column) ||
    t.indexes.some((i) => i.columns.includes(column)) || [...s.views, ...s.matviews].some((v) => v.table === t.name && v.columns.includes(column));
}

const collationUsed = (s: GenSchema, name: string) => s.tables.some((t) => t.columns.some((c) => c.collation === `public.${q(name)}`));

/** `tables` new random tables added to a copy of `s`: growth towards a large schema. */
export function grow(rng: Rng, s: GenSchema, tables: number): GenSchema {
  const copy = structuredClone(s);
  for (let i = 0; i < tables; i++) copy.tables.push(newTable(rng, copy));
  return copy;
}

/** `changes` random changes applied to a copy of `s`; grants on objects that went go with them. */
export function evolve(rng: Rng, s: GenSchema, changes: number): GenSchema {
  const copy = structuredClone(s);
  for (let i = 0; i < changes; i++) pick(rng, CHANGES)(rng, copy);
  const objects = new Set(grantable(copy).map((o) => `${o.kind} ${o.object}`));
  copy.grants = copy.grants.filter((g) => objects.has(`${g.kind} ${g.object}`));
  return copy;
}

function renderColumn(c: GenColumn): string {
  const type = c.type === 'status' || /^(d|ct)\d+$/.test(c.type) ? `public.${q(c.type)}` : c.type;
  return `${q(c.name)} ${type}${c.collation !== null ? ` COLLATE ${c.collation}` : ''}${c.notNull ? ' NOT NULL' : ''}${c.default !== null ? ` DEFAULT ${c.default}` : ''}`;
}

function renderFunction(f: GenFunction): string {
  const body = f.language === 'sql' ? `SELECT (${f.argument} + ${f.body})::${f.returns}` : `BEGIN RETURN ${f.argument} * ${f.body}; END`;
  return `CREATE FUNCTION public.${q(f.name)}(${f.argument} integer) RETURNS ${f.returns} LANGUAGE ${f.language} ${f.volatility} AS $$ ${body} $$`;
}

function renderSequence(x: GenSequence): string {
  return `CREATE SEQUENCE public.${q(x.name)} AS ${x.type} START WITH ${x.start} INCREMENT BY ${x.increment} CACHE ${x.cache}` +
    `${x.max !== null ? ` MAXVALUE ${x.max}` : ''}${x.cycle ? ' CYCLE' : ''}`;
}

function renderTable(t: GenTable): string[] {
  const out: string[] = [];
  const { always, sequence, increment } = t.identity;
  const options = [sequence !== null ? `SEQUENCE NAME public.${q(sequence)}` : '', increment !== 1 ? `INCREMENT BY ${increment}` : ''].filter(Boolean).join(' ');
  const columns = [`id bigint GENERATED ${always ? 'ALWAYS' : 'BY DEFAULT'} AS IDENTITY${options ? ` (${options})` : ''} PRIMARY KEY`, ...t.columns.map(renderColumn)];
  for (const c of t.checks) columns.push(`CONSTRAINT ${q(c.name)} CHECK (${q(c.column)} >= 0)`);
  for (const r of t.references) columns.push(`CONSTRAINT ${q(r.name)} FOREIGN KEY (${q(r.column)}) REFERENCES public.${q(r.table)} (id)`);
  for (const e of t.exclusions) columns.push(`CONSTRAINT ${q(e.name)} EXCLUDE USING ${e.method} (${q(e.column)} WITH =)`);
  const params = Object.entries(t.params).map(([k, v]) => `${k} = ${v}`);
  out.push(`CREATE ${t.unlogged ? 'UNLOGGED ' : ''}TABLE public.${q(t.name)} (\n  ${columns.join(',\n  ')}\n)${params.length > 0 ? ` WITH (${params.join(', ')})` : ''}`);
  for (const c of t.columns) if (c.statistics !== null) out.push(`ALTER TABLE public.${q(t.name)} ALTER COLUMN ${q(c.name)} SET STATISTICS ${c.statistics}`);
  for (const i of t.indexes) {
    const column = i.lower ? `lower(${q(i.columns[0]!)})` : i.columns.map(q).join(', ');
    out.push(`CREATE ${i.unique ? 'UNIQUE ' : ''}INDEX ${q(i.name)} ON public.${q(t.name)} (${column})${i.where ? ` WHERE ${i.where}` : ''}`);
  }
  for (const g of t.triggers) {
    out.push(`CREATE TRIGGER ${q(g.name)} ${g.timing} ${g.events.join(' OR ')} ON public.${q(t.name)} FOR EACH ROW EXECUTE FUNCTION public.${q(g.function)}()`);
  }
  if (t.rls.enabled) out.push(`ALTER TABLE public.${q(t.name)} ENABLE ROW LEVEL SECURITY`);
  if (t.rls.forced) out.push(`ALTER TABLE public.${q(t.name)} FORCE ROW LEVEL SECURITY`);
  for (const p of t.policies) {
    const expression = p.command === 'INSERT' ? 'WITH CHECK (id > 0)' : 'USING (id > 0)';
    out.push(`CREATE POLICY ${q(p.name)} ON public.${q(t.name)} AS ${p.restrictive ? 'RESTRICTIVE' : 'PERMISSIVE'} FOR ${p.command} TO ${p.role !== null ? q(p.role) : 'PUBLIC'} ${expression}`);
  }
  if (t.comment !== null) out.push(`COMMENT ON TABLE public.${q(t.name)} IS '${t.comment}'`);
  return out;
}

function renderPartitioned(p: GenPartitioned): string[] {
  const out = [`CREATE TABLE public.${q(p.name)} (k integer NOT NULL, ${p.columns.map(renderColumn).join(', ')}) PARTITION BY RANGE (k)`];
  for (const x of p.partitions) out.push(`CREATE TABLE public.${q(x.name)} PARTITION OF public.${q(p.name)} FOR VALUES FROM (${x.from}) TO (${x.from + 100})`);
  if (p.hasDefault) out.push(`CREATE TABLE public.${q(`${p.name}_default`)} PARTITION OF public.${q(p.name)} DEFAULT`);
  for (const i of p.indexes) out.push(`CREATE INDEX ${q(i.name)} ON public.${q(p.name)} (${q(i.column)})`);
  return out;
}

export function render(s: GenSchema): string {
  const out: string[] = [];
  if (s.btreeGist) out.push('CREATE EXTENSION btree_gist WITH SCHEMA public');
  for (const c of s.collations) out.push(`CREATE COLLATION public.${q(c.name)} (provider = libc, locale = '${c.locale}')`);
  out.push(`CREATE TYPE public.status AS ENUM (${s.statuses.map((v) => `'${v}'`).join(', ')})`);
  for (const d of s.domains) {
    out.push(`CREATE DOMAIN public.${q(d.name)} AS ${d.base}${d.notNull ? ' NOT NULL' : ''}${d.default !== null ? ` DEFAULT ${d.default}` : ''}` +
      d.checks.map((c) => ` CONSTRAINT ${q(c.name)} CHECK (${c.expression})`).join(''));
  }
  for (const c of s.composites) out.push(`CREATE TYPE public.${q(c.name)} AS (${c.attributes.map((a) => `${q(a.name)} ${a.type}`).join(', ')})`);
  for (const x of s.sequences) out.push(renderSequence(x));
  for (const f of s.functions) out.push(renderFunction(f));
  for (const f of s.triggerFunctions) {
    out.push(`CREATE FUNCTION public.${q(f.name)}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM ${f.body}; RETURN COALESCE(NEW, OLD); END $$`);
  }
  for (const a of s.aggregates) {
    out.push(`CREATE AGGREGATE public.${q(a.name)}(integer) (SFUNC = pg_catalog.${a.sfunc}, STYPE = integer${a.initcond !== null ? `, INITCOND = '${a.initcond}'` : ''})`);
  }
  for (const o of s.operators) out.push(`CREATE OPERATOR public.${o.name} (LEFTARG = integer, RIGHTARG = integer, FUNCTION = pg_catalog.${o.function})`);
  for (const t of s.tables) out.push(...renderTable(t));
  for (const p of s.partitioned) out.push(...renderPartitioned(p));
  for (const v of s.views) {
    if (!s.tables.some((t) => t.name === v.table)) continue;
    out.push(`CREATE VIEW public.${q(v.name)} AS SELECT id, ${v.columns.map(q).join(', ')} FROM public.${q(v.table)}`);
  }
  for (const m of s.matviews) {
    out.push(`CREATE MATERIALIZED VIEW public.${q(m.name)} AS SELECT id, ${m.columns.map(q).join(', ')} FROM public.${q(m.table)} WITH ${m.withData ? '' : 'NO '}DATA`);
    if (m.indexed) out.push(`CREATE UNIQUE INDEX ${q(`${m.name}_id`)} ON public.${q(m.name)} (id)`);
  }
  for (const g of s.grants) out.push(`GRANT ${g.privilege} ON ${g.kind} ${g.object} TO ${q(g.role)}${g.option ? ' WITH GRANT OPTION' : ''}`);
  return `${out.join(';\n')};\n`;
}

/** Creates `count` roles on the server for one run (grants and policies name them), and the way to drop them after. */
export async function evolutionRoles(count = 2): Promise<{ roles: string[]; drop: () => Promise<void> }> {
  const suffix = randomBytes(4).toString('hex');
  const roles = Array.from({ length: count }, (_, i) => `evolution_g${i}_${suffix}`);
  for (const role of roles) await queryOnce(sharedPostgresUrl(), `CREATE ROLE "${role}" NOLOGIN`);
  return { roles, drop: async () => { for (const role of roles) await queryOnce(sharedPostgresUrl(), `DROP ROLE IF EXISTS "${role}"`); } };
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
export async function runEvolutions(t: Teardown, roles: readonly string[], seed: number, steps: number, onStep: (s: EvolutionStep) => void,
  next: (rng: Rng, s: GenSchema) => GenSchema = (rng, s) => evolve(rng, s, 1 + Math.floor(rng() * 3))): Promise<void> {
  const rng = random(seed);
  const db = await roleDatabase(t, 'evolution');
  let schema = initialSchema(rng, roles);
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
