// Shared by the executor integration tests: a fresh database per test, artifact directories, and running the
// executor either as the runner does (a child process with only EXECUTOR_ENV) or in-process through runCommand.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import pg from 'pg';
import type { ExecutorReport } from '../../src/shared/executor-report.js';
import { EXECUTOR_ENV } from '../../src/shared/runner-env.js';
import { runCommand, type ExecutorCommand } from '../../src/executor/run.js';
import { createTestDatabase, sharedPostgresUrl } from '../../tools/stack/postgres.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const COORDINATION_DIGEST = `sha256:${'c0'.repeat(32)}`;

export type ExecutorEnv = Partial<Record<keyof typeof EXECUTOR_ENV, string>>;
/** What the helpers need of a test: somewhere to put their clean-up (a benchmark passes its own). */
export type Teardown = Pick<Test, 'teardown'>;

export function envFor(values: ExecutorEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(values)) if (value !== undefined) env[EXECUTOR_ENV[key as keyof typeof EXECUTOR_ENV]] = value;
  return env;
}

export interface ProcessRun<R> {
  code: number | null;
  report: R;
  stdout: string;
  stderr: string;
}

/** Runs `node --import tsx src/executor/main.ts <command>` with exactly the given EXECUTOR_ENV values. */
export function runExecutorProcess<R extends ExecutorReport>(command: ExecutorCommand, values: ExecutorEnv): Promise<ProcessRun<R>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/executor/main.ts', command], { cwd: REPO, env: envFor(values) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.on('error', reject);
    child.on('close', (code) => {
      const lines = stdout.split('\n').filter((l) => l !== '');
      if (lines.length !== 1) {
        reject(new Error(`executor ${command} printed ${lines.length} lines (exit ${code}): ${stdout}\nstderr: ${stderr}`));
        return;
      }
      resolve({ code, report: JSON.parse(lines[0]!) as R, stdout, stderr });
    });
  });
}

/** The same command, in-process: for the many refusal cases where process start-up adds nothing. */
export async function runExecutor<R extends ExecutorReport>(command: ExecutorCommand, values: ExecutorEnv): Promise<R> {
  return (await runCommand(command, envFor(values))) as R;
}

