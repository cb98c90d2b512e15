// The records a migration keeps outside its claim, decided without a cluster: the unresolved-run copy kept in step
// with status (written, left alone, removed after a settlement, restored after a restore, never beside another
// Apply in flight), and the release a retiring claim stages, performs and clears (or withholds).
import t from 'tap';
import { pino } from 'pino';
import { MigrationPass, type MigrationDeps } from '../../src/controller/migration/context.js';
import { retireMigrationClaim } from '../../src/controller/migration/retire.js';
import { SecondReleaseError } from '../../src/controller/release.js';
import { reconcileMigrationDeletion } from '../../src/controller/migration/deletion.js';
import { placeholderLeaseEpoch } from '../../src/controller/claim-values.js';
import { reconcileUnresolvedRunCopy } from '../../src/controller/migration/unresolved.js';
import type { PtahMigration, UnresolvedRun } from '../../src/shared/api/migration-kinds.js';
import { ANNOTATIONS, FINALIZERS } from '../../src/shared/api/names.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { canonicalJson, sha256Digest } from '../../src/shared/canonical.js';
import { ApiError, type KubeClient, type KubeObject } from '../../src/shared/kube-client.js';
import type { ReleaseRequest, TargetLock } from '../../src/shared/targetlock.js';

const d = (seed: string) => sha256Digest(seed);
const NOW = new Date('2030-01-01T00:00:00.000Z');

/** One stored PtahMigration: status PUTs and annotation merge patches, each guarded by resourceVersion. */
class OneObjectClient {
  writes: string[] = [];
  /** Status writes and realm releases in the order they happened, each with the status stored at that moment. */
  order: { what: 'status' | 'release' | 'finalizer'; stored: PtahMigration['status'] }[] = [];
  constructor(public stored: PtahMigration) {}
  private bump(next: PtahMigration, what: string): PtahMigration {
    this.stored = { ...next, metadata: { ...next.metadata, resourceVersion: String(Number(this.stored.metadata.resourceVersion) + 1) } };
    this.writes.push(what);
    if (what === 'status') this.order.push({ what, stored: structuredClone(this.stored.status) });
    return structuredClone(this.stored);
  }
  private guard(rv: string | undefined): void {
    if (rv !== this.stored.metadata.resourceVersion) throw new ApiError({ code: 409, reason: 'Conflict', message: 'stale' }, 'write');
  }
  async update<T extends KubeObject>(object: T): Promise<T> {
    const m = object as unknown as PtahMigration;
    this.guard(m.metadata.resourceVersion);
    return this.bump({ ...this.stored, status: structuredClone(m.status) }, 'status') as unknown as T;
  }
  async patch<T extends KubeObject>(_ref: unknown, body: { metadata: { resourceVersion?: string; annotations: Record<string, string | null> } } | unknown[]): Promise<T> {
    if (Array.isArray(body)) {
      // A JSON patch is the finalizer helper's: recorded, not applied (the tests read which writes came in what order).
      this.writes.push('finalizer patch');
      this.order.push({ what: 'finalizer', stored: structuredClone(this.stored.status) });
      return structuredClone(this.stored) as unknown as T;
    }
    this.guard(body.metadata.resourceVersion);
    const annotations = { ...this.stored.metadata.annotations };
    for (const [key, value] of Object.entries(body.metadata.annotations)) {
      if (value === null) delete annotations[key];
      else annotations[key] = value;
    }
    return this.bump({ ...this.stored, metadata: { ...this.stored.metadata, annotations } }, value(body)) as unknown as T;
  }
  async tryGet(): Promise<undefined> {
    return undefined;
  }
  async list(): Promise<never[]> {
    return [];
  }
}
const value = (body: { metadata: { annotations: Record<string, string | null> } }) =>
  (Object.values(body.metadata.annotations)[0] === null ? 'annotation removed' : 'annotation written');

function world(status: PtahMigration['status'], annotations: Record<string, string> = {}) {
  const client = new OneObjectClient({
    apiVersion: 'operator.ptah.run/v1alpha1',
    kind: 'PtahMigration',
    metadata: { name: 'orders', namespace: 'shop', uid: 'uid-1', generation: 1, resourceVersion: '1', annotations },
    spec: {
      target: { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'db', key: 'url' } },
      artifact: { configMapRef: { name: 'r1' }, verificationPolicyRef: { name: 'p', key: 'policy.yaml' }, format: 'ptah' },
      policy: { apply: 'OnApproval', lockTimeout: '5m' },
      interval: '10m',
      execution: { activeDeadlineSeconds: 900, failureRetryInterval: '30s', connectTimeout: '10s' },
      suspend: false,
    },
    status,
  });
  const events: string[] = [];
  const releases: ReleaseRequest[] = [];
  const lock = {
    release: async (r: ReleaseRequest) => {
      releases.push(r);
      client.order.push({ what: 'release', stored: structuredClone(client.stored.status) });
      return 'released' as const;
    },
  } as unknown as TargetLock;
  const deps: MigrationDeps = {
    client: client as unknown as KubeClient,
    events: { record: (_m, e) => events.push(`${e.type} ${e.reason}`) },
    manager: { controllerImage: 'c', controllerRevision: 'r', runnerImage: 'i', executorIdentity: `sha256:${'e'.repeat(64)}`, controllerStateVersion: 1, runnerProtocolVersion: 1 },
    clock: { now: () => NOW, monotonicMs: () => 0 },
    lockFor: () => lock,
    coordinationNamespace: 'ptah-system',
    log: pino({ level: 'silent' }),
    readFailures: new Map(),
  };
  return { client, events, releases, pass: new MigrationPass(deps, structuredClone(client.stored)) };
}

