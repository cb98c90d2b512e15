import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutorFailure, redact, registerUrlSecrets } from '../../src/executor/failure.js';
import { diffModels, summarizeDrift } from '../../src/executor/schema/diff.js';
import {
  emptyModel, stateFingerprint, type Collation, type Column, type Operator, type Constraint, type Grant, type Index, type Routine, type SchemaModel, type Sequence, type Table, type Trigger, type View,
} from '../../src/executor/schema/model.js';
import { planStatements, type PlannedStatement } from '../../src/executor/schema/statements.js';
import { planDocument, readPlanDocument } from '../../src/executor/schema/commands.js';
import { realmLockKey } from '../../src/shared/realm-lock-key.js';

const seqOptions = { start: '1', increment: '1', min: '1', max: '2147483647', cache: '1', cycle: false };
const col = (name: string, type = 'integer', extra: Partial<Column> = {}): Column => ({ name, type, notNull: false, default: null, identity: null, generated: null, collation: null, statistics: null, ...extra });
const pk = (name: string, columns: string): Constraint => ({ name, kind: 'primary_key', definition: `PRIMARY KEY (${columns})`, references: null });
const unique = (name: string, columns: string): Constraint => ({ name, kind: 'unique', definition: `UNIQUE (${columns})`, references: null });
const fk = (name: string, column: string, table: string, target: string): Constraint =>
  ({ name, kind: 'foreign_key', definition: `FOREIGN KEY (${column}) REFERENCES ${table.replace(/"/g, '')}(${target})`, references: table });
const table = (schema: string, name: string, columns: Column[], constraints: Constraint[] = []): Table =>
  ({ key: `"${schema}"."${name}"`, schema, name, columns, constraints, indexes: [], rowSecurity: false, forceRowSecurity: false, unlogged: false, options: [], partitionBy: null, partitionOf: null, partitionIndexes: [], inherits: [] });
const view = (name: string, definition: string, dependsOn: string[]): View => ({ key: `"public"."${name}"`, schema: 'public', name, materialized: false, populated: true, definition, indexes: [], dependsOn });
const sequence = (name: string, ownedBy: Sequence['ownedBy'] = null): Sequence =>
  ({ key: `"public"."${name}"`, schema: 'public', name, type: 'integer', options: seqOptions, ownedBy });
const model = (parts: Partial<SchemaModel>): SchemaModel => ({ ...emptyModel(), schemas: ['public'], ...parts });

const sqlOf = (plan: PlannedStatement[]) => plan.map((s) => s.sql);
const DIGESTS = { actualStateFingerprint: 'sha256:' + '1'.repeat(64), desiredSchemaDigest: 'sha256:' + '2'.repeat(64), desiredStateFingerprint: 'sha256:' + '3'.repeat(64), desiredCatalogDigest: 'sha256:' + '4'.repeat(64) };
/** Index of the first statement matching `pattern`; fails the test when none does. */
function at(t: Test, plan: PlannedStatement[], pattern: RegExp): number {
  const i = plan.findIndex((s) => pattern.test(s.sql));
  t.ok(i >= 0, `plan has a statement matching ${pattern}`);
  return i;
}

t.test('identical models plan nothing and report no drift', async (t) => {
  const m = model({ tables: [table('public', 't', [col('a')], [pk('t_pkey', 'a')])], views: [view('v', 'SELECT 1', [])] });
  t.same(planStatements(m, structuredClone(m)), []);
  t.same(summarizeDrift(diffModels(m, structuredClone(m))), { drift: false, findings: [], driftDigest: summarizeDrift(diffModels(model({}), model({}))).driftDigest });
});

t.test('column order does not count, in the diff or the fingerprint', async (t) => {
  const a = model({ tables: [table('public', 't', [col('a'), col('b')])] });
  const b = model({ tables: [table('public', 't', [col('b'), col('a')])] });
  t.same(planStatements(a, b), []);
  t.equal(stateFingerprint(a), stateFingerprint(b));
  t.not(stateFingerprint(a), stateFingerprint(model({ tables: [table('public', 't', [col('a'), col('b', 'bigint')])] })));
});

t.test('a foreign key leaves before the key it references changes and comes back after', async (t) => {
  const users = (c: Constraint) => table('public', 'users', [col('id'), col('email', 'text')], [pk('users_pkey', 'id'), c]);
  const orders = table('public', 'orders', [col('email', 'text')], [fk('orders_email_fkey', 'email', '"public"."users"', 'email')]);
  const plan = planStatements(
    model({ tables: [users(unique('users_email_key', 'email')), orders] }),
    model({ tables: [users(unique('users_email_key', 'email, id')), orders] }),
  );
  const dropFk = at(t, plan, /"orders" DROP CONSTRAINT "orders_email_fkey"/);
  const dropKey = at(t, plan, /"users" DROP CONSTRAINT "users_email_key"/);
  const addKey = at(t, plan, /"users" ADD CONSTRAINT "users_email_key" UNIQUE \(email, id\)/);
  const addFk = at(t, plan, /"orders" ADD CONSTRAINT "orders_email_fkey"/);
  t.ok(dropFk < dropKey && dropKey < addKey && addKey < addFk, sqlOf(plan).join('\n'));
  t.notOk(plan.some((s) => s.destructive), 'replacing a key loses nothing');
});

t.test('a foreign key whose referenced key stays is left alone', async (t) => {
  const users = table('public', 'users', [col('id'), col('note', 'text')], [pk('users_pkey', 'id')]);
  const orders = table('public', 'orders', [col('user_id')], [fk('orders_user_fkey', 'user_id', '"public"."users"', 'id')]);
  const plan = planStatements(model({ tables: [users, orders] }), model({ tables: [{ ...users, columns: [col('id')] }, orders] }));
  t.same(sqlOf(plan), ['ALTER TABLE "public"."users" DROP COLUMN "note"']);
  t.same(plan[0]!.destructive, 'drop_column');
});

t.test('views reading a re-typed column go first and come back last, in dependency order', async (t) => {
  const base = (type: string) => table('public', 't', [col('a', type)]);
  const views = [view('v2', 'SELECT v1.a FROM public.v1', ['"public"."v1"']), view('v1', 'SELECT t.a FROM public.t', ['"public"."t"'])];
  const plan = planStatements(model({ tables: [base('integer')], views }), model({ tables: [base('bigint')], views }));
  t.same(sqlOf(plan), [
    'DROP VIEW "public"."v2"',
    'DROP VIEW "public"."v1"',
    'ALTER TABLE "public"."t" ALTER COLUMN "a" TYPE bigint USING "a"::bigint',
    'CREATE VIEW "public"."v1" AS\nSELECT t.a FROM public.t',
    'CREATE VIEW "public"."v2" AS\nSELECT v1.a FROM public.v1',
  ]);
  t.same(plan.map((s) => s.destructive ?? null), [null, null, 'change_column_type', null, null], 'only the type change is destructive');
});

t.test('views not reading a change are not touched; a removed view is a destructive drop', async (t) => {
  const tables = [table('public', 't', [col('a')]), table('public', 'u', [col('b')])];
  const keep = view('keep', 'SELECT u.b FROM public.u', ['"public"."u"']);
  const gone = view('gone', 'SELECT t.a FROM public.t', ['"public"."t"']);
  const plan = planStatements(model({ tables, views: [keep, gone] }), model({ tables: [tables[0]!, { ...tables[1]!, columns: [col('b'), col('c')] }], views: [keep] }));
  t.same(plan, [{ sql: 'DROP VIEW "public"."gone"', destructive: 'drop_view' }, { sql: 'ALTER TABLE "public"."u" ADD COLUMN "c" integer' }]);
});

t.test('dropping tables that reference each other drops the key between them first', async (t) => {
  const a = table('s', 'a', [col('id')], [pk('a_pkey', 'id')]);
  const b = table('s', 'b', [col('a_id')], [fk('b_a_fkey', 'a_id', '"s"."a"', 'id')]);
  const plan = planStatements(model({ schemas: ['public', 's'], tables: [a, b] }), model({}));
  t.same(sqlOf(plan), ['ALTER TABLE "s"."b" DROP CONSTRAINT "b_a_fkey"', 'DROP TABLE "s"."a"', 'DROP TABLE "s"."b"', 'DROP SCHEMA "s"']);
  t.same(plan.map((s) => s.destructive ?? null), [null, 'drop_table', 'drop_table', 'drop_schema']);
});

