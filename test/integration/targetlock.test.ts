// The realm Lease against the real API server: epochs, renewal, contention measured on this process's clock,
// takeover, release only by the holder under its epoch, and refusal of a foreign record it cannot judge.
import t from 'tap';
import type { V1Lease } from '@kubernetes/client-node';
import { sharedCluster, testNamespace, type NamespaceOwner } from '../../tools/stack/cluster.js';
import { restClient } from '../../src/shared/kube-client.js';
import type { Clock } from '../../src/shared/clock.js';
import { digest } from '../../src/shared/canonical.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { isLeaseEpoch, LEASE_EPOCH_ANNOTATION, MalformedLeaseError, TargetLock } from '../../src/shared/targetlock.js';

const cluster = sharedCluster();

/** A clock whose monotonic time only moves when the test says so; wall time is real. */
function manualClock(): Clock & { advance(ms: number): void } {
  let mono = 0;
  return { monotonicMs: () => mono, now: () => new Date(), advance: (ms) => (mono += ms) };
}

async function setup(t: NamespaceOwner) {
  const namespace = await testNamespace(t);
  const client = await restClient(cluster.kubeConfig('admin'));
  const realm = digest({ test: t.name, namespace });
  const read = () => client.get<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace, name: leaseNameFor(realm) });
  return { namespace, client, realm, read };
}

const A = { resourceUid: 'uid-a', operationId: `sha256:${'a'.repeat(64)}` };
const B = { resourceUid: 'uid-b', operationId: `sha256:${'b'.repeat(64)}` };

t.test('acquire creates the Lease under a new epoch; renewal by the same holder keeps it', async (t) => {
  const { namespace, client, realm, read } = await setup(t);
  const lock = new TargetLock(client, namespace, manualClock());
  const first = await lock.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 30, expectedEpoch: `v1-${'0'.repeat(32)}` });
  t.equal(first.kind, 'acquired');
  if (first.kind !== 'acquired') return;
  t.ok(isLeaseEpoch(first.epoch), 'a well-formed epoch');
  t.equal(first.continuous, false, 'a placeholder epoch is not continuity');
  const stored = await read();
  t.equal(stored.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION], first.epoch, 'the epoch is on the Lease');
  t.match(stored.spec?.renewTime, /\.\d{6}Z$/, 'MicroTime with six fraction digits');

  const renewed = await lock.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 30, expectedEpoch: first.epoch });
  t.same(renewed, { kind: 'acquired', epoch: first.epoch, continuous: true }, 'renewal keeps the epoch and reports continuity');
  t.equal((await read()).spec?.leaseTransitions, 0, 'renewal is not a transition');
});

t.test('a foreign holding is contended until its duration passes on this process’s clock, then taken over', async (t) => {
  const { namespace, client, realm, read } = await setup(t);
  const clockA = manualClock();
  const clockB = manualClock();
  const a = new TargetLock(client, namespace, clockA);
  const b = new TargetLock(client, namespace, clockB);
  const held = await a.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 20 });
  if (held.kind !== 'acquired') return t.fail('A could not acquire');

  const contended = await b.acquire({ coordinationDigest: realm, holder: B, durationSeconds: 20 });
  t.equal(contended.kind, 'contended', 'B meets A’s holding');
  if (contended.kind === 'contended') t.equal(contended.requeueAfterMs, 20_000, 'the whole duration remains from B’s first sight');

  clockB.advance(19_000);
  const still = await b.acquire({ coordinationDigest: realm, holder: B, durationSeconds: 20 });
  t.same(still.kind === 'contended' && still.requeueAfterMs, 1_000, 'one second left after 19 s of B’s own clock');

  // A renews: the record changes, so B's observation restarts however long B has waited.
  await a.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 20, expectedEpoch: held.epoch });
  clockB.advance(5_000);
  const restarted = await b.acquire({ coordinationDigest: realm, holder: B, durationSeconds: 20 });
  t.same(restarted.kind === 'contended' && restarted.requeueAfterMs, 20_000, 'a renewal restarts the foreign observation');

  clockB.advance(20_000);
  const taken = await b.acquire({ coordinationDigest: realm, holder: B, durationSeconds: 20 });
  t.equal(taken.kind, 'acquired', 'B takes over once A’s holding lapsed on B’s clock');
  if (taken.kind !== 'acquired') return;
  t.not(taken.epoch, held.epoch, 'a takeover is a new epoch');
  t.equal((await read()).spec?.leaseTransitions, 1, 'the takeover is counted');

  const back = await a.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 20, expectedEpoch: held.epoch });
  t.equal(back.kind, 'contended', 'A, which lost the realm, now meets B');
});

t.test('release: only the holder under its epoch; afterwards the next holding is a new epoch', async (t) => {
  const { namespace, client, realm, read } = await setup(t);
  const lock = new TargetLock(client, namespace, manualClock());
  const held = await lock.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 30 });
  if (held.kind !== 'acquired') return t.fail('could not acquire');

  t.equal(await lock.release({ coordinationDigest: realm, holder: B, epoch: held.epoch }), 'not-held', 'another holder cannot release');
  t.equal(await lock.release({ coordinationDigest: realm, holder: A, epoch: `v1-${'f'.repeat(32)}` }), 'not-held', 'another epoch cannot release');
  t.ok((await read()).spec?.holderIdentity, 'still held after the refused releases');

  t.equal(await lock.release({ coordinationDigest: realm, holder: A, epoch: held.epoch }), 'released');
  t.notOk((await read()).spec?.holderIdentity, 'the holder is cleared');
  t.equal(await lock.release({ coordinationDigest: realm, holder: A, epoch: held.epoch }), 'not-held', 'a second release is a no-op');

  const again = await lock.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 30, expectedEpoch: held.epoch });
  t.ok(again.kind === 'acquired' && again.epoch !== held.epoch && !again.continuous, 're-acquisition after a release is a new, non-continuous epoch');
});

t.test('a foreign Lease without a duration is refused, not judged expired', async (t) => {
  const { namespace, client, realm } = await setup(t);
  await client.create<V1Lease>({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: leaseNameFor(realm), namespace },
    spec: { holderIdentity: 'someone-else' },
  });
  const lock = new TargetLock(client, namespace, manualClock());
  await t.rejects(lock.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 30 }), MalformedLeaseError);
  await t.rejects(lock.acquire({ coordinationDigest: realm, holder: A, durationSeconds: 3 }), RangeError, 'a duration below 5 s is refused before any request');
});
