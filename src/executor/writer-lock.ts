// The locks a mutating run (schema apply, migration-apply) holds for its whole write: its realm's lock, then the
// database writer lock, one fixed key per database that every realm shares (DATABASE_WRITER_LOCK_KEY).
//
// In that order, a writer that holds its realm lock and still finds the writer lock taken faces another realm: a
// writer of its own realm would hold the realm lock too, and lets go of the writer lock first. So a same-realm
// writer waits on the realm lock as before, and another realm's writer refuses at once, before any write.
//
// The holder names its realm in its session's application_name, sent when it connects: so the name is in place
// before the lock is taken, survives RESET ALL, and ends with the session and its locks (nothing stale after a
// crash, nothing written to the database). Any role reads it from pg_locks and pg_stat_activity without waiting.
import { REFUSED_BEFORE_WRITING } from '../shared/executor-report.js';
import { DATABASE_WRITER_LOCK_KEY } from '../shared/realm-lock-key.js';
import { acquireRealmLock, type Db, type RealmLock } from './db.js';
import { ExecutorFailure } from './failure.js';
import { connectTarget, type CommandContext } from './physical-identity.js';

// "ptah-writer " and 43 base64url characters: within the 63 bytes PostgreSQL keeps of an application_name.
const WRITER_PREFIX = 'ptah-writer ';
const WRITER_NAME = /^ptah-writer ([A-Za-z0-9_-]{43})$/;

export function writerApplicationName(coordinationDigest: string): string {
  return WRITER_PREFIX + Buffer.from(coordinationDigest.slice('sha256:'.length), 'hex').toString('base64url');
}

/** The coordination digest a writer's application_name carries, if it carries one. */
export function writerRealm(applicationName: string | null | undefined): string | undefined {
  const match = WRITER_NAME.exec(applicationName ?? '');
  return match ? `sha256:${Buffer.from(match[1]!, 'base64url').toString('hex')}` : undefined;
}

/** A writer's connection to the target: named for its realm, its physical identity recorded in `context`. */
export function connectWriter(url: string, coordinationDigest: string, context: CommandContext): Promise<Db> {
  return connectTarget(url, context, writerApplicationName(coordinationDigest));
}

/** The session holding the writer lock on this database; pg_locks shows a bigint key as two unsigned halves. */
const WRITER_LOCK_HOLDER = `
  SELECT a.application_name FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint`;

/**
 * Takes the realm lock (waiting at most `timeoutMs`) and then the database writer lock (never waiting). Refuses
 * with `database_held_by_other_realm`, holding nothing, when another realm writes to this database.
 */
export async function acquireWriterLocks(client: Db, coordinationDigest: string, timeoutMs: number): Promise<RealmLock> {
  const realm = await acquireRealmLock(client, coordinationDigest, timeoutMs);
  try {
    const { rows } = await client.query<{ taken: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS taken', [DATABASE_WRITER_LOCK_KEY]);
    if (!rows[0]?.taken) throw await heldByOtherRealm(client);
  } catch (err) {
    await realm.release();
    throw err;
  }
  return {
    // The writer lock first: a writer of this realm waiting for the realm lock must then find it free.
    release: async () => {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [DATABASE_WRITER_LOCK_KEY]).catch(() => undefined);
      await realm.release();
    },
  };
}

async function heldByOtherRealm(client: Db): Promise<ExecutorFailure> {
  const { rows } = await client.query<{ application_name: string | null }>(WRITER_LOCK_HOLDER, [DATABASE_WRITER_LOCK_KEY]);
  const holder = writerRealm(rows[0]?.application_name);
  const who = holder === undefined ? 'another session (its realm could not be read)' : `the realm with coordination digest ${holder}`;
  return new ExecutorFailure(REFUSED_BEFORE_WRITING.databaseHeldByOtherRealm,
    `${who} is writing to this physical database (it holds the database writer lock); two realms must not write to one database; nothing was changed`);
}
