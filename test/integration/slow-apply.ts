// A PtahMigration whose Apply runs long enough to be acted on while it runs, and what tests read around it: the
// Job, the realm Lease and the database's history table.
import type { V1Job, V1Lease } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { WAIT_MS, type MigrationWorld } from './migration-world.js';

/** Three files; the second sleeps `seconds` in the database, so the Apply can be acted on while it runs. */
export const slowFiles = (seconds: number) => ({
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY);\n',
  '0002_create_orders.up.sql': `SELECT pg_sleep(${seconds});\nCREATE TABLE orders (id bigserial PRIMARY KEY);\n`,
  '0003_create_invoices.up.sql': 'CREATE TABLE invoices (id bigserial PRIMARY KEY);\n',
});
export const VERSIONS = ['0001', '0002', '0003'];

export interface RunningApply {
  m: PtahMigration;
  claim: ActiveOperation;
  job: V1Job;
  /** The realm Lease's name and the identity the claim holds it under. */
  lease: { name: string; holder: string };
}

/** Starts a migration whose Apply (policy Always) runs the slow files, and waits until the database is sleeping in it. */
export async function startSlowApply(w: MigrationWorld, db: TestDatabase, seconds: number): Promise<RunningApply> {
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', slowFiles(seconds));
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always', activeDeadlineSeconds: 120, lockTimeout: '1m' });
  const m = await w.waitFor('orders', 'an Apply dispatched with its Job UID recorded', (m) =>
    (m.status?.activeOperation?.type === 'Apply' && m.status.activeOperation.jobUID ? m : undefined));
  const claim = m.status!.activeOperation!;
  await waitFor(async () => ((await sleepingSessions(w, db)) > 0 ? true : undefined), { what: 'the Apply to be sleeping in the database', timeoutMs: WAIT_MS });
  const job = await w.admin.get<V1Job>(jobRef(w, claim.jobName));
  return { m, claim, job, lease: { name: leaseNameFor(claim.coordinationDigest!), holder: holderIdentityFor(m.metadata.uid!, claim.id) } };
}

export const jobRef = (w: MigrationWorld, name: string) => ({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name });

export async function sleepingSessions(w: Pick<MigrationWorld, 'sql'>, db: TestDatabase): Promise<number> {
  const rows = await w.sql<{ n: number }>(db, `SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND query ILIKE '%pg_sleep%'`);
  return rows[0]?.n ?? 0;
}

export const isTerminal = (job: V1Job | undefined) => Boolean(job?.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True'));

export async function jobTerminal(w: MigrationWorld, name: string): Promise<V1Job> {
  return waitFor(async () => {
    const job = await w.admin.get<V1Job>(jobRef(w, name));
    return isTerminal(job) ? job : undefined;
  }, { what: `Job ${name} to end`, timeoutMs: WAIT_MS });
}

export const readLease = (w: MigrationWorld, name: string) =>
  w.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name });

export const renewedAt = (lease: V1Lease | undefined) => (lease?.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : NaN);

/** The history table as [version, operation ID] pairs. */
export const historyOf = async (w: MigrationWorld, db: TestDatabase) => (await w.history(db)).map((r) => [r.version, r.operationId]);

