// observe, plan and apply of a declarative schema against a real PostgreSQL. The main cases connect as an
// ordinary role (CREATEDB, no superuser), as a real target would, and own a fresh database per test.
import t, { type Test } from 'tap';
import pg from 'pg';
import { realmLockKey } from '../../src/shared/realm-lock-key.js';
import type { ApplyReport, ObserveReport, PlanReport, SchemaPlanDocument } from '../../src/shared/executor-report.js';
import type { ClassifiedPlanDocument } from '../../src/executor/schema/commands.js';
import {
  COORDINATION_DIGEST, artifactDir, freshDatabase, jsonFile, operationId, queryOnce, roleDatabase, runExecutor, runExecutorProcess, type ExecutorEnv,
} from './executor-helpers.js';

const schemaDir = (t: Test, sql: string) => artifactDir(t, { 'schema.sql': sql });
const applyEnv = (t: Test, url: string, plan: SchemaPlanDocument, op: string): ExecutorEnv =>
  ({ dbUrl: url, planFile: jsonFile(t, plan), operationId: op, coordinationDigest: COORDINATION_DIGEST });

async function planFor(url: string, dir: string, extra: ExecutorEnv = {}): Promise<PlanReport> {
  return runExecutor<PlanReport>('plan', { dbUrl: url, artifactDir: dir, ...extra });
}

const DESIRED = `
CREATE SCHEMA app;
CREATE TABLE app.users (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE app.orders (
  id serial PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES app.users (id) ON DELETE CASCADE,
  qty integer NOT NULL DEFAULT 1 CHECK (qty > 0)
);
CREATE INDEX orders_user_idx ON app.orders (user_id) WHERE qty > 1;
CREATE VIEW app.order_emails AS SELECT o.id, u.email FROM app.orders o JOIN app.users u ON u.id = o.user_id;
`;

t.test('observe, plan and apply round-trip and converge: a second plan has no changes', async (t) => {
  const db = await roleDatabase(t, 'exec_rt');
  const dir = schemaDir(t, DESIRED);

  const observed = await runExecutorProcess<ObserveReport>('observe', { dbUrl: db.url, artifactDir: dir });
  t.equal(observed.code, 0, observed.stderr);
  t.equal(observed.report.drift, true);
  t.same(observed.report.findings, [
    { category: 'missing_schema', count: 1 }, { category: 'missing_sequence', count: 1 }, { category: 'missing_table', count: 2 }, { category: 'missing_view', count: 1 },
  ]);
  t.notMatch(observed.stdout, /users|orders|email/, 'the report names no object');

  const planned = await runExecutorProcess<PlanReport>('plan', { dbUrl: db.url, artifactDir: dir });
  t.equal(planned.code, 0, planned.stderr);
  t.equal(planned.report.outcome, 'Changes');
  const plan = planned.report.plan!;
  t.equal(plan.statementCount, plan.statements.length);
  t.equal(plan.destructive, false);
  t.equal(plan.actualStateFingerprint, observed.report.actualStateFingerprint, 'plan and observe read the same state');
  t.same(await db.ownedDatabases(), [(new URL(db.url)).pathname.slice(1)], 'the scratch database was dropped');
  t.same(await db.query("SELECT 1 FROM pg_namespace WHERE nspname = 'app'"), [], 'planning changed nothing in the target');

  const op = operationId('apply');
  const applied = await runExecutorProcess<ApplyReport>('apply', applyEnv(t, db.url, plan, op));
  t.equal(applied.code, 0, applied.stderr);
  // Every report names the physical database it opened (executor-physical-identity.test.ts holds it to that).
  const identity = { physicalIdentityDigest: observed.report.physicalIdentityDigest, physicalIdentityKind: 'system-identifier' };
  t.same(applied.report, { command: 'apply', outcome: 'applied', planContentDigest: planned.report.planContentDigest, statementsExecuted: plan.statementCount, ...identity });
  t.same(await db.query('SELECT operation_id, plan_content_digest, statement_count FROM ptah_migrations.schema_applies'),
    [{ operation_id: op, plan_content_digest: planned.report.planContentDigest, statement_count: plan.statementCount }], 'the target records who applied what');

  await db.query("INSERT INTO app.users (email) VALUES ('a@example.test')");
  await db.query('INSERT INTO app.orders (user_id, qty) SELECT id, 2 FROM app.users');
  t.same(await db.query('SELECT email FROM app.order_emails'), [{ email: 'a@example.test' }], 'the applied schema works');

  const second = await runExecutorProcess<PlanReport>('plan', { dbUrl: db.url, artifactDir: dir });
  t.same(second.report, { command: 'plan', outcome: 'NoChanges', actualStateFingerprint: plan.desiredStateFingerprint, ...identity });
  const again = await runExecutor<ObserveReport>('observe', { dbUrl: db.url, artifactDir: dir });
  t.equal(again.drift, false);
  t.same(again.findings, []);
  t.equal(again.actualStateFingerprint, plan.desiredStateFingerprint, 'the bookkeeping schema is not part of the state');

  const replay = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, plan, operationId('replay')));
  t.equal(replay.outcome, 'failed');
  t.equal(replay.error?.code, 'target_changed', 'an applied plan cannot be applied twice');
});

