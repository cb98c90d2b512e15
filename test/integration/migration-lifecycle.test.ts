// What happens to a PtahMigration Apply while it runs, on the real control plane with the real runner, executor
// and PostgreSQL: a suspension keeps the claim and the Lease and leaves the run unresolved until a reading after
// the resume settles it; an operator upgrade that keeps the execution binding adopts the run; a moved execution
// binding records the run Unknown before the epoch moves and leaves the Lease to expire; deletion does not wait
// and announces the lost run. Every assertion is on a durable record: status, the realm Lease, the database's
// history table, every Job ever created, and Events.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { KubeObject } from '../../src/shared/kube-client.js';
import { LEASE_EPOCH_ANNOTATION } from '../../src/shared/targetlock.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { jobsOf, MANAGER, migrationWorld, WAIT_MS } from './migration-world.js';
import { historyOf, isTerminal, jobRef, jobTerminal, readLease, renewedAt, sleepingSessions, startSlowApply, VERSIONS } from './slow-apply.js';

t.test('suspension mid-Apply keeps the claim and the Lease; the run is left unresolved and a reading after the resume settles it', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('suspend_mid_apply');
  const { m, claim, job, lease } = await startSlowApply(w, db, 30);
  const readingsBefore = jobsOf(w, 'history').length;

  const suspended = await w.admin.patch<PtahMigration>(w.ref('PtahMigration', 'orders'), { spec: { suspend: true } }, 'merge');
  t.ok(suspended.metadata.generation! > m.metadata.generation!, 'fixture: the suspension is a new generation');
  const seen = await w.waitFor('orders', 'the suspension seen by a supervising pass', (m) =>
    (m.status?.conditions?.find((c) => c.type === 'Ready')?.observedGeneration === suspended.metadata.generation ? m : undefined));
  t.match(seen.status?.activeOperation, { id: claim.id, jobName: claim.jobName, jobUID: claim.jobUID, dispatchStarted: true }, 'the claim still names the Job');
  t.notOk(seen.status?.activeOperation?.leaseContinuityLost, 'the Lease was held throughout');

  const before = await readLease(w, lease.name);
  t.equal(before?.spec?.holderIdentity, lease.holder, 'the claim holds the realm');
  const renewed = await waitFor(async () => {
    const now = await readLease(w, lease.name);
    return renewedAt(now) > renewedAt(before) ? now : undefined;
  }, { what: 'the Lease renewed while suspended', timeoutMs: 30_000 });
  t.equal(renewed.spec?.holderIdentity, lease.holder, 'renewed by the same holder');
  t.equal(renewed.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION], claim.leaseEpoch, 'under the claim\'s epoch');
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, claim.jobName))), 'while the Job still runs');
  t.equal((await w.get('orders')).status?.activeOperation?.id, claim.id, 'and the claim still stands');

  await jobTerminal(w, claim.jobName);
  const recorded = await w.waitFor('orders', 'the run recorded unresolved', (m) => (m.status?.unresolvedRun && !m.status.activeOperation ? m : undefined));
  t.match(recorded.status?.unresolvedRun, { outcome: 'Unknown', operationID: claim.id, jobName: claim.jobName, jobUID: job.metadata?.uid }, 'the run is unresolved, Unknown');
  t.match(recorded.status?.lastRun, { outcome: 'Unknown', operationID: claim.id, appliedVersions: [] }, 'its result was not read');
  t.match(recorded.status?.lastRun?.message, /^InputsChanged: /, 'because the generation moved');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, claim.id]), 'whatever the run did: here it applied everything');

  const stillSuspended = await w.waitFor('orders', 'suspended with the record standing', (m) => (m.status?.phase === 'Suspended' ? m : undefined));
  t.equal(stillSuspended.status?.unresolvedRun?.operationID, claim.id, 'a suspended migration takes no reading: the record stands');
  t.notOk(stillSuspended.status?.pendingLockRelease, 'the release the run owed was performed');
  t.not((await readLease(w, lease.name))?.spec?.holderIdentity, lease.holder, 'the realm was handed back once nothing could write');
  await sleep(3_000);
  t.equal((await w.get('orders')).status?.unresolvedRun?.operationID, claim.id, 'still unresolved');
  t.equal(jobsOf(w, 'apply').length, 1, 'no Apply Job while suspended');
  t.equal(jobsOf(w, 'history').length, readingsBefore, 'no reading while suspended');

  await w.admin.patch(w.ref('PtahMigration', 'orders'), { spec: { suspend: false } }, 'merge');
  const settled = await w.waitFor('orders', 'settled by a reading after the resume', (m) =>
    (m.status?.resolvedRun && !m.status.unresolvedRun && m.status.phase === 'InSync' ? m : undefined));
  t.match(settled.status?.resolvedRun, { operationID: claim.id, outcome: 'Unknown', resolution: 'ResolvedByHistoryRead' }, 'the record names the settled attempt');
  t.equal(settled.status?.history?.targetIdentityDigest, claim.targetIdentityDigest, 'by a reading of the same database');
  t.equal(settled.status?.history?.pendingCount, 0, 'which found nothing pending');
  t.ok(jobsOf(w, 'history').length > readingsBefore, 'a reading ran after the resume');
  t.equal(jobsOf(w, 'apply').length, 1, 'nothing was run again');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, claim.id]), 'each version once in the history table');
});

