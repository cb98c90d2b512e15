// PtahSchema execution-binding rotation and realm coordination on the real control plane, runner and PostgreSQL: a
// rotation during a pending approval retires the plan and its approval; a rotation while a Plan runs keeps the claim
// (and the realm) until its Job stops; two schemas on one coordination key never overlap, proof included.
import t from 'tap';
import type { V1Job, V1Lease } from '@kubernetes/client-node';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PendingBindingRetirement, PtahSchema, PtahSchemaPlan } from '../../src/shared/api/schema-kinds.js';
import { CLEANUP_TTL_SECONDS } from '../../src/shared/job/build.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { RUNNER_IMAGE_OTHER_EXECUTOR } from '../../tools/stack/kubelet/images.js';
import { variantExecutorIdentity } from '../../tools/stack/variants.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { eventsAbout, leaseHolding } from './migration-world.js';
import { approvalConditionOf, approvalNamed, MANAGER, schemaJobsOf, schemaWorld, WAIT_MS, watchSchemas, type SchemaWorld } from './schema-world.js';
import pg from 'pg';

/** A release that changes the executor: its runner image carries another executor, which the binding names. */
const NEXT_MANAGER = { ...MANAGER, runnerImage: RUNNER_IMAGE_OTHER_EXECUTOR, executorIdentity: variantExecutorIdentity('executor') };
const PRODUCTS = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  title text NOT NULL
);
`;

const jobRef = (w: SchemaWorld, name: string) => ({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name });
const isTerminal = (job: V1Job | undefined) => Boolean(job?.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True'));
const imageOf = (job: V1Job) => job.spec?.template.spec?.containers[0]?.image;
/** When a Job ended: its completion time, or when it was marked Failed. */
const endedAt = (job: V1Job): number => {
  if (job.status?.completionTime) return new Date(job.status.completionTime).getTime();
  const failed = job.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
  return failed?.lastTransitionTime ? new Date(failed.lastTransitionTime).getTime() : NaN;
};
const startedAt = (job: V1Job): number => (job.status?.startTime ? new Date(job.status.startTime).getTime() : NaN);

async function sessionsWaiting(w: SchemaWorld, db: TestDatabase, pattern: string): Promise<number> {
  const rows = await w.sql<{ n: number }>(db, `SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE pid <> pg_backend_pid() AND state = 'active' AND query ILIKE $1`, [pattern]);
  return rows[0]?.n ?? 0;
}

t.test('a changed executor binding during a pending approval retires the plan and the approval', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_rotate_approval');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', PRODUCTS);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  const waiting = await w.waitFor('catalog', 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  const p1 = await w.plan('catalog');
  const epoch1 = waiting.status!.executionBinding!.epoch;
  t.equal(p1.spec.executionBindingID, epoch1, 'fixture: the plan is of the first epoch');
  t.equal(waiting.status?.executionBinding?.executorIdentity, ownExecutorIdentity(), 'fixture: the first epoch binds this checkout\'s executor');

  await w.stopController();
  const a1 = await w.approve('catalog');
  const fresh = await approvalNamed(w, a1.metadata.name!);
  t.notOk(approvalConditionOf(fresh, 'Consumed'), 'fixture: the approval is unspent');
  t.notOk(approvalConditionOf(fresh, 'Stale'), 'fixture: the approval is not stale');
  const jobsBefore = new Set(w.jobsSeen.keys());

  const seen = await watchSchemas(t, w);
  await w.startController(undefined, NEXT_MANAGER);
  const stale = await waitFor(async () => {
    const a = await approvalNamed(w, a1.metadata.name!);
    return approvalConditionOf(a, 'Stale')?.status === 'True' ? a : undefined;
  }, { what: 'the approval to go Stale', timeoutMs: 60_000 });
  t.equal(approvalConditionOf(stale, 'Stale')?.reason, 'ExecutionBindingChanged', 'it went Stale because the binding changed');
  t.notOk(approvalConditionOf(stale, 'Consumed'), 'it was never spent');

  const republished = await w.waitFor('catalog', 'a new plan under the new epoch',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.plan.uid !== p1.metadata.uid && !s.status.pendingBindingRetirement ? s : undefined));
  const epoch2 = republished.status!.executionBinding!.epoch;
  t.not(epoch2, epoch1, 'status.executionBinding.epoch changed');
  t.equal(republished.status?.executionBinding?.executorIdentity, NEXT_MANAGER.executorIdentity, 'the new epoch binds the other release\'s executor');
  const records = seen.map((s) => s.status?.pendingBindingRetirement).filter((r): r is PendingBindingRetirement => r !== undefined);
  t.ok(records.length > 0, 'status.pendingBindingRetirement was written');
  t.equal(records[0]?.plan?.name, p1.metadata.name, 'the record named the retired plan');
  t.equal(records[0]?.plan?.uid, p1.metadata.uid);
  t.equal(records[0]?.retiredEpoch, epoch1, 'and the retired epoch');
  t.notOk(republished.status?.pendingBindingRetirement, 'the record is gone');
  const rotation = await eventsAbout(w, waiting.metadata.uid!, 'ExecutionBindingChanged');
  t.equal(rotation.length, 1, 'one ExecutionBindingChanged Event');

  const p2 = await w.plan('catalog');
  t.equal(p2.spec.executionBindingID, epoch2, 'the new plan is published under the new epoch');
  t.equal(schemaJobsOf(w, 'apply').length, 0, 'no Apply Job ran under the old plan');
  t.same(await w.applies(db), [], 'the database records no Apply');
  t.same(await w.tables(db), [], 'and is untouched');
  const newJobs = [...w.jobsSeen.entries()].filter(([uid]) => !jobsBefore.has(uid)).map(([, job]) => job);
  t.ok(newJobs.length >= 2, 'the new epoch read and planned again');
  t.same([...new Set(newJobs.map(imageOf))], [RUNNER_IMAGE_OTHER_EXECUTOR], 'its Jobs run the new runner image');

  // Companion: a fresh approval of the new epoch's plan applies it, under the new runner.
  const a2 = await w.approve('catalog');
  await w.waitFor('catalog', 'InSync under the new epoch',
    (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === p2.metadata.uid && !s.status.pendingObservation && !s.status.pendingLockRelease ? s : undefined));
  const applies = await w.applies(db);
  t.same(applies.map((a) => a.planContentDigest), [p2.spec.contentDigest], 'only the new plan was applied, once');
  t.equal(approvalConditionOf(await approvalNamed(w, a2.metadata.name!), 'Consumed')?.status, 'True', 'the fresh approval was spent');
  t.notOk(approvalConditionOf(await approvalNamed(w, a1.metadata.name!), 'Consumed'), 'the retired approval is still unspent');
  t.same(schemaJobsOf(w, 'apply').map(imageOf), [RUNNER_IMAGE_OTHER_EXECUTOR], 'the one Apply ran the new runner image');
});

t.test('a binding change while a Plan runs keeps its claim and the realm until the Job stops', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_rotate_plan');
  const secret = await w.installSample(db);
  await w.desired('catalog-slow', `SELECT pg_sleep(20);\n${PRODUCTS}`);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-slow', secret, apply: 'OnApproval', activeDeadlineSeconds: 300 });
  const planning = await w.waitFor('catalog', 'the Plan dispatched with its Job UID recorded',
    (s) => (s.status?.activeOperation?.type === 'Plan' && s.status.activeOperation.jobUID ? s : undefined), WAIT_MS);
  const claim = planning.status!.activeOperation!;
  const epoch1 = planning.status!.executionBinding!.epoch;
  await waitFor(async () => ((await sessionsWaiting(w, db, '%pg_sleep%')) > 0 ? true : undefined), { what: 'the Plan to be sleeping in the scratch database', timeoutMs: WAIT_MS });
  const lease = leaseNameFor(claim.coordinationDigest!);
  const holder = holderIdentityFor(planning.metadata.uid!, claim.id);
  t.same((await leaseHolding(w, lease))[0], holder, 'fixture: the Plan holds the realm');
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, claim.jobName))), 'fixture: the Plan Job is running');

  await w.stopController();
  await w.startController(undefined, NEXT_MANAGER);

  let rotatedWhileRunning = false;
  let checks = 0;
  const problems: string[] = [];
  const planJob = await waitFor(async () => {
    // Status and Lease first, then the Job: a Job still running now was running when they were read.
    const s = await w.get('catalog');
    const [leaseHolder] = await leaseHolding(w, lease);
    const leaseObj = await w.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: lease });
    const readAt = Date.now();
    const job = await w.admin.get<V1Job>(jobRef(w, claim.jobName));
    if (isTerminal(job)) return job;
    checks++;
    if (s.status?.activeOperation?.id !== claim.id) problems.push(`claim ${JSON.stringify(s.status?.activeOperation?.type)} ${s.status?.activeOperation?.id} while the Plan Job runs`);
    if (leaseHolder !== holder) problems.push(`Lease held by ${leaseHolder} while the Plan Job runs`);
    // Nothing renews a retired reading's Lease, so it must outlive whatever the Job can still do: its Pod is stopped
    // at the Job's deadline (plus the Pod's grace), and the Lease may lapse only after that.
    const renew = leaseObj?.spec?.renewTime ? new Date(leaseObj.spec.renewTime as unknown as string).getTime() : NaN;
    const duration = (leaseObj?.spec?.leaseDurationSeconds ?? 0) * 1000;
    const jobEnd = Date.parse(String(job.status?.startTime)) + ((job.spec?.activeDeadlineSeconds ?? Infinity) + (job.spec?.template.spec?.terminationGracePeriodSeconds ?? 0)) * 1000;
    if (!(renew + duration > readAt)) problems.push(`Lease expired (renewed ${String(leaseObj?.spec?.renewTime)}, ${duration} ms) while the Plan Job runs`);
    if (!(renew + duration >= jobEnd)) problems.push(`the Lease (renewed ${String(leaseObj?.spec?.renewTime)}, ${duration} ms) lapses before the Plan Job's deadline and grace end (${new Date(jobEnd).toISOString()})`);
    if (s.status?.executionBinding?.epoch !== epoch1) {
      rotatedWhileRunning = true;
      if (s.status?.pendingBindingRetirement?.job?.name !== claim.jobName) problems.push(`pendingBindingRetirement ${JSON.stringify(s.status?.pendingBindingRetirement)} does not name the Plan Job`);
    }
    return undefined;
  }, { what: 'the retired Plan Job to stop', timeoutMs: WAIT_MS, intervalMs: 300 });
  t.ok(checks > 0, `the claim and Lease were checked while the Plan ran (${checks} times)`);
  t.ok(rotatedWhileRunning, 'the binding rotated while the Plan Job still ran');
  t.same(problems, [], 'the Plan kept its claim and the realm while its Job ran');

  // The release is owed (pendingLockRelease) in the retiring write and done by the next pass: wait for both.
  const settled = await w.waitFor('catalog', 'the retired Plan claim retired, its release done and the record cleared',
    (s) => (s.status?.activeOperation?.id !== claim.id && !s.status?.pendingBindingRetirement && !s.status?.pendingLockRelease ? s : undefined));
  t.not(settled.status?.executionBinding?.epoch, epoch1, 'the new epoch is in force');
  t.ok(Date.now() >= endedAt(planJob), 'the claim went only after the Job ended');
  const [after] = await leaseHolding(w, lease);
  t.not(after, holder, 'the retired Plan\'s realm was handed back');
  t.equal((await w.admin.get<V1Job>(jobRef(w, claim.jobName))).spec?.ttlSecondsAfterFinished, CLEANUP_TTL_SECONDS, 'the retired Plan Job got its cleanup TTL');

  const republished = await w.waitFor('catalog', 'a plan under the new epoch',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined), 180_000);
  const plan = await w.plan('catalog');
  t.equal(plan.spec.executionBindingID, republished.status?.executionBinding?.epoch, 'the plan is of the new epoch');
  t.not(plan.spec.producedBy.jobName, claim.jobName, 'it was not produced by the retired Plan Job');
  const plans = await w.admin.list<PtahSchemaPlan>(API_VERSION, KINDS.PtahSchemaPlan.kind, w.ns);
  t.notOk(plans.some((p) => p.spec.producedBy.jobName === claim.jobName && p.metadata.uid === republished.status?.plan?.uid), 'no plan of the retired Job is current');
  t.same(await w.applies(db), [], 'nothing was applied');
});