t.test('a change to an existing schema converges, with destructive statements flagged and reasons given', async (t) => {
  const db = await roleDatabase(t, 'exec_change');
  await db.query(`${DESIRED}
    CREATE TABLE app.legacy (id int);
    ALTER TABLE app.orders ADD COLUMN note text;
    INSERT INTO app.users (email) VALUES ('a@example.test'), ('b@example.test');
    INSERT INTO app.orders (user_id, qty) SELECT id, 3 FROM app.users;`);
  const dir = schemaDir(t, `
    CREATE SCHEMA app;
    CREATE TABLE app.users (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, email varchar(320) NOT NULL UNIQUE, created_at timestamptz DEFAULT now());
    CREATE TABLE app.orders (
      id bigint PRIMARY KEY, user_id bigint NOT NULL REFERENCES app.users (id), qty bigint NOT NULL DEFAULT 1 CHECK (qty > 0 AND qty < 100),
      placed_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX orders_user_idx ON app.orders (user_id);
    CREATE VIEW app.order_emails AS SELECT o.id, u.email, o.qty FROM app.orders o JOIN app.users u ON u.id = o.user_id;`);
  const report = await planFor(db.url, dir);
  t.equal(report.outcome, 'Changes', JSON.stringify(report.error));
  const plan = report.plan!;
  t.equal(plan.destructive, true);
  const reasons = plan.destructiveStatements.map((d) => d.reason);
  for (const reason of ['drop_table', 'drop_column', 'change_column_type']) t.ok(reasons.includes(reason), `flags ${reason}`);
  const shapes: Record<string, RegExp> = {
    drop_table: /^DROP TABLE /, drop_column: / DROP COLUMN /, drop_sequence: /^DROP SEQUENCE /, change_column_type: / ALTER COLUMN "\w+" TYPE /,
  };
  for (const d of plan.destructiveStatements) t.match(plan.statements[d.index], shapes[d.reason] ?? /^$/, `statement ${d.index} is a ${d.reason}`);
  t.notOk(reasons.includes('drop_view'), 'a view that comes back is not a destructive drop');

  const applied = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, plan, operationId('change')));
  t.equal(applied.outcome, 'applied', JSON.stringify(applied.error));
  t.same(await db.query('SELECT count(*)::int AS n FROM app.order_emails'), [{ n: 2 }], 'data survived');
  t.equal((await planFor(db.url, dir)).outcome, 'NoChanges');

  const additive = await planFor(db.url, schemaDir(t, `
    CREATE SCHEMA app;
    CREATE TABLE app.users (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, email varchar(320) NOT NULL UNIQUE, created_at timestamptz DEFAULT now(), name text);
    CREATE TABLE app.orders (
      id bigint PRIMARY KEY, user_id bigint NOT NULL REFERENCES app.users (id), qty bigint NOT NULL DEFAULT 1 CHECK (qty > 0 AND qty < 100),
      placed_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX orders_user_idx ON app.orders (user_id);
    CREATE VIEW app.order_emails AS SELECT o.id, u.email, o.qty FROM app.orders o JOIN app.users u ON u.id = o.user_id;`));
  t.equal(additive.outcome, 'Changes');
  t.equal(additive.plan?.destructive, false, 'adding a column is not destructive');
  t.same(additive.plan?.destructiveStatements, []);
});

