// PtahMigration paths before the dispatch boundary that no other test runs (issue #8), on the real control plane
// with the real runner, executor and PostgreSQL: an Apply claim whose dispatch window closes while another
// resource holds the realm; an approval withdrawn between the claim's authorization and its consume write (and its
// replacement refused by admission meanwhile); an undispatched claim at an execution-binding rotation; a finalizer
// with no claim or record. Each fixture is checked before the path is taken; status, the realm Lease, Events, every
// Job ever created and the database's history table are the witnesses.
import t, { type Test } from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration, PtahMigrationApproval, PtahMigrationPlan } from '../../src/shared/api/migration-kinds.js';
import { FINALIZERS } from '../../src/shared/api/names.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { placeholderLeaseEpoch } from '../../src/controller/claim-values.js';
import { ApiError, restClient } from '../../src/shared/kube-client.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { FaultClient, type StepHook } from '../faults/fault-client.js';
import {
  eventAbout,
  jobsOf,
  leaseHolding,
  MANAGER,
  manualReconciler,
  migrationWorld,
  runningApply,
  WAIT_MS,
  type ManualReconciler,
  type MigrationWorld,
} from './migration-world.js';
import { historyOf, jobRef, slowFiles, VERSIONS } from './slow-apply.js';

const QUICK_FILES = {
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY);\n',
  '0002_create_orders.up.sql': 'CREATE TABLE orders (id bigserial PRIMARY KEY);\n',
  '0003_create_invoices.up.sql': 'CREATE TABLE invoices (id bigserial PRIMARY KEY);\n',
};

const inSyncApplied = (m: PtahMigration) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' && !m.status.activeOperation ? m : undefined);
const readyReason = (m: PtahMigration | undefined) => m?.status?.conditions?.find((c) => c.type === 'Ready')?.reason;
const isConsumed = (a: PtahMigrationApproval | undefined) => a?.status?.conditions?.some((c) => c.type === 'Consumed' && c.status === 'True') ?? false;
const approvalNamed = (w: MigrationWorld, name: string) => w.admin.tryGet<PtahMigrationApproval>(w.ref('PtahMigrationApproval', name));
const managerClient = () => restClient(sharedCluster().kubeConfig('manager'), { fieldManager: 'ptah-migration-paths-test' });

/** The stored versions of the resource from the first that carries `claimId` on: the claim's states, then the write that retired it. */
function claimLife(states: PtahMigration[], claimId: string): { carrying: PtahMigration[]; retiring: PtahMigration | undefined } {
  const first = states.findIndex((s) => s.status?.activeOperation?.id === claimId);
  if (first < 0) return { carrying: [], retiring: undefined };
  const after = states.slice(first);
  const gone = after.findIndex((s) => s.status?.activeOperation?.id !== claimId);
  return { carrying: gone < 0 ? after : after.slice(0, gone), retiring: gone < 0 ? undefined : after[gone] };
}

/** A fresh database and a migration `orders` of QUICK_FILES on it. */
async function quickMigration(w: MigrationWorld, dbPrefix: string, apply: 'Always' | 'OnApproval'): Promise<TestDatabase> {
  const db = await w.database(dbPrefix);
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', QUICK_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply });
  return db;
}

/** Every Job ever created under the claim's reserved name. */
const jobsNamed = (w: MigrationWorld, name: string): V1Job[] => [...w.jobsSeen.values()].filter((j) => j.metadata?.name === name);

