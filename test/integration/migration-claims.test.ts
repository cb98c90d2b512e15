// Claims in flight on the real control plane, with the real runner, executor and PostgreSQL: a suspension landing
// between the create and the UID record does not retire the running Apply; continuity loss is latched when the
// realm Lease changes hands mid-run and when a dispatched claim records no Lease duration; a claim of a type this
// manager does not know survives an execution-binding rotation untouched; a claim the driver refuses is reported
// in a condition and looked at again after a back-off, not in a hot loop.
import t, { type Test } from 'tap';
import type { EventsV1Event } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { registry } from '../../src/shared/metrics.js';
import { restClient, type KubeClient } from '../../src/shared/kube-client.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { LEASE_EPOCH_ANNOTATION } from '../../src/shared/targetlock.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { jobsOf, MANAGER, migrationWorld, WAIT_MS, type MigrationWorld } from './migration-world.js';
import { refuseUpdates } from './test-policy.js';
import { historyOf, isTerminal, jobRef, jobTerminal, readLease, renewedAt, sleepingSessions, slowFiles, startSlowApply, VERSIONS } from './slow-apply.js';

const cluster = sharedCluster();
const managerClient = (): Promise<KubeClient> => restClient(cluster.kubeConfig('manager'), { fieldManager: 'ptah-migration-claims-test' });

/** Refuses, in the test namespace, the PtahMigration status writes for which `allowed` is false. */
const statusWritePolicy = (t: Test, w: MigrationWorld, name: string, allowed: string) =>
  refuseUpdates(t, w.ns, name, { apiGroup: 'operator.ptah.run', resource: 'ptahmigrations/status', allowed });

const claimOf = (m: PtahMigration) => m.status?.activeOperation;

/** Waits until the claim's run has its lastRun record and the claim is gone. */
const runAccountedFor = (w: MigrationWorld, claim: ActiveOperation) =>
  w.waitFor('orders', 'the run accounted for', (m) => (m.status?.lastRun?.operationID === claim.id && !claimOf(m) ? m : undefined));

/** The unresolved record a run left: still standing, or already settled by a reading of the same database. */
const unresolvedRecordOf = (m: PtahMigration) => m.status?.unresolvedRun ?? m.status?.resolvedRun;