t.test('a target changed after planning is refused at apply and nothing changes', async (t) => {
  const db = await roleDatabase(t, 'exec_moved');
  await db.query('CREATE TABLE t (a int)');
  const report = await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int, b int);'));
  t.equal(report.outcome, 'Changes');
  await db.query('CREATE TABLE someone_elses (x int)');
  const applied = await runExecutorProcess<ApplyReport>('apply', applyEnv(t, db.url, report.plan!, operationId('moved')));
  t.equal(applied.code, 1);
  t.equal(applied.report.outcome, 'failed');
  t.equal(applied.report.error?.code, 'target_changed');
  t.equal(applied.report.statementsExecuted, 0);
  t.same(await db.query("SELECT column_name FROM information_schema.columns WHERE table_name = 't' ORDER BY 1"), [{ column_name: 'a' }]);
});

t.test('apply waits for the realm lock at most PTAH_LOCK_TIMEOUT_MS, then refuses having changed nothing', async (t) => {
  const db = await roleDatabase(t, 'exec_locked');
  const report = await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int);'));
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('SELECT pg_advisory_lock($1::bigint)', [realmLockKey(COORDINATION_DIGEST)]);
  const applied = await runExecutor<ApplyReport>('apply', { ...applyEnv(t, db.url, report.plan!, operationId('locked')), lockTimeoutMs: '200' });
  t.equal(applied.outcome, 'failed');
  t.equal(applied.error?.code, 'lock_timeout');
  t.same(await db.query("SELECT to_regclass('public.t') IS NULL AS absent"), [{ absent: true }]);
  await holder.query('SELECT pg_advisory_unlock_all()');
  t.equal((await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, report.plan!, operationId('free')))).outcome, 'applied', 'and applies once the lock is free');
});

t.test('a statement that fails at apply rolls the whole plan back', async (t) => {
  const db = await roleDatabase(t, 'exec_rollback');
  await db.query('CREATE TABLE t (a int); INSERT INTO t VALUES (1);');
  const report = await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int, b int, c int NOT NULL);'));
  t.same(report.plan?.statements, ['ALTER TABLE "public"."t" ADD COLUMN "b" integer', 'ALTER TABLE "public"."t" ADD COLUMN "c" integer NOT NULL']);
  const applied = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, report.plan!, operationId('rollback')));
  t.equal(applied.outcome, 'failed');
  t.equal(applied.error?.code, 'statement_failed');
  t.equal(applied.statementsExecuted, 1);
  t.match(applied.error?.message, /statement 2 of 2.*contains null values/);
  t.same(await db.query("SELECT column_name FROM information_schema.columns WHERE table_name = 't'"), [{ column_name: 'a' }], 'column b was rolled back');
  t.same(await db.query("SELECT to_regclass('ptah_migrations.schema_applies') IS NULL AS absent"), [{ absent: true }], 'nothing was recorded');
});