export interface Database {
  url: string;
  name: string;
  query<T extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

/** A fresh database for one test, dropped when the test ends. */
export async function freshDatabase(t: Test, prefix: string): Promise<Database> {
  const db = await createTestDatabase(sharedPostgresUrl(), prefix);
  t.teardown(() => db.drop());
  return { url: db.url, name: db.name, query: (sql, params) => queryOnce(db.url, sql, params) };
}

export async function queryOnce<T extends pg.QueryResultRow>(url: string, sql: string, params?: unknown[]): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** A directory holding `files`, removed when the test ends. */
export function artifactDir(t: Teardown, files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'ptah-artifact-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

export function jsonFile(t: Teardown, value: unknown): string {
  return join(artifactDir(t, { 'value.json': JSON.stringify(value) }), 'value.json');
}

export const operationId = (label: string) => `sha256:${randomBytes(32).toString('hex')}#${label}`;

/** Polls `check` until it returns true; the deadline only bounds a broken run, it is never asserted. */
export async function waitFor(what: string, check: () => Promise<boolean>, limitMs = 60_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface RoleDatabase {
  url: string;
  password: string;
  role: string;
  query<T extends Record<string, unknown> = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Databases the role owns (the target, plus any scratch database left behind). */
  ownedDatabases(): Promise<string[]>;
}

/** A fresh database owned by a fresh ordinary role (LOGIN CREATEDB, no superuser), as a real target is; both go when the test ends. */
export async function roleDatabase(t: Teardown, prefix: string): Promise<RoleDatabase> {
  const admin = sharedPostgresUrl();
  const suffix = randomBytes(5).toString('hex');
  const role = `${prefix}_r_${suffix}`;
  const name = `${prefix}_${suffix}`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  await queryOnce(admin, `CREATE ROLE "${role}" LOGIN CREATEDB PASSWORD '${password}'`);
  await queryOnce(admin, `CREATE DATABASE "${name}" OWNER "${role}" TEMPLATE template0`);
  t.teardown(async () => {
    for (const db of await queryOnce<{ datname: string }>(admin, 'SELECT datname FROM pg_database WHERE datdba = (SELECT oid FROM pg_roles WHERE rolname = $1)', [role])) {
      await queryOnce(admin, `DROP DATABASE "${db.datname}" WITH (FORCE)`);
    }
    await queryOnce(admin, `DROP ROLE "${role}"`);
  });
  const url = new URL(admin);
  url.username = role;
  url.password = password;
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    password,
    role,
    query: (sql, params) => queryOnce(url.toString(), sql, params),
    ownedDatabases: async () => (await queryOnce<{ datname: string }>(admin,
      'SELECT datname FROM pg_database WHERE datdba = (SELECT oid FROM pg_roles WHERE rolname = $1) ORDER BY datname', [role])).map((r) => r.datname),
  };
}

/** A database built straight from `sql` by `db`'s role, next to it: what a converged target must read as. */
export async function builtFrom(db: RoleDatabase, label: string, sql: string): Promise<string> {
  const witness = `${new URL(db.url).pathname.slice(1)}_${label}`;
  await db.query(`CREATE DATABASE "${witness}" TEMPLATE template0`);
  const url = new URL(db.url);
  url.pathname = `/${witness}`;
  await queryOnce(url.toString(), sql);
  return url.toString();
}

// An independent witness of a database's schema, read straight from the catalog without the executor's model:
// every fact about the managed schemas (extension members excluded) as one sorted list of lines. Column order
// is not a fact (a column added later lands last); privileges are compared with defaults made explicit.
const MANAGED = `n.nspname NOT IN ('pg_catalog', 'information_schema', 'ptah_migrations') AND n.nspname NOT LIKE 'pg\\_%'`;
const NOT_MEMBER = (catalog: string, oid: string) => `NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = '${catalog}'::regclass AND e.objid = ${oid} AND e.deptype = 'e')`;
const CATALOG_FACTS = `
  WITH rel AS (SELECT c.*, n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE ${MANAGED} AND ${NOT_MEMBER('pg_class', 'c.oid')}),
       pro AS (SELECT p.* FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${MANAGED} AND ${NOT_MEMBER('pg_proc', 'p.oid')}),
       typ AS (SELECT t.* FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE ${MANAGED} AND ${NOT_MEMBER('pg_type', 't.oid')})
  SELECT 'schema ' || n.nspname || ' acl ' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(coalesce(n.nspacl, acldefault('n', n.nspowner))) x), '')
    FROM pg_namespace n WHERE ${MANAGED}
  UNION ALL SELECT 'extension ' || extname || ' ' || extversion || ' in ' || extnamespace::regnamespace::text FROM pg_extension
  UNION ALL SELECT 'relation ' || c.oid::regclass::text || ' kind ' || c.relkind::text || ' rls ' || c.relrowsecurity::text || c.relforcerowsecurity::text
         || ' part ' || coalesce(pg_get_partkeydef(c.oid), '-') || ' bound ' || coalesce(pg_get_expr(c.relpartbound, c.oid), '-')
         || ' acl ' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text)
                                   FROM unnest(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) x), '')
    FROM rel c WHERE c.relkind <> 'i' AND c.relkind <> 'I' AND c.relkind <> 'c'
  UNION ALL SELECT 'column ' || c.oid::regclass::text || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' notnull ' || a.attnotnull
         || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') || ' identity ' || a.attidentity::text || ' generated ' || a.attgenerated::text
    FROM rel c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
  UNION ALL SELECT 'constraint ' || coalesce(con.conrelid::regclass::text, con.contypid::regtype::text) || ' ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
    FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace WHERE ${MANAGED} AND ${NOT_MEMBER('pg_constraint', 'con.oid')}
  UNION ALL SELECT 'index ' || pg_get_indexdef(c.oid) FROM rel c WHERE c.relkind IN ('i', 'I')
  UNION ALL SELECT 'view ' || c.oid::regclass::text || ' ' || pg_get_viewdef(c.oid) FROM rel c WHERE c.relkind IN ('v', 'm')
  UNION ALL SELECT 'sequence ' || s.seqrelid::regclass::text || ' ' || format_type(s.seqtypid, NULL) || ' ' || s.seqstart || ' ' || s.seqincrement || ' '
         || s.seqmin || ' ' || s.seqmax || ' ' || s.seqcache || ' ' || s.seqcycle
         || ' owned ' || coalesce((SELECT d.refobjid::regclass::text || '.' || d.refobjsubid FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                                    AND d.objid = s.seqrelid AND d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')), '-')
    FROM pg_sequence s JOIN rel c ON c.oid = s.seqrelid
  UNION ALL SELECT 'routine ' || pg_get_functiondef(p.oid) || ' acl ' || coalesce((SELECT string_agg(x::text, ',' ORDER BY x::text)
                                   FROM unnest(coalesce(p.proacl, acldefault('f', p.proowner))) x), '')
    FROM pro p WHERE p.prokind IN ('f', 'p')
  UNION ALL SELECT 'trigger ' || pg_get_triggerdef(tg.oid) || ' enabled ' || tg.tgenabled::text FROM pg_trigger tg JOIN rel c ON c.oid = tg.tgrelid WHERE NOT tg.tgisinternal
  UNION ALL SELECT 'policy ' || pol.polrelid::regclass::text || ' ' || pol.polname || ' ' || pol.polpermissive::text || ' ' || pol.polcmd::text || ' '
         || array_to_string(ARRAY(SELECT r::regrole::text FROM unnest(pol.polroles) r ORDER BY 1), ',')
         || ' ' || coalesce(pg_get_expr(pol.polqual, pol.polrelid), '-') || ' ' || coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid), '-')
    FROM pg_policy pol JOIN rel c ON c.oid = pol.polrelid
  UNION ALL SELECT 'enum ' || t.oid::regtype::text || ' ' || array_to_string(ARRAY(SELECT enumlabel FROM pg_enum WHERE enumtypid = t.oid ORDER BY enumsortorder), ',')
    FROM typ t WHERE t.typtype = 'e'
  UNION ALL SELECT 'domain ' || t.oid::regtype::text || ' ' || format_type(t.typbasetype, t.typtypmod) || ' ' || t.typnotnull || ' ' || coalesce(t.typdefault, '-')
    FROM typ t WHERE t.typtype = 'd'
  UNION ALL SELECT 'attribute ' || t.oid::regtype::text || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
    FROM typ t JOIN pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped WHERE t.typtype = 'c' AND (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'
  UNION ALL SELECT 'comment ' || pg_describe_object(d.classoid, d.objoid, d.objsubid) || ' = ' || d.description FROM pg_description d
   WHERE d.classoid <> 'pg_extension'::regclass AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = d.classoid AND e.objid = d.objoid AND e.deptype = 'e')
     AND (d.classoid = 'pg_namespace'::regclass
          OR (pg_identify_object(d.classoid, d.objoid, d.objsubid)).schema NOT IN ('pg_catalog', 'information_schema', 'ptah_migrations'))`;

export async function catalogFacts(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`SET search_path = ''`);
    const { rows } = await client.query<{ fact: string }>(`SELECT fact FROM (${CATALOG_FACTS}) facts(fact) ORDER BY 1`);
    return rows.map((r) => r.fact);
  } finally {
    await client.end();
  }
}