t.test('a suspension between the create and the UID record keeps the running Apply: adopted, its Lease renewed, settled Unknown on its terminal pass', async (t) => {
  const w = await migrationWorld(t);
  // Holds the pass in the window between the create and the UID record: the manager cannot record a Job UID.
  const allowUidRecord = await statusWritePolicy(t, w, 'no-job-uid',
    '!has(object.status) || !has(object.status.activeOperation) || object.status.activeOperation.type != "Apply" || !has(object.status.activeOperation.jobUID) || ' +
    '(has(oldObject.status) && has(oldObject.status.activeOperation) && has(oldObject.status.activeOperation.jobUID))');
  await w.startController();
  const db = await w.database('adopt_moved');
  const secret = await w.installSample(db);
  // Long enough to outlast the refusals' backoff: each refused UID write doubles the key's retry delay (5 ms · 2ⁿ), so
  // after the ~10-20 s of refusals before allowUidRecord the adoption itself can come 10-20 s later. With 25 s the
  // Job ended before the renewal after the adoption could be seen under CI load (the fresh-clone run at e164f88).
  await w.artifact('orders-r1', slowFiles(60));
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always', activeDeadlineSeconds: 120, lockTimeout: '1m' });

  const claim = await waitFor(async () => {
    const c = claimOf(await w.get('orders'));
    if (c?.type !== 'Apply' || c.dispatchStarted !== true) return undefined;
    return (await w.admin.tryGet(jobRef(w, c.jobName))) ? c : undefined;
  }, { what: 'an Apply marked, its Job created', timeoutMs: WAIT_MS });
  await waitFor(async () => ((await sleepingSessions(w, db)) > 0 ? true : undefined), { what: 'the Apply to be sleeping in the database', timeoutMs: WAIT_MS });
  const job = await w.admin.get(jobRef(w, claim.jobName));
  t.notOk(claimOf(await w.get('orders'))?.jobUID, 'fixture: the claim has not recorded the Job\'s UID');

  await w.admin.patch(w.ref('PtahMigration', 'orders'), { spec: { suspend: true } }, 'merge');
  await sleep(6_000);
  const during = await w.get('orders');
  t.equal(claimOf(during)?.id, claim.id, 'passes under the moved inputs leave the claim in flight');
  t.notOk(during.status?.unresolvedRun, 'and record nothing while the Job runs');
  t.notOk(isTerminal(await w.admin.get(jobRef(w, claim.jobName))), 'fixture: the Job is still running');

  await allowUidRecord();
  const adopted = await w.waitFor('orders', 'the Job adopted by UID', (m) => (claimOf(m)?.jobUID ? m : undefined));
  t.equal(claimOf(adopted)?.jobUID, job.metadata?.uid, 'the claim records the Job it created');
  t.equal(claimOf(adopted)?.id, claim.id);
  const leaseName = leaseNameFor(claim.coordinationDigest!);
  const before = await readLease(w, leaseName);
  const renewed = await waitFor(async () => {
    const now = await readLease(w, leaseName);
    return renewedAt(now) > renewedAt(before) ? now : undefined;
  }, { what: 'the Lease renewed after the adoption', timeoutMs: 30_000 });
  t.equal(renewed.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION], claimOf(adopted)?.leaseEpoch, 'under the claim\'s epoch');
  t.notOk(isTerminal(await w.admin.get(jobRef(w, claim.jobName))), 'while the Job still runs');

  const ended = await jobTerminal(w, claim.jobName);
  const recorded = await w.waitFor('orders', 'the run recorded unresolved', (m) => (m.status?.unresolvedRun && !claimOf(m) ? m : undefined));
  t.match(recorded.status?.unresolvedRun, { outcome: 'Unknown', operationID: claim.id, jobUID: job.metadata?.uid }, 'its result is not read: the inputs moved');
  const endedAt = ended.status?.conditions?.find((c) => c.type === 'Complete' || c.type === 'Failed')?.lastTransitionTime;
  t.ok(Date.parse(recorded.status!.unresolvedRun!.recordedAt) >= new Date(endedAt!).getTime() - 1_000, 'recorded on the terminal pass, not before');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, claim.id]), 'the one run applied each migration once');
  t.equal(jobsOf(w, 'apply').length, 1, 'one Apply Job was ever created');
});

t.test('continuity loss is latched when the realm Lease changes hands mid-run: the run is Unknown whatever it did', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('lease_lost');
  const { claim, lease } = await startSlowApply(w, db, 20);
  await w.admin.delete({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: lease.name });

  const latched = await w.waitFor('orders', 'continuity loss latched', (m) => (claimOf(m)?.leaseContinuityLost ? m : undefined));
  t.equal(claimOf(latched)?.id, claim.id, 'on the same claim');
  t.not(claimOf(latched)?.leaseEpoch, claim.leaseEpoch, 'which now names the epoch it holds');
  await jobTerminal(w, claim.jobName);
  const recorded = await runAccountedFor(w, claim);
  t.match(recorded.status?.lastRun, { outcome: 'Unknown', operationID: claim.id }, 'never accounted Applied: the run is Unknown');
  t.equal(unresolvedRecordOf(recorded)?.operationID, claim.id, 'and left an unresolved record (a later reading may have settled it)');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, claim.id]), 'the run itself applied each migration once');
  t.equal(jobsOf(w, 'apply').length, 1);
});