t.test('an Apply claim that cannot dispatch before its dispatchNotAfter is retired DispatchWindowClosed; no Job, its approval unspent, a later claim applies it once', async (t) => {
  // Seed: "Authorization comes first, so a claim whose authorization moved is retired without waiting for a Lease
  // another claimant holds, and without taking the realm for work that will not run."
  // Sizing (fingerprint.ts applyDeadlines): dispatchNotAfter = startedAt + spec.execution.activeDeadlineSeconds. The
  // waiter's window is the CRD's minimum, 30 s; the holder sleeps 50 s in its 0002 while it holds the shared realm.
  const w = await migrationWorld(t);
  await w.startController();
  const [dbHolder, dbWaiter] = await Promise.all([w.database('window_holder'), w.database('window_waiter')]);
  const [secretHolder, secretWaiter] = await Promise.all([w.installSample(dbHolder, 'db-holder'), w.installSample(dbWaiter, 'db-waiter')]);
  await w.artifact('holder-r1', slowFiles(50));
  await w.artifact('waiter-r1', QUICK_FILES);
  // The waiter first, so its plan awaits approval before the holder takes the realm: its claim is made at once.
  await w.createMigration({ name: 'waiter', artifact: 'waiter-r1', secret: secretWaiter, apply: 'OnApproval', coordinationKey: 'shared-db', activeDeadlineSeconds: 30, lockTimeout: '10s' });
  await w.waitFor('waiter', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  await w.createMigration({ name: 'holder', artifact: 'holder-r1', secret: secretHolder, apply: 'Always', coordinationKey: 'shared-db', activeDeadlineSeconds: 120, lockTimeout: '1m' });
  const holder = await runningApply(w, dbHolder, 'holder');

  const waiterUid = (await w.get('waiter')).metadata.uid!;
  const states = await w.watchMigration('waiter');
  const approval = await w.approve('waiter');
  const claimed = await w.waitFor('waiter', 'its Apply claimed', (m) => (m.status?.activeOperation?.type === 'Apply' ? m : undefined));
  const claim = claimed.status!.activeOperation!;
  t.notOk(claim.dispatchStarted || claim.jobUID || claim.admissionSnapshot, 'fixture: the claim is an undispatched Apply');
  t.equal(claim.leaseEpoch, placeholderLeaseEpoch(claim.id), 'fixture: it has never taken the realm');
  t.equal(claim.approvalRef?.uid, approval.metadata.uid, 'fixture: it runs under the approval');
  t.equal(claim.coordinationDigest, holder.claim.coordinationDigest, 'fixture: on the holder\'s realm');
  t.same(await leaseHolding(w, holder.lease.name), [holder.lease.holder, holder.claim.leaseEpoch], 'fixture: the holder\'s running Apply holds it');
  t.equal(Date.parse(claim.dispatchNotAfter!) - Date.parse(claim.startedAt), 30_000, 'fixture: the dispatch window is the 30 s execution window');

  const retired = await w.waitFor('waiter', 'the claim retired', (m) => (m.status?.activeOperation?.id !== claim.id ? m : undefined), 90_000);
  t.equal((await w.get('holder')).status?.activeOperation?.id, holder.claim.id, 'fixture: the holder\'s Apply still ran when the window closed');
  const { carrying, retiring } = claimLife(states, claim.id);
  t.ok(retiring, 'the watch saw the retiring write');
  t.equal(readyReason(retiring), 'DispatchWindowClosed', 'retired because its dispatch window closed');
  t.match(retiring?.status?.conditions?.find((c) => c.type === 'Ready')?.message, claim.dispatchNotAfter!, 'naming the instant it closed');
  t.notOk(carrying.some((s) => s.status?.activeOperation?.dispatchStarted || s.status?.activeOperation?.admissionSnapshot), 'no state of the claim was ever marked or snapshotted');
  t.ok(carrying.every((s) => s.status?.activeOperation?.leaseEpoch === claim.leaseEpoch), 'and it never took the realm');
  const withdrawn = await eventAbout(w, waiterUid, 'ClaimWithdrawn', claim.id);
  t.match(withdrawn.note, /dispatch window closed/, 'a Warning Event says why it was withdrawn');
  t.ok(Date.parse(withdrawn.eventTime ?? '') >= Date.parse(claim.dispatchNotAfter!), 'not before the window closed');
  t.same(jobsNamed(w, claim.jobName), [], 'no Job was ever created under its name');
  t.equal(jobsOf(w, 'apply', 'waiter').length, 0, 'nor any Apply Job of the waiter');
  t.notOk(isConsumed(await approvalNamed(w, approval.metadata.name!)), 'its approval was not spent: authorization comes before the consume');
  t.notOk(retiring?.status?.pendingLockRelease, 'a claim that never took the realm owes no release');
  t.notOk(retired.status?.unresolvedRun, 'nothing ran, so nothing is unresolved');

  // Once the holder hands the realm back, a later claim of the waiter (the plan is re-read; its approval is still
  // unspent) dispatches, and the waiter's database is migrated once.
  const done = await w.waitFor('waiter', 'applied and in sync', inSyncApplied, 2 * WAIT_MS);
  const operation = done.status!.lastRun!.operationID;
  t.not(operation, claim.id, 'by a later claim');
  t.same(await historyOf(w, dbWaiter), VERSIONS.map((v) => [v, operation]), 'each version applied once, by that claim');
  const applies = jobsOf(w, 'apply', 'waiter');
  t.equal(applies.length, 1, 'one Apply Job of the waiter was ever created');
  t.not(applies[0]?.metadata?.name, claim.jobName, 'under the later claim\'s name');
  const consumed = (await approvalNamed(w, approval.metadata.name!))?.status?.conditions?.find((c) => c.type === 'Consumed');
  t.equal(consumed?.status, 'True', 'the approval left unspent was spent once');
  t.ok(consumed?.message.includes(operation), 'on the run that applied');
  await w.waitFor('holder', 'the holder applied too', inSyncApplied);
  t.same(await historyOf(w, dbHolder), VERSIONS.map((v) => [v, holder.claim.id]), 'the holder\'s run applied each version once');
});

/** The approval `name` as the approver would give it again: the same decision under the same name. */
async function recreateApproval(w: MigrationWorld, old: PtahMigrationApproval): Promise<PtahMigrationApproval> {
  const { migrationRef, planRef, planFingerprint } = old.spec;
  return w.approver.create<PtahMigrationApproval>({ apiVersion: old.apiVersion, kind: old.kind, metadata: { name: old.metadata.name, namespace: w.ns }, spec: { migrationRef, planRef, planFingerprint } } as PtahMigrationApproval);
}

/** Deletes the approval `name` and tries to give it again under its name; returns the deleted one and what the API server answered. */
async function replaceApproval(w: MigrationWorld, name: string): Promise<{ deleted: PtahMigrationApproval; answer: PtahMigrationApproval | ApiError }> {
  const deleted = await w.admin.get<PtahMigrationApproval>(w.ref('PtahMigrationApproval', name));
  await w.admin.delete(w.ref('PtahMigrationApproval', name));
  await waitFor(async () => ((await approvalNamed(w, name)) ? undefined : true), { what: `approval ${name} to be gone`, timeoutMs: 30_000 });
  const answer = await recreateApproval(w, deleted).catch((e: unknown) => {
    if (e instanceof ApiError) return e;
    throw e;
  });
  return { deleted, answer };
}

interface ReplacementWindow {
  what: string;
  hook: Omit<StepHook, 'run'>;
  /** How the passes after the replacement end, up to the retirement. */
  passes: RegExp[];
}

const WINDOWS: ReplacementWindow[] = [
  {
    // The Lease renewal is the one write between the authorize step's read of the approval and the consume step's.
    what: 'after the authorize step, before the consume step reads it: the consume step retires the claim in the same pass',
    hook: { step: 'lease', when: 'after' },
    passes: [/approval could not be spent|deleted or replaced before it was spent/],
  },
  {
    what: 'after the consume step read it, before its write: the write fails, and the next pass\'s authorization retires the claim',
    hook: { step: 'consume', when: 'before' },
    passes: [/^error: .*\b(404|409)\b/, /^authorization moved: ApprovalWithdrawn/],
  },
];

/** Passes until the claim is an Apply whose snapshot is durable and that holds the realm: everything before the consume. */
async function readyToConsume(t: Test, w: MigrationWorld, r: ManualReconciler, db: TestDatabase): Promise<ActiveOperation> {
  const waiting = await r.passUntil('orders', 'a plan awaiting approval or an Apply claim', (m) =>
    (m.status?.activeOperation?.type === 'Apply' || (m.status?.phase === 'AwaitingApproval' && m.status.plan) ? m : undefined));
  if (!waiting.status?.activeOperation) await w.approve('orders');
  const claim = await r.passUntil('orders', 'an Apply claim with its admission snapshot', (m) => {
    const c = m.status?.activeOperation;
    return c?.type === 'Apply' && c.admissionSnapshot ? c : undefined;
  });
  const m = await w.get('orders');
  t.notOk(claim.dispatchStarted || claim.jobUID, 'fixture: the claim is an undispatched Apply');
  t.same(await leaseHolding(w, leaseNameFor(claim.coordinationDigest!)), [holderIdentityFor(m.metadata.uid!, claim.id), claim.leaseEpoch], 'fixture: it holds the realm under its epoch');
  t.notOk(await w.admin.tryGet(jobRef(w, claim.jobName)), 'fixture: no Job stands under its name');
  t.notOk(isConsumed(await approvalNamed(w, claim.approvalRef!.name)), 'fixture: its approval is not spent');
  t.same(await w.history(db), [], 'fixture: nothing was applied');
  return claim;
}

t.test('an approval withdrawn between the claim\'s authorization and its consume write retires the claim ApprovalWithdrawn; nothing is dispatched, and admission refuses a replacement meanwhile', async (t) => {
  // Seed (Enforcement): "PtahMigration consumeMigrationApproval before the marker, skipped by findMigrationApproval; an
  // approval deleted or replaced by then retires the claim". The manager is driven pass by pass through the real
  // reconciler; the fault client withdraws the approval at an exact point between the two writes: deleted, and
  // given again under its name. Admission refuses the new one while the Apply claim stands, so "replaced" cannot
  // happen in this window through the API server; it is admitted once the claim is retired.
  const w = await migrationWorld(t);
  const db = await quickMigration(w, 'approval_withdrawn', 'OnApproval');
  const faults = new FaultClient(await managerClient());
  const r = manualReconciler(w, faults);
  const states = await w.watchMigration('orders');

  let again: PtahMigrationApproval | undefined;
  for (const window of WINDOWS) {
    await t.test(window.what, async (t) => {
      const claim = await readyToConsume(t, w, r, db);
      const spent = claim.approvalRef!;
      let replaced: Awaited<ReturnType<typeof replaceApproval>> | undefined;
      faults.hookStep({ ...window.hook, run: async () => { replaced = await replaceApproval(w, spent.name); } });
      const passes: string[] = [];
      for (const expected of window.passes) {
        passes.push(await r.pass('orders'));
        t.match(passes.at(-1), expected, `pass ${passes.length} ends as expected`);
      }
      t.ok(faults.hookRan, 'fixture: the approval was withdrawn at that point');
      t.equal(replaced?.deleted.metadata.uid, spent.uid, 'fixture: the claim\'s own approval');
      const answer = replaced?.answer;
      t.ok(answer instanceof ApiError && answer.code === 403, 'admission refused to give it again while the Apply claim stood');
      t.match(answer instanceof ApiError ? answer.message : '', /already applying .*not waiting for an approval/, 'because the migration is applying');

      const now = await w.get('orders');
      t.notOk(now.status?.activeOperation, `the claim is retired (passes: ${passes.join(' | ')})`);
      const { carrying, retiring } = claimLife(states, claim.id);
      t.equal(readyReason(retiring), 'ApprovalWithdrawn', 'with reason ApprovalWithdrawn');
      t.notOk(carrying.some((s) => s.status?.activeOperation?.dispatchStarted), 'it was never marked');
      t.ok(r.events.some((e) => e.reason === 'ClaimWithdrawn' && e.note.includes(claim.id)), 'a ClaimWithdrawn Event names it');
      t.notOk(faults.calls.some((c) => c.kind === 'Job' && c.verb === 'create' && c.name === claim.jobName), 'no create of its Job was ever made');
      t.notOk(await w.admin.tryGet(jobRef(w, claim.jobName)), 'nothing stands under its name');
      t.notOk(faults.calls.some((c) => c.step === 'consume' && c.ok), 'no approval was spent');
      t.not((await leaseHolding(w, leaseNameFor(claim.coordinationDigest!)))[0], holderIdentityFor(now.metadata.uid!, claim.id), 'the realm was handed back');
      t.notOk(now.status?.pendingLockRelease, 'and no release is owed');

      // Nothing is applying now: the same decision given again is admitted, as a new object.
      again = await recreateApproval(w, replaced!.deleted);
      t.not(again.metadata.uid, spent.uid, 'given again under its name with a new UID once the claim is gone');
    });
  }

  // The approval given again is a person's decision of its own: it authorizes one run, which applies once.
  t.equal(jobsOf(w, 'apply').length, 0, 'no Apply Job was created while the approval was withdrawn');
  await w.startController();
  const done = await w.waitFor('orders', 'applied and in sync', inSyncApplied);
  const operation = done.status!.lastRun!.operationID;
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, operation]), 'each version applied once');
  t.equal(jobsOf(w, 'apply').length, 1, 'by one Apply Job');
  const consumed = await approvalNamed(w, again!.metadata.name!);
  t.equal(consumed?.metadata.uid, again?.metadata.uid, 'the approval given last');
  t.match(consumed?.status?.conditions?.find((c) => c.type === 'Consumed'), { status: 'True', reason: 'DispatchCommitted' }, 'was spent on it');
});

