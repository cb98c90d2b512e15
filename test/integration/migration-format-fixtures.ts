// One schema written as each tool's migration directory, in the tool's documented shape, with down sections that
// leave a mark if they ever run; and the witness: a database psql builds from the up SQL the fixture wrote (never
// from a reading of the files). Shared by the executor tests and the PtahMigration ones on the control plane.
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import type { MigrationFormat } from '../../src/shared/migration-format.js';
import { artifactDir, freshDatabase, type Database } from './executor-helpers.js';

/** One migration: its statements (up), and whether one of them cannot run in a transaction. */
export interface Step {
  version: number;
  name: string;
  up: string[];
  noTransaction?: boolean;
}

export const STEPS: Step[] = [
  { version: 1, name: 'users', up: ['CREATE TABLE users (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text NOT NULL)'] },
  {
    version: 2,
    name: 'lower_email',
    up: [
      'CREATE FUNCTION lower_email() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n  NEW.email := lower(NEW.email);\n  RETURN NEW;\nEND;\n$$',
      'CREATE TRIGGER users_lower BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION lower_email()',
      "INSERT INTO users (email) VALUES ('A@Example.org'), ('semi;colon@example.org')",
    ],
  },
  { version: 3, name: 'users_email', up: ['CREATE UNIQUE INDEX CONCURRENTLY users_email ON users (email)'], noTransaction: true },
  { version: 10, name: 'orders', up: ['CREATE TABLE orders (id bigint PRIMARY KEY, user_id bigint REFERENCES users (id))', "COMMENT ON TABLE orders IS 'since 10'"] },
];

/** A down section that leaves a table behind if it ever runs. */
const DOWN = 'CREATE TABLE down_ran (a int);';
const pad = (step: Step, width: number) => String(step.version).padStart(width, '0');
const statements = (step: Step) => step.up.map((s) => `${s};\n`).join('');

/** The version a step is recorded under: dbmate's are the timestamps its `new` command writes. */
export const recorded = (format: MigrationFormat, step: Step) => String((format === 'dbmate' ? 20240101000000n : 0n) + BigInt(step.version));

/** Each format's files for `steps`, as that tool's documentation shapes them. */
export const LAYOUTS: Record<Exclude<MigrationFormat, 'ptah'>, (steps: readonly Step[]) => Record<string, string>> = {
  'golang-migrate': (steps) => Object.fromEntries(steps.flatMap((s) => [
    [`${pad(s, 6)}_${s.name}.up.sql`, statements(s)],
    [`${pad(s, 6)}_${s.name}.down.sql`, DOWN],
  ])),
  goose: (steps) => Object.fromEntries(steps.map((s) => [`${pad(s, 5)}_${s.name}.sql`,
    `-- ${s.name}\n${s.noTransaction ? '-- +goose NO TRANSACTION\n' : ''}-- +goose Up\n` +
    s.up.map((sql) => (sql.includes('$$') ? `-- +goose StatementBegin\n${sql};\n-- +goose StatementEnd\n` : `${sql};\n`)).join('') +
    `\n-- +goose Down\n${DOWN}\n`])),
  dbmate: (steps) => Object.fromEntries(steps.map((s) => [`${recorded('dbmate', s)}_${s.name}.sql`,
    `-- migrate:up${s.noTransaction ? ' transaction:false' : ''}\n${statements(s)}\n-- migrate:down\n${DOWN}\n`])),
  flyway: (steps) => Object.fromEntries(steps.flatMap((s) => [
    [`V${s.version}${s.version === 1 ? '.0' : ''}__${s.name}.sql`, statements(s)],
    [`U${s.version}__${s.name}.sql`, DOWN],
  ])),
};

/** A database built by psql from the up SQL of `steps`, file by file, as a person would check them. */
export async function witness(t: Test, steps: readonly Step[]): Promise<Database> {
  const db = await freshDatabase(t, 'exec_fmt_witness');
  await psqlRuns(t, db.url, steps);
  return db;
}

/** psql runs the up SQL of `steps` on the database at `url`, file by file: what another tool that ran them left. */
export async function psqlRuns(t: Test, url: string, steps: readonly Step[]): Promise<void> {
  const dir = artifactDir(t, Object.fromEntries(steps.map((s, i) => [`${i}.sql`, statements(s)])));
  for (const [i] of steps.entries()) {
    await new Promise<void>((resolve, reject) => {
      execFile('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', join(dir, `${i}.sql`), url], (err, _out, stderr) =>
        err ? reject(new Error(`psql failed: ${stderr}`)) : resolve());
    });
  }
}

/** Flyway's checksum computed here, not by the code under test: one CRC32 of the text with line breaks and a BOM removed. */
export const flywaySum = (text: string) => crc32(Buffer.from(text.replace(/^\uFEFF/, '').replace(/\r\n|\r|\n/g, ''), 'utf8')) | 0;

export type Tool = Exclude<MigrationFormat, 'ptah'>;

/** The history table each tool writes, with rows for `applied`, as migration-formats.md describes the tool writing it. */
export const TOOL_HISTORY: Record<Tool, (applied: readonly Step[], files: Record<string, string>) => string> = {
  'golang-migrate': (applied) => 'CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);' +
    `INSERT INTO schema_migrations VALUES (${applied.at(-1)!.version}, false)`,
  goose: (applied) => 'CREATE TABLE goose_db_version (id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY, version_id bigint NOT NULL, ' +
    'is_applied boolean NOT NULL, tstamp timestamp NOT NULL DEFAULT now()); INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true)' +
    applied.map((s) => `, (${s.version}, true)`).join(''),
  dbmate: (applied) => 'CREATE TABLE schema_migrations (version varchar NOT NULL PRIMARY KEY);' +
    `INSERT INTO schema_migrations VALUES ${applied.map((s) => `('${recorded('dbmate', s)}')`).join(', ')}`,
  flyway: (applied, files) => 'CREATE TABLE flyway_schema_history (installed_rank INT NOT NULL PRIMARY KEY, version VARCHAR(50), description VARCHAR(200) NOT NULL, ' +
    'type VARCHAR(20) NOT NULL, script VARCHAR(1000) NOT NULL, checksum INTEGER, installed_by VARCHAR(100) NOT NULL, ' +
    'installed_on TIMESTAMP NOT NULL DEFAULT now(), execution_time INTEGER NOT NULL, success BOOLEAN NOT NULL);' +
    `INSERT INTO flyway_schema_history (installed_rank, version, description, type, script, checksum, installed_by, execution_time, success) VALUES ${
      applied.map((s, i) => {
        const script = Object.keys(files).find((name) => name.startsWith(`V${s.version}`) && name.endsWith(`__${s.name}.sql`))!;
        return `(${i + 1}, '${script.slice(1, script.indexOf('__'))}', '${s.name}', 'SQL', '${script}', ${flywaySum(files[script]!)}, 'app', 12, true)`;
      }).join(', ')}`,
};

/**
 * What adopting a database `tool` migrated through `ranByTool` must give: psql's build of every file's up SQL, the
 * tool's history table as it left it, and the executor's (empty) bookkeeping schema.
 */
export async function adoptedWitness(t: Test, tool: Tool, ranByTool: readonly Step[], files: Record<string, string>): Promise<Database> {
  const built = await witness(t, STEPS);
  await built.query(TOOL_HISTORY[tool](ranByTool, files));
  await built.query('CREATE SCHEMA ptah_migrations');
  return built;
}
