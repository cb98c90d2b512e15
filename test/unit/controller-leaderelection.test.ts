import t from 'tap';
import { pino } from 'pino';
import { ManualClock } from '../../src/controller/clock.js';
import { LeaderElector, type LeaderElectionOptions } from '../../src/controller/leaderelection.js';
import { registry } from '../../src/shared/metrics.js';
import { ApiError, type KubeClient, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';

const silent = pino({ level: 'silent' });

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  renewTime?: string;
  acquireTime?: string;
  leaseTransitions?: number;
}
type Lease = KubeObject & { spec?: LeaseSpec };

/** An in-memory API server for one kind: resourceVersions, 409 on stale updates and on create over an existing name. */
class LeaseStore {
  private rv = 0;
  readonly leases = new Map<string, Lease>();
  /** When set, every update fails with this error (a partitioned or failing API server). */
  failUpdates?: Error;
  /** Resolved before each read/write returns: lets a test interleave two electors. */
  gate: () => Promise<void> = async () => {};

  client: Pick<KubeClient, 'tryGet' | 'create' | 'update'> = {
    tryGet: async <T extends KubeObject>(ref: ResourceRef) => {
      const lease = this.leases.get(ref.name);
      await this.gate();
      return lease ? (structuredClone(lease) as T) : undefined;
    },
    create: async <T extends KubeObject>(obj: T) => {
      await this.gate();
      const name = obj.metadata?.name as string;
      if (this.leases.has(name)) throw new ApiError({ code: 409, reason: 'AlreadyExists' }, 'POST');
      const stored = { ...structuredClone(obj), metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } } as Lease;
      this.leases.set(name, stored);
      return structuredClone(stored) as T;
    },
    update: async <T extends KubeObject>(obj: T) => {
      await this.gate();
      if (this.failUpdates) throw this.failUpdates;
      const name = obj.metadata?.name as string;
      const current = this.leases.get(name);
      if (!current) throw new ApiError({ code: 404, reason: 'NotFound' }, 'PUT');
      if (current.metadata?.resourceVersion !== obj.metadata?.resourceVersion) throw new ApiError({ code: 409, reason: 'Conflict' }, 'PUT');
      const stored = { ...structuredClone(obj), metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } } as Lease;
      this.leases.set(name, stored);
      return structuredClone(stored) as T;
    },
  };

  spec(name = 'lease'): LeaseSpec {
    return this.leases.get(name)?.spec ?? {};
  }

  /** Rewrites the record as another process would (bumping the resourceVersion). */
  write(spec: LeaseSpec, name = 'lease'): void {
    this.leases.set(name, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name, namespace: 'ns', resourceVersion: String(++this.rv) },
      spec,
    });
  }
}

function elector(store: LeaseStore, clock: ManualClock, identity: string, over: Partial<LeaderElectionOptions> = {}): LeaderElector {
  return new LeaderElector({
    client: store.client,
    namespace: 'ns',
    name: 'lease',
    identity,
    logger: silent,
    clock,
    onStartedLeading: () => {},
    onStoppedLeading: () => {},
    ...over,
  });
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

/** Moves the clock forward in small steps, letting the electors' promises run between steps. */
async function run(clock: ManualClock, ms: number, step = 100): Promise<void> {
  for (let done = 0; done < ms; done += step) {
    clock.advance(Math.min(step, ms - done));
    await flush();
  }
}

async function masterStatus(name: string): Promise<number | undefined> {
  const data = await registry.getSingleMetric('leader_election_master_status')?.get();
  return data?.values.find((v) => v.labels.name === name)?.value;
}

t.test('the first candidate creates the Lease; another waits a full lease duration of its own observation', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  const a = elector(store, clock, 'a');
  const b = elector(store, clock, 'b');
  t.equal(await a.tryAcquireOrRenew(), true);
  t.match(store.spec(), { holderIdentity: 'a', leaseDurationSeconds: 15, leaseTransitions: 0 });
  t.match(store.spec().renewTime, /\.\d{6}Z$/, 'renewTime is a MicroTime');
  t.equal(await b.tryAcquireOrRenew(), false, 'held by a');
  await run(clock, 14_900);
  t.equal(await b.tryAcquireOrRenew(), false, 'still within 15 s of b first seeing the record');
  clock.advance(100);
  t.equal(await b.tryAcquireOrRenew(), true, 'b takes over once the record stood unchanged for 15 s');
  t.match(store.spec(), { holderIdentity: 'b', leaseTransitions: 1 });
  t.equal(await a.tryAcquireOrRenew(), false, 'a, having seen the new record just now, must wait in turn');
});