t.test('an operator upgrade that keeps the execution binding adopts the running Apply and harvests it', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('upgrade_keeps_binding');
  const { m, claim, job } = await startSlowApply(w, db, 30);
  const binding = m.status!.executionBinding!;

  await w.stopController();
  const next = { ...MANAGER, controllerImage: 'localhost/ptah-operator:next', controllerRevision: 'migration-test-next' };
  await w.startController(undefined, next);
  const adopted = await w.waitFor('orders', 'the new release recorded beside the claim', (m) =>
    (m.status?.executionBinding?.controllerRevision === next.controllerRevision ? m : undefined));
  t.equal(adopted.status?.activeOperation?.jobUID, job.metadata?.uid, 'the claim still names the running Job');
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, claim.jobName))), 'fixture: the Job was still running when the new release took over');
  t.match(adopted.status?.executionBinding, { epoch: binding.epoch, controllerStateVersion: binding.controllerStateVersion, controllerImage: next.controllerImage },
    'the epoch is kept; only the recorded identity changed');

  const done = await w.waitFor('orders', 'applied and in sync', (m) =>
    (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' && !m.status.activeOperation ? m : undefined));
  t.match(done.status?.lastRun, { operationID: claim.id, jobName: claim.jobName, jobUID: job.metadata?.uid, appliedVersions: VERSIONS }, 'the adopted run was harvested');
  t.match(done.status?.lastRun?.dispatchedBy, { controllerRevision: MANAGER.controllerRevision }, 'it names the release that dispatched it');
  t.notOk(done.status?.unresolvedRun, 'nothing is unresolved');
  t.equal(jobsOf(w, 'apply').length, 1, 'no second Apply Job');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, claim.id]), 'each version applied once, by the adopted run');
});