t.test('an undispatched Apply claim at an execution-binding rotation goes in the write that installs the epoch; no Job, its Lease released, the plan re-read', async (t) => {
  // Seed: "A migration leaves nothing behind. An undispatched claim goes in the write that installs the epoch, and a
  // dispatched Apply becomes an unresolved run first, so the epoch moves on the next pass once no claim is in
  // flight." The claim is taken pass by pass to the last write before its consume: it holds the realm under its
  // own epoch and its admission snapshot is durable; then one pass of a release with another controller-state
  // version meets it.
  const w = await migrationWorld(t);
  const db = await quickMigration(w, 'rotation_undispatched', 'Always');
  const r = manualReconciler(w, await managerClient());
  const claim = await r.passUntil('orders', 'an Apply claim with its admission snapshot', (m) => {
    const c = m.status?.activeOperation;
    return c?.type === 'Apply' && c.admissionSnapshot ? c : undefined;
  });
  const before = await w.get('orders');
  const oldBinding = before.status!.executionBinding!;
  const lease = leaseNameFor(claim.coordinationDigest!);
  const holder = holderIdentityFor(before.metadata.uid!, claim.id);
  t.notOk(claim.dispatchStarted || claim.jobUID, 'fixture: the claim is an undispatched Apply');
  t.same(await leaseHolding(w, lease), [holder, claim.leaseEpoch], 'fixture: it holds the realm under its own epoch');
  t.equal(before.status?.plan?.uid, claim.planRef?.uid, 'fixture: its plan is the current one');
  const readings = jobsOf(w, 'history').length;
  const states = await w.watchMigration('orders');

  const next = { ...MANAGER, controllerStateVersion: oldBinding.controllerStateVersion + 1 };
  const rotated = manualReconciler(w, r.deps.client, next);
  t.equal(await rotated.pass('orders'), 'execution binding rotated', 'the next pass rotates the binding');
  const moved = states.findIndex((s) => s.status?.executionBinding?.epoch !== oldBinding.epoch);
  t.ok(moved > 0, 'fixture: the watch saw the old epoch and the new one');
  const installing = states[moved]!;
  t.equal(states[moved - 1]?.status?.activeOperation?.id, claim.id, 'the claim stood under the old epoch until then');
  t.notOk(installing.status?.activeOperation, 'and went in the write that installed the new epoch');
  t.notOk(installing.status?.plan, 'the plan of the old epoch went with it');
  t.match(installing.status?.pendingLockRelease, { operationID: claim.id, leaseEpoch: claim.leaseEpoch }, 'that write staged the release the claim owed');
  t.equal(readyReason(installing), 'ExecutionBindingChanged');
  t.equal(installing.status?.executionBinding?.controllerStateVersion, next.controllerStateVersion, 'the new epoch binds the new state version');
  t.ok(rotated.events.some((e) => e.reason === 'ExecutionBindingChanged' && e.note.includes(oldBinding.epoch)), 'a Warning Event names the retired epoch');
  const after = await w.get('orders');
  t.notOk(after.status?.pendingLockRelease, 'the release was performed');
  t.not((await leaseHolding(w, lease))[0], holder, 'the realm is no longer held for the claim');
  t.same(jobsNamed(w, claim.jobName), [], 'no Job was ever created for the retired claim');

  // The new release reads the history again and plans under the new epoch; that plan applies once.
  await w.startController(undefined, next);
  const done = await w.waitFor('orders', 'applied and in sync under the new epoch', inSyncApplied);
  const newEpoch = installing.status!.executionBinding!.epoch;
  t.equal(done.status?.executionBinding?.epoch, newEpoch, 'the epoch did not move again');
  t.ok(jobsOf(w, 'history').length > readings, 'the history was read again');
  const applies = jobsOf(w, 'apply');
  t.equal(applies.length, 1, 'one Apply Job was ever created');
  t.not(applies[0]?.metadata?.name, claim.jobName, 'for a new claim');
  const planName = applies[0]?.metadata?.annotations?.['operator.ptah.run/plan-name'];
  t.not(planName, claim.planRef?.name, 'of a new plan');
  t.equal((await w.admin.get<PtahMigrationPlan>(w.ref('PtahMigrationPlan', planName!))).spec.executionBindingID, newEpoch, 'computed under the new epoch');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, done.status!.lastRun!.operationID]), 'each version applied once, by the new epoch\'s run');
  t.not(done.status?.lastRun?.operationID, claim.id);
});

