// A pass's realm Leases (src/shared/lifecycle/leases.ts) and the dispatch sequence's lease step over them: a
// holding this pass already renewed without interruption, under the same realm, holder, duration and epoch, is not
// renewed again by the lease step (a schema proof reading's acquirePendingLock, then the lease step, renewed it
// twice); anything else still renews: another epoch or holder, a renewal that found the holding interrupted, a
// release or another acquisition of the realm since, or a renewal older than half the Lease's duration.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import { buildOperationJob } from '../../src/shared/job/build.js';
import type { KubeClient } from '../../src/shared/kube-client.js';
import { dispatch, type DispatchClaim, type DispatchFamily } from '../../src/shared/lifecycle/dispatch.js';
import { holdingRequest, PassLeases, renewHolding } from '../../src/shared/lifecycle/leases.js';
import { migrationOperation } from '../../src/shared/lifecycle/operations.js';
import type { AdmissionSnapshot } from '../../src/shared/podintent.js';
import type { AcquireRequest, AcquireResult, TargetLock } from '../../src/shared/targetlock.js';
import { CASES, inputFor, snapshotted, stored } from './job-fixtures.js';

const EPOCH = `v1-${'e'.repeat(32)}`;
const OTHER_EPOCH = `v1-${'f'.repeat(32)}`;
const OWNER_UID = 'migration-uid-1';

/** A TargetLock that answers every acquisition with `answer` and counts what reached it. */
function fakeLock(answer: () => AcquireResult) {
  const calls: string[] = [];
  const lock = {
    namespace: 'team-a',
    acquire: async (r: AcquireRequest) => (calls.push(`acquire ${r.holder.operationId} ${r.expectedEpoch}`), answer()),
    release: async () => (calls.push('release'), 'released' as const),
  } as unknown as TargetLock;
  let nowMs = 0;
  const clock = { now: () => new Date(nowMs), monotonicMs: () => nowMs };
  return { calls, leases: new PassLeases(lock, clock), advance: (ms: number) => void (nowMs += ms) };
}

const continuous = (): AcquireResult => ({ kind: 'acquired', epoch: EPOCH, continuous: true });
const request = (over: Partial<AcquireRequest> = {}): AcquireRequest => ({
  coordinationDigest: `sha256:${'a'.repeat(64)}`,
  holder: { resourceUid: OWNER_UID, operationId: 'op-1' },
  durationSeconds: 600,
  expectedEpoch: EPOCH,
  ...over,
});

t.test('a continuous renewal is remembered for exactly that holding', async (t) => {
  const w = fakeLock(continuous);
  t.notOk(w.leases.renewedInPass(request()), 'nothing renewed yet');
  await w.leases.acquire(request());
  t.ok(w.leases.renewedInPass(request()), 'the same realm, holder, duration and epoch');
  t.notOk(w.leases.renewedInPass(request({ expectedEpoch: OTHER_EPOCH })), 'another epoch');
  t.notOk(w.leases.renewedInPass(request({ holder: { resourceUid: OWNER_UID, operationId: 'op-2' } })), 'another operation');
  t.notOk(w.leases.renewedInPass(request({ holder: { resourceUid: 'other-uid', operationId: 'op-1' } })), 'another resource');
  t.notOk(w.leases.renewedInPass(request({ durationSeconds: 300 })), 'another duration');
  t.notOk(w.leases.renewedInPass(request({ coordinationDigest: `sha256:${'b'.repeat(64)}` })), 'another realm');
  t.equal(w.leases.namespace, 'team-a', 'the Leases\' namespace is the lock\'s');
});

t.test('an interrupted or contended holding, a release, a later acquisition or a stale renewal is not remembered', async (t) => {
  const taken = fakeLock(() => ({ kind: 'acquired', epoch: OTHER_EPOCH, continuous: false }));
  await taken.leases.acquire(request());
  t.notOk(taken.leases.renewedInPass(request()), 'a renewal that found another epoch');
  t.notOk(taken.leases.renewedInPass(request({ expectedEpoch: OTHER_EPOCH })), 'nor the epoch it took');

  const contended = fakeLock(() => ({ kind: 'contended', requeueAfterMs: 1000, holderIdentity: 'someone' }));
  await contended.leases.acquire(request());
  t.notOk(contended.leases.renewedInPass(request()), 'a realm held elsewhere');

  const released = fakeLock(continuous);
  await released.leases.acquire(request());
  await released.leases.release({ coordinationDigest: request().coordinationDigest, holder: request().holder, epoch: EPOCH });
  t.notOk(released.leases.renewedInPass(request()), 'released since');

  let answer: AcquireResult = continuous();
  const again = fakeLock(() => answer);
  await again.leases.acquire(request());
  answer = { kind: 'contended', requeueAfterMs: 1000, holderIdentity: 'someone' };
  await again.leases.acquire(request());
  t.notOk(again.leases.renewedInPass(request()), 'a later acquisition of the realm that found it held elsewhere');

  const broken = new PassLeases({ namespace: 'team-a', acquire: async () => { throw new Error('API down'); }, release: async () => 'released' } as unknown as TargetLock, { now: () => new Date(0), monotonicMs: () => 0 });
  await t.rejects(broken.acquire(request()), /API down/);
  t.notOk(broken.renewedInPass(request()), 'an acquisition that failed');

  const slow = fakeLock(continuous);
  await slow.leases.acquire(request());
  slow.advance(299_999);
  t.ok(slow.leases.renewedInPass(request()), 'under half the Lease\'s duration ago');
  slow.advance(1);
  t.notOk(slow.leases.renewedInPass(request()), 'half the Lease\'s duration ago: renewed again');
});

