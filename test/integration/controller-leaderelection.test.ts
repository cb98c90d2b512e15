// Leader election on a real coordination.k8s.io/v1 Lease: two electors in one process contend for one Lease.
// Durations are asserted only as lower bounds on the durable record (acquireTime versus the last renewTime, both
// written by this process's clock), never as "it happened within N ms" of wall time.
import t from 'tap';
import { pino } from 'pino';
import { toMicroTime } from '../../src/controller/clock.js';
import { LeaderElector, type LeaderElectionOptions } from '../../src/controller/leaderelection.js';
import { restClient, type KubeClient, type KubeObject } from '../../src/shared/kube-client.js';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';

const silent = pino({ level: 'silent' });

interface Lease extends KubeObject {
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

let admin: KubeClient;
t.before(async () => {
  admin = await restClient(sharedCluster().kubeConfig('admin'));
});

const readLease = (namespace: string, name: string): Promise<Lease> => admin.get<Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace, name });
const ms = (microTime: string | undefined): number => Date.parse(microTime ?? '');

/** Starts two electors on one Lease and tracks whether they ever led at the same time. */
function pair(t: { teardown(fn: () => unknown): void }, namespace: string, name: string, timing: Partial<LeaderElectionOptions>) {
  const leading = new Set<string>();
  let overlapped = false;
  const make = (identity: string): LeaderElector =>
    new LeaderElector({
      client: admin,
      namespace,
      name,
      identity,
      logger: silent,
      ...timing,
      onStartedLeading: () => {
        leading.add(identity);
        if (leading.size > 1) overlapped = true;
      },
      onStoppedLeading: () => {
        leading.delete(identity);
      },
    });
  const a = make('replica-a');
  const b = make('replica-b');
  t.teardown(() => Promise.all([a.stop(), b.stop()]));
  a.start();
  b.start();
  return { a, b, overlapped: () => overlapped };
}

const FAST = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 500 };

t.test('exactly one of two electors leads; after the leader stops without releasing, the other takes over once the lease expired by its own clock', async (t) => {
  const ns = await testNamespace(t);
  const { a, b, overlapped } = pair(t, ns, 'contended', { ...FAST, releaseOnStop: false });
  const leader = await waitFor(async () => (a.isLeader() ? a : b.isLeader() ? b : undefined), { what: 'a leader', timeoutMs: 20_000 });
  const follower = leader === a ? b : a;
  await sleep(2500); // several renewals and follower attempts
  t.equal(leader.isLeader(), true, 'the leader kept renewing');
  t.equal(follower.isLeader(), false, 'the follower never took over a live lease');
  const held = await readLease(ns, 'contended');
  t.equal(held.spec?.holderIdentity, leader.identity);
  t.equal(held.spec?.leaseDurationSeconds, 3);
  t.match(held.spec?.renewTime, /\.\d{6}Z$/, 'renewTime is a MicroTime');

  await leader.stop();
  const abandoned = await readLease(ns, 'contended');
  t.equal(abandoned.spec?.holderIdentity, leader.identity, 'stopped without releasing: the record still names it');
  await waitFor(async () => (follower.isLeader() ? true : undefined), { what: 'the follower to take over', timeoutMs: 20_000 });
  const taken = await readLease(ns, 'contended');
  t.equal(taken.spec?.holderIdentity, follower.identity);
  t.equal(taken.spec?.leaseTransitions, (abandoned.spec?.leaseTransitions ?? 0) + 1);
  t.ok(
    ms(taken.spec?.acquireTime) - ms(abandoned.spec?.renewTime) >= 3000,
    `taken over no sooner than a lease duration after the last renewal (${ms(taken.spec?.acquireTime) - ms(abandoned.spec?.renewTime)} ms)`,
  );
  t.equal(overlapped(), false, 'the two never led at once');
});

t.test('after a clean release the other elector takes over at once, long before the lease would have expired', async (t) => {
  const ns = await testNamespace(t);
  const { a, b, overlapped } = pair(t, ns, 'released', { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 500 });
  const leader = await waitFor(async () => (a.isLeader() ? a : b.isLeader() ? b : undefined), { what: 'a leader', timeoutMs: 20_000 });
  const follower = leader === a ? b : a;
  const before = await readLease(ns, 'released');
  await leader.stop();
  await waitFor(async () => (follower.isLeader() ? true : undefined), { what: 'the follower to take over', timeoutMs: 14_000 });
  const taken = await readLease(ns, 'released');
  t.equal(taken.spec?.holderIdentity, follower.identity);
  t.equal(taken.spec?.leaseDurationSeconds, 15, 'the new holder writes its own duration over the release\'s 1 s');
  t.ok(ms(taken.spec?.acquireTime) - ms(before.spec?.renewTime) < 15_000, 'taken over before the released lease could have expired');
  t.equal(overlapped(), false);
});

t.test('a lease whose renewTime lies in the future (a skewed holder) still expires a lease duration after we first saw it', async (t) => {
  const ns = await testNamespace(t);
  const future = toMicroTime(new Date(Date.now() + 24 * 3600_000));
  await admin.create<Lease>({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'skewed', namespace: ns },
    spec: { holderIdentity: 'ghost-from-the-future', leaseDurationSeconds: 2, acquireTime: future, renewTime: future, leaseTransitions: 7 },
  });
  const createdAt = Date.now();
  const elector = new LeaderElector({ client: admin, namespace: ns, name: 'skewed', identity: 'replica-c', logger: silent, ...FAST, onStartedLeading: () => {}, onStoppedLeading: () => {} });
  t.teardown(() => elector.stop());
  elector.start();
  await waitFor(async () => (elector.isLeader() ? true : undefined), { what: 'the takeover', timeoutMs: 20_000 });
  const taken = await readLease(ns, 'skewed');
  t.equal(taken.spec?.holderIdentity, 'replica-c');
  t.equal(taken.spec?.leaseTransitions, 8);
  t.ok(ms(taken.spec?.acquireTime) - createdAt >= 2000, 'the holder\'s 2 s were waited out, measured here');
});
