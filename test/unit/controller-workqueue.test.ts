import t from 'tap';
import { ManualClock } from '../../src/controller/clock.js';
import { registry } from '../../src/shared/metrics.js';
import {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  WorkQueue,
  defaultRateLimiter,
} from '../../src/controller/workqueue.js';

let seq = 0;
const uniqueName = (what: string): string => `wq-test-${what}-${seq++}`;

/** Drains every key available right now (without waiting), releasing each. */
async function drainNow(q: WorkQueue): Promise<string[]> {
  const keys: string[] = [];
  while (q.length > 0) {
    const key = (await q.get()) as string;
    keys.push(key);
    q.done(key);
  }
  return keys;
}

async function metricValue(metric: string, name: string, field?: string): Promise<number | undefined> {
  const m = registry.getSingleMetric(metric);
  if (!m) throw new Error(`metric ${metric} is not registered`);
  const data = await m.get();
  const hit = data.values.find(
    (v) => v.labels.name === name && (field === undefined || (v as { metricName?: string }).metricName === field),
  );
  return hit?.value;
}

t.test('a key added twice before a worker takes it is processed once', async (t) => {
  const q = new WorkQueue({ name: uniqueName('dedup') });
  q.add('ns/a');
  q.add('ns/a');
  q.add('ns/b');
  q.add('ns/a');
  t.equal(q.length, 2);
  t.same(await drainNow(q), ['ns/a', 'ns/b']);
  t.equal(q.length, 0);
  await q.shutDown();
});

t.test('a key a worker holds is never handed to a second worker, and runs again after done when re-added', async (t) => {
  const q = new WorkQueue({ name: uniqueName('exclusive') });
  q.add('k');
  const first = await q.get();
  t.equal(first, 'k');
  q.add('k');
  q.add('k');
  // A second worker waits: the only key is held.
  let second: string | undefined | null = null;
  const waiting = q.get().then((k) => (second = k));
  await new Promise((r) => setImmediate(r));
  t.equal(second, null, 'the second worker got nothing while the first holds k');
  t.equal(q.length, 1, 'the re-add is remembered once');
  q.done('k');
  await waiting;
  t.equal(second, 'k', 'k runs again after the holder released it');
  q.done('k');
  t.equal(q.length, 0);
  await q.shutDown();
});

t.test('exclusivity holds under concurrent workers and every re-add after a take gets a later pass', async (t) => {
  const q = new WorkQueue({ name: uniqueName('concurrent') });
  const keys = ['a', 'b', 'c', 'd'];
  const holders = new Map<string, number>();
  let maxHeld = 0;
  // Per key: the add counter value a pass started after (it sees every add before its start).
  const addedSeq = new Map<string, number>();
  const seenSeq = new Map<string, number>();
  let counter = 0;
  let passes = 0;

  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      const held = (holders.get(key) ?? 0) + 1;
      holders.set(key, held);
      maxHeld = Math.max(maxHeld, held);
      seenSeq.set(key, addedSeq.get(key) ?? 0);
      passes++;
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 3)));
      holders.set(key, (holders.get(key) as number) - 1);
      q.done(key);
    }
  };
  const workers = Array.from({ length: 4 }, worker);
  for (let i = 0; i < 300; i++) {
    const key = keys[i % keys.length] as string;
    addedSeq.set(key, ++counter);
    q.add(key);
    if (i % 7 === 0) await new Promise((r) => setTimeout(r, 1));
  }
  // Wait until the queue is idle: every key's last add has been seen by a pass that started after it.
  for (let i = 0; i < 5000 && (q.length > 0 || keys.some((k) => seenSeq.get(k) !== addedSeq.get(k))); i++) {
    await new Promise((r) => setTimeout(r, 2));
  }
  await q.shutDown();
  await Promise.all(workers);
  t.equal(maxHeld, 1, 'no key was ever held by two workers');
  t.ok(passes < 300, `adds collapsed into fewer passes (${passes})`);
  for (const k of keys) t.equal(seenSeq.get(k), addedSeq.get(k), `the last add of ${k} was followed by a pass`);
});