t.test('objects outside the supported set are refused, in the desired schema and in the target', async (t) => {
  const db = await roleDatabase(t, 'exec_unsupported');
  const desiredCases: [string, string, RegExp][] = [
    // Beside an ordinary aggregate, which is modelled and so not named.
    ['ordered-set aggregate', `CREATE AGGREGATE my_sum (int) (SFUNC = int4pl, STYPE = int);
      CREATE FUNCTION pct_step(s float8[], v float8) RETURNS float8[] LANGUAGE sql AS 'SELECT s || v';
      CREATE FUNCTION pct_final(s float8[], p float8) RETURNS float8 LANGUAGE sql AS 'SELECT s[1]';
      CREATE AGGREGATE my_pct (float8 ORDER BY float8) (SFUNC = pct_step, STYPE = float8[], FINALFUNC = pct_final);`,
    /outside the supported set: ordered_set_aggregate \(1\)\. See/],
    ['range type', 'CREATE TYPE floatrange AS RANGE (subtype = float8);', /range_type \(1\)/],
    ['rule', 'CREATE TABLE t (a int); CREATE RULE r AS ON DELETE TO t DO INSTEAD NOTHING;', /rule \(1\)/],
    ['unlogged sequence of its own', 'CREATE UNLOGGED SEQUENCE s;', /unlogged_object \(1\)/],
    ['view options', 'CREATE VIEW v WITH (security_barrier) AS SELECT 1 AS a;', /storage_parameter \(1\)/],
    ['column privilege', `CREATE TABLE t (a int); GRANT SELECT (a) ON t TO "${db.role}";`, /column_privilege \(1\)/],
    ['default privilege', `ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO "${db.role}";`, /default_privilege \(1\)/],
    // Inheritance within the managed schemas is modelled; from a table outside them it is not.
    ['inheritance from a table outside the managed schemas', 'CREATE SCHEMA ptah_migrations; CREATE TABLE ptah_migrations.base (a int); CREATE TABLE t (b int) INHERITS (ptah_migrations.base);',
      /outside the supported set: inheritance_from_unmanaged_table \(1\)\. See/],
    ['disabled trigger', "CREATE TABLE t (a int); CREATE FUNCTION tf() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'; CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION tf(); ALTER TABLE t DISABLE TRIGGER tr;", /disabled_trigger \(1\)/],
    // An operator is modelled; the shell its commutator names, never defined, is not.
    ['shell operator', 'CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq, COMMUTATOR = ====);', /outside the supported set: shell_operator \(1\)\. See/],
    ['operator ownership', 'CREATE ROLE ptah_scratch_owner_probe; CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq); ALTER OPERATOR === (int, int) OWNER TO ptah_scratch_owner_probe;', /ownership \(1\)/],
    ['collation of a composite type\'s attribute', 'CREATE TYPE c AS (a text COLLATE "C");', /composite_attribute_collation \(1\)/],
    ['ownership', 'CREATE ROLE ptah_scratch_owner_probe; CREATE TABLE t (a int); ALTER TABLE t OWNER TO ptah_scratch_owner_probe;', /ownership \(1\)/],
    ['collation ownership', "CREATE ROLE ptah_scratch_owner_probe; CREATE COLLATION c (locale = 'C'); ALTER COLLATION c OWNER TO ptah_scratch_owner_probe;", /ownership \(1\)/],
    ['routine ownership', "CREATE ROLE ptah_scratch_owner_probe; CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'; ALTER FUNCTION f() OWNER TO ptah_scratch_owner_probe;", /ownership \(1\)/],
  ];
  const superuser = await freshDatabase(t, 'exec_unsupported_su');
  for (const [name, sql, kind] of desiredCases) {
    // The ownership case needs CREATEROLE, so every case plans as the superuser; the census is the same.
    const report = await planFor(superuser.url, schemaDir(t, sql));
    t.equal(report.error?.code, 'unsupported_object', name);
    t.match(report.error?.message, /^the desired schema holds/, name);
    t.match(report.error?.message, kind, name);
  }
  t.equal((await planFor(superuser.url, schemaDir(t, 'CREATE TABLE t (a int);'))).outcome, 'Changes', 'the same target plans a supported schema');
  const aggregate = await planFor(superuser.url, schemaDir(t, 'CREATE AGGREGATE my_sum (int) (SFUNC = int4pl, STYPE = int);'));
  t.same(aggregate.plan?.statements, ['SET LOCAL check_function_bodies = off', 'CREATE OR REPLACE AGGREGATE "public"."my_sum"(integer) (SFUNC = int4pl, STYPE = integer)'],
    `an ordinary aggregate is modelled: ${JSON.stringify(aggregate.error)}`);
  const collation = await planFor(superuser.url, schemaDir(t, "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false); CREATE TABLE t (a text COLLATE ci);"));
  t.same(collation.plan?.statements.slice(0, 1), [`CREATE COLLATION "public"."ci" (PROVIDER = icu, LOCALE = 'und-u-ks-level2', DETERMINISTIC = false)`],
    `a collation of the schema's own is modelled: ${JSON.stringify(collation.error)}`);
  const operator = await planFor(superuser.url, schemaDir(t, 'CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq, COMMUTATOR = ===);'));
  t.same(operator.plan?.statements, ['CREATE OPERATOR "public".=== (FUNCTION = int4eq, LEFTARG = integer, RIGHTARG = integer, COMMUTATOR = OPERATOR("public".===))'],
    `an operator over a function is modelled: ${JSON.stringify(operator.error)}`);
  // An extension's own functions, types and operators are the extension's, never refused on their own.
  const withExtension = await planFor(superuser.url, schemaDir(t, 'CREATE EXTENSION citext; CREATE EXTENSION pgcrypto; CREATE TABLE t (a citext);'));
  t.equal(withExtension.outcome, 'Changes', `extensions are modelled: ${JSON.stringify(withExtension.error)}`);

  await db.query("CREATE TYPE span AS RANGE (subtype = float8); CREATE TABLE t (s span);");
  for (const command of ['observe', 'plan'] as const) {
    const report = await runExecutor<ObserveReport | PlanReport>(command, { dbUrl: db.url, artifactDir: schemaDir(t, 'CREATE TABLE t (s text);') });
    t.equal(report.error?.code, 'unsupported_object', command);
    t.match(report.error?.message, /^the target database's managed schemas hold objects outside the supported set: multirange_type \(1\), range_type \(1\)/, command);
  }
});

t.test('the desired schema is built in a scratch database that is always dropped, or in an empty dev database', async (t) => {
  const db = await roleDatabase(t, 'exec_scratch');
  const target = new URL(db.url).pathname.slice(1);
  const broken = await runExecutorProcess<PlanReport>('plan', { dbUrl: db.url, artifactDir: schemaDir(t, 'CREATE TABLE t (a int);\nCREATE TABLE u (b nosuchtype);') });
  t.equal(broken.report.error?.code, 'desired_schema_invalid');
  t.match(broken.report.error?.message, /line 2: type "nosuchtype" does not exist/);
  t.same(await db.ownedDatabases(), [target], 'the scratch database was dropped after the failure');
  const control = await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int); COMMIT; DROP TABLE t;'));
  t.equal(control.error?.code, 'desired_schema_invalid');
  t.match(control.error?.message, /COMMIT is not allowed/);

  const dev = await freshDatabase(t, 'exec_dev');
  const withDev = await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int);'), { devUrl: dev.url });
  t.equal(withDev.outcome, 'Changes', JSON.stringify(withDev.error));
  t.same(await db.ownedDatabases(), [target], 'no scratch database when a dev database is given');
  t.same(await dev.query("SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"), [], 'the dev database is left empty');
  await dev.query('CREATE TABLE leftover (x int)');
  const dirty = await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int);'), { devUrl: dev.url });
  t.equal(dirty.error?.code, 'dev_database_not_empty');
});

