// The informer against a loopback stand-in for the API server, for the failures a real one will not produce on
// demand: 410 Gone, a failing LIST, a silent watch, a cut connection, a paged LIST. The real-server behaviour is
// covered by test/integration/controller-informer.test.ts.
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { ManualClock } from '../../src/controller/clock.js';
import { Informer } from '../../src/controller/informer.js';
import { registry } from '../../src/shared/metrics.js';
import type { KubeObject } from '../../src/shared/kube-client.js';

const silent = pino({ level: 'silent' });
let namespaces = 0;

type ConfigMap = KubeObject & { data?: Record<string, string> };

class FakeApiServer {
  /** A namespace per server, so each test's informer has its own metrics series. */
  readonly namespace = `ns${namespaces++}`;
  readonly items = new Map<string, ConfigMap>();
  rv = 100;
  /** LISTs to answer 500 before answering properly. */
  listFailures = 0;
  /** Status to answer the next WATCH with (once). */
  nextWatchStatus?: number;
  readonly lists: URLSearchParams[] = [];
  readonly watches: Array<{ query: URLSearchParams; res: http.ServerResponse }> = [];
  readonly authHeaders: string[] = [];
  private readonly server = http.createServer((req, res) => this.handle(req, res));

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  put(name: string, data: Record<string, string> = {}): ConfigMap {
    const cm: ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: this.namespace, resourceVersion: String(++this.rv) }, data };
    this.items.set(name, cm);
    return cm;
  }

  /** Writes one watch event to the newest watch. */
  send(type: string, object: unknown): void {
    this.watches.at(-1)?.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  get openWatch(): http.ServerResponse | undefined {
    const w = this.watches.at(-1);
    return w && !w.res.writableEnded && !w.res.destroyed ? w.res : undefined;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://fake');
    this.authHeaders.push(req.headers.authorization ?? '');
    if (url.pathname !== `/api/v1/namespaces/${this.namespace}/configmaps`) {
      res.writeHead(404).end();
      return;
    }
    if (url.searchParams.get('watch') === 'true') {
      this.watches.push({ query: url.searchParams, res });
      if (this.nextWatchStatus) {
        const code = this.nextWatchStatus;
        this.nextWatchStatus = undefined;
        res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code, reason: code === 410 ? 'Expired' : 'InternalError', message: 'injected' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      return;
    }
    this.lists.push(url.searchParams);
    if (this.listFailures > 0) {
      this.listFailures--;
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: 500, reason: 'InternalError', message: 'injected' }));
      return;
    }
    const all = [...this.items.values()].filter((cm) => {
      const selector = url.searchParams.get('labelSelector');
      if (!selector) return true;
      const [k, v] = selector.split('=');
      return cm.metadata?.labels?.[k as string] === v;
    });
    const limit = Number(url.searchParams.get('limit') ?? all.length);
    const offset = Number(url.searchParams.get('continue') ?? 0);
    const page = all.slice(offset, offset + limit);
    const next = offset + limit < all.length ? String(offset + limit) : undefined;
    // Items of a LIST carry no apiVersion/kind, as the real API server's.
    const items = page.map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: String(this.rv), continue: next }, items }));
  }
}

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'test-token' }],
    contexts: [{ name: 'c', cluster: 'fake', user: 'u' }],
    currentContext: 'c',
  });
  return kc;
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Waits until the informer has counted `n` failed LISTs/WATCHes (its backoff sleep is then scheduled). */
async function untilFailures(informer: Informer<ConfigMap>, n: number): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if ((await counter('ptah_operator_informer_failures_total', { resource: informer.resource })) >= n) {
      await new Promise((r) => setTimeout(r, 5));
      return;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${n} failures`);
}

async function counter(metric: string, labels: Record<string, string>): Promise<number> {
  const data = await registry.getSingleMetric(metric)?.get();
  return data?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
}

interface Seen {
  events: string[];
}

/** A fake API server and an informer on it; `cleanup` stops both (pass it to t.teardown). */
async function setup(over: Partial<ConstructorParameters<typeof Informer>[0]> = {}) {
  const api = new FakeApiServer();
  const server = await api.start();
  const clock = new ManualClock();
  const informer = new Informer<ConfigMap>({
    kubeConfig: kubeConfig(server),
    apiVersion: 'v1',
    kind: 'ConfigMap',
    namespace: api.namespace,
    logger: silent,
    clock,
    watchTimeoutSeconds: 300,
    watchdogMs: 60_000,
    backoff: { initialMs: 1000, maxMs: 8000 },
    ...over,
  });
  const seen: Seen = { events: [] };
  informer.on('add', (o) => seen.events.push(`add ${o.metadata?.name}@${o.metadata?.resourceVersion}`));
  informer.on('update', (o, old) => seen.events.push(`update ${o.metadata?.name}@${old?.metadata?.resourceVersion}->${o.metadata?.resourceVersion}`));
  informer.on('delete', (o) => seen.events.push(`delete ${o.metadata?.name}`));
  const cleanup = async (): Promise<void> => {
    await informer.stop();
    await api.close();
  };
  return { api, clock, informer, seen, cleanup };
}

t.test('initial sync: a paged LIST fills the cache, then a WATCH opens from its resourceVersion with bookmarks', async (t) => {
  const { api, informer, seen, cleanup } = await setup({ pageSize: 2, labelSelector: 'app=x' });
  t.teardown(cleanup);
  for (const name of ['a', 'b', 'c']) api.put(name);
  for (const cm of api.items.values()) cm.metadata = { ...cm.metadata, labels: { app: 'x' } };
  api.put('unlabelled');
  t.equal(informer.hasSynced(), false);
  informer.start();
  await informer.waitForSync();
  t.equal(informer.hasSynced(), true);
  t.same(seen.events, ['add a@101', 'add b@102', 'add c@103']);
  t.equal(api.lists.length, 2, 'two pages of two');
  t.equal(api.lists[1]?.get('continue'), '2');
  t.equal(api.lists[0]?.get('labelSelector'), 'app=x');
  t.equal(informer.get(`${api.namespace}/b`)?.kind, 'ConfigMap', 'list items get their apiVersion/kind back');
  t.same(informer.list().map((o) => o.metadata?.name), ['a', 'b', 'c']);
  await until(() => api.watches.length === 1, 'watch');
  const q = api.watches[0]?.query as URLSearchParams;
  t.equal(q.get('resourceVersion'), '104');
  t.equal(q.get('allowWatchBookmarks'), 'true');
  t.equal(q.get('timeoutSeconds'), '300');
  t.equal(q.get('labelSelector'), 'app=x');
  t.ok(api.authHeaders.every((h) => h === 'Bearer test-token'), 'the kubeconfig credentials are sent');
});

t.test('watch events update the cache; the server ending a watch reopens it from the last resourceVersion', async (t) => {
  const { api, informer, seen, cleanup } = await setup();
  t.teardown(cleanup);
  api.put('a');
  informer.start();
  await informer.waitForSync();
  await until(() => !!api.openWatch, 'watch');
  const listsBefore = api.lists.length;
  api.send('ADDED', api.put('b'));
  const a2 = api.put('a', { k: 'v' });
  api.send('MODIFIED', a2);
  api.send('MODIFIED', a2); // same resourceVersion again: no second update
  api.send('BOOKMARK', { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: '250' } });
  api.send('DELETED', { ...api.items.get('b'), metadata: { ...api.items.get('b')?.metadata, resourceVersion: '251' } });
  await until(() => seen.events.length === 4, 'events');
  await new Promise((r) => setTimeout(r, 20));
  t.same(seen.events, ['add a@101', 'add b@102', 'update a@101->103', 'delete b']);
  t.equal(informer.get(`${api.namespace}/b`), undefined);
  t.same(informer.get(`${api.namespace}/a`)?.data, { k: 'v' });
  api.openWatch?.end();
  await until(() => api.watches.length === 2, 'rewatch');
  t.equal(api.watches[1]?.query.get('resourceVersion'), '251', 'reopened from the last event, bookmarks included');
  t.equal(api.lists.length, listsBefore, 'no relist after a normal close');
});

t.test('the cache keeps no managedFields, from a LIST or a WATCH; everything else of the object is kept', async (t) => {
  const { api, informer, cleanup } = await setup();
  t.teardown(cleanup);
  const managedFields = [{ manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': {} } }];
  const listed = api.put('listed', { k: 'v' });
  listed.metadata = { ...listed.metadata, labels: { app: 'x' }, managedFields };
  const handed: ConfigMap[] = [];
  informer.on('add', (o) => void handed.push(o));
  informer.start();
  await informer.waitForSync();
  await until(() => !!api.openWatch, 'watch');
  const watched = api.put('watched', { w: '1' });
  watched.metadata = { ...watched.metadata, annotations: { note: 'n' }, managedFields };
  api.send('ADDED', watched);
  await until(() => handed.length === 2, 'the watched add');
  for (const name of ['listed', 'watched']) {
    const cached = informer.get(`${api.namespace}/${name}`);
    t.notOk(cached?.metadata && 'managedFields' in cached.metadata, `${name}: no managedFields in the cache`);
    const { managedFields: _served, ...metadata } = api.items.get(name)!.metadata!;
    t.same(cached, { ...api.items.get(name), metadata }, `${name}: the rest as served`);
  }
  t.ok(handed.every((o) => !('managedFields' in (o.metadata ?? {}))), 'handlers get the object the cache keeps');
  t.same(informer.get(`${api.namespace}/listed`)?.metadata?.labels, { app: 'x' });
  t.same(informer.get(`${api.namespace}/watched`)?.metadata?.annotations, { note: 'n' });
});

t.test('410 Gone, as a watch ERROR event or as the WATCH status, relists and diffs the cache', async (t) => {
  const { api, clock, informer, seen, cleanup } = await setup();
  t.teardown(cleanup);
  api.put('keep');
  api.put('vanish');
  api.put('change');
  informer.start();
  await informer.waitForSync();
  await until(() => !!api.openWatch, 'watch');
  const gone = await counter('ptah_operator_informer_lists_total', { resource: informer.resource, reason: 'gone' });
  api.items.delete('vanish');
  api.put('change', { x: '1' });
  api.put('new');
  api.send('ERROR', { kind: 'Status', apiVersion: 'v1', code: 410, reason: 'Expired', message: 'too old resource version' });
  await until(() => seen.events.length === 6, 'relist events');
  t.same(seen.events.slice(3), ['delete vanish', 'update change@103->104', 'add new@105']);
  await until(() => !!api.openWatch && api.watches.length === 2, 'new watch');
  t.equal(api.watches[1]?.query.get('resourceVersion'), '105');

  api.nextWatchStatus = 410;
  clock.advance(1000); // the watch lived a while before the server ended it
  api.openWatch?.end();
  await until(() => api.lists.length === 3, 'relist after a 410 status');
  t.equal(await counter('ptah_operator_informer_lists_total', { resource: informer.resource, reason: 'gone' }), gone + 2);
  t.equal(seen.events.length, 6, 'nothing changed, nothing emitted');
});

t.test('a failing LIST is retried with growing backoff until it succeeds', async (t) => {
  const { api, clock, informer, cleanup } = await setup();
  t.teardown(cleanup);
  api.listFailures = 3;
  api.put('a');
  informer.start();
  await untilFailures(informer, 1);
  t.equal(informer.hasSynced(), false);
  // Backoff n waits within [base/2, base), base = 1 s · 2ⁿ⁻¹.
  clock.advance(499);
  await new Promise((r) => setTimeout(r, 20));
  t.equal(api.lists.length, 1, 'not before half the first backoff');
  clock.advance(501);
  await untilFailures(informer, 2);
  t.equal(api.lists.length, 2);
  clock.advance(999);
  await new Promise((r) => setTimeout(r, 20));
  t.equal(api.lists.length, 2, 'the second backoff is longer (at least 1 s)');
  clock.advance(1001);
  await untilFailures(informer, 3);
  t.equal(api.lists.length, 3);
  clock.advance(4000);
  await informer.waitForSync();
  t.equal(api.lists.length, 4);
  t.equal(await counter('ptah_operator_informer_failures_total', { resource: informer.resource }), 3);
  t.equal(await counter('ptah_operator_informer_lists_total', { resource: informer.resource, reason: 'error' }), 3);
});

t.test('a WATCH that fails (HTTP 500, a cut connection) relists after backoff', async (t) => {
  const { api, clock, informer, seen, cleanup } = await setup();
  t.teardown(cleanup);
  api.put('a');
  informer.start();
  await informer.waitForSync();
  await until(() => !!api.openWatch, 'watch');
  api.openWatch?.socket?.destroy();
  await untilFailures(informer, 1);
  api.put('b');
  clock.advance(1000);
  await until(() => api.lists.length === 2, 'relist');
  await until(() => seen.events.includes('add b@102'), 'the object created while disconnected');
  await until(() => !!api.openWatch && api.watches.length === 2, 'watch again');
  api.nextWatchStatus = 500;
  clock.advance(1000); // the watch lived a while before the server ended it
  api.openWatch?.end();
  await untilFailures(informer, 2);
  t.equal(api.watches.length, 3);
  clock.advance(8000);
  await until(() => api.lists.length === 3, 'relist after the 500');
});

t.test('the watchdog reopens a silent watch from the last resourceVersion', async (t) => {
  const { api, clock, informer, cleanup } = await setup();
  t.teardown(cleanup);
  informer.start();
  await informer.waitForSync();
  await until(() => !!api.openWatch, 'watch');
  api.send('BOOKMARK', { metadata: { resourceVersion: '300' } });
  await new Promise((r) => setTimeout(r, 20));
  clock.advance(59_000);
  await new Promise((r) => setTimeout(r, 20));
  t.equal(api.watches.length, 1, 'not silent long enough yet');
  clock.advance(1000);
  await until(() => api.watches.length === 2, 'watch reopened');
  t.equal(api.watches[1]?.query.get('resourceVersion'), '300');
  t.equal(api.lists.length, 1, 'no relist: the resourceVersion is still good');
  t.equal(await counter('ptah_operator_informer_watches_total', { resource: informer.resource, reason: 'watchdog' }), 1);
});

t.test('handlers that throw or reject are contained; later handlers and later events still run', async (t) => {
  const { api, informer, seen, cleanup } = await setup();
  t.teardown(cleanup);
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown): void => {
    unhandled.push(e);
  };
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => process.off('unhandledRejection', onUnhandled));
  informer.on('add', () => {
    throw new Error('sync handler bug');
  });
  informer.on('add', async () => {
    throw new Error('async handler bug');
  });
  const after: string[] = [];
  const off = informer.on('add', (o) => after.push(o.metadata?.name as string));
  api.put('a');
  informer.start();
  await informer.waitForSync();
  await until(() => !!api.openWatch, 'watch');
  api.send('ADDED', api.put('b'));
  await until(() => after.length === 2, 'later handler saw both');
  off();
  api.send('ADDED', api.put('c'));
  await until(() => seen.events.length === 3, 'third event');
  await new Promise((r) => setTimeout(r, 20));
  t.same(after, ['a', 'b'], 'an unsubscribed handler hears nothing more');
  t.same(unhandled, [], 'no unhandled rejection');
  t.equal(api.watches.length, 1, 'the watch was not disturbed');
});

t.test('stop() ends the informer; a sync wait is rejected rather than left hanging', async (t) => {
  const api = new FakeApiServer();
  const server = await api.start();
  t.teardown(() => api.close());
  api.listFailures = 100;
  const clock = new ManualClock();
  const informer = new Informer<ConfigMap>({ kubeConfig: kubeConfig(server), apiVersion: 'v1', kind: 'ConfigMap', namespace: api.namespace, logger: silent, clock });
  informer.start();
  const waiting = informer.waitForSync();
  const abort = new AbortController();
  const givenUp = informer.waitForSync(abort.signal);
  abort.abort();
  await t.rejects(givenUp, /gave up waiting/);
  await until(() => api.lists.length === 1, 'first list');
  await informer.stop();
  await t.rejects(waiting, /stopped before it synced/);
  await t.rejects(informer.waitForSync(), /stopped before it synced/);
  t.throws(() => informer.start(), /already started/);
  t.throws(() => new Informer({ kubeConfig: kubeConfig(server), apiVersion: 'v1', kind: 'Widget', logger: silent }), /not a registered resource/);
});