t.test('per-key exponential backoff grows 5 ms → 1000 s and forget resets it', async (t) => {
  const limiter = new ItemExponentialFailureRateLimiter();
  const delays = Array.from({ length: 20 }, () => limiter.when('k'));
  t.same(delays.slice(0, 5), [5, 10, 20, 40, 80]);
  t.equal(delays[17], 5 * 2 ** 17);
  t.equal(delays[18], 1_000_000, 'capped at 1000 s');
  t.equal(delays[19], 1_000_000);
  t.equal(limiter.retries('k'), 20);
  t.equal(limiter.when('other'), 5, 'keys back off independently');
  limiter.forget('k');
  t.equal(limiter.retries('k'), 0);
  t.equal(limiter.when('k'), 5, 'after forget the next failure starts at the base again');
});

t.test('rate limiter constructors refuse nonsense', async (t) => {
  t.throws(() => new ItemExponentialFailureRateLimiter(0, 10), /0 < base/);
  t.throws(() => new ItemExponentialFailureRateLimiter(10, 5), /base \(10\) <= max \(5\)/);
  t.throws(() => new BucketRateLimiter(0, 10), /qps > 0/);
  t.throws(() => new BucketRateLimiter(10, 0), /burst >= 1/);
  t.throws(() => new MaxOfRateLimiter(), /at least one/);
  t.throws(() => new WorkQueue({ name: '' }), /needs a name/);
});

t.test('the overall token bucket lets a burst through, then spaces retries at qps', async (t) => {
  const clock = new ManualClock();
  const bucket = new BucketRateLimiter(10, 3, clock);
  t.same([bucket.when(), bucket.when(), bucket.when()], [0, 0, 0], 'the burst is free');
  t.equal(bucket.when(), 100, 'the next token exists in 1/qps');
  t.equal(bucket.when(), 200, 'and the one after that is reserved behind it');
  clock.advance(1000);
  // 10 tokens refilled but the bucket holds at most 3; two were owed.
  t.same([bucket.when(), bucket.when(), bucket.when(), bucket.when()], [0, 0, 0, 100]);
});

t.test('the default limiter takes the larger of per-key backoff and the bucket', async (t) => {
  const clock = new ManualClock();
  const limiter = defaultRateLimiter(clock);
  t.equal(limiter.when('k'), 5, 'first failure: per-key base (bucket is full)');
  t.equal(limiter.when('k'), 10);
  for (let i = 0; i < 98; i++) limiter.when(`x${i}`);
  // 100 tokens spent; the bucket now dominates a fresh key's 5 ms.
  t.equal(limiter.when('fresh'), 100);
  t.equal(limiter.retries('k'), 2);
  limiter.forget('k');
  t.equal(limiter.retries('k'), 0);
});

t.test('addRateLimited delays by the limiter; forget restarts the backoff', async (t) => {
  const clock = new ManualClock();
  const q = new WorkQueue({ name: uniqueName('ratelimited'), clock, rateLimiter: new ItemExponentialFailureRateLimiter(5, 1000) });
  q.addRateLimited('k');
  t.equal(q.length, 0, 'not available before its delay');
  clock.advance(4);
  t.equal(q.length, 0);
  clock.advance(1);
  t.equal(q.length, 1, 'available after 5 ms');
  t.same(await drainNow(q), ['k']);
  q.addRateLimited('k');
  clock.advance(9);
  t.equal(q.length, 0, 'second failure waits 10 ms');
  clock.advance(1);
  t.equal(q.length, 1);
  await drainNow(q);
  t.equal(q.numRequeues('k'), 2);
  q.forget('k');
  t.equal(q.numRequeues('k'), 0);
  q.addRateLimited('k');
  clock.advance(5);
  t.equal(q.length, 1, 'after forget: 5 ms again');
  await q.shutDown();
});