t.test('a finalizer with no claim and no record is removed by the next pass before anything else', async (t) => {
  // Seed: "Two writes, in order: the finalizer through a metadata patch, then the claim through a status patch. A
  // crash between them leaves a finalizer with no claim, which the next pass removes before doing anything else."
  // The admin puts the finalizer back on a settled migration while no manager runs; the manager that starts next
  // owes a binding rotation too, and the finalizer goes first.
  const w = await migrationWorld(t);
  await w.startController();
  const db = await quickMigration(w, 'bare_finalizer', 'Always');
  await w.waitFor('orders', 'applied, in sync, its finalizer gone', (m) => (inSyncApplied(m) && !m.metadata.finalizers?.includes(FINALIZERS.migration) ? m : undefined));
  await w.stopController();

  const added = await w.admin.patch<PtahMigration>(w.ref('PtahMigration', 'orders'), [
    { op: 'test', path: '/metadata/finalizers', value: null },
    { op: 'add', path: '/metadata/finalizers', value: [FINALIZERS.migration] },
  ], 'json');
  t.same(added.metadata.finalizers, [FINALIZERS.migration], 'fixture: the resource carries the migration finalizer');
  t.notOk(added.status?.activeOperation || added.status?.unresolvedRun || added.status?.pendingLockRelease, 'fixture: with no claim and no record');
  const states = await w.watchMigration('orders');
  const jobsBefore = [...w.jobsSeen.keys()];
  const epoch = added.status!.executionBinding!.epoch;

  await w.startController(undefined, { ...MANAGER, controllerStateVersion: added.status!.executionBinding!.controllerStateVersion + 1 });
  await w.waitFor('orders', 'the binding rotated', (m) => (m.status?.executionBinding?.epoch !== epoch ? m : undefined));
  // The GET above can see the rotation before the test's own watch delivers it: wait for the watch too.
  await waitFor(async () => states.some((s) => s.status?.executionBinding?.epoch !== epoch) || undefined, { what: 'the watch delivered the rotation', timeoutMs: 15_000 });
  const later = states.slice(states.findIndex((s) => s.metadata.resourceVersion === added.metadata.resourceVersion) + 1);
  const first = later[0];
  t.ok(first, 'fixture: the watch saw the writes after the finalizer was added');
  t.notOk(first?.metadata.finalizers?.includes(FINALIZERS.migration), 'the first write removed the finalizer');
  t.same(first?.status, added.status, 'and changed nothing else');
  t.ok(later.findIndex((s) => s.status?.executionBinding?.epoch !== epoch) > 0, 'the rotation came after it');
  t.ok(later.filter((s) => s.status?.activeOperation).every((s) => s.metadata.finalizers?.includes(FINALIZERS.migration)),
    'a claim taken afterwards carries the finalizer: only a finalizer with nothing to hold is removed');
  await w.waitFor('orders', 'settled again under the new epoch', (m) => (m.status?.phase === 'InSync' && !m.status.activeOperation && m.status.executionBinding?.epoch !== epoch ? m : undefined));
  await sleep(2_000);
  t.same([...w.jobsSeen.values()].filter((j) => !jobsBefore.includes(j.metadata!.uid!)).map((j) => j.metadata?.labels?.['operator.ptah.run/operation']), ['history'],
    'one reading under the new epoch and nothing else ran');
  t.equal(jobsOf(w, 'apply').length, 1, 'no second Apply');
  t.equal((await w.history(db)).length, 3, 'the history is unchanged');
});