/**
 * `pg_dump --schema-only` of the managed schemas, as a sorted multiset of lines: a witness that shares nothing with
 * the executor. Comments, session settings and blank lines go; so does the order of lines (a column added later is
 * printed last, and the engine never reorders columns) with the comma that order puts at a line's end, and pg_dump's
 * own meta-commands, and the order of storage parameters in a `WITH (…)` list (which means nothing). Owners are left
 * out (--no-owner): the executor never changes them.
 */
export async function schemaDump(url: string): Promise<string[]> {
  const { stdout, code, stderr } = await new Promise<{ stdout: string; stderr: string; code: number | null }>((resolve, reject) => {
    const child = spawn('pg_dump', ['--schema-only', '--no-owner', '--exclude-schema=ptah_migrations', `--dbname=${url}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString(); });
    child.on('error', reject);
    child.on('close', (exit) => resolve({ stdout: out, stderr: err, code: exit }));
  });
  if (code !== 0) throw new Error(`pg_dump exited ${code}: ${stderr}`);
  return stdout.split('\n')
    // pg_dump's own psql meta-commands (\restrict carries a random key per run) are not the schema.
    .filter((line) => line.trim() !== '' && !line.startsWith('--') && !line.startsWith('\\') && !/^SET |^SELECT pg_catalog\.set_config/.test(line))
    .map((line) => line.replace(/,$/, '').replace(/WITH \(([^()]*)\)/g, (_, list: string) => `WITH (${list.split(', ').sort().join(', ')})`))
    .sort();
}