t.test('expiry ignores the holder\'s renewTime: a record from the past or the future expires 15 s after we first see it', async (t) => {
  for (const [what, renewTime] of [
    ['renewTime an hour in the past', '2029-12-31T23:00:00.000000Z'],
    ['renewTime a day in the future', '2030-01-02T00:00:00.000000Z'],
  ] as const) {
    const clock = new ManualClock();
    const store = new LeaseStore();
    store.write({ holderIdentity: 'ghost', leaseDurationSeconds: 15, renewTime, acquireTime: renewTime, leaseTransitions: 3 });
    const b = elector(store, clock, 'b');
    t.equal(await b.tryAcquireOrRenew(), false, `${what}: not taken on first sight`);
    clock.advance(14_999);
    t.equal(await b.tryAcquireOrRenew(), false, `${what}: not before 15 s`);
    clock.advance(1);
    t.equal(await b.tryAcquireOrRenew(), true, `${what}: taken after 15 s`);
    t.equal(store.spec().leaseTransitions, 4);
  }
});

t.test('a renewal restarts the follower\'s wait; the holder\'s own lease duration is the one honoured', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  const a = elector(store, clock, 'a', { leaseDurationMs: 30_000 });
  const b = elector(store, clock, 'b');
  t.equal(await a.tryAcquireOrRenew(), true);
  t.equal(store.spec().leaseDurationSeconds, 30);
  t.equal(await b.tryAcquireOrRenew(), false);
  clock.advance(10_000);
  t.equal(await a.tryAcquireOrRenew(), true, 'a renews');
  t.equal(store.spec().leaseTransitions, 0, 'a renewal is no transition');
  clock.advance(20_000);
  t.equal(await b.tryAcquireOrRenew(), false, 'b saw a new record: its wait started over');
  clock.advance(29_999);
  t.equal(await b.tryAcquireOrRenew(), false, 'a asked for 30 s, not b\'s 15 s');
  clock.advance(1);
  t.equal(await b.tryAcquireOrRenew(), true);
});

t.test('a released Lease (holder cleared) is taken at once', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  store.write({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 2 });
  const b = elector(store, clock, 'b');
  t.equal(await b.tryAcquireOrRenew(), true);
  t.match(store.spec(), { holderIdentity: 'b', leaseTransitions: 3 });
});

t.test('two candidates racing on one resourceVersion: exactly one wins, the other gets a 409 and backs off', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  store.write({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 0 });
  // Both reads complete before either write.
  let readers = 0;
  let bothRead!: () => void;
  const barrier = new Promise<void>((r) => (bothRead = r));
  store.gate = async () => {
    if (++readers === 2) bothRead();
    if (readers <= 2) await barrier;
  };
  const results = await Promise.all([elector(store, clock, 'a').tryAcquireOrRenew(), elector(store, clock, 'b').tryAcquireOrRenew()]);
  t.same(results.filter(Boolean).length, 1, `one winner: ${JSON.stringify(results)}`);
  t.equal(store.spec().holderIdentity, results[0] ? 'a' : 'b');

  const fresh = new LeaseStore();
  readers = 0;
  const barrier2 = new Promise<void>((r) => (bothRead = r));
  fresh.gate = async () => {
    if (++readers === 2) bothRead();
    if (readers <= 2) await barrier2;
  };
  const created = await Promise.all([elector(fresh, clock, 'a').tryAcquireOrRenew(), elector(fresh, clock, 'b').tryAcquireOrRenew()]);
  t.same(created.filter(Boolean).length, 1, 'on create too: AlreadyExists loses');
});

