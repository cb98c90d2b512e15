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
import { createTestDatabase, sharedPostgresUrl } from '../harness/postgres.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const COORDINATION_DIGEST = `sha256:${'c0'.repeat(32)}`;

export type ExecutorEnv = Partial<Record<keyof typeof EXECUTOR_ENV, string>>;

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
export function artifactDir(t: Test, files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'ptah-artifact-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

export function jsonFile(t: Test, value: unknown): string {
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
