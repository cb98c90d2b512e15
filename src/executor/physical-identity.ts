// Which physical database a connection reached, whatever URL led there: two realms whose URLs differ
// (127.0.0.1 and localhost, a DNS alias) but reach one database must be seen as one. Reported as a digest of
// kind `system-identifier` (the cluster's identifier and the database's OID; PostgreSQL 15 lets any role read
// pg_control_system()) or, where a managed service withholds that function, of the weaker kind
// `server-address` (the address, port and database name the server itself sees).
import pg from 'pg';
import { digest } from '../shared/canonical.js';
import type { PhysicalIdentityFields, PhysicalIdentityKind } from '../shared/executor-report.js';
import { connect, disconnect, type Db } from './db.js';

export interface PhysicalIdentity {
  kind: PhysicalIdentityKind;
  digest: string;
}

/** What a command learned about its target, kept by the caller so an error report can still carry it. */
export interface CommandContext {
  physicalIdentity?: PhysicalIdentity;
}

// insufficient_privilege (EXECUTE revoked) and undefined_function (a server without it).
const WITHHELD = new Set(['42501', '42883']);

/** Must run outside a transaction: a refused pg_control_system() would abort it. */
export async function readPhysicalIdentity(client: Db): Promise<PhysicalIdentity> {
  try {
    const { rows } = await client.query<{ system_identifier: string; database_oid: string }>(
      `SELECT (SELECT system_identifier::text FROM pg_control_system()) AS system_identifier,
              (SELECT oid::text FROM pg_database WHERE datname = current_database()) AS database_oid`);
    const { system_identifier: systemIdentifier, database_oid: databaseOid } = rows[0]!;
    return { kind: 'system-identifier', digest: digest({ formatVersion: 1, kind: 'system-identifier', systemIdentifier, databaseOid }) };
  } catch (err) {
    if (!(err instanceof pg.DatabaseError) || !WITHHELD.has(err.code ?? '')) throw err;
  }
  // Over a Unix socket the server sees no address (null): then only the port and name are left.
  const { rows } = await client.query<{ address: string | null; port: number | null; database: string }>(
    'SELECT host(inet_server_addr()) AS address, inet_server_port() AS port, current_database() AS database');
  const { address, port, database } = rows[0]!;
  return { kind: 'server-address', digest: digest({ formatVersion: 1, kind: 'server-address', address, port, database }) };
}

/** Connects to the target and records its physical identity in `context` before anything else runs on it. */
export async function connectTarget(url: string, context: CommandContext, applicationName?: string): Promise<Db> {
  const client = await connect(url, 'target', applicationName);
  try {
    context.physicalIdentity = await readPhysicalIdentity(client);
  } catch (err) {
    await disconnect(client);
    throw err;
  }
  return client;
}

export function physicalIdentityFields(identity: PhysicalIdentity | undefined): PhysicalIdentityFields {
  return identity === undefined ? {} : { physicalIdentityDigest: identity.digest, physicalIdentityKind: identity.kind };
}