t.test('sequences: created before the defaults that call them, owned after their column exists, not dropped twice', async (t) => {
  const serial = col('id', 'integer', { notNull: true, default: "nextval('public.t_id_seq'::regclass)" });
  const created = planStatements(model({}), model({ tables: [table('public', 't', [serial])], sequences: [sequence('t_id_seq', { table: '"public"."t"', column: 'id' })] }));
  const createSeq = at(t, created, /^CREATE SEQUENCE "public"."t_id_seq"/);
  const createTable = at(t, created, /^CREATE TABLE "public"."t"/);
  const own = at(t, created, /OWNED BY "public"."t"."id"$/);
  t.ok(createSeq < createTable && createTable < own, sqlOf(created).join('\n'));

  const withSerial = model({ tables: [table('public', 't', [serial, col('x')])], sequences: [sequence('t_id_seq', { table: '"public"."t"', column: 'id' })] });
  const droppedColumn = planStatements(withSerial, model({ tables: [table('public', 't', [col('x')])] }));
  t.same(sqlOf(droppedColumn), ['ALTER TABLE "public"."t" DROP COLUMN "id"'], 'the owned sequence goes with its column');
  t.same(sqlOf(planStatements(withSerial, model({}))), ['DROP TABLE "public"."t"'], 'and with its table');

  const freed = planStatements(withSerial, model({ tables: [table('public', 't', [col('x')])], sequences: [sequence('t_id_seq')] }));
  t.ok(at(t, freed, /OWNED BY NONE/) < at(t, freed, /DROP COLUMN "id"/), 'a sequence that outlives its column is released first');
  t.notOk(freed.some((s) => /DROP SEQUENCE/.test(s.sql)));
});

t.test('identity columns: NOT NULL before ADD IDENTITY, DROP IDENTITY before DROP NOT NULL', async (t) => {
  const identity = { generation: 'always' as const, sequence: '"public"."t_ids"', options: seqOptions };
  const plain = model({ tables: [table('public', 't', [col('id')])] });
  const withIdentity = model({ tables: [table('public', 't', [col('id', 'integer', { notNull: true, identity })])] });
  t.same(sqlOf(planStatements(plain, withIdentity)), [
    'ALTER TABLE "public"."t" ALTER COLUMN "id" SET NOT NULL',
    'ALTER TABLE "public"."t" ALTER COLUMN "id" ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME "public"."t_ids" START WITH 1 INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 CACHE 1 NO CYCLE)',
  ]);
  const renamed = model({ tables: [table('public', 't', [col('id', 'integer', { notNull: true, identity: { ...identity, sequence: '"app"."t ""ids"""' } })])] });
  t.same(sqlOf(planStatements(withIdentity, renamed)), [
    'ALTER SEQUENCE "public"."t_ids" SET SCHEMA "app"',
    'ALTER SEQUENCE "app"."t_ids" RENAME TO "t ""ids"""',
  ], 'a renamed identity sequence is moved and renamed in place, its column kept');
  t.same(sqlOf(planStatements(withIdentity, plain)), [
    'ALTER TABLE "public"."t" ALTER COLUMN "id" DROP IDENTITY',
    'ALTER TABLE "public"."t" ALTER COLUMN "id" DROP NOT NULL',
  ]);
});

t.test('drift findings hold categories and counts only, and the digest follows the detail', async (t) => {
  const actual = model({ tables: [table('public', 't', [col('a'), col('gone')]), table('public', 'old', [])] });
  const desired = model({ tables: [table('public', 't', [col('a', 'bigint'), col('new')]), table('public', 'fresh', [])], views: [view('v', 'SELECT 1', [])] });
  const drift = summarizeDrift(diffModels(actual, desired));
  t.same(drift.findings, [
    { category: 'changed_column', count: 1 }, { category: 'extra_column', count: 1 }, { category: 'extra_table', count: 1 },
    { category: 'missing_column', count: 1 }, { category: 'missing_table', count: 1 }, { category: 'missing_view', count: 1 },
  ]);
  t.notMatch(JSON.stringify(drift.findings), /gone|fresh|old/, 'no object names');
  t.equal(summarizeDrift(diffModels(structuredClone(actual), structuredClone(desired))).driftDigest, drift.driftDigest, 'equal drift, equal digest');
  const other = model({ ...desired, tables: [table('public', 't', [col('a', 'text'), col('new')]), table('public', 'fresh', [])] });
  t.not(summarizeDrift(diffModels(actual, other)).driftDigest, drift.driftDigest, 'same categories, different detail, different digest');
});

t.test('the plan document is checked before anything else happens', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ptah-plan-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const digest = 'sha256:' + 'a'.repeat(64);
  const good = {
    formatVersion: 1, engine: 'postgresql', statements: ['CREATE TABLE "public"."t" ()'], statementCount: 1, destructive: false,
    destructiveStatements: [], privilegeChanging: false, privilegeStatements: [], lockingStatements: [], transactional: true,
    actualStateFingerprint: digest, desiredSchemaDigest: digest, desiredStateFingerprint: digest, desiredCatalogDigest: digest,
  };
  const read = (doc: unknown) => {
    const path = join(dir, 'plan.json');
    writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
    return readPlanDocument(path);
  };
  t.same(read(good), good);
  const classified = { ...good, privilegeChanging: true, privilegeStatements: [0], lockingStatements: [{ index: 0, reason: 'table_rewrite' }], transactional: false };
  t.same(read(classified), classified, 'a classified plan reads back as written');
  const bad: [string, unknown][] = [
    ['not json', '{'],
    ['array', []],
    ['format version', { ...good, formatVersion: 2 }],
    ['engine', { ...good, engine: 'mysql' }],
    ['empty statement', { ...good, statements: [' '], statementCount: 1 }],
    ['count', { ...good, statementCount: 2 }],
    ['destructive flag', { ...good, destructive: true }],
    ['fingerprint', { ...good, actualStateFingerprint: 'abc' }],
    ['schema digest', { ...good, desiredSchemaDigest: undefined }],
    ['no convergence fingerprint', { ...good, desiredStateFingerprint: undefined }],
    ['no catalog digest', { ...good, desiredCatalogDigest: undefined }],
    ['privilege flag without statements', { ...good, privilegeChanging: true }],
    ['privilege statements without the flag', { ...good, privilegeStatements: [0] }],
    ['privilege statement out of range', { ...good, privilegeChanging: true, privilegeStatements: [1] }],
    ['no privilege classification', { ...good, privilegeChanging: undefined, privilegeStatements: undefined }],
    ['locking statement out of range', { ...good, lockingStatements: [{ index: 3, reason: 'table_rewrite' }] }],
    ['no locking classification', { ...good, lockingStatements: undefined }],
    ['no transactional flag', { ...good, transactional: 'yes' }],
  ];
  for (const [name, doc] of bad) {
    t.throws(() => read(doc), { name: 'ExecutorFailure', code: 'invalid_plan' }, name);
  }
});

t.test('redaction removes registered URLs and passwords, and any URL credentials', async (t) => {
  registerUrlSecrets('postgres://app:s3cr%40t-pw@db.example:5432/app');
  t.equal(redact('failed for postgres://app:s3cr%40t-pw@db.example:5432/app'), 'failed for ***');
  t.equal(redact('password s3cr@t-pw and s3cr%40t-pw'), 'password *** and ***');
  t.equal(redact('see postgresql://u:other@h/db'), 'see postgresql://u:***@h/db');
  t.equal(new ExecutorFailure('x', 'leaked s3cr@t-pw').message, 'leaked ***');
});

t.test('realm lock keys are stable signed 64-bit integers, distinct per realm', async (t) => {
  const a = realmLockKey('sha256:' + '1'.repeat(64));
  t.equal(a, realmLockKey('sha256:' + '1'.repeat(64)));
  t.not(a, realmLockKey('sha256:' + '2'.repeat(64)));
  const n = BigInt(a);
  t.ok(n >= -(2n ** 63n) && n < 2n ** 63n);
  t.throws(() => realmLockKey(''));
});