t.test('a bad URL or an unreachable server gives a clear error without the password', async (t) => {
  const db = await roleDatabase(t, 'exec_badurl');
  const dir = schemaDir(t, 'CREATE TABLE t (a int);');
  const wrongPassword = new URL(db.url);
  wrongPassword.password = `${db.password}-wrong`;
  const unreachable = new URL(db.url);
  unreachable.port = '1';
  const cases: [string, string, string, RegExp][] = [
    ['wrong password', wrongPassword.toString(), 'connection_failed', /password authentication failed/],
    ['nothing listens', unreachable.toString(), 'connection_failed', /could not connect to the target database: .*ECONNREFUSED/],
    ['not a URL', `host=localhost password=${db.password}`, 'invalid_url', /not a valid URL/],
    ['another scheme', `mysql://u:${db.password}@127.0.0.1/db`, 'invalid_url', /postgres:\/\//],
  ];
  for (const [name, url, code, message] of cases) {
    const run = await runExecutorProcess<ObserveReport>('observe', { dbUrl: url, artifactDir: dir });
    t.equal(run.code, 1, name);
    t.equal(run.report.error?.code, code, name);
    t.match(run.report.error?.message, message, name);
    t.notMatch(run.stdout + run.stderr, db.password, `${name}: no password in the output`);
  }
  const missing = await runExecutorProcess<ObserveReport>('observe', { artifactDir: dir });
  t.same(missing.report.error, { code: 'invalid_input', message: 'PTAH_DB_URL is not set' });
});

t.test('a plan of index builds runs CONCURRENTLY; a build that fails leaves no index behind and changes nothing', async (t) => {
  const db = await roleDatabase(t, 'exec_concurrent');
  await db.query('CREATE TABLE t (a int, b int); INSERT INTO t SELECT i, i % 2 FROM generate_series(1, 100) i;');
  const wanted = 'CREATE TABLE t (a int, b int); CREATE INDEX t_a ON t (a); CREATE UNIQUE INDEX t_b ON t (b);';
  const report = await planFor(db.url, schemaDir(t, wanted));
  const plan = report.plan as ClassifiedPlanDocument;
  t.equal(plan.transactional, false);
  t.same(plan.statements, ['CREATE INDEX CONCURRENTLY t_a ON public.t USING btree (a)', 'CREATE UNIQUE INDEX CONCURRENTLY t_b ON public.t USING btree (b)']);
  const indexes = () => db.query("SELECT indexrelid::regclass::text AS name, indisvalid AS valid FROM pg_index WHERE indrelid = 'public.t'::regclass ORDER BY 1");

  const failed = await runExecutorProcess<ApplyReport>('apply', applyEnv(t, db.url, plan, operationId('dup')));
  t.equal(failed.code, 1);
  t.equal(failed.report.outcome, 'failed');
  t.equal(failed.report.error?.code, 'statement_failed');
  t.match(failed.report.error?.message, /statement 2 of 2 failed: .*could not create unique index.*every index this plan built was dropped again/);
  t.same(await indexes(), [], 'neither the built index nor the invalid one is left');
  t.same(await db.query("SELECT to_regclass('ptah_migrations.schema_applies') IS NULL AS absent"), [{ absent: true }], 'nothing was recorded');

  await db.query('TRUNCATE t; INSERT INTO t VALUES (1, 1), (2, 2);');
  await db.query('CREATE TABLE other (x int)');
  const moved = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, plan, operationId('moved')));
  t.equal(moved.error?.code, 'target_changed', 'a concurrent plan also refuses a target that moved');
  t.same(await indexes(), []);
  await db.query('DROP TABLE other');

  const applied = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, plan, operationId('ok')));
  t.equal(applied.outcome, 'applied', JSON.stringify(applied.error));
  t.same(await indexes(), [{ name: 't_a', valid: true }, { name: 't_b', valid: true }]);
  t.same(await db.query('SELECT statement_count FROM ptah_migrations.schema_applies'), [{ statement_count: 2 }], 'the apply is recorded');
  t.equal((await planFor(db.url, schemaDir(t, wanted))).outcome, 'NoChanges');
});