t.test('an execution-binding rotation mid-Apply records the run Unknown before the epoch moves and leaves the Lease to expire', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('binding_rotation');
  const { m, claim, lease } = await startSlowApply(w, db, 30);
  const oldEpoch = m.status!.executionBinding!.epoch;
  const states = await w.watchMigration('orders');

  await w.stopController();
  await w.startController(undefined, { ...MANAGER, controllerStateVersion: m.status!.executionBinding!.controllerStateVersion + 1 });
  const rotated = await w.waitFor('orders', 'the run recorded and the epoch moved', (m) =>
    (m.status?.unresolvedRun?.operationID === claim.id || m.status?.resolvedRun?.operationID === claim.id) && m.status.executionBinding?.epoch !== oldEpoch ? m : undefined);
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, claim.jobName))), 'fixture: the Job can still write');
  t.match(rotated.status?.lastRun, { outcome: 'Unknown', operationID: claim.id, jobUID: claim.jobUID }, 'the dispatched Apply is Unknown');
  t.match(rotated.status?.lastRun?.message, /^ExecutionBindingChanged: /, 'because the binding moved');
  t.equal(rotated.status?.executionBinding?.controllerStateVersion, m.status!.executionBinding!.controllerStateVersion + 1, 'the new epoch binds the new state version');

  const moved = states.findIndex((s) => s.status?.executionBinding?.epoch !== oldEpoch);
  t.ok(moved > 0, 'fixture: the watch saw the old epoch and the new one');
  t.match(states[moved]?.status?.unresolvedRun, { operationID: claim.id, outcome: 'Unknown' }, 'the run was recorded unresolved before the epoch moved');
  t.ok(states.slice(0, moved).some((s) => s.status?.unresolvedRun?.operationID === claim.id && !s.status.activeOperation),
    'in its own write, under the old epoch');
  t.notOk(states.slice(moved).some((s) => s.status?.activeOperation?.id === claim.id), 'no state of the new epoch carries the claim');
  t.same(await readLease(w, lease.name).then((l) => [l?.spec?.holderIdentity, l?.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION]]),
    [lease.holder, claim.leaseEpoch], 'the realm is still held while the Job can write');

  await jobTerminal(w, claim.jobName);
  await sleep(3_000);
  t.notOk(states.some((s) => s.status?.pendingLockRelease), 'no release was ever staged');
  t.same(await readLease(w, lease.name).then((l) => [l?.spec?.holderIdentity, l?.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION]]),
    [lease.holder, claim.leaseEpoch], 'nor performed after the Job stopped: the Lease is left to expire');
  t.equal(jobsOf(w, 'apply').length, 1, 'no second Apply Job');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, claim.id]), 'the one run applied each version once');
});

t.test('deleting a PtahMigration mid-Apply does not wait for the run, and a Warning Event announces it is lost', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('delete_mid_apply');
  const { m, claim, lease } = await startSlowApply(w, db, 40);

  await w.admin.delete(w.ref('PtahMigration', 'orders'));
  await waitFor(async () => ((await w.admin.tryGet(w.ref('PtahMigration', 'orders'))) ? undefined : true), { what: 'the PtahMigration to go', timeoutMs: WAIT_MS });
  t.notOk((await w.history(db)).some((r) => r.version === '0002'), 'it went before the sleeping migration finished');

  type EventsV1 = KubeObject & { type?: string; reason?: string; note?: string; regarding?: { uid?: string; kind?: string } };
  const discarded = await waitFor(async () => {
    const events = await w.admin.list<EventsV1>('events.k8s.io/v1', 'Event', w.ns);
    return events.find((e) => e.reason === 'ActiveRunDiscarded' && e.regarding?.uid === m.metadata.uid);
  }, { what: 'the ActiveRunDiscarded Event', timeoutMs: 30_000 });
  t.equal(discarded.type, 'Warning', 'a Warning');
  t.equal(discarded.regarding?.kind, KINDS.PtahMigration.kind, 'about the deleted PtahMigration');
  t.match(discarded.note, claim.id, 'it names the lost operation');
  t.match(discarded.note, /may still be writing/, 'and says the run may still be writing');
  t.same(await readLease(w, lease.name).then((l) => [l?.spec?.holderIdentity, l?.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION]]),
    [lease.holder, claim.leaseEpoch], 'the realm Lease is left to expire, not released');
  t.equal(jobsOf(w, 'apply').length, 1, 'one Apply Job was ever created');
  t.same(await w.admin.list(API_VERSION, KINDS.PtahMigration.kind, w.ns), [], 'nothing stands in for the resource');
  await w.sql(db, 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
});