t.test('two PtahSchemas on one coordination key never overlap: Apply, proof and the other\'s Apply', async (t) => {
  const w = await schemaWorld(t);
  const dbA = await w.database('schema_realm_a');
  const dbB = await w.database('schema_realm_b');
  const secretA = await w.installSample(dbA, 'a-db');
  const secretB = await w.installSample(dbB, 'b-db');
  await w.desired('a-r1', 'CREATE TABLE a_items (id bigint PRIMARY KEY);\n');
  await w.desired('a-r2', 'CREATE TABLE a_items (id bigint PRIMARY KEY, note text);\n');
  await w.desired('b-r1', 'CREATE TABLE b_items (id bigint PRIMARY KEY);\n');
  await w.startController();
  await w.createSchema({ name: 'a', artifact: 'a-r1', secret: secretA, apply: 'OnApproval', coordinationKey: 'shared-db', lockTimeout: '90s', activeDeadlineSeconds: 300 });
  await w.waitFor('a', 'A\'s first plan', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  const a1 = await w.plan('a');
  await w.approve('a');
  await w.waitFor('a', 'A InSync on r1', (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === a1.metadata.uid && !s.status.pendingObservation && !s.status.pendingLockRelease ? s : undefined));

  await w.createSchema({ name: 'b', artifact: 'b-r1', secret: secretB, apply: 'OnApproval', coordinationKey: 'shared-db', activeDeadlineSeconds: 300 });
  await w.admin.patch(w.ref('PtahSchema', 'a'), { spec: { desired: { configMapRef: { name: 'a-r2' } } } }, 'merge');
  const aWaiting = await w.waitFor('a', 'A\'s r2 plan', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.plan.uid !== a1.metadata.uid && !s.status.activeOperation ? s : undefined));
  const bWaiting = await w.waitFor('b', 'B\'s plan', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && !s.status.activeOperation ? s : undefined));
  t.equal(aWaiting.status?.target?.coordinationDigest, bWaiting.status?.target?.coordinationDigest, 'fixture: both schemas are in one realm');
  const lease = leaseNameFor(aWaiting.status!.target!.coordinationDigest);
  const a2 = await w.plan('a');
  const b1 = await w.plan('b');

  // A session holds a_items, so A's Apply blocks in the database while it holds the realm.
  const locker = new pg.Client({ connectionString: dbA.url });
  await locker.connect();
  t.teardown(() => locker.end().catch(() => undefined));
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE a_items IN ACCESS EXCLUSIVE MODE');
  await w.approve('a');
  const aApplying = await w.waitFor('a', 'A\'s Apply dispatched', (s) => (s.status?.activeOperation?.type === 'Apply' && s.status.activeOperation.jobUID ? s : undefined));
  const aClaim = aApplying.status!.activeOperation!;
  await waitFor(async () => {
    const rows = await w.sql<{ n: number }>(dbA, 'SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = \'Lock\' AND query ILIKE \'%a_items%\'');
    return (rows[0]?.n ?? 0) > 0 ? true : undefined;
  }, { what: 'A\'s Apply to wait on the table lock', timeoutMs: WAIT_MS });
  t.equal((await leaseHolding(w, lease))[0], holderIdentityFor(aApplying.metadata.uid!, aClaim.id), 'fixture: A\'s Apply holds the realm');

  await w.approve('b');
  const bClaimed = await w.waitFor('b', 'B\'s Apply claimed', (s) => (s.status?.activeOperation?.type === 'Apply' ? s : undefined));
  const bClaim = bClaimed.status!.activeOperation!;
  const problems: string[] = [];
  /** B's state, then A's: when A still held the realm after B was read, it held it when B was read. */
  const undispatchedWhileAHolds = async (): Promise<PtahSchema> => {
    const b = await w.get('b');
    const bJobs = schemaJobsOf(w, 'apply', 'b').length;
    const a = await w.get('a');
    const aHolds = Boolean(a.status?.activeOperation || a.status?.pendingObservation || a.status?.pendingLockRelease);
    if (!aHolds) return a;
    const when = `A in ${a.status?.phase} (${a.status?.activeOperation?.type ?? (a.status?.pendingObservation ? 'proof owed' : 'release owed')})`;
    checks.push(when);
    const op = b.status?.activeOperation;
    if (op && op.id !== bClaim.id) problems.push(`${when}: B carries another claim ${op.type} ${op.id}`);
    if (op?.dispatchStarted || op?.jobUID) problems.push(`${when}: B's claim was dispatched`);
    if (bJobs > 0) problems.push(`${when}: a B Apply Job exists`);
    if (!op) problems.push(`${when}: B's claim is gone`);
    return a;
  };
  const checks: string[] = [];
  for (let i = 0; i < 20; i++) {
    await undispatchedWhileAHolds();
    await sleep(500);
  }
  t.equal(checks.length, 20, 'fixture: A held the realm all the while its Apply was blocked');
  await locker.query('COMMIT');

  // A applies, then proves under its Lease; B must stay undispatched through the proof.
  await waitFor(async () => {
    const a = await undispatchedWhileAHolds();
    return a.status?.phase === 'InSync' && a.status.applied?.planRef.uid === a2.metadata.uid && !a.status.pendingObservation ? a : undefined;
  }, { what: 'A InSync on r2, proven', timeoutMs: WAIT_MS, intervalMs: 250 });
  t.ok(checks.some((c) => c.includes('VerifyingConvergence') || c.includes('proof owed')), `B was checked while A's proof ran (${checks.length} checks)`);
  // The proof's status write stages the release; B may go from here on.
  t.same(problems, [], 'B\'s claim waited undispatched while A held the realm, including through A\'s proof');

  await w.waitFor('b', 'B InSync', (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === b1.metadata.uid && !s.status.pendingObservation && !s.status.pendingLockRelease ? s : undefined));
  const jobs = await w.admin.list<V1Job>('batch/v1', 'Job', w.ns);
  const byName = new Map(jobs.map((j) => [j.metadata!.name!, j]));
  const live = (seenJobs: V1Job[]) => seenJobs.map((j) => byName.get(j.metadata!.name!)).filter((j): j is V1Job => j !== undefined);
  const [aApply] = live(schemaJobsOf(w, 'apply', 'a')).filter((j) => j.metadata?.name === aClaim.jobName);
  const [bApply] = live(schemaJobsOf(w, 'apply', 'b'));
  t.ok(aApply && bApply, 'both Apply Jobs are still readable');
  if (!aApply || !bApply) return;
  const aProof = live([...schemaJobsOf(w, 'observe', 'a'), ...schemaJobsOf(w, 'plan', 'a')]).filter((j) => startedAt(j) >= startedAt(aApply));
  t.ok(aProof.length >= 2, `A's proof ran an Observe and a Plan after its Apply (${aProof.length} Jobs)`);
  const aProofEnd = Math.max(...aProof.map(endedAt));
  t.ok(endedAt(aApply) <= Math.min(...aProof.map(startedAt)), 'A\'s proof started only after A\'s Apply Job ended');
  t.ok(startedAt(bApply) >= aProofEnd, `B's Apply Job started (${bApply.status?.startTime}) only after A's proof ended (${new Date(aProofEnd).toISOString()})`);
  t.ok(startedAt(bApply) >= endedAt(aApply), 'and after A\'s Apply ended');
  t.equal(bApply.metadata?.name, bClaim.jobName, 'B dispatched the claim that waited');

  const appliesA = await w.applies(dbA);
  const appliesB = await w.applies(dbB);
  t.same(appliesA.map((a) => a.planContentDigest), [a1.spec.contentDigest, a2.spec.contentDigest], 'A applied r1 and r2, once each');
  t.same(appliesB.map((a) => a.planContentDigest), [b1.spec.contentDigest], 'B applied once');
  const aApplied = appliesA[1]!.appliedAt.getTime();
  const bApplied = appliesB[0]!.appliedAt.getTime();
  t.ok(aApplied <= aProofEnd, 'A\'s database records its Apply before its proof ended');
  t.ok(bApplied >= aProofEnd, `B's database records its Apply (${appliesB[0]!.appliedAt.toISOString()}) after A's proof ended`);
  t.ok(startedAt(bApply) <= bApplied + 1000, 'B\'s Apply is recorded within its Job');
});
