// The manager on the real API server: two replicas, one Lease; only the leader's controller reconciles, and when it
// stops the other replica's controller takes over from a fresh list. Also the Event recorder and the finalizer
// helper against the API server's own validation and JSON Patch semantics.
import t from 'tap';
import { pino } from 'pino';
import { Controller } from '../../src/controller/controller.js';
import { EventRecorder } from '../../src/controller/events.js';
import { FinalizerError, addFinalizer, hasFinalizer, removeFinalizer } from '../../src/controller/finalizer.js';
import { startController, type ControllerRegistration, type ManagerHandle } from '../../src/controller/manager.js';
import { ApiError, restClient, type KubeClient, type KubeObject } from '../../src/shared/kube-client.js';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';

const silent = pino({ level: 'silent' });

let admin: KubeClient;
t.before(async () => {
  admin = await restClient(sharedCluster().kubeConfig('admin'));
});

const configMap = (namespace: string, name: string): KubeObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data: {} } as KubeObject);
const cmRef = (namespace: string, name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace, name });

t.test('only the leader reconciles; when it stops, the other replica takes over and reconciles from a fresh list', async (t) => {
  const ns = await testNamespace(t);
  const passes: Array<[string, string]> = [];
  const registration = (identity: string): ControllerRegistration => ({
    name: 'configmap-echo',
    setup: (env) =>
      new Controller({
        name: 'configmap-echo',
        logger: silent,
        workers: env.workers,
        reconcile: async (key) => {
          passes.push([identity, key]);
        },
      }).watchPrimary(env.informer({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns })),
  });
  const start = (identity: string): ManagerHandle =>
    startController({
      kubeConfig: sharedCluster().kubeConfig('admin'),
      client: admin,
      logger: silent,
      leaseNamespace: ns,
      leaseName: 'ptah-manager',
      identity,
      leaderElection: { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500 },
      workers: 2,
      controllers: [registration(identity)],
    });
  const m1 = start('m1');
  const m2 = start('m2');
  t.teardown(() => Promise.all([m1.stop(), m2.stop()]));

  const leaderName = await waitFor(async () => (m1.isLeader() ? 'm1' : m2.isLeader() ? 'm2' : undefined), { what: 'a leader', timeoutMs: 20_000 });
  const [leader, follower, followerName] = leaderName === 'm1' ? [m1, m2, 'm2'] : [m2, m1, 'm1'];
  await waitFor(async () => (leader.ready() ? true : undefined), { what: 'the leader\'s informers to sync', timeoutMs: 20_000 });
  t.equal(follower.ready(), true, 'a follower is ready: readiness does not depend on leadership');

  await admin.create(configMap(ns, 'first'));
  await waitFor(async () => (passes.some(([, k]) => k === `${ns}/first`) ? true : undefined), { what: 'a pass for first', timeoutMs: 20_000 });
  t.ok(passes.every(([who]) => who === leaderName), 'only the leader reconciled');
  const handoverAt = passes.length;

  await leader.stop();
  t.equal(leader.ready(), false, 'a stopped manager is not ready');
  t.equal(leader.isLeader(), false);
  await waitFor(async () => (follower.isLeader() && follower.ready() ? true : undefined), { what: 'the follower to lead', timeoutMs: 20_000 });
  await waitFor(async () => (passes.slice(handoverAt).some(([, k]) => k === `${ns}/first`) ? true : undefined), {
    what: 'the new leader to reconcile what existed before it led', timeoutMs: 20_000,
  });
  await admin.create(configMap(ns, 'second'));
  await waitFor(async () => (passes.some(([, k]) => k === `${ns}/second`) ? true : undefined), { what: 'a pass for second', timeoutMs: 20_000 });
  t.ok(passes.slice(handoverAt).every(([who]) => who === followerName), 'after the handover only the new leader reconciled');
});