t.test('a dispatched Apply that records no Lease duration is not treated as continuous: continuity loss is latched', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('lease_fields');
  const { claim } = await startSlowApply(w, db, 20);
  await w.stopController();
  const manager = await managerClient();
  await manager.patch(w.ref('PtahMigration', 'orders'), [
    { op: 'test', path: '/status/activeOperation/id', value: claim.id },
    { op: 'remove', path: '/status/activeOperation/leaseDurationSeconds' },
  ], 'json', { subresource: 'status' });
  t.notOk(claimOf(await w.get('orders'))?.leaseDurationSeconds, 'fixture: the claim records no Lease duration');
  await w.startController();

  const latched = await w.waitFor('orders', 'continuity loss latched', (m) => (claimOf(m)?.leaseContinuityLost ? m : undefined));
  t.equal(claimOf(latched)?.id, claim.id);
  await jobTerminal(w, claim.jobName);
  const recorded = await runAccountedFor(w, claim);
  t.match(recorded.status?.lastRun, { outcome: 'Unknown', operationID: claim.id }, 'the result is not trusted');
  t.equal(unresolvedRecordOf(recorded)?.operationID, claim.id, 'and left an unresolved record (a later reading may have settled it)');
  t.equal(jobsOf(w, 'apply').length, 1);
});

t.test('a claim of an operation type this manager does not know survives a binding rotation untouched', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('unknown_type');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', slowFiles(0));
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'OnApproval' });
  const waiting = await w.waitFor('orders', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' && !claimOf(m) ? m : undefined));
  await w.stopController();

  const epoch = waiting.status!.executionBinding!.epoch;
  const foreign: ActiveOperation = {
    type: 'Vacuum', id: `sha256:${'f'.repeat(64)}`, inputFingerprint: `sha256:${'e'.repeat(64)}`, jobName: 'ptah-m-vacuum-orders-0123456789abcdef',
    startedAt: new Date().toISOString(), attempt: 1, executionBindingID: epoch, dispatchStarted: true,
  };
  const manager = await managerClient();
  await manager.patch(w.ref('PtahMigration', 'orders'), [{ op: 'add', path: '/status/activeOperation', value: foreign }], 'json', { subresource: 'status' });
  await w.startController(undefined, { ...MANAGER, controllerStateVersion: 2 });

  const blocked = await w.waitFor('orders', 'the unknown claim reported', (m) =>
    (m.status?.conditions?.some((c) => c.type === 'Blocked' && c.status === 'True' && c.reason === 'UnknownOperation') ? m : undefined));
  await sleep(4_000);
  const after = await w.get('orders');
  t.same(claimOf(after), foreign, 'the claim stands exactly as the newer manager wrote it');
  t.equal(after.status?.executionBinding?.epoch, epoch, 'the binding did not move under it');
  t.equal(blocked.status?.phase, 'Blocked');
  t.equal(jobsOf(w, 'apply').length, 0, 'nothing was dispatched');
});

/** A CEL condition that lets every status write through except an Apply claim's carrying `field`. */
const applyClaimWithout = (field: string) =>
  `!has(object.status) || !has(object.status.activeOperation) || object.status.activeOperation.type != "Apply" || !has(object.status.activeOperation.${field})`;

/**
 * A migration (policy Always, quick files) whose Apply claim is held where the manager cannot write `field`; waits
 * until `ready` accepts the claim and stops the controller there. Returns the claim, its database and the
 * function that lifts the hold.
 */
async function heldApplyClaim(t: Test, w: MigrationWorld, field: string, what: string, ready: (c: ActiveOperation) => boolean) {
  const lift = await statusWritePolicy(t, w, `no-${field.toLowerCase()}`, applyClaimWithout(field));
  await w.startController();
  const db = await w.database(`held_${field.toLowerCase()}`);
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', slowFiles(0));
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always' });
  const claim = await waitFor(async () => {
    const c = claimOf(await w.get('orders'));
    return c?.type === 'Apply' && ready(c) ? c : undefined;
  }, { what, timeoutMs: WAIT_MS });
  await w.stopController();
  return { claim, db, lift };
}

