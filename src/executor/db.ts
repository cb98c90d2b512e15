// Opening a database, telling a statement's own failure from a lost connection, and the realm's advisory lock.
import pg from 'pg';
import { realmLockKey } from '../shared/realm-lock-key.js';
import { ExecutorFailure, errorMessage, registerUrlSecrets } from './failure.js';

const CONNECT_TIMEOUT_MS = 10_000;

export type Db = pg.Client;

/** Which database a connection is for; named in error messages instead of the URL. */
export type DbRole = 'target' | 'dev' | 'scratch';

export function parseDatabaseUrl(url: string, role: DbRole): URL {
  registerUrlSecrets(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ExecutorFailure('invalid_url', `the ${role} database URL is not a valid URL`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new ExecutorFailure('invalid_url', `the ${role} database URL must use the postgres:// or postgresql:// scheme, not ${parsed.protocol}//`);
  }
  if (!parsed.hostname) throw new ExecutorFailure('invalid_url', `the ${role} database URL names no host`);
  if (parsed.pathname.length <= 1) throw new ExecutorFailure('invalid_url', `the ${role} database URL names no database`);
  return parsed;
}

/**
 * `applicationName`, when given, is the session's name whatever the URL says: pg lets a URL's `application_name`
 * override the one passed beside it, so the URL's is dropped. A name sent at start-up survives `RESET ALL`.
 */
export async function connect(url: string, role: DbRole, applicationName?: string): Promise<Db> {
  parseDatabaseUrl(url, role);
  const client = new pg.Client({
    connectionString: applicationName === undefined ? url : withoutApplicationName(url),
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: applicationName ?? 'ptah-executor',
  });
  // A connection that drops while idle is reported by the next query; without a listener it would crash the process.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw new ExecutorFailure('connection_failed', `could not connect to the ${role} database: ${errorMessage(err)}`);
  }
  return client;
}

/** The URL without its `application_name` query parameters; every other byte is kept as written. */
export function withoutApplicationName(url: string): string {
  const at = url.indexOf('?');
  if (at < 0) return url;
  const kept = url.slice(at + 1).split('&').filter((part) => {
    const key = part.split('=', 1)[0]!;
    let name = key;
    try {
      name = decodeURIComponent(key);
    } catch {
      // A key that does not decode is not application_name.
    }
    return name !== 'application_name';
  });
  return kept.length === 0 ? url.slice(0, at) : `${url.slice(0, at)}?${kept.join('&')}`;
}

export async function disconnect(client: Db): Promise<void> {
  await client.end().catch(() => undefined);
}

/**
 * True only for an error the server raised about the statement itself, after which the statement (or the
 * transaction it ran in) is known not to have committed. A lost connection, a shutdown or a client-side
 * failure are not: whether a COMMIT in flight took effect is then unknown.
 */
export function isStatementError(err: unknown): err is pg.DatabaseError {
  if (!(err instanceof pg.DatabaseError) || typeof err.code !== 'string') return false;
  return !err.code.startsWith('08') && !['57P01', '57P02', '57P03'].includes(err.code);
}

/** A lost or refused connection (a server shutdown or termination included), as opposed to a statement's own error. */
export function isConnectionLoss(err: unknown): boolean {
  if (err instanceof pg.DatabaseError) return !isStatementError(err);
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return (typeof code === 'string' && /^E[A-Z]+$/.test(code)) ||
    (typeof message === 'string' && /Connection terminated|connection error|Client was closed|not queryable/i.test(message));
}

/** The error code for a database failure: `statementCode` for a statement's own error, else what went wrong. */
export function failureCode(err: unknown, statementCode: string): string {
  return isStatementError(err) ? statementCode : isConnectionLoss(err) ? 'connection_lost' : 'internal_error';
}

/** The pg message plus the line of the failing statement when the server gave a position in `sql`. */
export function describeSqlError(err: unknown, sql: string): string {
  const line = sqlErrorLine(err, sql);
  return line === undefined ? errorMessage(err) : `line ${line}: ${errorMessage(err)}`;
}

/** The 1-based line of `sql` at the error position the server reported, if it reported one. */
export function sqlErrorLine(err: unknown, sql: string): number | undefined {
  const position = err instanceof pg.DatabaseError ? Number(err.position) : NaN;
  return Number.isInteger(position) && position >= 1 ? sql.slice(0, position - 1).split('\n').length : undefined;
}

export interface RealmLock {
  release(): Promise<void>;
}

/** Takes the realm's session-level advisory lock, waiting at most `timeoutMs`, on this connection. */
export async function acquireRealmLock(client: Db, coordinationDigest: string, timeoutMs: number): Promise<RealmLock> {
  const key = realmLockKey(coordinationDigest);
  await client.query(`SELECT set_config('lock_timeout', $1, false)`, [`${timeoutMs}ms`]);
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [key]);
  } catch (err) {
    if (err instanceof pg.DatabaseError && err.code === '55P03') {
      throw new ExecutorFailure('lock_timeout', `another operation held the realm's database lock for longer than ${timeoutMs} ms; nothing was changed`);
    }
    throw err;
  } finally {
    await client.query('RESET lock_timeout').catch(() => undefined);
  }
  return {
    release: async () => {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [key]).catch(() => undefined);
    },
  };
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Runs `fn` in a read-only transaction with an empty search_path, so every name the catalog prints is qualified. */
export async function withReadOnlySnapshot<T>(client: Db, fn: () => Promise<T>): Promise<T> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await qualifyNames(client);
    const result = await fn();
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Within the current transaction, makes catalog functions (pg_get_viewdef, format_type, …) qualify every user name. */
export async function qualifyNames(client: Db): Promise<void> {
  await client.query(`SELECT set_config('search_path', '', true)`);
}