t.test('the Event recorder writes events.k8s.io/v1 Events the API server accepts, with a growing series and a redacted note', async (t) => {
  const ns = await testNamespace(t);
  const regarding = await admin.create(configMap(ns, 'subject'));
  const recorder = new EventRecorder({ client: admin, controller: 'operator.ptah.run/manager', instance: 'test-instance', logger: silent });
  const event = { type: 'Warning' as const, reason: 'TargetUnreachable', note: 'cannot reach postgres://app:hunter2@db:5432/app (password=hunter2)', action: 'Observe' };
  recorder.record(regarding, event);
  await recorder.flush();
  recorder.record(regarding, event);
  recorder.record(regarding, event);
  await recorder.flush();
  const list = await admin.list<KubeObject & Record<string, unknown>>('events.k8s.io/v1', 'Event', ns);
  const ours = list.filter((e) => (e.regarding as { name?: string } | undefined)?.name === 'subject');
  t.equal(ours.length, 1, 'three occurrences, one Event');
  t.match(ours[0], {
    reason: 'TargetUnreachable',
    type: 'Warning',
    action: 'Observe',
    reportingController: 'operator.ptah.run/manager',
    reportingInstance: 'test-instance',
    series: { count: 3 },
    regarding: { kind: 'ConfigMap', name: 'subject', namespace: ns, uid: regarding.metadata?.uid },
  });
  const note = String(ours[0]?.note);
  t.notOk(note.includes('hunter2'), `no credential in the note: ${note}`);
  t.notOk(note.includes('db:5432'), 'no URL in the note');
});

t.test('finalizers: added and removed by guarded JSON Patch; a stale read fails instead of clobbering', async (t) => {
  const ns = await testNamespace(t);
  const ours = 'operator.ptah.run/test';
  const theirs = 'example.com/other';
  const fresh = await admin.create(configMap(ns, 'guarded'));
  const withOurs = await addFinalizer(admin, fresh, ours);
  t.same(withOurs.metadata?.finalizers, [ours], 'added to an object with no finalizers');
  t.equal(await addFinalizer(admin, withOurs, ours), withOurs, 'already there: no write');

  // Someone else adds theirs; our copy is now stale, and adding through it must fail, not drop theirs.
  const withBoth = await admin.patch<KubeObject>(cmRef(ns, 'guarded'), [{ op: 'add', path: '/metadata/finalizers/-', value: theirs }], 'json');
  const staleErr = await addFinalizer(admin, { ...fresh }, 'operator.ptah.run/another').then(() => undefined, (e: unknown) => e);
  t.ok(staleErr instanceof ApiError, 'a stale add fails');
  t.equal((staleErr as ApiError).code, 422, 'the failed test op is reported as 422 by the API server');
  t.same((await admin.get<KubeObject>(cmRef(ns, 'guarded'))).metadata?.finalizers, [ours, theirs], 'nothing was clobbered');

  const rvErr = await addFinalizer(admin, { ...withBoth, metadata: { ...withBoth.metadata, resourceVersion: withOurs.metadata?.resourceVersion } }, 'operator.ptah.run/rv', { guardResourceVersion: true }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(rvErr instanceof ApiError && rvErr.code === 422, 'the resourceVersion guard refuses a stale object');

  // They remove theirs while we hold a copy where ours sits at index 0 of two: removal by index stays correct.
  const current = await admin.get<KubeObject>(cmRef(ns, 'guarded'));
  const withoutOurs = await removeFinalizer(admin, current, ours);
  t.same(withoutOurs.metadata?.finalizers, [theirs]);
  // A copy where ours was at index 1 while index 1 no longer exists (or holds something else) must fail.
  const staleRemove = await removeFinalizer(admin, { ...current, metadata: { ...current.metadata, finalizers: [theirs, ours] } }, ours).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(staleRemove instanceof ApiError, 'removing by a stale index fails');
  t.same((await admin.get<KubeObject>(cmRef(ns, 'guarded'))).metadata?.finalizers, [theirs], 'their finalizer survived');

  // Deletion: ours may not be added any more, and removing the last finalizer lets the object go.
  await admin.delete(cmRef(ns, 'guarded'));
  const deleting = await admin.get<KubeObject>(cmRef(ns, 'guarded'));
  t.ok(deleting.metadata?.deletionTimestamp, 'held by the finalizer');
  await t.rejects(addFinalizer(admin, deleting, ours), FinalizerError, 'no new finalizer on an object being deleted');
  t.notOk(hasFinalizer(deleting, ours));
  await removeFinalizer(admin, deleting, theirs);
  t.equal(await admin.tryGet(cmRef(ns, 'guarded')), undefined, 'gone once the last finalizer came off');
});
