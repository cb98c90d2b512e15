// The PostgreSQL advisory-lock keys the executor's writers take. A realm's key (the second line of serialization
// behind the Lease): every writer of one realm, schema or migration, takes the same key, so two executors that
// both believe they hold the realm still run one after the other inside the database. The database writer key:
// one per database, so two realms that name one physical database never write to it at once.
import { createHash } from 'node:crypto';

const DOMAIN = 'ptah-realm-advisory-lock-v1\0';

/** A signed 64-bit key (as a decimal string, the form `pg_advisory_lock(bigint)` takes) for a coordination digest. */
export function realmLockKey(coordinationDigest: string): string {
  if (!coordinationDigest) throw new Error('a realm lock key needs a non-empty coordination digest');
  const hash = createHash('sha256').update(DOMAIN).update(coordinationDigest).digest();
  return hash.readBigInt64BE(0).toString();
}

/**
 * The one key every writer of a database takes, whatever its realm: an advisory lock is already scoped to its
 * database, so one fixed key means "one writer per physical database". Not a digest, so no realm's key is it.
 */
export const DATABASE_WRITER_LOCK_KEY = realmLockKey('ptah-database-writer');