t.test('a plan that grants, revokes or changes a policy says so, whatever else it does', async (t) => {
  const db = await roleDatabase(t, 'exec_privilege');
  await db.query('CREATE TABLE t (a int)');
  const granted = await planFor(db.url, schemaDir(t, `CREATE TABLE t (a int); GRANT SELECT ON t TO "${db.role}_reader";`));
  t.equal(granted.error?.code, 'desired_schema_invalid', 'a grant to a missing role fails to build, naming nothing secret');
  const plain = (await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int, b int);'))).plan as ClassifiedPlanDocument;
  t.same([plain.privilegeChanging, plain.privilegeStatements], [false, []], 'adding a column changes no privilege');
  const rls = (await planFor(db.url, schemaDir(t, 'CREATE TABLE t (a int, b int); ALTER TABLE t ENABLE ROW LEVEL SECURITY;'))).plan as ClassifiedPlanDocument;
  t.equal(rls.privilegeChanging, true);
  t.same(rls.privilegeStatements.map((i) => rls.statements[i]), ['ALTER TABLE "public"."t" ENABLE ROW LEVEL SECURITY']);
});

// The catalog witness (src/executor/schema/catalog.ts): what the model cannot see is never reported converged.
const PARTITIONED = `
CREATE TABLE public.events (id bigint, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE public.events_2026 PARTITION OF public.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
`;