/** How many passes the migration controller has run in this process. */
async function reconciles(): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'controller_runtime_reconcile_total');
  return (metric?.values ?? []).filter((v) => v.labels.controller === 'ptahmigration').reduce((sum, v) => sum + v.value, 0);
}

t.test('a claim the dispatch driver refuses is reported in a condition and looked at again after a back-off', async (t) => {
  const w = await migrationWorld(t);
  // Held undispatched: the manager cannot record an admission snapshot.
  const { claim, lift } = await heldApplyClaim(t, w, 'admissionSnapshot', 'an undispatched Apply claim', (c) => Boolean(c.leaseEpoch));
  // The claim loses its Lease duration: a claim the driver must refuse, never dispatch.
  const manager = await managerClient();
  await manager.patch(w.ref('PtahMigration', 'orders'), [
    { op: 'test', path: '/status/activeOperation/id', value: claim.id },
    { op: 'remove', path: '/status/activeOperation/leaseDurationSeconds' },
  ], 'json', { subresource: 'status' });
  await lift();
  await w.startController();

  const refused = await w.waitFor('orders', 'the refusal reported', (m) =>
    (m.status?.conditions?.some((c) => c.type === 'Blocked' && c.status === 'True' && c.reason === 'ClaimRefused') ? m : undefined));
  t.match(refused.status?.conditions?.find((c) => c.reason === 'ClaimRefused')?.message, /lease duration/, 'the condition says why');
  const start = await reconciles();
  await sleep(10_000);
  const passes = (await reconciles()) - start;
  t.ok(passes <= 3, `the refused claim is looked at again after a back-off, not in a loop (${passes} passes in 10 s)`);
  t.equal(claimOf(await w.get('orders'))?.id, claim.id, 'the claim is left for a person or a newer manager');
  t.equal(jobsOf(w, 'apply').length, 0, 'nothing was dispatched');
});

t.test('a template that moved after its admission snapshot withdraws the undispatched claim with a Warning; the next claim dispatches once', async (t) => {
  const w = await migrationWorld(t);
  // Held before the mark: the manager cannot write dispatchStarted.
  const { claim: held, db, lift } = await heldApplyClaim(t, w, 'dispatchStarted', 'an Apply claim with its admission snapshot, held before the mark', (c) => Boolean(c.admissionSnapshot));
  t.equal(jobsOf(w, 'apply').length, 0, 'fixture: nothing dispatched');

  // A release whose Pod template differs (its controller image is recorded in the template) and keeps the binding.
  await w.startController(undefined, { ...MANAGER, controllerImage: 'localhost/ptah-operator:next' });
  const withdrawn = await w.waitFor('orders', 'the held claim withdrawn', (m) => (claimOf(m)?.id !== held.id ? m : undefined));
  t.not(claimOf(withdrawn)?.id, held.id, 'the claim whose envelope moved is gone');
  const event = await waitFor(async () => (await w.admin.list<EventsV1Event>('events.k8s.io/v1', 'Event', w.ns))
    .find((e) => e.reason === 'AdmissionSnapshotRefused' && (e.note ?? '').includes(held.id)), { what: 'the Warning Event', timeoutMs: 30_000 });
  t.equal(event.type, 'Warning', 'a Warning Event names the refused claim');
  t.equal(jobsOf(w, 'apply').length, 0, 'no Job was created under the moved template');

  await lift();
  const done = await w.waitFor('orders', 'in sync', (m) => (m.status?.phase === 'InSync' ? m : undefined));
  const applies = jobsOf(w, 'apply');
  t.equal(applies.length, 1, 'the next claim dispatched exactly once');
  t.not(done.status?.lastRun?.operationID, held.id, 'under a new operation');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, done.status!.lastRun!.operationID]), 'each migration applied once');
});