const APPLY = CASES.find((c) => c.family === 'migration' && c.type === 'Apply')!;

/** A migration Apply claim, its snapshot recorded, driven through the driver over `leases`. */
async function dispatchOver(leases: PassLeases): Promise<string> {
  const recorded = snapshotted(inputFor(APPLY)).claim.admissionSnapshot as AdmissionSnapshot;
  let claim: DispatchClaim = { ...(inputFor(APPLY).claim as DispatchClaim), leaseEpoch: EPOCH, leaseDurationSeconds: 600, admissionSnapshot: recorded };
  const jobOf = (s: AdmissionSnapshot | undefined): V1Job => buildOperationJob({ ...inputFor(APPLY), claim: { ...claim, admissionSnapshot: s } });
  const family: DispatchFamily = {
    family: 'migration',
    owner: { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigration', namespace: 'team-a', name: 'orders', uid: OWNER_UID },
    get claim() {
      return claim;
    },
    operation: migrationOperation('Apply'),
    authorize: async () => ({ ok: true }),
    retireUnauthorized: async () => undefined,
    stage: async () => true,
    buildJob: async (s) => jobOf(s),
    consumeApproval: async () => true,
    writeClaim: async (fields) => {
      claim = { ...claim, ...fields };
    },
    finishUncertain: async () => undefined,
    retryReadOnly: async () => undefined,
    announceStarted: () => undefined,
    warn: () => undefined,
  };
  let created: V1Job | undefined;
  const client = {
    create: async (job: V1Job) => (created = stored(job)),
    get: async () => created,
  } as unknown as KubeClient;
  return (await dispatch(family, { client, lock: leases })).why;
}

t.test('the lease step does not renew again what this pass renewed under the claim\'s epoch and holder', async (t) => {
  const w = fakeLock(continuous);
  const claimId = inputFor(APPLY).claim.id;
  const digest = (inputFor(APPLY).claim as DispatchClaim).coordinationDigest!;
  await w.leases.acquire(request({ coordinationDigest: digest, holder: { resourceUid: OWNER_UID, operationId: claimId } }));
  t.equal(await dispatchOver(w.leases), 'dispatched');
  t.same(w.calls, [`acquire ${claimId} ${EPOCH}`], 'one renewal in the pass: the earlier one');
});

t.test('the lease step renews a holding this pass did not renew, or renewed under another epoch', async (t) => {
  const claimId = inputFor(APPLY).claim.id;
  const digest = (inputFor(APPLY).claim as DispatchClaim).coordinationDigest!;
  const fresh = fakeLock(continuous);
  t.equal(await dispatchOver(fresh.leases), 'dispatched');
  t.same(fresh.calls, [`acquire ${claimId} ${EPOCH}`], 'nothing renewed earlier: the lease step renews');

  const other = fakeLock(continuous);
  await other.leases.acquire(request({ coordinationDigest: digest, holder: { resourceUid: OWNER_UID, operationId: claimId }, expectedEpoch: undefined }));
  t.equal(await dispatchOver(other.leases), 'dispatched');
  t.same(other.calls, [`acquire ${claimId} undefined`, `acquire ${claimId} ${EPOCH}`], 'renewed earlier without the claim\'s epoch: the lease step renews');
});

t.test('renewHolding: the one continuity rule every renewal shares', async (t) => {
  const holding = { coordinationDigest: `sha256:${'a'.repeat(64)}`, resourceUid: OWNER_UID, operationId: 'op-1', durationSeconds: 600, epoch: EPOCH };
  const kept = fakeLock(continuous);
  t.same(await renewHolding(kept.leases, holding), { kept: true }, 'held without interruption under the epoch on record: kept');
  t.same(kept.calls, [`acquire op-1 ${EPOCH}`], 'renewed under the holding\'s run and epoch');
  const retaken = fakeLock(() => ({ kind: 'acquired', epoch: OTHER_EPOCH, continuous: false }));
  t.same(await renewHolding(retaken.leases, holding), { kept: false, epoch: OTHER_EPOCH, requeueAfterMs: 1 }, 'taken again under a new epoch: lost, with the epoch now held');
  const sameEpochInterrupted = fakeLock(() => ({ kind: 'acquired', epoch: EPOCH, continuous: false }));
  t.equal((await renewHolding(sameEpochInterrupted.leases, holding)).kept, false, 'an interrupted holding is lost even under the same epoch');
  const contended = fakeLock(() => ({ kind: 'contended', requeueAfterMs: 4_000, holderIdentity: 'someone-else' }));
  t.same(await renewHolding(contended.leases, holding), { kept: false, requeueAfterMs: 4_000 }, 'held by someone else: lost, no epoch, look again when the Lease may be free');
  t.same(holdingRequest({ ...holding, epoch: undefined }).expectedEpoch, undefined, 'a holding with no epoch yet expects none');
});
