// A real PostgreSQL 15 server for tests: one throwaway cluster in a temp directory, on loopback, on a port
// chosen at run time. Debian's postgres refuses to run as root, so initdb and the postmaster run as the
// `postgres` user through runuser. Host connections need a password (scram), so tests can prove it is redacted.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { freePort } from './ports.js';
import { onInterrupt, trackGroup } from './processes.js';

const PG_BIN = process.env.PTAH_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const SERVER_USER = 'postgres';
const READY_TIMEOUT_MS = 60_000;

export interface PostgresServer {
  /** Superuser URL (user postgres, with password) of the `postgres` database. */
  url: string;
  port: number;
  /**
   * Sets the scheduling priority of the server's processes, and so of the backends it starts later; throws when the
   * system refuses (raising it back needs root).
   */
  renice(nice: number): void;
  stop(): Promise<void>;
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export const TEST_PG_URL_ENV = 'PTAH_TEST_PG_URL';

/** The server the test runner started for the whole run. Tests fail, never skip, when it is missing. */
export function sharedPostgresUrl(): string {
  const url = process.env[TEST_PG_URL_ENV];
  if (!url) {
    throw new Error(
      `${TEST_PG_URL_ENV} is not set. Run the suite with \`npm test\` (it starts one PostgreSQL server for the run), ` +
        `or start one yourself with \`npx tsx tools/stack/postgres.ts\` and pass the ${TEST_PG_URL_ENV}=... line it prints ` +
        `to \`npx tap\`.`,
    );
  }
  return url;
}

export async function startPostgres(): Promise<PostgresServer> {
  const { uid, gid } = serverUserIds();
  const dir = mkdtempSync(join(tmpdir(), 'ptah-pg-'));
  const dataDir = join(dir, 'data');
  const socketDir = join(dir, 'sock');
  mkdirSync(socketDir);
  const password = randomBytes(18).toString('base64url');
  const pwFile = join(dir, 'pw');
  writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
  for (const path of [dir, socketDir, pwFile]) chownSync(path, uid, gid);

  try {
    execFileSync('runuser', ['-u', SERVER_USER, '--', join(PG_BIN, 'initdb'), '-D', dataDir, '-U', SERVER_USER,
      `--pwfile=${pwFile}`, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--locale=C', '--no-sync'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${stderrOf(err)}`);
  }
  rmSync(pwFile);

  const port = await freePort();
  // Its own process group, tracked like the control plane's: however the harness ends, the server ends with it.
  const child = spawn('runuser', ['-u', SERVER_USER, '--', join(PG_BIN, 'postgres'), '-D', dataDir, '-p', String(port),
    '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${socketDir}`, '-c', 'fsync=off',
    '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=200'],
  { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  trackGroup('postgres', child);
  let serverLog = '';
  child.stderr?.on('data', (chunk: Buffer) => { serverLog = (serverLog + chunk.toString()).slice(-4000); });

  const url = `postgres://${SERVER_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  const stop = once(async () => {
    await stopServer(child, dataDir);
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    await waitUntilReady(url, child, () => serverLog);
  } catch (err) {
    await stop();
    throw err;
  }
  const renice = (nice: number) => void execFileSync('renice', ['-n', String(nice), '-g', String(child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { url, port, renice, stop };
}

/** A fresh, empty database on the server `baseUrl` names; drop() removes it even while clients are connected. */
export async function createTestDatabase(baseUrl: string, prefix: string): Promise<TestDatabase> {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9_]+/g, '_').slice(0, 40);
  const name = `${clean}_${randomBytes(6).toString('hex')}`;
  await withClient(baseUrl, (c) => c.query(`CREATE DATABASE "${name}" TEMPLATE template0`));
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: once(() => withClient(baseUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined)),
  };
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

function serverUserIds(): { uid: number; gid: number } {
  const line = execFileSync('getent', ['passwd', SERVER_USER], { encoding: 'utf8' }).trim();
  const fields = line.split(':');
  return { uid: Number(fields[2]), gid: Number(fields[3]) };
}

async function waitUntilReady(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres exited with code ${child.exitCode}: ${log()}`);
    try {
      await withClient(url, (c) => c.query('SELECT 1'));
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`postgres did not accept connections within ${READY_TIMEOUT_MS} ms: ${log()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

// runuser does not reliably forward signals, so signal the postmaster itself (its pid is in postmaster.pid).
async function stopServer(child: ChildProcess, dataDir: string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let postmasterPid: number | undefined;
  try {
    postmasterPid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    postmasterPid = undefined;
  }
  if (postmasterPid) process.kill(postmasterPid, 'SIGINT'); // fast shutdown
  else child.kill('SIGTERM');
  await exited;
}

function stderrOf(err: unknown): string {
  const stderr = (err as { stderr?: Buffer }).stderr;
  return stderr ? stderr.toString().trim() : String(err);
}

function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined;
  return () => (result ??= fn());
}

// CLI mode: start one server for a whole test run (or for development) and keep it until SIGTERM/SIGINT.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = await startPostgres();
  process.stdout.write(`${TEST_PG_URL_ENV}=${server.url}\n`);
  onInterrupt(() => server.stop());
  setInterval(() => undefined, 1 << 30);
}