t.test('the loop: lead, lose leadership when renewals fail past the deadline, stop reconciling, then contend again', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  const events: string[] = [];
  const name = `lease-loop-${Date.now()}`;
  const a = new LeaderElector({
    client: store.client,
    namespace: 'ns',
    name,
    identity: 'a',
    logger: silent,
    clock,
    onStartedLeading: () => events.push(`start@${clock.monotonicMs()}`),
    onStoppedLeading: () => {
      events.push(`stop@${clock.monotonicMs()}`);
    },
  });
  a.start();
  await flush();
  t.equal(a.isLeader(), true);
  t.equal(await masterStatus(name), 1);
  await run(clock, 6_000);
  t.equal(a.isLeader(), true, 'renewing every retry period');
  const renewedBefore = store.spec(name).renewTime;
  store.failUpdates = new ApiError({ code: 500, reason: 'InternalError' }, 'PUT');
  await run(clock, 8_000);
  t.equal(a.isLeader(), true, 'failures inside the renew deadline are tolerated');
  await run(clock, 2_200);
  t.equal(a.isLeader(), false, 'lost once the renew deadline passed without a renewal');
  t.equal(await masterStatus(name), 0);
  t.equal(events.length, 2);
  t.match(events[1], /^stop@/);
  t.equal(store.spec(name).holderIdentity, 'a', 'a lost Lease is not released (it may be someone else\'s by now)');
  t.equal(store.spec(name).renewTime, renewedBefore);

  store.failUpdates = undefined;
  await run(clock, 3_000);
  t.equal(a.isLeader(), true, 'once the API server answers again, a contends and (still being the holder) leads again');
  await a.stop();
  t.equal(events.length, 4);
});

t.test('stop(): onStoppedLeading finishes before the holder is cleared', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  let holderDuringStop: string | undefined;
  const a = elector(store, clock, 'a', {
    onStoppedLeading: async () => {
      await flush();
      holderDuringStop = store.spec().holderIdentity;
    },
  });
  a.start();
  await flush();
  t.equal(a.isLeader(), true);
  await a.stop();
  t.equal(holderDuringStop, 'a', 'still held while the controllers were stopping');
  t.match(store.spec(), { holderIdentity: '', leaseDurationSeconds: 1 });
  t.equal(a.isLeader(), false);
  const b = elector(store, clock, 'b');
  t.equal(await b.tryAcquireOrRenew(), true, 'a follower takes the released Lease without waiting');

  const keep = new LeaseStore();
  const c = elector(keep, clock, 'c', { releaseOnStop: false });
  c.start();
  await flush();
  await c.stop();
  t.equal(keep.spec().holderIdentity, 'c', 'releaseOnStop: false leaves the record');
});

t.test('options are checked', async (t) => {
  const clock = new ManualClock();
  const store = new LeaseStore();
  t.throws(() => elector(store, clock, 'x', { leaseDurationMs: 500 }), /at least 1 s/);
  t.throws(() => elector(store, clock, 'x', { leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }), /greater than the renew deadline/);
  t.throws(() => elector(store, clock, 'x', { renewDeadlineMs: 2_000, retryPeriodMs: 2_000 }), /greater than the retry period/);
  t.throws(() => elector(store, clock, 'x', { name: '' }), /namespace and name/);
  t.match(new LeaderElector({ client: store.client, namespace: 'ns', name: 'l', logger: silent, onStartedLeading: () => {}, onStoppedLeading: () => {} }).identity, /^.+_[0-9a-f-]{36}$/);
});
