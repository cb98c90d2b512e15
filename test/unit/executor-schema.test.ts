import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutorFailure, redact, registerUrlSecrets } from '../../src/executor/failure.js';
import { diffModels, summarizeDrift } from '../../src/executor/schema/diff.js';
import { stateFingerprint, type Column, type Constraint, type SchemaModel, type Table, type View, type Sequence } from '../../src/executor/schema/model.js';
import { planStatements, type PlannedStatement } from '../../src/executor/schema/statements.js';
import { readPlanDocument } from '../../src/executor/schema/commands.js';
import { realmLockKey } from '../../src/shared/realm-lock-key.js';

const seqOptions = { start: '1', increment: '1', min: '1', max: '2147483647', cache: '1', cycle: false };
const col = (name: string, type = 'integer', extra: Partial<Column> = {}): Column => ({ name, type, notNull: false, default: null, identity: null, ...extra });
const pk = (name: string, columns: string): Constraint => ({ name, kind: 'primary_key', definition: `PRIMARY KEY (${columns})`, references: null });
const unique = (name: string, columns: string): Constraint => ({ name, kind: 'unique', definition: `UNIQUE (${columns})`, references: null });
const fk = (name: string, column: string, table: string, target: string): Constraint =>
  ({ name, kind: 'foreign_key', definition: `FOREIGN KEY (${column}) REFERENCES ${table.replace(/"/g, '')}(${target})`, references: table });
const table = (schema: string, name: string, columns: Column[], constraints: Constraint[] = []): Table =>
  ({ key: `"${schema}"."${name}"`, schema, name, columns, constraints, indexes: [] });
const view = (name: string, definition: string, dependsOn: string[]): View => ({ key: `"public"."${name}"`, schema: 'public', name, definition, dependsOn });
const sequence = (name: string, ownedBy: Sequence['ownedBy'] = null): Sequence =>
  ({ key: `"public"."${name}"`, schema: 'public', name, type: 'integer', options: seqOptions, ownedBy });
const model = (parts: Partial<SchemaModel>): SchemaModel => ({ schemas: ['public'], tables: [], views: [], sequences: [], ...parts });

const sqlOf = (plan: PlannedStatement[]) => plan.map((s) => s.sql);
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
  const identity = { generation: 'always' as const, options: seqOptions };
  const plain = model({ tables: [table('public', 't', [col('id')])] });
  const withIdentity = model({ tables: [table('public', 't', [col('id', 'integer', { notNull: true, identity })])] });
  t.same(sqlOf(planStatements(plain, withIdentity)), [
    'ALTER TABLE "public"."t" ALTER COLUMN "id" SET NOT NULL',
    'ALTER TABLE "public"."t" ALTER COLUMN "id" ADD GENERATED ALWAYS AS IDENTITY (START WITH 1 INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 CACHE 1 NO CYCLE)',
  ]);
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
    destructiveStatements: [], actualStateFingerprint: digest, desiredSchemaDigest: digest, desiredStateFingerprint: digest,
  };
  const read = (doc: unknown) => {
    const path = join(dir, 'plan.json');
    writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
    return readPlanDocument(path);
  };
  t.same(read(good), good);
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