// The kinds beyond tables, views and sequences: extensions, enums, domains, composite types, routines, triggers,
// row-level security and policies, comments, grants, materialized views and partitions. Each case checks the
// order PostgreSQL needs and the classification a person approves by (destructive, privilege, locking).
const ptable = (name: string, columns: Column[], extra: Partial<Table> = {}): Table => ({ ...table('public', name, columns), ...extra });
const index = (name: string, on: string, extra = ''): Index => ({ name, definition: `CREATE INDEX ${name} ON public.${on} USING btree (a)${extra}`, unique: false, statistics: [] });
const pview = (name: string, dependsOn: string[], extra: Partial<View> = {}): View => ({ ...view(name, ' SELECT 1 AS a', dependsOn), ...extra });
const routine = (name: string, body = 'SELECT 1', result = 'integer', args = ''): Routine => ({
  key: `public.${name}(${args})`, kind: 'function', header: `f ${result} (${args})`,
  definition: `CREATE OR REPLACE FUNCTION public.${name}(${args}) RETURNS ${result} LANGUAGE sql AS $$${body}$$`, afterTables: false, viewRowTypes: [], calls: [],
});
const trigger = (name: string, on: string, fn: string): Trigger =>
  ({ table: `"public"."${on}"`, name, routine: `public.${fn}()`, definition: `CREATE TRIGGER ${name} BEFORE UPDATE ON public.${on} FOR EACH ROW EXECUTE FUNCTION public.${fn}()` });
const grant = (target: string, grantee: string, privilege: string, grantable = false): Grant => ({ target, grantee, privilege, grantable });

t.test('extensions and types exist before the tables that use them, and go only after', async (t) => {
  const desired = model({
    extensions: [{ name: 'citext', schema: 'public', version: '1.6' }],
    enums: [{ key: 'public.mood', schema: 'public', values: ['sad', 'happy'] }],
    domains: [{ key: 'public.email', type: 'public.citext', collation: null, notNull: false, default: null, checks: [{ name: 'has_at', definition: "CHECK ((VALUE ~~ '%@%'::public.citext))" }] }],
    composites: [{ key: 'public.pair', attributes: [{ name: 'a', type: 'public.mood' }] }],
    tables: [ptable('t', [col('m', 'public.mood'), col('e', 'public.email'), col('p', 'public.pair')])],
  });
  const plan = planStatements(model({}), desired);
  const order = [/^CREATE EXTENSION "citext" WITH SCHEMA "public" VERSION '1.6'$/, /^CREATE TYPE public.mood AS ENUM \('sad', 'happy'\)$/,
    /^CREATE DOMAIN public.email AS public.citext$/, /^ALTER DOMAIN public.email ADD CONSTRAINT "has_at" CHECK/, /^CREATE TYPE public.pair AS \("a" public.mood\)$/, /^CREATE TABLE "public"."t"/];
  const positions = order.map((p) => at(t, plan, p));
  t.same(positions, [...positions].sort((a, b) => a - b), sqlOf(plan).join('\n'));
  t.notOk(plan.some((s) => s.destructive || s.privilege), 'creating loses nothing and grants nothing');

  const back = planStatements(desired, model({}));
  const dropTable = at(t, back, /^DROP TABLE "public"."t"$/);
  for (const p of [/^DROP TYPE public.pair$/, /^DROP DOMAIN public.email$/, /^DROP TYPE public.mood$/, /^DROP EXTENSION "citext"$/]) t.ok(at(t, back, p) > dropTable, `${p} after the table`);
  t.same([...new Set(back.flatMap((s) => (s.destructive ? [s.destructive] : [])))].sort(), ['drop_extension', 'drop_table', 'drop_type']);
});

const collation = (name: string, options: string): Collation => ({ key: `"public"."${name}"`, definition: `CREATE COLLATION "public"."${name}" (${options})` });
const ICU_CI = "PROVIDER = icu, LOCALE = 'und-u-ks-level2', DETERMINISTIC = false";

