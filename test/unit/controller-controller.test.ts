import t from 'tap';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { ManualClock } from '../../src/controller/clock.js';
import {
  Controller,
  TerminalError,
  ignoreStatusOnlyUpdates,
  keyOf,
  parseKey,
  toControllerOwner,
  toLabelledOwner,
  type EventSource,
  type ObjectEvent,
  type ReconcileContext,
  type ReconcileResult,
} from '../../src/controller/controller.js';
import { ItemExponentialFailureRateLimiter } from '../../src/controller/workqueue.js';
import { registry } from '../../src/shared/metrics.js';
import type { KubeObject } from '../../src/shared/kube-client.js';

const silent = pino({ level: 'silent' });
let seq = 0;
const uniqueName = (what: string): string => `ctl-test-${what}-${seq++}`;

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function metric(name: string, labels: Record<string, string>): Promise<number | undefined> {
  const data = await registry.getSingleMetric(name)?.get();
  return data?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value;
}

type Handler = (obj: KubeObject, old?: KubeObject) => void;
/** An informer stand-in: emits what the test tells it to. */
class FakeSource implements EventSource<KubeObject> {
  readonly handlers = new Map<string, Set<Handler>>();
  on(event: ObjectEvent, handler: Handler): () => void {
    const set = this.handlers.get(event) ?? new Set<Handler>();
    this.handlers.set(event, set);
    set.add(handler);
    return () => set.delete(handler);
  }
  emit(event: 'add' | 'update' | 'delete', obj: KubeObject, old?: KubeObject): void {
    for (const h of this.handlers.get(event) ?? []) h(obj, old);
  }
}

const obj = (namespace: string | undefined, name: string, extra: Partial<NonNullable<KubeObject['metadata']>> = {}): KubeObject => ({
  metadata: { namespace, name, ...extra },
});

t.test('keys: format and parse, with malformed keys refused', async (t) => {
  t.equal(keyOf(obj('ns', 'a')), 'ns/a');
  t.equal(keyOf(obj(undefined, 'node-1')), 'node-1');
  t.throws(() => keyOf({ metadata: {} }), /no metadata.name/);
  t.same(parseKey('ns/a'), { namespace: 'ns', name: 'a' });
  t.same(parseKey('a'), { name: 'a' });
  for (const bad of ['', '/a', 'ns/', 'a/b/c']) t.throws(() => parseKey(bad), /malformed object key/, bad);
});