t.test('a difference only the catalog shows: no plan says NoChanges, observe reports drift, and nothing is touched', async (t) => {
  const db = await roleDatabase(t, 'exec_unmodelled');
  const dir = schemaDir(t, PARTITIONED);
  await db.query(PARTITIONED);
  const converged = await planFor(db.url, dir);
  t.equal(converged.outcome, 'NoChanges', 'fixture: built from the desired schema, the target converges');
  t.equal((await runExecutor<ObserveReport>('observe', { dbUrl: db.url, artifactDir: dir })).drift, false, 'fixture: and has no drift');
  // The partition's key index under another name: the model keeps a partition's key with its parent's key.
  await db.query('ALTER INDEX public.events_2026_pkey RENAME TO events_2026_renamed');
  const before = await db.query("SELECT relname FROM pg_class WHERE relname LIKE 'events%' ORDER BY 1");

  const planned = await planFor(db.url, dir);
  t.equal(planned.outcome, undefined, 'no outcome: neither NoChanges nor a plan');
  t.equal(planned.error?.code, 'unmodelled_difference');
  t.match(planned.error?.message, /events_2026_renamed/, 'the message shows the fact only the target holds');
  t.match(planned.error?.message, /events_2026_pkey/, 'and the one only the desired schema holds');
  const observed = await runExecutor<ObserveReport>('observe', { dbUrl: db.url, artifactDir: dir });
  t.equal(observed.drift, true, 'observe reports drift');
  t.same(observed.findings?.map((f) => f.category), ['unmodelled_difference'], 'as a difference the model does not see');
  // Every fact naming the index differs (the index, its columns, the key that uses it): as many as the plan counted.
  const counted = [...(planned.error?.message ?? '').matchAll(/(\d+) fact\(s\)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  t.ok(counted >= 2, `the plan counted ${counted} differing facts`);
  t.equal(observed.findings?.[0]?.count, counted, 'observe counts the same facts');
  t.same(await db.query("SELECT relname FROM pg_class WHERE relname LIKE 'events%' ORDER BY 1"), before, 'nothing was changed');
});

t.test('inheritance: a column a child declares and one it only inherits differ in the catalog; a parent outside the managed schemas is refused', async (t) => {
  const db = await roleDatabase(t, 'exec_inherit');
  const declared = 'CREATE TABLE public.p (a int); CREATE TABLE public.c (a int, b int) INHERITS (public.p);';
  await db.query(declared);
  t.equal((await planFor(db.url, schemaDir(t, declared))).outcome, 'NoChanges', 'fixture: built from the desired schema, the target converges');
  // PostgreSQL cannot make a declared column inherited only, so the model leaves it; the witness still sees it.
  const inheritedOnly = await planFor(db.url, schemaDir(t, 'CREATE TABLE public.p (a int); CREATE TABLE public.c (b int) INHERITS (public.p);'));
  t.equal(inheritedOnly.error?.code, 'unmodelled_difference');
  t.match(inheritedOnly.error?.message, /column public\.c\.a integer .* local true inherited 1/, 'the target declares it');
  t.match(inheritedOnly.error?.message, /column public\.c\.a integer .* local false inherited 1/, 'the desired schema only inherits it');

  await db.query('CREATE SCHEMA ptah_migrations; CREATE TABLE ptah_migrations.base (z int); ALTER TABLE public.c ADD COLUMN z int; ALTER TABLE public.c INHERIT ptah_migrations.base');
  const refused = await planFor(db.url, schemaDir(t, declared));
  t.equal(refused.error?.code, 'unsupported_object');
  t.match(refused.error?.message, /^the target database's managed schemas hold objects outside the supported set: inheritance_from_unmanaged_table \(1\)\. See/);
});

t.test('inheritance: another parent order, and a parent whose columns the child lacks, are refused by the proof unless the child declares them', async (t) => {
  const db = await roleDatabase(t, 'exec_inherit_order');
  await db.query('CREATE TABLE public.p (a int); CREATE TABLE public.q (z int); CREATE TABLE public.c (b int) INHERITS (public.p, public.q);');
  // NO INHERIT p makes c.a c's own and INHERIT p leaves it so, where the desired schema only inherits it.
  const reordered = await planFor(db.url, schemaDir(t, 'CREATE TABLE public.p (a int); CREATE TABLE public.q (z int); CREATE TABLE public.c (b int) INHERITS (public.q, public.p);'));
  t.equal(reordered.error?.code, 'plan_verification_failed', 'another order without the columns declared');
  const declared = await planFor(db.url, schemaDir(t, 'CREATE TABLE public.p (a int); CREATE TABLE public.q (z int); CREATE TABLE public.c (a int, b int) INHERITS (public.q, public.p);'));
  t.same(declared.plan?.statements, ['ALTER TABLE "public"."c" NO INHERIT "public"."p"', 'ALTER TABLE "public"."c" INHERIT "public"."p"'],
    `another order with them declared: ${JSON.stringify(declared.error)}`);

  const withChild = 'CREATE TABLE public.p (a int); CREATE TABLE public.q (z int); CREATE TABLE public.c (b int) INHERITS (public.p, public.q); CREATE TABLE public.r (y int); CREATE TABLE public.d (x int) INHERITS (public.r);';
  const made = await planFor(db.url, schemaDir(t, withChild));
  t.equal(made.outcome, 'Changes', `a new child of a new parent is made with INHERITS: ${JSON.stringify(made.error)}`);
  await db.query('CREATE TABLE public.r (y int); CREATE TABLE public.d (x int);');
  const lacking = await planFor(db.url, schemaDir(t, withChild));
  t.equal(lacking.error?.code, 'plan_verification_failed', 'an existing table taking a parent whose column it lacks');
  t.match(lacking.error?.message, /child table is missing column "y"/);
});

t.test('an Apply whose result the catalog does not read as promised is rolled back', async (t) => {
  const db = await roleDatabase(t, 'exec_catalog_apply');
  const planned = await planFor(db.url, schemaDir(t, 'CREATE TABLE public.t (id integer PRIMARY KEY);'));
  const plan = planned.plan as ClassifiedPlanDocument;
  t.ok(plan, 'fixture: a plan');
  // The plan promises another catalog than its statements make: the model still reads as promised.
  const other = (await planFor(db.url, schemaDir(t, 'CREATE TABLE public.t (id integer PRIMARY KEY); COMMENT ON TABLE public.t IS $$x$$;'))).plan as ClassifiedPlanDocument;
  t.not(other.desiredCatalogDigest, plan.desiredCatalogDigest, 'fixture: the two desired schemas differ in the catalog');
  const applied = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, { ...plan, desiredCatalogDigest: other.desiredCatalogDigest }, operationId('catalog')));
  t.equal(applied.outcome, 'failed');
  t.equal(applied.error?.code, 'convergence_failed');
  t.same(await db.query("SELECT 1 FROM pg_class WHERE relname = 't'"), [], 'the transaction was rolled back');
  const honest = await runExecutor<ApplyReport>('apply', applyEnv(t, db.url, plan, operationId('honest')));
  t.equal(honest.outcome, 'applied', 'the plan as written applies');
});

t.test('a reading does not wait behind a session that holds a keyed table exclusively', async (t) => {
  // The model's reading never waited here; the catalog witness must not either (pg_get_indexdef would).
  const db = await roleDatabase(t, 'exec_locked');
  const sql = 'CREATE TABLE public.products (id integer PRIMARY KEY, name text UNIQUE);';
  await db.query(sql);
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('BEGIN');
  await holder.query('LOCK TABLE public.products IN ACCESS EXCLUSIVE MODE');
  const planned = await Promise.race([
    planFor(db.url, schemaDir(t, sql)),
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 20_000)),
  ]);
  await holder.query('ROLLBACK');
  t.equal(planned?.outcome, 'NoChanges', 'the plan finished while the table was locked');
});