t.test('collations exist before the domains, tables and indexes that name them, and go only after', async (t) => {
  const desired = model({
    collations: [collation('ci', ICU_CI)],
    domains: [{ key: 'public.code', type: 'text', collation: 'public.ci', notNull: false, default: null, checks: [] }],
    tables: [ptable('t', [col('a', 'text', { collation: 'public.ci' }), col('c', 'public.code')], { indexes: [index('t_a', 't', ' COLLATE public.ci')] })],
    comments: [{ target: 'COLLATION "public"."ci"', text: 'case-insensitive' }],
  });
  const plan = planStatements(model({}), desired);
  const order = [/^CREATE COLLATION "public"."ci" \(PROVIDER = icu/, /^CREATE DOMAIN public.code AS text COLLATE public.ci$/,
    /^CREATE TABLE "public"."t" \(\n {2}"a" text COLLATE public.ci,/, /^CREATE INDEX t_a ON public.t/, /^COMMENT ON COLLATION "public"."ci" IS 'case-insensitive'$/];
  const positions = order.map((p) => at(t, plan, p));
  t.same(positions, [...positions].sort((a, b) => a - b), sqlOf(plan).join('\n'));

  const back = planStatements(desired, model({}));
  const dropCollation = at(t, back, /^DROP COLLATION "public"."ci"$/);
  for (const p of [/^DROP TABLE "public"."t"$/, /^DROP DOMAIN public.code$/]) t.ok(at(t, back, p) < dropCollation, `${p} before the collation`);
  t.equal(back[dropCollation]!.destructive, 'drop_type', 'a dropped collation is classified as a dropped type');

  const moved = planStatements(desired, { ...desired, tables: [ptable('t', [col('a', 'text'), col('c', 'public.code')])] });
  t.notOk(moved.some((s) => s.sql.includes('DROP COLLATION')), 'a collation a column leaves stays while the desired schema has it');
});

t.test('a changed collation is dropped and made again before what names it, its comment set again; a domain changes collation by a rebuild', async (t) => {
  const withCollation = (options: string, domainCollation: string | null) => model({
    collations: [collation('ci', options)],
    domains: [{ key: 'public.code', type: 'text', collation: domainCollation, notNull: false, default: null, checks: [] }],
    comments: [{ target: 'COLLATION "public"."ci"', text: 'x' }],
  });
  const plan = planStatements(withCollation(ICU_CI, null), withCollation("PROVIDER = icu, LOCALE = 'und-u-ks-level1', DETERMINISTIC = false", 'public.ci'));
  t.same(sqlOf(plan), [
    'DROP COLLATION "public"."ci"', `CREATE COLLATION "public"."ci" (PROVIDER = icu, LOCALE = 'und-u-ks-level1', DETERMINISTIC = false)`,
    'DROP DOMAIN public.code', 'CREATE DOMAIN public.code AS text COLLATE public.ci', `COMMENT ON COLLATION "public"."ci" IS 'x'`,
  ]);
  t.same(plan.map((s) => s.destructive ?? null), ['drop_type', null, 'drop_type', null, null]);
  t.same(summarizeDrift(diffModels(withCollation(ICU_CI, null), model({}))).findings.find((f) => f.category === 'extra_collation'), { category: 'extra_collation', count: 1 });
});

const operator = (name: string, fn: string, extra: Partial<Operator> = {}): Operator => ({
  key: `public.${name}(text,text)`, name: `"public".${name}`, options: `FUNCTION = public.${fn}, LEFTARG = text, RIGHTARG = text`,
  commutator: null, negator: null, routine: `public.${fn}(text,text)`, ...extra,
});

t.test('operators are made after their routines and before the tables, and dropped before their routines', async (t) => {
  const eq = routine('ci_eq', 'SELECT true', 'boolean', 'text,text');
  const checked = ptable('t', [col('a', 'text')], { constraints: [{ name: 'c', kind: 'check', definition: 'CHECK ((a OPERATOR(public.=~=) a))', references: null }] });
  const desired = model({ routines: [eq], operators: [operator('=~=', 'ci_eq')], tables: [checked], comments: [{ target: 'OPERATOR public.=~=(text,text)', text: 'x' }] });
  const plan = planStatements(model({}), desired);
  const order = [/^CREATE OR REPLACE FUNCTION public.ci_eq/, /^CREATE OPERATOR "public".=~= \(FUNCTION = public.ci_eq, LEFTARG = text, RIGHTARG = text\)$/,
    /^CREATE TABLE "public"."t"/, /^ALTER TABLE "public"."t" ADD CONSTRAINT "c"/, /^COMMENT ON OPERATOR public.=~=\(text,text\) IS 'x'$/];
  const positions = order.map((p) => at(t, plan, p));
  t.same(positions, [...positions].sort((a, b) => a - b), sqlOf(plan).join('\n'));

  const back = planStatements(desired, model({}));
  t.ok(at(t, back, /^DROP TABLE/) < at(t, back, /^DROP OPERATOR public.=~=\(text,text\)$/), 'the operator goes after the table using it');
  t.ok(at(t, back, /^DROP OPERATOR/) < at(t, back, /^DROP FUNCTION public.ci_eq/), 'and before its routine');
  t.equal(back.find((s) => s.sql.startsWith('DROP OPERATOR'))!.destructive, 'drop_routine');

  const recreatedRoutine = planStatements(desired, { ...desired, routines: [{ ...eq, header: 'f boolean (x text, y text)', definition: eq.definition.replace('true', 'false') }] });
  t.ok(at(t, recreatedRoutine, /^DROP OPERATOR/) < at(t, recreatedRoutine, /^DROP FUNCTION public.ci_eq/), 'a routine made again takes its operator down first');
  t.ok(at(t, recreatedRoutine, /^CREATE OR REPLACE FUNCTION/) < at(t, recreatedRoutine, /^CREATE OPERATOR/), 'and makes it again after itself');
  t.ok(recreatedRoutine.some((s) => s.sql.startsWith('COMMENT ON OPERATOR')), "the operator's comment is set again");
});

t.test("an operator's links: set by the partner made second, cleared by a partner's drop; another change makes it again", async (t) => {
  const eq = operator('=~=', 'ci_eq');
  const ne = operator('<~>', 'ci_ne');
  const linked = [{ ...eq, negator: ne.key }, { ...ne, negator: eq.key }];
  const added = planStatements(model({ operators: [eq] }), model({ operators: linked }));
  t.same(sqlOf(added), ['CREATE OPERATOR "public".<~> (FUNCTION = public.ci_ne, LEFTARG = text, RIGHTARG = text, NEGATOR = OPERATOR("public".=~=))'],
    'the new partner links the operator that stays');
  t.same(sqlOf(planStatements(model({ operators: linked }), model({ operators: [eq] }))), ['DROP OPERATOR public.<~>(text,text)'], "the partner's drop clears the link");
  const changed = planStatements(model({ operators: linked }), model({ operators: [{ ...linked[0]!, options: `${eq.options}, HASHES` }, linked[1]!] }));
  t.same(sqlOf(changed), [
    'DROP OPERATOR public.=~=(text,text)',
    'CREATE OPERATOR "public".=~= (FUNCTION = public.ci_eq, LEFTARG = text, RIGHTARG = text, HASHES, NEGATOR = OPERATOR("public".<~>))',
  ], 'made again, it links its partner again');
  const unlinked = planStatements(model({ operators: linked }), model({ operators: [eq, ne] }));
  t.equal(unlinked.filter((s) => s.sql.startsWith('DROP OPERATOR')).length, 1, 'a link no drop clears makes one of the pair again');
});

t.test('an extension changes version or schema in place', async (t) => {
  const plan = planStatements(model({ schemas: ['public', 'ext'], extensions: [{ name: 'citext', schema: 'public', version: '1.5' }] }),
    model({ schemas: ['public', 'ext'], extensions: [{ name: 'citext', schema: 'ext', version: '1.6' }] }));
  t.same(sqlOf(plan), ['ALTER EXTENSION "citext" SET SCHEMA "ext"', `ALTER EXTENSION "citext" UPDATE TO '1.6'`]);
});

t.test('enum values are added in position; removing one recreates the type, flagged destructive', async (t) => {
  const e = (values: string[]) => [{ key: 'public.mood', schema: 'public', values }];
  const people = ptable('people', [col('m', 'public.mood', { default: "'happy'::public.mood" }), col('h', 'public.mood[]')]);
  const added = planStatements(model({ enums: e(['sad', 'happy']), tables: [people] }), model({ enums: e(['meh', 'sad', 'ok', 'happy', 'wow']), tables: [people] }));
  t.same(sqlOf(added), [
    "ALTER TYPE public.mood ADD VALUE 'meh' BEFORE 'sad'", "ALTER TYPE public.mood ADD VALUE 'ok' AFTER 'sad'", "ALTER TYPE public.mood ADD VALUE 'wow' AFTER 'happy'",
  ]);
  t.notOk(added.some((s) => s.destructive || s.locking), 'adding a value rewrites nothing');

  const reading = pview('happy', ['"public"."people"']);
  const removed = planStatements(model({ enums: e(['sad', 'ok', 'happy']), tables: [people], views: [reading] }),
    model({ enums: e(['sad', 'happy']), tables: [people], views: [reading] }));
  const rename = at(t, removed, /^ALTER TYPE public.mood RENAME TO "ptah_replaced_[0-9a-f]{16}"$/);
  t.equal(removed[rename]!.destructive, 'remove_enum_value');
  const dropView = at(t, removed, /^DROP VIEW "public"."happy"$/);
  const retype = at(t, removed, /ALTER COLUMN "m" TYPE public.mood USING "m"::text::public.mood$/);
  const retypeArray = at(t, removed, /ALTER COLUMN "h" TYPE public.mood\[\] USING "h"::text\[\]::public.mood\[\]$/);
  const dropOld = at(t, removed, /^DROP TYPE "public"."ptah_replaced_/);
  const createView = at(t, removed, /^CREATE VIEW "public"."happy"/);
  t.ok(dropView < rename && rename < retype && retype < retypeArray && retypeArray < dropOld && dropOld < createView, sqlOf(removed).join('\n'));
  t.equal(removed[retype]!.locking, 'table_rewrite');
  t.ok(at(t, removed, /ALTER COLUMN "m" DROP DEFAULT/) < retype && retype < at(t, removed, /ALTER COLUMN "m" SET DEFAULT 'happy'::public.mood/), 'the default steps aside');
});

t.test('a routine is replaced in place when its signature and header hold, else dropped and created with its dependants around it', async (t) => {
  const touch = routine('touch', 'SELECT 1', 'trigger');
  const withTrigger = (r: Routine, views: View[] = []) =>
    model({ routines: [r], tables: [ptable('t', [col('a')])], triggers: [trigger('t_touch', 't', 'touch')], views });
  const replaced = planStatements(withTrigger(touch), withTrigger(routine('touch', 'SELECT 2', 'trigger')));
  t.same(sqlOf(replaced), ['SET LOCAL check_function_bodies = off', 'CREATE OR REPLACE FUNCTION public.touch() RETURNS trigger LANGUAGE sql AS $$SELECT 2$$'],
    'the trigger stays');

  const reader = pview('v', ['"public"."t"', 'public.touch()']);
  const retyped = planStatements(withTrigger(touch, [reader]), withTrigger(routine('touch', 'SELECT 2', 'event_trigger'), [reader]));
  const dropTrigger = at(t, retyped, /^DROP TRIGGER "t_touch" ON "public"."t"$/);
  const dropView = at(t, retyped, /^DROP VIEW "public"."v"$/);
  const dropFn = at(t, retyped, /^DROP FUNCTION public.touch\(\)$/);
  const create = at(t, retyped, /^CREATE OR REPLACE FUNCTION public.touch\(\) RETURNS event_trigger/);
  const createView = at(t, retyped, /^CREATE VIEW "public"."v"/);
  const createTrigger = at(t, retyped, /^CREATE TRIGGER t_touch/);
  t.ok(dropTrigger < dropFn && dropView < dropFn && dropFn < create && create < createView && create < createTrigger, sqlOf(retyped).join('\n'));
  t.notOk(retyped.some((s) => s.destructive), 'the same signature comes back');

  const gone = planStatements(model({ routines: [routine('f'), routine('f', 'SELECT 1', 'integer', 'integer')] }), model({ routines: [routine('f', 'SELECT 1', 'integer', 'integer')] }));
  t.same(gone.map((s) => [s.sql, s.destructive]), [['DROP FUNCTION public.f()', 'drop_routine']], 'a signature that goes is a destructive drop');
});

t.test('a routine whose body is parsed at creation comes after the tables it reads', async (t) => {
  const plan = planStatements(model({}), model({ tables: [ptable('t', [col('a')])], routines: [{ ...routine('n'), afterTables: true }, routine('m')] }));
  t.ok(at(t, plan, /FUNCTION public.m\(\)/) < at(t, plan, /^CREATE TABLE/) && at(t, plan, /^CREATE TABLE/) < at(t, plan, /FUNCTION public.n\(\)/), sqlOf(plan).join('\n'));
});

// An ordinary aggregate over a support function public.<sfunc>(integer, integer), as introspect reads it.
const aggregate = (name: string, sfunc: string, initcond = '0'): Routine => ({
  key: `public.${name}(integer)`, kind: 'aggregate', header: 'a integer (integer)',
  definition: `CREATE OR REPLACE AGGREGATE "public"."${name}"(integer) (SFUNC = public.${sfunc}, STYPE = integer, INITCOND = '${initcond}')`,
  afterTables: false, viewRowTypes: [], calls: [`public.${sfunc}(integer,integer)`],
});
// Named to sort after the aggregate, so only the aggregate's dependency puts it first.
const step = (names = 'integer, integer', extra: Partial<Routine> = {}): Routine =>
  ({ ...routine('step', 'SELECT $1 + $2', 'integer', 'integer,integer'), header: `f integer (${names})`,
    definition: `CREATE OR REPLACE FUNCTION public.step(${names}) RETURNS integer LANGUAGE sql AS $$SELECT $1 + $2$$`, ...extra });

t.test('an aggregate is made after its support functions and before the views reading it, and replaced in place under them', async (t) => {
  const reader = pview('v', ['"public"."t"', 'public.agg(integer)']);
  const withAggregate = (agg: Routine, extra: Partial<Routine> = {}) =>
    model({ routines: [agg, step('integer, integer', extra)], tables: [ptable('t', [col('a')])], views: [reader] });
  const created = planStatements(model({}), withAggregate(aggregate('agg', 'step')));
  const order = [/^CREATE OR REPLACE FUNCTION public.step/, /^CREATE OR REPLACE AGGREGATE "public"."agg"/, /^CREATE TABLE "public"."t"/, /^CREATE VIEW "public"."v"/];
  const positions = order.map((p) => at(t, created, p));
  t.same(positions, [...positions].sort((a, b) => a - b), sqlOf(created).join('\n'));

  const replaced = planStatements(withAggregate(aggregate('agg', 'step')), withAggregate(aggregate('agg', 'step', '10')));
  t.same(sqlOf(replaced), ['SET LOCAL check_function_bodies = off', aggregate('agg', 'step', '10').definition], 'the view stays');

  // A support function parsed at creation is made after the tables, and its aggregate after it.
  const late = planStatements(model({}), withAggregate(aggregate('agg', 'step'), { afterTables: true }));
  const latePositions = [/^CREATE TABLE "public"."t"/, /^CREATE OR REPLACE FUNCTION public.step/, /^CREATE OR REPLACE AGGREGATE/, /^CREATE VIEW/].map((p) => at(t, late, p));
  t.same(latePositions, [...latePositions].sort((a, b) => a - b), sqlOf(late).join('\n'));
});

t.test('a support function made again takes its aggregate, and what reads the aggregate, down first and makes them again after it', async (t) => {
  const reader = pview('v', ['"public"."t"', 'public.agg(integer)']);
  const caller: Routine = { ...routine('caller', 'SELECT public.agg(a) FROM public.t'), afterTables: true, calls: ['public.agg(integer)'] };
  const granted = [grant('FUNCTION public.agg(integer)', '"r"', 'EXECUTE')];
  const withStep = (names: string) =>
    model({ routines: [aggregate('agg', 'step'), step(names), caller], tables: [ptable('t', [col('a')])], views: [reader], grants: granted });
  const plan = planStatements(withStep('integer, integer'), withStep('a integer, b integer'));
  const [dropView, dropCaller, dropAggregate, dropStep] = [/^DROP VIEW "public"."v"$/, /^DROP FUNCTION public.caller\(\)$/,
    /^DROP AGGREGATE public.agg\(integer\)$/, /^DROP FUNCTION public.step\(integer,integer\)$/].map((p) => at(t, plan, p));
  const [createStep, createAggregate, createCaller, createView, regrant] = [/^CREATE OR REPLACE FUNCTION public.step/, /^CREATE OR REPLACE AGGREGATE/,
    /^CREATE OR REPLACE FUNCTION public.caller/, /^CREATE VIEW "public"."v"/, /^GRANT EXECUTE ON FUNCTION public.agg\(integer\) TO "r"$/].map((p) => at(t, plan, p));
  t.ok(dropView < dropAggregate && dropCaller < dropAggregate && dropAggregate < dropStep && dropStep < createStep && createStep < createAggregate &&
    createAggregate < createCaller && createAggregate < createView && createView < regrant, sqlOf(plan).join('\n'));
  t.notOk(plan.some((s) => s.destructive), 'everything comes back');
  t.ok(plan[regrant]!.privilege, 'the grant the aggregate lost is a privilege statement');

  const gone = planStatements(model({ routines: [aggregate('agg', 'step'), step(), { ...aggregate('none', 'step'), key: 'public.none()' }] }), model({}));
  t.same(gone.map((s) => [s.sql, s.destructive]), [
    ['DROP AGGREGATE public.none(*)', 'drop_routine'], ['DROP AGGREGATE public.agg(integer)', 'drop_routine'], ['DROP FUNCTION public.step(integer,integer)', 'drop_routine'],
  ], 'aggregates go before their support functions; one of no arguments is written (*)');
});

t.test('row-level security and policies are privilege changes; policies on a dropped table go with it', async (t) => {
  const policy = { table: '"public"."t"', name: 'own', definition: 'CREATE POLICY "own" ON "public"."t" AS PERMISSIVE FOR ALL TO PUBLIC USING (true)' };
  const before = model({ tables: [ptable('t', [col('a')])] });
  const after = model({ tables: [ptable('t', [col('a')], { rowSecurity: true, forceRowSecurity: true })], policies: [policy] });
  const plan = planStatements(before, after);
  t.same(sqlOf(plan), ['ALTER TABLE "public"."t" ENABLE ROW LEVEL SECURITY', 'ALTER TABLE "public"."t" FORCE ROW LEVEL SECURITY', policy.definition]);
  t.ok(plan.every((s) => s.privilege), 'each is a privilege change');
  const back = planStatements(after, before);
  t.same(sqlOf(back), ['DROP POLICY "own" ON "public"."t"', 'ALTER TABLE "public"."t" DISABLE ROW LEVEL SECURITY', 'ALTER TABLE "public"."t" NO FORCE ROW LEVEL SECURITY']);
  t.same(sqlOf(planStatements(after, model({}))), ['DROP TABLE "public"."t"'], 'no separate policy drop for a dropped table');
});

t.test('grants: changes are privilege statements; a new routine starts with EXECUTE for PUBLIC; a recreated view is granted again', async (t) => {
  const items = ptable('items', [col('a')]);
  const base = { tables: [items], routines: [routine('f')] };
  const publicExecute = grant('FUNCTION public.f()', 'PUBLIC', 'EXECUTE');
  const plan = planStatements(model(base), model({ ...base, grants: [grant('TABLE "public"."items"', '"r"', 'SELECT', true), publicExecute] }));
  t.same(sqlOf(plan), ['GRANT SELECT ON TABLE "public"."items" TO "r" WITH GRANT OPTION', 'GRANT EXECUTE ON FUNCTION public.f() TO PUBLIC']);
  t.ok(plan.every((s) => s.privilege));

  const fresh = planStatements(model({}), model({ routines: [routine('g')], grants: [grant('FUNCTION public.g()', '"r"', 'EXECUTE')] }));
  t.same(sqlOf(fresh).slice(-2), ['GRANT EXECUTE ON FUNCTION public.g() TO "r"', 'REVOKE EXECUTE ON FUNCTION public.g() FROM PUBLIC'], 'the default is revoked');

  const option = planStatements(model({ ...base, grants: [grant('TABLE "public"."items"', '"r"', 'SELECT', true)] }), model({ ...base, grants: [grant('TABLE "public"."items"', '"r"', 'SELECT')] }));
  t.same(sqlOf(option), ['REVOKE GRANT OPTION FOR SELECT ON TABLE "public"."items" FROM "r"']);

  const v = (definition: string) => model({ tables: [items], views: [pview('v', ['"public"."items"'], { definition })], grants: [grant('TABLE "public"."v"', '"r"', 'SELECT')] });
  const redefined = planStatements(v(' SELECT 1 AS a'), v(' SELECT 2 AS a'));
  t.same(sqlOf(redefined), ['DROP VIEW "public"."v"', 'CREATE VIEW "public"."v" AS\n SELECT 2 AS a', 'GRANT SELECT ON TABLE "public"."v" TO "r"']);
  t.same(planStatements(v(' SELECT 1 AS a'), model({ tables: [items] })).map((s) => s.sql), ['DROP VIEW "public"."v"'], 'no revoke on a dropped view');
});

t.test('comments are set last, set again on a recreated object, and removed only where the object stays', async (t) => {
  const base = { tables: [ptable('t', [col('a')])], views: [pview('v', ['"public"."t"'])] };
  const comments = [{ target: 'VIEW "public"."v"', text: "it's a view" }, { target: 'COLUMN "public"."t"."a"', text: 'a' }];
  const set = planStatements(model(base), model({ ...base, comments }));
  t.same(sqlOf(set), [`COMMENT ON VIEW "public"."v" IS 'it''s a view'`, `COMMENT ON COLUMN "public"."t"."a" IS 'a'`]);
  t.notOk(set.some((s) => s.privilege || s.destructive));
  const retyped = { tables: [ptable('t', [col('a', 'bigint')])], views: base.views };
  const again = planStatements(model({ ...base, comments }), model({ ...retyped, comments }));
  t.same(sqlOf(again).slice(-1), [`COMMENT ON VIEW "public"."v" IS 'it''s a view'`], 'the recreated view gets its comment back; the column kept its own');
  t.same(sqlOf(planStatements(model({ ...base, comments }), model(base))).sort(), ['COMMENT ON COLUMN "public"."t"."a" IS NULL', 'COMMENT ON VIEW "public"."v" IS NULL']);
  t.same(sqlOf(planStatements(model({ ...base, comments }), model({}))), ['DROP VIEW "public"."v"', 'DROP TABLE "public"."t"'], 'a dropped object takes its comment');
});

t.test('partitions: parents first, the parent index reaches every partition, a changed bound remakes the partition', async (t) => {
  const parent = ptable('events', [col('a')], { partitionBy: 'RANGE (a)', indexes: [{ name: 'events_a', definition: 'CREATE INDEX events_a ON ONLY public.events USING btree (a)', unique: false, statistics: [] }] });
  const part = (bound: string) => ptable('events_1', [col('a')], { partitionOf: { parent: parent.key, bound } });
  const plan = planStatements(model({}), model({ tables: [part('FOR VALUES FROM (1) TO (10)'), parent] }));
  t.same(sqlOf(plan), [
    'CREATE TABLE "public"."events" (\n  "a" integer\n) PARTITION BY RANGE (a)',
    'CREATE TABLE "public"."events_1" PARTITION OF "public"."events" FOR VALUES FROM (1) TO (10)',
    'CREATE INDEX events_a ON public.events USING btree (a)',
  ]);
  const rebound = planStatements(model({ tables: [parent, part('FOR VALUES FROM (1) TO (10)')] }), model({ tables: [parent, part('FOR VALUES FROM (1) TO (20)')] }));
  t.same(rebound.map((s) => [s.sql, s.destructive ?? null]), [
    ['DROP TABLE "public"."events_1"', 'drop_table'],
    ['CREATE TABLE "public"."events_1" PARTITION OF "public"."events" FOR VALUES FROM (1) TO (20)', null],
  ]);
  t.same(planStatements(model({ tables: [parent, part('DEFAULT')] }), model({ tables: [{ ...parent, columns: [col('a'), col('b')] }, { ...part('DEFAULT'), columns: [col('a'), col('b')] }] }))
    .map((s) => s.sql), ['ALTER TABLE "public"."events" ADD COLUMN "b" integer'], 'a partition takes its columns from its parent');
});

t.test('a partition\'s own index names: made first under their name when the parent\'s index is built, renamed in place otherwise', async (t) => {
  const parentIndex = { name: 'events_a', definition: 'CREATE INDEX events_a ON ONLY public.events USING btree (a)', unique: false, statistics: [] };
  const parent = ptable('events', [col('a')], { partitionBy: 'RANGE (a)', indexes: [parentIndex] });
  const own = (name: string) => ({ name, parent: '"public"."events_a"', definition: `CREATE INDEX ${name} ON public.events_1 USING btree (a)` });
  const part = (name: string) => ptable('events_1', [col('a')], { partitionOf: { parent: parent.key, bound: 'DEFAULT' }, partitionIndexes: [own(name)] });
  t.same(sqlOf(planStatements(model({}), model({ tables: [parent, part('events_1_mine')] }))).slice(2), [
    'CREATE INDEX events_1_mine ON public.events_1 USING btree (a)',
    'CREATE INDEX events_a ON public.events USING btree (a)',
  ], 'the partition\'s index exists before the parent\'s build, which attaches it');
  t.same(sqlOf(planStatements(model({ tables: [parent, part('events_1_a_idx')] }), model({ tables: [parent, part('events_1_mine')] }))),
    ['ALTER INDEX "public"."events_1_a_idx" RENAME TO "events_1_mine"']);
  const second = { name: 'events_b', definition: 'CREATE INDEX events_b ON ONLY public.events USING btree (b)', unique: false, statistics: [] };
  const two = ptable('events', [col('a'), col('b')], { partitionBy: 'RANGE (a)', indexes: [parentIndex, second] });
  const swapped = (x: string, y: string) => ptable('events_1', [col('a'), col('b')], { partitionOf: { parent: parent.key, bound: 'DEFAULT' },
    partitionIndexes: [{ ...own(x) }, { name: y, parent: '"public"."events_b"', definition: `CREATE INDEX ${y} ON public.events_1 USING btree (b)` }] });
  t.same(sqlOf(planStatements(model({ tables: [two, swapped('p', 'q')] }), model({ tables: [two, swapped('q', 'p')] }))), [
    'ALTER INDEX "public"."p" RENAME TO "ptah_renaming_0"',
    'ALTER INDEX "public"."q" RENAME TO "ptah_renaming_1"',
    'ALTER INDEX "public"."ptah_renaming_0" RENAME TO "q"',
    'ALTER INDEX "public"."ptah_renaming_1" RENAME TO "p"',
  ], 'swapped names go through temporary ones');
});

t.test('an index column\'s statistics target: set after the build, changed in place without a rebuild', async (t) => {
  const base = ptable('t', [col('a')]);
  const withStats = (target?: number) => ({ tables: [{ ...base, indexes: [{ ...index('t_a', 't'), statistics: target === undefined ? [] : [{ column: 1, target }] }] }] });
  t.same(sqlOf(planStatements(model({}), model(withStats(3000)))).slice(1), [
    'CREATE INDEX t_a ON public.t USING btree (a)',
    'ALTER INDEX "public"."t_a" ALTER COLUMN 1 SET STATISTICS 3000',
  ]);
  t.same(sqlOf(planStatements(model(withStats(3000)), model(withStats(100)))), ['ALTER INDEX "public"."t_a" ALTER COLUMN 1 SET STATISTICS 100']);
  t.same(sqlOf(planStatements(model(withStats(100)), model(withStats()))), ['ALTER INDEX "public"."t_a" ALTER COLUMN 1 SET STATISTICS -1'], 'back to the default');
});

t.test('materialized views are created with data and their indexes, and recreated whole when anything changes', async (t) => {
  const mv = (indexes: Index[]) => pview('mv', ['"public"."t"'], { materialized: true, indexes });
  const base = { tables: [ptable('t', [col('a')])] };
  const plan = planStatements(model(base), model({ ...base, views: [mv([index('mv_a', 'mv')])] }));
  t.same(sqlOf(plan), ['CREATE MATERIALIZED VIEW "public"."mv" AS\n SELECT 1 AS a\nWITH DATA', 'CREATE INDEX mv_a ON public.mv USING btree (a)']);
  const empty = { ...mv([]), populated: false };
  t.same(sqlOf(planStatements(model(base), model({ ...base, views: [empty] }))), ['CREATE MATERIALIZED VIEW "public"."mv" AS\n SELECT 1 AS a\nWITH NO DATA'],
    'created empty where the desired schema leaves it empty');
  t.same(planStatements(model({ ...base, views: [mv([])] }), model({ ...base, views: [empty] })), [], 'and never emptied or filled afterwards: its data is the application\'s');
  const more = planStatements(model({ ...base, views: [mv([index('mv_a', 'mv')])] }), model({ ...base, views: [mv([index('mv_a', 'mv'), index('mv_b', 'mv')])] }));
  t.same(sqlOf(more)[0], 'DROP MATERIALIZED VIEW "public"."mv"');
  t.equal(more.length, 4);
  t.notOk(more.some((s) => s.destructive), 'a recreated materialized view comes back with its data');
});

t.test('locking: rewrites, scans and blocking builds on existing tables are marked; new tables are not', async (t) => {
  const before = model({ tables: [ptable('t', [col('a'), col('b', 'text')])] });
  const after = model({
    tables: [ptable('t', [col('a', 'bigint', { notNull: true }), col('b', 'text'), col('g', 'integer', { generated: 'a * 2' })], {
      indexes: [index('t_a', 't')], constraints: [{ name: 'b_check', kind: 'check', definition: "CHECK ((b <> ''::text))", references: null }],
    }), ptable('fresh', [col('a')], { indexes: [index('fresh_a', 'fresh')] })],
  });
  const plan = planStatements(before, after);
  const locking = (p: RegExp) => plan[at(t, plan, p)]!.locking ?? null;
  t.equal(locking(/ALTER COLUMN "a" TYPE bigint/), 'table_rewrite');
  t.equal(locking(/ALTER COLUMN "a" SET NOT NULL/), 'full_table_scan');
  t.equal(locking(/ADD COLUMN "g" integer GENERATED ALWAYS AS \(a \* 2\) STORED/), 'table_rewrite');
  t.equal(locking(/ADD CONSTRAINT "b_check"/), 'full_table_scan');
  t.equal(locking(/CREATE INDEX t_a/), 'blocking_index_build');
  t.equal(locking(/CREATE INDEX fresh_a/), null, 'a new table is empty');
  t.equal(locking(/CREATE TABLE "public"."fresh"/), null);
  t.equal(planDocument(plan, DIGESTS).transactional, true, 'a mixed plan runs in a transaction');
});

t.test('a plan of index builds on existing tables runs CONCURRENTLY outside a transaction, and says so', async (t) => {
  const before = model({ tables: [ptable('t', [col('a')])] });
  const plan = planStatements(before, model({ tables: [ptable('t', [col('a')], { indexes: [index('t_a', 't'), { ...index('t_u', 't'), definition: 'CREATE UNIQUE INDEX t_u ON public.t USING btree (a)', unique: true }] })] }));
  const doc = planDocument(plan, DIGESTS);
  t.equal(doc.transactional, false);
  t.same(doc.statements, ['CREATE INDEX CONCURRENTLY t_a ON public.t USING btree (a)', 'CREATE UNIQUE INDEX CONCURRENTLY t_u ON public.t USING btree (a)']);
  t.same(doc.lockingStatements, [{ index: 0, reason: 'concurrent_index_build' }, { index: 1, reason: 'concurrent_index_build' }]);
  t.same(sqlOf(plan), ['CREATE INDEX t_a ON public.t USING btree (a)', 'CREATE UNIQUE INDEX t_u ON public.t USING btree (a)'], 'the proof runs the transactional form');

  const partitioned = model({ tables: [ptable('p', [col('a')], { partitionBy: 'RANGE (a)' })] });
  const onParent = planStatements(partitioned, model({ tables: [ptable('p', [col('a')], { partitionBy: 'RANGE (a)', indexes: [index('p_a', 'p')] })] }));
  t.equal(planDocument(onParent, DIGESTS).transactional, true,
    'a partitioned table cannot be indexed concurrently');
  const privileged = planDocument([{ sql: 'GRANT SELECT ON TABLE "public"."t" TO "r"', privilege: true }], DIGESTS);
  t.same([privileged.privilegeChanging, privileged.privilegeStatements], [true, [0]]);
});

t.test('generated columns: a changed expression is a new column; the fingerprint covers every kind', async (t) => {
  const m = (generated: string) => model({ tables: [ptable('t', [col('a'), col('g', 'integer', { generated })])] });
  t.same(sqlOf(planStatements(m('a * 2'), m('a * 3'))), ['ALTER TABLE "public"."t" DROP COLUMN "g"', 'ALTER TABLE "public"."t" ADD COLUMN "g" integer GENERATED ALWAYS AS (a * 3) STORED']);
  const kinds: Partial<SchemaModel>[] = [
    { extensions: [{ name: 'x', schema: 'public', version: '1' }] }, { enums: [{ key: 'public.e', schema: 'public', values: [] }] },
    { domains: [{ key: 'public.d', type: 'integer', collation: null, notNull: false, default: null, checks: [] }] }, { composites: [{ key: 'public.c', attributes: [] }] },
    { routines: [routine('f')] }, { collations: [collation('ci', ICU_CI)] }, { operators: [operator('=~=', 'ci_eq')] }, { triggers: [trigger('tr', 't', 'f')] }, { comments: [{ target: 'SCHEMA "public"', text: 'x' }] },
    { grants: [grant('SCHEMA "public"', '"r"', 'USAGE')] }, { policies: [{ table: '"public"."t"', name: 'p', definition: 'CREATE POLICY' }] },
  ];
  const empty = stateFingerprint(model({}));
  for (const k of kinds) t.not(stateFingerprint(model(k)), empty, `${Object.keys(k)[0]} is in the fingerprint`);
  t.not(stateFingerprint(model({ routines: [aggregate('agg', 'step', '1')] })), stateFingerprint(model({ routines: [aggregate('agg', 'step', '2')] })),
    "an aggregate's definition is in the fingerprint");
  t.same(summarizeDrift(diffModels(model({}), model({ enums: [{ key: 'public.e', schema: 'public', values: ['a'] }], grants: [grant('SCHEMA "public"', '"r"', 'USAGE')] }))).findings,
    [{ category: 'missing_enum', count: 1 }, { category: 'missing_grant', count: 1 }]);
});

t.test('a comment on an object the model does not list one by one (a key\'s index) is planned once, then converges', async (t) => {
  const keyed = { tables: [ptable('t', [col('a')], { constraints: [{ name: 't_pkey', kind: 'primary_key', definition: 'PRIMARY KEY (a)', references: null }] })] };
  const comments = [{ target: 'INDEX "public"."t_pkey"', text: 'the key' }];
  t.same(sqlOf(planStatements(model(keyed), model({ ...keyed, comments }))), [`COMMENT ON INDEX "public"."t_pkey" IS 'the key'`]);
  t.same(planStatements(model({ ...keyed, comments }), model({ ...keyed, comments })), [], 'an unchanged comment plans nothing');
});

t.test('a table made again (its partitioning changes) gets its foreign keys, triggers and policies once, after it exists', async (t) => {
  const parent = ptable('accounts', [col('id')], { constraints: [pk('accounts_pkey', 'id')] });
  const events = (partitionBy: string | null) => ptable('events', [col('account')], { partitionBy, constraints: [fk('events_account_fkey', 'account', parent.key, 'id')] });
  const extras = { triggers: [trigger('events_touch', 'events', 'touch')], policies: [{ table: '"public"."events"', name: 'p', definition: 'CREATE POLICY "p" ON "public"."events"' }] };
  const plan = planStatements(model({ tables: [parent, events(null)], routines: [routine('touch')], ...extras }),
    model({ tables: [parent, events('RANGE (account)')], routines: [routine('touch')], ...extras }));
  t.same(sqlOf(plan), [
    'DROP TABLE "public"."events"',
    'CREATE TABLE "public"."events" (\n  "account" integer\n) PARTITION BY RANGE (account)',
    'ALTER TABLE "public"."events" ADD CONSTRAINT "events_account_fkey" FOREIGN KEY (account) REFERENCES public.accounts(id)',
    'CREATE TRIGGER events_touch BEFORE UPDATE ON public.events FOR EACH ROW EXECUTE FUNCTION public.touch()',
    'CREATE POLICY "p" ON "public"."events"',
  ]);
  t.same(plan.map((s) => s.destructive ?? null)[0], 'drop_table');
});

t.test('two tables made again, one referencing the other: the key between them is dropped once and added once', async (t) => {
  const accounts = (partitionBy: string | null) => ptable('accounts', [col('id')], { partitionBy, constraints: [pk('accounts_pkey', 'id')] });
  const events = (partitionBy: string | null) => ptable('events', [col('account')], { partitionBy, constraints: [fk('events_account_fkey', 'account', '"public"."accounts"', 'id')] });
  const plan = sqlOf(planStatements(model({ tables: [accounts(null), events(null)] }), model({ tables: [accounts('HASH (id)'), events('HASH (account)')] })));
  t.equal(plan.filter((s) => / DROP CONSTRAINT "events_account_fkey"$/.test(s)).length, 1, plan.join('\n'));
  t.equal(plan.filter((s) => / ADD CONSTRAINT "events_account_fkey" /.test(s)).length, 1, plan.join('\n'));
  t.ok(plan.findIndex((s) => s.startsWith('ALTER TABLE "public"."events" ADD CONSTRAINT "events_account_fkey"')) > plan.findIndex((s) => s.includes('ADD CONSTRAINT "accounts_pkey"')));
});

t.test('inheritance: a child is made with its own columns INHERITS its parents, after them, and dropped before them', async (t) => {
  const item = ptable('item', [col('id'), col('name', 'text')], { constraints: [{ name: 'item_name', kind: 'check', definition: "CHECK ((name <> ''::text))", references: null }] });
  const book = ptable('book', [col('isbn', 'text')], { inherits: [item.key] });
  const ebook = ptable('ebook', [col('url', 'text')], { inherits: [book.key] });
  const tagged = ptable('tagged', [col('tags', 'text[]')]);
  const both = ptable('both', [col('tags', 'text[]')], { inherits: [tagged.key, item.key] });
  const plan = planStatements(model({}), model({ tables: [ebook, book, both, item, tagged] }));
  t.same(sqlOf(plan).filter((s) => s.startsWith('CREATE TABLE')).map((s) => s.replace(/\n */g, ' ')), [
    'CREATE TABLE "public"."item" ( "id" integer, "name" text )',
    'CREATE TABLE "public"."tagged" ( "tags" text[] )',
    'CREATE TABLE "public"."book" ( "isbn" text ) INHERITS ("public"."item")',
    'CREATE TABLE "public"."both" ( "tags" text[] ) INHERITS ("public"."tagged", "public"."item")',
    'CREATE TABLE "public"."ebook" ( "url" text ) INHERITS ("public"."book")',
  ], 'parents first by generation, whatever the names; parents in their order');
  t.same(sqlOf(planStatements(model({ tables: [ebook, book, both, item, tagged] }), model({}))).filter((s) => s.startsWith('DROP TABLE')), [
    'DROP TABLE "public"."ebook"', 'DROP TABLE "public"."book"', 'DROP TABLE "public"."both"', 'DROP TABLE "public"."item"', 'DROP TABLE "public"."tagged"',
  ], 'children before their parents');
  const grown = { ...item, columns: [...item.columns, col('price', 'numeric')] };
  t.same(sqlOf(planStatements(model({ tables: [item, book, ebook] }), model({ tables: [grown, book, ebook] }))), ['ALTER TABLE "public"."item" ADD COLUMN "price" numeric'],
    'a column added to a parent reaches its children through PostgreSQL alone');
  t.not(stateFingerprint(model({ tables: [item, book] })), stateFingerprint(model({ tables: [item, { ...book, inherits: [] }] })), 'the parents are in the fingerprint');
});

t.test('inheritance: parents taken and left in place, never a rebuild, and what a child held through a parent stays its own', async (t) => {
  const check = (name: string, definition: string): Constraint => ({ name, kind: 'check', definition, references: null });
  const item = ptable('item', [col('id'), col('name', 'text')], { constraints: [check('item_name', "CHECK ((name <> ''::text))")] });
  const tagged = ptable('tagged', [col('tags', 'text[]')], { constraints: [check('tagged_few', 'CHECK ((cardinality(tags) < 100)) NO INHERIT')] });
  const note = (extra: Partial<Table>) => ptable('note', [col('body', 'text')], extra);

  // Taken: the child's own columns and checks first (INHERIT needs them), then INHERIT; no reason is flagged.
  const taken = planStatements(model({ tables: [item, note({})] }),
    model({ tables: [item, note({ columns: [col('id'), col('name', 'text'), col('body', 'text')], constraints: [check('item_name', "CHECK ((name <> ''::text))")], inherits: [item.key] })] }));
  t.same(taken.map((s) => [s.sql, s.destructive ?? null]), [
    ['ALTER TABLE "public"."note" ADD COLUMN "id" integer', null],
    ['ALTER TABLE "public"."note" ADD COLUMN "name" text', null],
    ['ALTER TABLE "public"."note" ADD CONSTRAINT "item_name" CHECK ((name <> \'\'::text))', null],
    ['ALTER TABLE "public"."note" INHERIT "public"."item"', null],
  ]);
  const owning = { columns: [col('id'), col('name', 'text'), col('body', 'text')], constraints: [check('item_name', "CHECK ((name <> ''::text))")] };
  t.same(summarizeDrift(diffModels(model({ tables: [item, note({ ...owning, inherits: [item.key] })] }), model({ tables: [item, note(owning)] }))).findings,
    [{ category: 'changed_table_parents', count: 1 }], 'a change of parents alone is drift');

  // Left: NO INHERIT first; what it held only through the parent is now its own, dropped when not declared, kept
  // when declared; a NO INHERIT check was never the child's.
  const left = planStatements(model({ tables: [item, tagged, note({ inherits: [item.key, tagged.key] })] }),
    model({ tables: [item, tagged, note({ columns: [col('body', 'text'), col('id')], inherits: [] })] }));
  t.same(left.map((s) => [s.sql, s.destructive ?? null]), [
    ['ALTER TABLE "public"."note" NO INHERIT "public"."item"', null],
    ['ALTER TABLE "public"."note" NO INHERIT "public"."tagged"', null],
    ['ALTER TABLE "public"."note" DROP CONSTRAINT "item_name"', null],
    ['ALTER TABLE "public"."note" DROP COLUMN "name"', 'drop_column'],
    ['ALTER TABLE "public"."note" DROP COLUMN "tags"', 'drop_column'],
  ]);

  // A parent that goes: its children that stay leave it before the drop.
  const dropped = sqlOf(planStatements(model({ tables: [item, note({ inherits: [item.key] })] }),
    model({ tables: [note({ columns: [col('id'), col('name', 'text'), col('body', 'text')], constraints: [check('item_name', "CHECK ((name <> ''::text))")] })] })));
  t.same(dropped, ['ALTER TABLE "public"."note" NO INHERIT "public"."item"', 'DROP TABLE "public"."item"']);

  // What a child holds through a parent it keeps is never added or dropped on it (PostgreSQL refuses both).
  const inheritedOnly = note({ inherits: [item.key] });
  const declared = note({ columns: [col('id'), col('body', 'text')], inherits: [item.key] });
  t.same(sqlOf(planStatements(model({ tables: [item, inheritedOnly] }), model({ tables: [item, declared] }))), [], 'not added');
  t.same(sqlOf(planStatements(model({ tables: [item, declared] }), model({ tables: [item, inheritedOnly] }))), [], 'not dropped');
  t.same(sqlOf(planStatements(model({ tables: [item, declared] }), model({ tables: [item, note({ inherits: [] })] }))),
    ['ALTER TABLE "public"."note" NO INHERIT "public"."item"', 'ALTER TABLE "public"."note" DROP CONSTRAINT "item_name"',
      'ALTER TABLE "public"."note" DROP COLUMN "id"', 'ALTER TABLE "public"."note" DROP COLUMN "name"'],
    'a declared column is dropped once the parent is left');

  // Another order: the longest start of the desired parents already in order stays, the rest is left and taken again.
  const order = (...parents: Table[]) => model({ tables: [item, tagged, ptable('c', [], { inherits: parents.map((p) => p.key) })] });
  t.same(sqlOf(planStatements(order(item, tagged), order(tagged, item))),
    ['ALTER TABLE "public"."c" NO INHERIT "public"."item"', 'ALTER TABLE "public"."c" INHERIT "public"."item"']);
});