const run: UnresolvedRun = { outcome: 'Unknown', operationID: d('op-1'), jobName: 'ptah-m-apply-orders-1', targetIdentityDigest: d('db'), recordedAt: '2029-12-31T23:00:00.000Z' };
const copyOf = (r: UnresolvedRun) => ({ [ANNOTATIONS.unresolvedRun]: canonicalJson(r) });

function claim(type: string, id: string, extra: Partial<ActiveOperation> = {}): ActiveOperation {
  return { type, id, inputFingerprint: d('in'), jobName: `ptah-m-${type.toLowerCase()}-orders-0123456789abcdef`, startedAt: '2030-01-01T00:00:00Z', attempt: 1, executionBindingID: `v1-${'a'.repeat(32)}`, ...extra };
}

t.test('the copy is written when status holds the record and the copy does not', async (t) => {
  const { pass, client } = world({ unresolvedRun: run });
  t.ok(await reconcileUnresolvedRunCopy(pass), 'the pass ends after the write');
  t.same(client.writes, ['annotation written']);
  t.same(JSON.parse(client.stored.metadata.annotations![ANNOTATIONS.unresolvedRun]!), run);
});

t.test('a copy that agrees with the record is left alone', async (t) => {
  const { pass, client } = world({ unresolvedRun: run }, copyOf(run));
  t.equal(await reconcileUnresolvedRunCopy(pass), undefined);
  t.same(client.writes, []);
});

t.test('a copy that disagrees with the record is rewritten from it', async (t) => {
  const { pass, client } = world({ unresolvedRun: run }, copyOf({ ...run, outcome: 'Partial' }));
  t.ok(await reconcileUnresolvedRunCopy(pass));
  t.same(JSON.parse(client.stored.metadata.annotations![ANNOTATIONS.unresolvedRun]!), run);
});

t.test('a copy left by an interrupted removal (status names it resolved) is removed', async (t) => {
  const { pass, client } = world({ resolvedRun: { operationID: run.operationID, outcome: 'Unknown', resolution: 'ResolvedByHistoryRead', resolvedAt: NOW.toISOString() } }, copyOf(run));
  t.ok(await reconcileUnresolvedRunCopy(pass));
  t.same(client.writes, ['annotation removed']);
  t.notOk(client.stored.status?.unresolvedRun, 'nothing restored');
});

t.test('a copy written ahead of the record its claim has not stored yet is removed, not restored', async (t) => {
  const { pass, client } = world({ activeOperation: claim('Apply', run.operationID) }, copyOf(run));
  t.ok(await reconcileUnresolvedRunCopy(pass));
  t.same(client.writes, ['annotation removed']);
  t.notOk(client.stored.status?.unresolvedRun, 'no record beside the live claim');
});

t.test('status that came back without the record (a restore) gets it back from the copy', async (t) => {
  const { pass, client, events } = world({ plan: { name: 'ptah-mplan-x', uid: 'p' } }, copyOf(run));
  t.ok(await reconcileUnresolvedRunCopy(pass));
  t.same(client.writes, ['status']);
  t.same(client.stored.status?.unresolvedRun, run, 'the record is back');
  t.notOk(client.stored.status?.plan, 'no plan stands beside it');
  t.equal(client.stored.status?.nextReconciliationTime, NOW.toISOString(), 'a reading is due to try settling it');
  t.same(events, ['Warning UnresolvedRunRestored']);
});

t.test('a restore beside a reading in flight restores; beside another Apply in flight it waits', async (t) => {
  const reading = world({ activeOperation: claim('History', d('read')) }, copyOf(run));
  t.ok(await reconcileUnresolvedRunCopy(reading.pass));
  t.same(reading.client.stored.status?.unresolvedRun, run);
  const applying = world({ activeOperation: claim('Apply', d('other')) }, copyOf(run));
  t.equal(await reconcileUnresolvedRunCopy(applying.pass), undefined);
  t.same(applying.client.writes, []);
});

t.test('a malformed copy is reported and left for a person', async (t) => {
  const { pass, client, events } = world({}, { [ANNOTATIONS.unresolvedRun]: '{"outcome":"Maybe"}' });
  t.equal(await reconcileUnresolvedRunCopy(pass), undefined);
  t.same(client.writes, []);
  t.same(events, ['Warning UnresolvedRunCopyMalformed']);
});

const apply = claim('Apply', d('apply'), { coordinationDigest: d('realm'), leaseDurationSeconds: 1020, leaseEpoch: `v1-${'b'.repeat(32)}`, dispatchStarted: true });

