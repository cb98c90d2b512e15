// A PtahSchema whose Apply waits in the database long enough to be acted on while it runs (a test session holds the
// table its plan alters), and what the tests read around it: the proof readings the stored history shows.
import type { Test } from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import pg from 'pg';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { leaseHolding } from './migration-world.js';
import { switchDesired, WAIT_MS, type SchemaWorld } from './schema-world.js';

/** An unknown outcome's proof waits out the Apply's window (here at most 60 s) and 30 s of grace. */
export const PROOF_WAIT_MS = WAIT_MS + 90_000;

export const R1 = 'CREATE TABLE products (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sku text NOT NULL);\n';
export const R2 = 'CREATE TABLE products (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sku text NOT NULL, title text);\n';

/** A session holding ACCESS EXCLUSIVE on `table`, so an Apply that alters it waits in the database. */
export async function holdTable(db: TestDatabase, table: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
    },
  };
}

/** Sessions of an Apply waiting for a lock in the database. */
export async function waitingWriters(w: SchemaWorld, db: TestDatabase): Promise<number> {
  const rows = await w.sql<{ n: number }>(db, `SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`);
  return rows[0]?.n ?? 0;
}

/** Ends the sessions waiting on a lock: what killing their container does to them. */
export async function endWaitingWriters(w: SchemaWorld, db: TestDatabase): Promise<void> {
  await w.sql(db, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`);
}

/** r1 converged under policy Always, then r2 desired while a session holds products: its Apply waits in the database. */
export async function blockedApply(t: Test, w: SchemaWorld, db: TestDatabase, options: { activeDeadlineSeconds?: number; lockTimeout?: string } = {}) {
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', R1);
  await w.desired('catalog-r2', R2);
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'Always', activeDeadlineSeconds: options.activeDeadlineSeconds ?? 120, lockTimeout: options.lockTimeout ?? '100s' });
  await w.waitFor('catalog', 'r1 in sync', (s) => (s.status?.phase === 'InSync' && s.status.applied && !s.status.pendingLockRelease ? s : undefined));
  const lock = await holdTable(db, 'products');
  t.teardown(() => lock.release());
  await switchDesired(w, 'catalog', 'catalog-r2');
  const running = await w.waitFor('catalog', 'the r2 Apply dispatched with its Job UID', (s) =>
    (s.status?.activeOperation?.type === 'Apply' && s.status.activeOperation.jobUID ? s : undefined));
  await waitFor(async () => ((await waitingWriters(w, db)) > 0 ? true : undefined), { what: 'the Apply to wait on the table lock', timeoutMs: WAIT_MS });
  const claim = running.status!.activeOperation!;
  const job = await w.admin.get<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName });
  const [holder, epoch] = await leaseHolding(w, leaseNameFor(claim.coordinationDigest!));
  t.equal(holder, holderIdentityFor(running.metadata.uid!, claim.id), 'fixture: the Apply holds the realm');
  t.equal(epoch, claim.leaseEpoch, 'fixture: under the epoch its claim names');
  return { running, claim, job, lock, r1Applies: (await w.applies(db)).length };
}

/** The proof readings the stored history shows for Apply `applyId`: each proof claim's type, epoch and holder. */
export function proofClaims(states: PtahSchema[], applyId: string): { type: string; id: string; leaseEpoch?: string }[] {
  const seen = new Map<string, { type: string; id: string; leaseEpoch?: string }>();
  for (const s of states) {
    const c = s.status?.activeOperation;
    if (c?.proofOf === applyId && !seen.has(c.id)) seen.set(c.id, { type: c.type, id: c.id, leaseEpoch: c.leaseEpoch });
  }
  return [...seen.values()];
}

