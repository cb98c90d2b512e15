// PtahSchema runs nobody can account for, on the real stack: drift made by hand after the approval, an Apply Pod
// killed mid-run, an Apply Job deleted after the mark, the manager replaced while an Apply runs, and a Job deadline
// hit mid-Apply. Each is settled by a fresh Observe and Plan under the Apply's own Lease epoch, and the database's
// own table shows that nothing was applied twice and nothing ran that was not approved.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import type { TestDatabase } from '../harness/postgres.js';
import { sleep, waitFor } from '../harness/wait.js';
import { leaseHolding } from './migration-world.js';
import { schemaJobsOf, schemaWorld, switchDesired, WAIT_MS, watchSchemas, type SchemaWorld } from './schema-world.js';
import pg from 'pg';

/** An unknown outcome's proof waits out the Apply's window (here at most 60 s) and 30 s of grace. */
const PROOF_WAIT_MS = WAIT_MS + 90_000;

const R1 = 'CREATE TABLE products (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sku text NOT NULL);\n';
const R2 = 'CREATE TABLE products (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sku text NOT NULL, title text);\n';

/** A session holding ACCESS EXCLUSIVE on `table`, so an Apply that alters it waits in the database. */
async function holdTable(db: TestDatabase, table: string): Promise<{ release(): Promise<void> }> {
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
async function waitingWriters(w: SchemaWorld, db: TestDatabase): Promise<number> {
  const rows = await w.sql<{ n: number }>(db, `SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`);
  return rows[0]?.n ?? 0;
}

/** Ends the sessions waiting on a lock: what killing their container does to them. */
async function endWaitingWriters(w: SchemaWorld, db: TestDatabase): Promise<void> {
  await w.sql(db, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`);
}

/** r1 converged under policy Always, then r2 desired while a session holds products: its Apply waits in the database. */
async function blockedApply(t: Test, w: SchemaWorld, db: TestDatabase, options: { activeDeadlineSeconds?: number; lockTimeout?: string } = {}) {
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
function proofClaims(states: PtahSchema[], applyId: string): { type: string; id: string; leaseEpoch?: string }[] {
  const seen = new Map<string, { type: string; id: string; leaseEpoch?: string }>();
  for (const s of states) {
    const c = s.status?.activeOperation;
    if (c?.proofOf === applyId && !seen.has(c.id)) seen.set(c.id, { type: c.type, id: c.id, leaseEpoch: c.leaseEpoch });
  }
  return [...seen.values()];
}

t.test('drift made by hand after the approval refuses at apply with no SQL run, and settles through a fresh Observe and Plan under the Apply\'s epoch', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_drift');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', R1);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  await w.waitFor('catalog', 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  const plan = await w.plan('catalog');
  await w.stopController();
  await w.approve('catalog');
  await w.sql(db, 'CREATE TABLE made_by_hand (id int)');
  const states = await watchSchemas(t, w, 'catalog');
  await w.startController();

  const settled = await w.waitFor('catalog', 'a new plan after the refused Apply', (s) =>
    (s.status?.plan && s.status.plan.uid !== plan.metadata.uid && !s.status.pendingObservation && !s.status.activeOperation ? s : undefined));
  const applyClaims = [...new Map(states.flatMap((s) => (s.status?.activeOperation?.type === 'Apply' ? [[s.status.activeOperation.id, s.status.activeOperation] as const] : []))).values()];
  t.equal(applyClaims.length, 1, 'one Apply was claimed');
  const apply = applyClaims[0]!;
  const pendings = states.map((s) => s.status?.pendingObservation).filter((p) => p?.applyOperationID === apply.id);
  t.equal(pendings[0]?.outcome, 'ApplyRefused', 'the Apply reported it changed nothing');
  t.same(await w.tables(db), ['made_by_hand'], 'no SQL of the plan ran');
  t.same(await w.applies(db), [], 'the database records no Apply');
  const proofs = proofClaims(states, apply.id);
  t.same(proofs.map((p) => p.type), ['Observe', 'Plan'], 'exactly one Observe and one Plan proved it');
  t.ok(proofs.every((p) => p.leaseEpoch === pendings[0]?.leaseEpoch && p.leaseEpoch === apply.leaseEpoch), 'both under the Apply\'s own Lease epoch');
  t.equal(settled.status?.plan?.approvalRequiredBecause, 'NotConverged', 'the new plan needs its own approval');
  // The new plan would drop the table made by hand: destructive, so it is held, and the database stays as it is.
  t.equal(settled.status?.plan?.destructive, true, 'the new plan is computed against the drifted database');
  const blocked = await w.waitFor('catalog', 'the destructive follow-up held', (s) => (s.status?.phase === 'Blocked' ? s : undefined));
  t.equal(blocked.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'DestructiveChangesDisabled');
  await sleep(3_000);
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'the refused Apply was never run again');
  t.same(await w.tables(db), ['made_by_hand'], 'and the database is as the person left it');
});

t.test('an Apply Pod killed mid-run leaves an unknown outcome that a fresh reading re-plans, never replays', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_pod_killed');
  await w.startController();
  // A short window: the proof of an unknown outcome waits until no Pod of the Apply can still run (its window and grace).
  const { claim, job, lock, r1Applies } = await blockedApply(t, w, db, { activeDeadlineSeconds: 60, lockTimeout: '50s' });
  const states = await watchSchemas(t, w, 'catalog');
  const pods = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  t.equal(pods.length, 1, 'fixture: the Apply Job runs one Pod');
  await w.admin.delete({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: pods[0]!.metadata!.name! }, { gracePeriodSeconds: 0 });
  const unknown = await w.waitFor('catalog', 'the proof owed with an unknown outcome', (s) =>
    (s.status?.pendingObservation?.applyOperationID === claim.id ? s : undefined));
  t.equal(unknown.status?.pendingObservation?.outcome, 'OutcomeUnknown');
  t.notOk(unknown.status?.activeOperation, 'the claim and the record were swapped in one write');
  // A kubelet stopping a Pod kills its whole container; the fake kubelet stops the runner and can leave its executor
  // child waiting on the lock, so its session is ended here as the container's death would end it.
  await endWaitingWriters(w, db);
  await lock.release();
  const settled = await w.waitFor('catalog', 'the proof settled', (s) => (!s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingLockRelease ? s : undefined), PROOF_WAIT_MS);
  t.ok(Date.parse(states.find((s) => s.status?.activeOperation?.proofOf === claim.id)?.status?.activeOperation?.startedAt ?? '') >= Date.parse(unknown.status!.pendingObservation!.observeAfter!),
    'no proof reading started before the Apply\'s window and grace had passed');
  const applies = await w.applies(db);
  t.equal(applies.length, r1Applies, 'the killed Apply committed nothing');
  t.notOk(applies.some((a) => a.operationId === claim.id), 'its operation ID is not in the database');
  t.same(proofClaims(states, claim.id).map((p) => p.type), ['Observe', 'Plan'], 'one Observe and one Plan proved it');
  t.equal(settled.status?.plan?.approvalRequiredBecause, 'NotConverged', 're-planned, and the new plan waits for an approval even under Always');
  t.equal(settled.status?.phase, 'AwaitingApproval');
  await sleep(3_000);
  t.equal(schemaJobsOf(w, 'apply', 'catalog').filter((j) => j.metadata?.annotations?.['operator.ptah.run/operation-id'] === claim.id).length, 1, 'the Apply was never run again');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 2, 'only r1\'s and the killed r2 Apply ever ran');
});

t.test('an Apply Job deleted after the mark is an unknown outcome, never created again', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_job_deleted');
  await w.startController();
  const { claim, lock } = await blockedApply(t, w, db, { activeDeadlineSeconds: 60, lockTimeout: '50s' });
  t.equal(claim.dispatchStarted, true, 'fixture: the dispatch marker is durable');
  await w.admin.delete({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }, { propagationPolicy: 'Background' });
  const unknown = await w.waitFor('catalog', 'the proof owed with an unknown outcome', (s) => (s.status?.pendingObservation?.applyOperationID === claim.id ? s : undefined));
  t.equal(unknown.status?.pendingObservation?.outcome, 'OutcomeUnknown');
  t.ok(unknown.status?.pendingObservation?.observeAfter, 'the proof waits out the Apply\'s window');
  await lock.release();
  await sleep(5_000);
  const jobs = schemaJobsOf(w, 'apply', 'catalog').filter((j) => j.metadata?.name === claim.jobName);
  t.equal(jobs.length, 1, 'the Job under the reserved name was created once');
  t.notOk(await w.admin.tryGet({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }), 'and never again');
  t.ok((await w.get('catalog')).status?.pendingObservation, 'the proof is still owed, holding the realm until the window passes');
});

t.test('a manager replaced while an Apply runs adopts it with the same Job and Pod', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_adopt');
  await w.startController();
  const { claim, job, lock } = await blockedApply(t, w, db);
  const podsBefore = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  await w.stopController();
  await w.startController(undefined, { controllerImage: 'localhost/ptah-operator:next', controllerRevision: 'schema-test-next', runnerImage: (await w.get('catalog')).status!.executionBinding!.runnerImage });
  await sleep(3_000);
  const during = await w.get('catalog');
  t.equal(during.status?.activeOperation?.id, claim.id, 'the new manager keeps the claim');
  t.equal(during.status?.activeOperation?.jobUID, job.metadata?.uid, 'with the same Job');
  await lock.release();
  const settled = await w.waitFor('catalog', 'the adopted Apply proven converged', (s) =>
    (s.status?.phase === 'InSync' && s.status.applied?.operationID === claim.id && !s.status.pendingLockRelease ? s : undefined));
  const podsAfter = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  t.same(podsAfter.map((p) => p.metadata?.uid), podsBefore.map((p) => p.metadata?.uid), 'the same Pod ran it');
  const applies = await w.applies(db);
  t.equal(applies.filter((a) => a.operationId === claim.id).length, 1, 'the adopted Apply is recorded once');
  t.equal(new Set(applies.map((a) => a.operationId)).size, applies.length, 'no operation ID twice');
  t.equal(new Set(applies.map((a) => a.planContentDigest)).size, applies.length, 'no plan content twice');
  t.equal(settled.status?.executionBinding?.epoch, claim.executionBindingID, 'the epoch is kept: only the recorded manager changed');
});

t.test('a Job deadline hit mid-Apply gives an unknown outcome, then exactly one Observe and one Plan under the same epoch', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_deadline');
  await w.startController();
  const { claim, lock, r1Applies } = await blockedApply(t, w, db, { activeDeadlineSeconds: 30, lockTimeout: '30s' });
  const states = await watchSchemas(t, w, 'catalog');
  const unknown = await w.waitFor('catalog', 'the proof owed after the deadline', (s) => (s.status?.pendingObservation?.applyOperationID === claim.id ? s : undefined));
  const pending = unknown.status!.pendingObservation!;
  t.equal(pending.outcome, 'OutcomeUnknown', 'the deadline leaves the outcome unknown');
  t.equal(pending.leaseEpoch, claim.leaseEpoch, 'the proof holds the Apply\'s epoch');
  await lock.release();
  await w.waitFor('catalog', 'the proof settled', (s) => (!s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingLockRelease ? s : undefined), PROOF_WAIT_MS);
  const proofs = proofClaims(states, claim.id);
  t.same(proofs.map((p) => p.type), ['Observe', 'Plan'], 'exactly one Observe and one Plan');
  t.ok(proofs.every((p) => p.leaseEpoch === claim.leaseEpoch), 'both under the Apply\'s epoch');
  t.equal((await w.applies(db)).length, r1Applies, 'the Apply committed nothing');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').filter((j) => j.metadata?.name === claim.jobName).length, 1, 'never run again');
});
