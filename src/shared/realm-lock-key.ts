// The PostgreSQL advisory-lock key of a realm (the executor's second line of serialization behind the Lease):
// every writer of one realm, schema or migration, takes the same key, so two executors that both believe they
// hold the realm still run one after the other inside the database.
import { createHash } from 'node:crypto';

const DOMAIN = 'ptah-realm-advisory-lock-v1\0';

/** A signed 64-bit key (as a decimal string, the form `pg_advisory_lock(bigint)` takes) for a coordination digest. */
export function realmLockKey(coordinationDigest: string): string {
  if (!coordinationDigest) throw new Error('a realm lock key needs a non-empty coordination digest');
  const hash = createHash('sha256').update(DOMAIN).update(coordinationDigest).digest();
  return hash.readBigInt64BE(0).toString();
}