t.test('owner mapping: only the controlling owner of the right kind and group', async (t) => {
  const owner = { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema' };
  const map = toControllerOwner(owner);
  const ref = (over: Record<string, unknown>) => ({ apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', name: 'app', uid: 'u1', controller: true, ...over });
  const cases: Array<[string, KubeObject, string[]]> = [
    ['controller owner', obj('ns', 'job-1', { ownerReferences: [ref({})] }), ['ns/app']],
    ['another version of the same group', obj('ns', 'job-1', { ownerReferences: [ref({ apiVersion: 'operator.ptah.run/v1' })] }), ['ns/app']],
    ['owner that is not the controller', obj('ns', 'job-1', { ownerReferences: [ref({ controller: false })] }), []],
    ['controller of another kind', obj('ns', 'job-1', { ownerReferences: [ref({ kind: 'PtahMigration' })] }), []],
    ['same kind in another group', obj('ns', 'job-1', { ownerReferences: [ref({ apiVersion: 'example.com/v1alpha1' })] }), []],
    ['no owners', obj('ns', 'job-1'), []],
  ];
  for (const [what, o, want] of cases) t.same(map(o), want, what);

  const byLabel = toLabelledOwner('operator.ptah.run/schema');
  t.same(byLabel(obj('ns', 'pod-1', { labels: { 'operator.ptah.run/schema': 'app' } })), ['ns/app']);
  t.same(byLabel(obj('ns', 'pod-1', { labels: { other: 'app' } })), [], 'no label, no key');
  t.same(byLabel(obj('ns', 'pod-1', { labels: { 'operator.ptah.run/schema': '' } })), [], 'an empty label is no owner');
});

t.test('ignoreStatusOnlyUpdates passes spec and metadata changes, drops status-only ones', async (t) => {
  const base = obj('ns', 'a', { generation: 3, labels: { x: '1' }, resourceVersion: '10' });
  const cases: Array<[string, KubeObject, boolean]> = [
    ['status only (same generation, new resourceVersion)', { ...base, metadata: { ...base.metadata, resourceVersion: '11' } }, false],
    ['generation changed', { ...base, metadata: { ...base.metadata, generation: 4 } }, true],
    ['labels changed', { ...base, metadata: { ...base.metadata, labels: { x: '2' } } }, true],
    ['finalizers changed', { ...base, metadata: { ...base.metadata, finalizers: ['f'] } }, true],
    ['annotations changed', { ...base, metadata: { ...base.metadata, annotations: { a: 'b' } } }, true],
    ['deletion started', { ...base, metadata: { ...base.metadata, deletionTimestamp: new Date(0) } }, true],
    ['no generation at all', obj('ns', 'a'), true],
  ];
  for (const [what, next, want] of cases) t.equal(ignoreStatusOnlyUpdates('update', next, base), want, what);
  t.equal(ignoreStatusOnlyUpdates('add', base), true);
  t.equal(ignoreStatusOnlyUpdates('delete', base), true);
});

t.test('an error requeues the key with growing backoff; success forgets it', async (t) => {
  const clock = new ManualClock();
  const name = uniqueName('errors');
  let calls = 0;
  const c = new Controller({
    name,
    logger: silent,
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter(100, 10_000),
    reconcile: async () => {
      calls++;
      if (calls <= 3) throw new Error(`boom ${calls}`);
    },
  });
  c.start();
  c.enqueue('ns/a');
  await until(() => calls === 1 && c.queue.numRequeues('ns/a') === 1, 'first failure');
  clock.advance(99);
  await until(() => true, 'tick');
  t.equal(calls, 1, 'not retried before the first backoff (100 ms)');
  clock.advance(1);
  await until(() => calls === 2 && c.queue.numRequeues('ns/a') === 2, 'second try');
  clock.advance(199);
  await new Promise((r) => setImmediate(r));
  t.equal(calls, 2, 'the second backoff doubled (200 ms)');
  clock.advance(1);
  await until(() => calls === 3 && c.queue.numRequeues('ns/a') === 3, 'third try');
  clock.advance(400);
  await until(() => calls === 4 && c.queue.numRequeues('ns/a') === 0, 'success forgets the backoff');
  t.equal(await metric('controller_runtime_reconcile_total', { controller: name, result: 'error' }), 3);
  t.equal(await metric('controller_runtime_reconcile_total', { controller: name, result: 'success' }), 1);
  t.equal(await metric('controller_runtime_reconcile_errors_total', { controller: name }), 3);
  t.equal(await metric('workqueue_retries_total', { name }), 3);
  await c.stop();
});

t.test('requeueAfter re-adds the key after that delay and resets its backoff; requeue uses the limiter', async (t) => {
  const clock = new ManualClock();
  const name = uniqueName('requeue');
  const answers: Array<ReconcileResult | Error> = [new Error('once'), { requeueAfter: 5000 }, { requeue: true }, {}];
  const seen: number[] = [];
  const c = new Controller({
    name,
    logger: silent,
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter(10, 10_000),
    reconcile: async () => {
      seen.push(clock.monotonicMs());
      const a = answers.shift() as ReconcileResult | Error;
      if (a instanceof Error) throw a;
      return a;
    },
  });
  c.start();
  c.enqueue('ns/a');
  await until(() => seen.length === 1, 'first pass');
  clock.advance(10);
  await until(() => seen.length === 2, 'retry after the error');
  t.equal(c.queue.numRequeues('ns/a'), 0, 'requeueAfter forgot the backoff');
  clock.advance(4999);
  await new Promise((r) => setImmediate(r));
  t.equal(seen.length, 2, 'not before requeueAfter');
  clock.advance(1);
  await until(() => seen.length === 3, 'pass after requeueAfter');
  t.equal(seen[2], 10 + 5000);
  clock.advance(10);
  await until(() => seen.length === 4, 'requeue: true goes through the limiter (10 ms, the first retry)');
  await until(() => c.queue.numRequeues('ns/a') === 0, 'final success forgets');
  t.equal(await metric('controller_runtime_reconcile_total', { controller: name, result: 'requeue_after' }), 1);
  t.equal(await metric('controller_runtime_reconcile_total', { controller: name, result: 'requeue' }), 1);
  t.equal(await metric('controller_runtime_reconcile_total', { controller: name, result: 'success' }), 1);
  await c.stop();
});

t.test('a terminal error and a malformed result are errors; only the latter is retried', async (t) => {
  const clock = new ManualClock();
  const name = uniqueName('terminal');
  const calls = new Map<string, number>();
  const c = new Controller({
    name,
    logger: silent,
    clock,
    rateLimiter: new ItemExponentialFailureRateLimiter(10, 10_000),
    reconcile: async (key) => {
      calls.set(key, (calls.get(key) ?? 0) + 1);
      if (key === 'ns/terminal') throw new TerminalError('spec.target.engine is not supported');
      return { requeueAfter: -5 };
    },
  });
  c.start();
  c.enqueue('ns/terminal');
  c.enqueue('ns/bad-result');
  await until(() => calls.get('ns/terminal') === 1 && calls.get('ns/bad-result') === 1, 'both ran');
  clock.advance(1000);
  await until(() => (calls.get('ns/bad-result') ?? 0) >= 2, 'the malformed result is retried');
  t.equal(calls.get('ns/terminal'), 1, 'a terminal error is not retried');
  t.equal(await metric('controller_runtime_terminal_reconcile_errors_total', { controller: name }), 1);
  t.ok(((await metric('controller_runtime_reconcile_errors_total', { controller: name })) ?? 0) >= 3);
  await c.stop();
});

t.test('no more than `workers` reconciles run at once, and all of them are used', async (t) => {
  const name = uniqueName('workers');
  let active = 0;
  let maxActive = 0;
  const release: Array<() => void> = [];
  const done: string[] = [];
  const c = new Controller({
    name,
    logger: silent,
    workers: 3,
    reconcile: async (key) => {
      active++;
      maxActive = Math.max(maxActive, active);
      await new Promise<void>((r) => release.push(r));
      active--;
      done.push(key);
    },
  });
  c.start();
  for (let i = 0; i < 10; i++) c.enqueue(`ns/k${i}`);
  while (done.length < 10) {
    await until(() => release.length > 0 && (active === 3 || active + done.length === 10), 'workers busy');
    t.ok(active <= 3);
    (release.shift() as () => void)();
    await new Promise((r) => setImmediate(r));
  }
  t.equal(maxActive, 3, 'three workers ran concurrently, never more');
  t.equal(await metric('controller_runtime_max_concurrent_reconciles', { controller: name }), 3);
  t.equal(await metric('controller_runtime_active_workers', { controller: name }), 0);
  await c.stop();
  t.throws(() => new Controller({ name: 'x', logger: silent, workers: 0, reconcile: async () => {} }), /workers must be a positive integer/);
  t.throws(() => new Controller({ name: '', logger: silent, reconcile: async () => {} }), /needs a name/);
});

t.test('watches map events to keys; a filter and a throwing mapper are contained', async (t) => {
  const name = uniqueName('watch');
  const seen: string[] = [];
  const c = new Controller({
    name,
    logger: silent,
    reconcile: async (key) => {
      seen.push(key);
    },
  });
  const primary = new FakeSource();
  const jobs = new FakeSource();
  const odd = new FakeSource();
  c.watchPrimary(primary, ignoreStatusOnlyUpdates)
    .watchOwned(jobs, { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema' })
    .watch(odd, () => {
      throw new Error('mapper bug');
    });
  c.start();
  const schema = obj('ns', 'app', { generation: 1 });
  primary.emit('add', schema);
  await until(() => seen.length === 1, 'primary add');
  primary.emit('update', { metadata: { ...schema.metadata, resourceVersion: '2' } }, schema);
  t.doesNotThrow(() => odd.emit('add', obj('ns', 'x')), 'a throwing mapper does not reach the informer');
  jobs.emit('update', obj('ns', 'job-1', { ownerReferences: [{ apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', name: 'app', uid: 'u', controller: true }] }));
  jobs.emit('delete', obj('ns', 'job-2'));
  await until(() => seen.length === 2, 'owned job event');
  await new Promise((r) => setTimeout(r, 5));
  t.same(seen, ['ns/app', 'ns/app'], 'status-only update and unowned job were not enqueued; the owned job mapped to its owner');
  await c.stop();
  t.equal([...primary.handlers.values()].reduce((n, s) => n + s.size, 0), 0, 'stop unsubscribed from the sources');
});

t.test('each pass gets its own reconcileID on its log lines; stop aborts passes in flight and waits for them', async (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      cb();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  const name = uniqueName('ctx');
  const ctxs: ReconcileContext[] = [];
  let finished = false;
  const c = new Controller({
    name,
    logger,
    reconcile: async (key, ctx) => {
      ctxs.push(ctx);
      ctx.log.info('pass');
      if (key === 'ns/slow') {
        await new Promise((r) => ctx.signal.addEventListener('abort', r, { once: true }));
        finished = true;
      }
    },
  });
  c.start();
  c.enqueue('ns/a');
  await until(() => ctxs.length === 1, 'first pass');
  c.enqueue('ns/a');
  await until(() => ctxs.length === 2, 'second pass');
  c.enqueue('ns/slow');
  await until(() => ctxs.length === 3, 'slow pass started');
  const [first, second] = ctxs as [ReconcileContext, ReconcileContext];
  t.not(first.reconcileID, second.reconcileID);
  t.match(first, { key: 'ns/a', namespace: 'ns', name: 'a' });
  const passLines = lines.filter((l) => l.msg === 'pass');
  t.same(
    passLines.slice(0, 2).map((l) => [l.controller, l.namespace, l.name, l.reconcileID]),
    [
      [name, 'ns', 'a', first.reconcileID],
      [name, 'ns', 'a', second.reconcileID],
    ],
  );
  const stopping = c.stop();
  t.equal(ctxs[2]?.signal.aborted, true, 'the pass in flight sees the abort at once');
  c.enqueue('ns/after-stop');
  await stopping;
  t.equal(finished, true, 'stop resolved after the pass in flight returned');
  t.notOk(ctxs.some((x) => x.key === 'ns/after-stop'), 'nothing runs after stop');
});

t.test('a malformed key is dropped, not retried', async (t) => {
  const clock = new ManualClock();
  let calls = 0;
  const c = new Controller({
    name: uniqueName('malformed'),
    logger: silent,
    clock,
    reconcile: async () => {
      calls++;
    },
  });
  c.start();
  c.enqueue('a/b/c');
  await until(() => c.queue.length === 0, 'taken');
  clock.advance(10_000);
  await new Promise((r) => setImmediate(r));
  t.equal(calls, 0);
  t.equal(clock.pending, 0, 'no retry scheduled');
  await c.stop();
});