t.test('retirement stages the release it owes in the write that clears the claim, performs it, then clears it', async (t) => {
  const { pass, client, releases } = world({ activeOperation: apply });
  await retireMigrationClaim(pass, { disposition: 'accounted', why: 'Applied', record: (s) => { s.lastRun = { outcome: 'Applied', operationID: apply.id, jobName: apply.jobName, startedAt: apply.startedAt, appliedVersions: ['1'] }; } });
  t.same(client.writes, ['status', 'status'], 'the outcome write, then the write clearing the staged release');
  t.same(releases, [{ coordinationDigest: d('realm'), holder: { resourceUid: 'uid-1', operationId: apply.id }, epoch: apply.leaseEpoch }]);
  t.same(client.order.map((o) => o.what), ['status', 'release', 'status'], 'the release follows the durable write and precedes clearing it');
  const atRelease = client.order[1]!.stored;
  t.notOk(atRelease?.activeOperation, 'when the release ran, the stored status no longer named the claim');
  t.match(atRelease?.pendingLockRelease, { operationID: apply.id, leaseEpoch: apply.leaseEpoch }, 'and it recorded the release owed');
  t.notOk(client.stored.status?.activeOperation);
  t.notOk(client.stored.status?.pendingLockRelease);
  t.equal(client.stored.status?.lastRun?.outcome, 'Applied');
});

t.test('a run nobody accounted for keeps the realm while anything it dispatched may still write', async (t) => {
  const writing = world({ activeOperation: apply });
  await retireMigrationClaim(writing.pass, { disposition: 'unaccounted', why: 'Unknown', mayStillWrite: true });
  t.same(writing.releases, [], 'no release: the Lease is left to expire');
  t.same(writing.client.writes, ['status']);
  t.notOk(writing.client.stored.status?.pendingLockRelease);
  const stopped = world({ activeOperation: apply });
  await retireMigrationClaim(stopped.pass, { disposition: 'unaccounted', why: 'Unknown', mayStillWrite: false });
  t.equal(stopped.releases.length, 1, 'released once nothing can still write');
});

t.test('a read-only claim owes nothing; a second owed release is refused', async (t) => {
  const reading = world({ activeOperation: claim('History', d('read')) });
  await retireMigrationClaim(reading.pass, { disposition: 'accounted', why: 'HistoryRead' });
  t.same(reading.releases, []);
  t.same(reading.client.writes, ['status']);
  const owed = { coordinationDigest: d('realm'), operationID: d('earlier'), leaseDurationSeconds: 1020, leaseEpoch: `v1-${'c'.repeat(32)}` };
  const twice = world({ activeOperation: apply, pendingLockRelease: owed });
  await t.rejects(retireMigrationClaim(twice.pass, { disposition: 'discard', why: 'x' }), SecondReleaseError);
  t.same(twice.client.writes, [], 'nothing written');
});

t.test('a claim that never took the realm (its epoch is still the placeholder) owes no release', async (t) => {
  const undispatched = claim('Apply', d('fresh'), { coordinationDigest: d('realm'), leaseDurationSeconds: 1020 });
  const { pass, client, releases } = world({ activeOperation: { ...undispatched, leaseEpoch: placeholderLeaseEpoch(undispatched.id) } });
  await retireMigrationClaim(pass, { disposition: 'discard', why: 'InputsChanged' });
  t.same(releases, [], 'nothing released');
  t.same(client.writes, ['status']);
  t.notOk(client.stored.status?.pendingLockRelease, 'and no release staged');
  const taken = world({ activeOperation: { ...undispatched, leaseEpoch: `v1-${'d'.repeat(32)}` } });
  await retireMigrationClaim(taken.pass, { disposition: 'discard', why: 'InputsChanged' });
  t.equal(taken.releases.length, 1, 'a claim holding a real epoch hands it back');
});

t.test('deletion retires a dispatched Apply through the one retirement: the release follows the status write', async (t) => {
  const deleting = (status: PtahMigration['status']) => {
    const w = world(status);
    w.client.stored.metadata.deletionTimestamp = NOW;
    w.client.stored.metadata.finalizers = [FINALIZERS.migration];
    return { ...w, pass: new MigrationPass(w.pass.deps, structuredClone(w.client.stored)) };
  };
  const { pass, client, releases, events } = deleting({ activeOperation: apply });
  await reconcileMigrationDeletion(pass);
  t.same(events, ['Warning ActiveRunDiscarded']);
  t.equal(releases.length, 1, 'nothing of the run can still write (no Job, no Pod), so the realm goes back');
  t.same(client.order.map((o) => o.what), ['status', 'release', 'status'], 'the claim is cleared and the release staged before the release');
  t.notOk(client.order[0]!.stored?.activeOperation, 'the first write clears the claim');
  t.match(client.order[0]!.stored?.pendingLockRelease, { operationID: apply.id });
  t.same(client.stored.metadata.finalizers, [FINALIZERS.migration], 'the finalizer comes off on the next pass, with nothing left to release');
});