t.test('addAfter: keys become available in due order, and the earliest time for a key wins', async (t) => {
  const clock = new ManualClock();
  const q = new WorkQueue({ name: uniqueName('after'), clock });
  q.addAfter('late', 30);
  q.addAfter('early', 10);
  q.addAfter('middle', 20);
  q.addAfter('moved-earlier', 50);
  q.addAfter('moved-earlier', 5);
  q.addAfter('kept-early', 15);
  q.addAfter('kept-early', 40);
  q.addAfter('now', 0);
  t.same(await drainNow(q), ['now'], 'a non-positive delay adds at once');
  const order: string[] = [];
  for (let step = 0; step < 60; step++) {
    clock.advance(1);
    order.push(...(await drainNow(q)));
  }
  t.same(order, ['moved-earlier', 'early', 'kept-early', 'middle', 'late']);
  t.equal(clock.pending, 0, 'a later addAfter for a key already due earlier schedules nothing');
  await q.shutDown();
});

t.test('shutDown drops waiting keys, ignores new adds, and resolves only after held keys are done', async (t) => {
  const clock = new ManualClock();
  const q = new WorkQueue({ name: uniqueName('shutdown'), clock });
  q.add('held');
  q.add('waiting');
  q.addAfter('delayed', 100);
  const held = await q.get();
  t.equal(held, 'held');
  let drained = false;
  const shut = q.shutDown().then(() => (drained = true));
  t.equal(q.shuttingDown, true);
  t.equal(await q.get(), undefined, 'no more keys are handed out');
  q.add('new');
  q.addAfter('new-later', 1);
  q.addRateLimited('new-limited');
  t.equal(q.length, 0, 'adds after shutdown are ignored');
  t.equal(clock.pending, 0, 'pending delays were cancelled');
  await new Promise((r) => setImmediate(r));
  t.equal(drained, false, 'still draining while a worker holds a key');
  q.done('held');
  await shut;
  t.equal(drained, true);
  await t.resolves(q.shutDown(), 'a second shutDown resolves at once');
});

t.test('a worker waiting in get() is released by shutDown', async (t) => {
  const q = new WorkQueue({ name: uniqueName('waiter') });
  const waiting = q.get();
  await q.shutDown();
  t.equal(await waiting, undefined);
});

t.test('metrics: adds, depth, retries, durations and in-flight work carry the queue name', async (t) => {
  const clock = new ManualClock();
  const name = uniqueName('metrics');
  const q = new WorkQueue({ name, clock, rateLimiter: new ItemExponentialFailureRateLimiter(5, 1000) });
  q.add('a');
  q.add('a');
  q.add('b');
  t.equal(await metricValue('workqueue_adds_total', name), 2, 'a deduplicated add is not counted');
  t.equal(await metricValue('workqueue_depth', name), 2);
  clock.advance(2000);
  const a = (await q.get()) as string;
  t.equal(await metricValue('workqueue_depth', name), 1);
  clock.advance(3000);
  t.equal(await metricValue('workqueue_longest_running_processor_seconds', name), 3);
  const b = (await q.get()) as string;
  clock.advance(1000);
  t.equal(await metricValue('workqueue_unfinished_work_seconds', name), 4 + 1, 'a ran 4 s and b 1 s so far');
  t.equal(await metricValue('workqueue_longest_running_processor_seconds', name), 4);
  q.done(a);
  q.done(b);
  t.equal(await metricValue('workqueue_unfinished_work_seconds', name), 0);
  t.equal(await metricValue('workqueue_queue_duration_seconds', name, 'workqueue_queue_duration_seconds_count'), 2);
  t.equal(await metricValue('workqueue_queue_duration_seconds', name, 'workqueue_queue_duration_seconds_sum'), 2 + 5);
  t.equal(await metricValue('workqueue_work_duration_seconds', name, 'workqueue_work_duration_seconds_sum'), 4 + 1);
  q.addRateLimited('a');
  q.addRateLimited('a');
  t.equal(await metricValue('workqueue_retries_total', name), 2);
  await q.shutDown();
  t.equal(await metricValue('workqueue_depth', name), 0);
  t.equal(await metricValue('workqueue_unfinished_work_seconds', name), undefined, 'a stopped queue drops its in-flight series');
});
