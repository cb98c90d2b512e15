// The informer against the real API server: it sees ConfigMaps come, change and go (namespaced and cluster-wide,
// through a label selector), and it keeps seeing them across a watch the server ends, a connection that is cut,
// and a connection that falls silent. The cut and the silence are made by a TCP proxy between the informer and
// the API server (TLS passes through it untouched).
import t from 'tap';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Informer, type InformerOptions } from '../../src/controller/informer.js';
import { restClient, type KubeClient, type KubeObject } from '../../src/shared/kube-client.js';
import { registry } from '../../src/shared/metrics.js';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';

const silent = pino({ level: 'silent' });
type ConfigMap = KubeObject & { data?: Record<string, string> };

/** A TCP proxy that can cut its connections, refuse new ones, or stop passing the server's bytes on. */
class Proxy {
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  private blocked = false;
  private readonly server: net.Server;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      if (this.blocked) return client.destroy();
      const upstream = net.connect(this.target.port, this.target.host);
      const pair = { client, upstream };
      this.pairs.add(pair);
      const end = (): void => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  async start(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Destroys every open connection (both directions), as a dropped network path would. */
  cut(): void {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
  }

  /** New connections are refused until unblock(). */
  block(): void {
    this.blocked = true;
  }

  unblock(): void {
    this.blocked = false;
  }

  /** Open connections stay up but nothing more from the server reaches the client: a half-dead path. */
  stall(): void {
    for (const { upstream, client } of this.pairs) {
      upstream.unpipe(client);
      upstream.pause();
    }
  }

  get open(): number {
    return this.pairs.size;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((r) => this.server.close(r));
  }
}

/** The admin kubeconfig, pointed at `server` instead (same CA, same client certificate). */
function kubeConfigVia(kc: KubeConfig, server: string): KubeConfig {
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return out;
}

async function counter(metric: string, labels: Record<string, string>): Promise<number> {
  const data = await registry.getSingleMetric(metric)?.get();
  return data?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
}

function configMap(namespace: string, name: string, labels: Record<string, string>, data: Record<string, string> = {}): ConfigMap {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels }, data };
}

function record(informer: Informer<ConfigMap>): string[] {
  const events: string[] = [];
  informer.on('add', (o) => events.push(`add ${o.metadata?.name}`));
  informer.on('update', (o, old) => events.push(`update ${o.metadata?.name} ${JSON.stringify(old?.data ?? {})}->${JSON.stringify(o.data ?? {})}`));
  informer.on('delete', (o) => events.push(`delete ${o.metadata?.name}`));
  return events;
}

const until = (what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<true> =>
  waitFor(async () => ((await cond()) ? true : undefined), { what, timeoutMs, intervalMs: 50 });

/** The part of a tap Test that started() needs. */
type Owner = { teardown(fn: () => unknown): void };

async function started(t: Owner, options: Omit<InformerOptions, 'logger' | 'apiVersion' | 'kind'>): Promise<{ informer: Informer<ConfigMap>; events: string[] }> {
  const informer = new Informer<ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', logger: silent, backoff: { initialMs: 100, maxMs: 500 }, ...options });
  const events = record(informer);
  t.teardown(() => informer.stop());
  informer.start();
  await informer.waitForSync();
  return { informer, events };
}

let admin: KubeClient;
t.before(async () => {
  admin = await restClient(sharedCluster().kubeConfig('admin'));
});

t.test('add, update and delete of ConfigMaps reach the handlers; the label selector filters, namespaced and cluster-wide', async (t) => {
  const ns = await testNamespace(t);
  const run = randomBytes(4).toString('hex');
  const labels = { 'ptah.run/informer-test': run };
  const kc = sharedCluster().kubeConfig('admin');
  const { informer, events } = await started(t, { kubeConfig: kc, namespace: ns, labelSelector: `ptah.run/informer-test=${run}` });
  const { events: clusterWide } = await started(t, { kubeConfig: kc, labelSelector: `ptah.run/informer-test=${run}` });
  t.equal(informer.hasSynced(), true);
  t.same(events, [], 'the namespace holds nothing with the label yet (kube-root-ca.crt is not labelled)');

  await admin.create(configMap(ns, 'unlabelled', {}));
  await admin.create(configMap(ns, 'a', labels, { k: '1' }));
  await until('add a', () => events.length >= 1);
  await admin.patch({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'a' }, { data: { k: '2' } }, 'merge');
  await until('update a', () => events.length >= 2);
  await admin.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'a' });
  await until('delete a', () => events.length >= 3);
  t.same(events, ['add a', 'update a {"k":"1"}->{"k":"2"}', 'delete a'], 'the unlabelled ConfigMap never appeared');
  t.equal(informer.get(`${ns}/a`), undefined);
  await until('the cluster-wide informer saw the same', () => clusterWide.length >= 3);
  t.same(clusterWide, events);
});

t.test('a watch the server ends (short timeoutSeconds) is reopened from where it was, without a relist', async (t) => {
  const ns = await testNamespace(t);
  const { informer, events } = await started(t, { kubeConfig: sharedCluster().kubeConfig('admin'), namespace: ns, watchTimeoutSeconds: 1 });
  const resource = informer.resource;
  await until('two server-ended watches', async () => (await counter('ptah_operator_informer_watches_total', { resource, reason: 'closed' })) >= 2);
  await admin.create(configMap(ns, 'after-reopen', {}));
  await until('add after-reopen', () => events.includes('add after-reopen'));
  t.equal(await counter('ptah_operator_informer_lists_total', { resource, reason: 'initial' }), 1);
  t.equal(await counter('ptah_operator_informer_lists_total', { resource, reason: 'error' }), 0, 'no relist');
  t.equal(await counter('ptah_operator_informer_lists_total', { resource, reason: 'gone' }), 0);
});

t.test('a cut connection: the informer backs off, relists, and reports what changed while it was away', async (t) => {
  const ns = await testNamespace(t);
  const kc = sharedCluster().kubeConfig('admin');
  const target = new URL(kc.getCurrentCluster()?.server as string);
  const proxy = new Proxy({ host: target.hostname, port: Number(target.port) });
  const port = await proxy.start();
  t.teardown(() => proxy.close());
  await admin.create(configMap(ns, 'doomed', {}));
  const { informer, events } = await started(t, { kubeConfig: kubeConfigVia(kc, `https://127.0.0.1:${port}`), namespace: ns });
  t.ok(events.includes('add doomed'));
  await until('the watch is open through the proxy', () => proxy.open > 0);
  const resource = informer.resource;

  proxy.block();
  proxy.cut();
  await until('a failure counted', async () => (await counter('ptah_operator_informer_failures_total', { resource })) >= 2);
  await admin.create(configMap(ns, 'born-while-away', {}));
  await admin.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'doomed' });
  proxy.unblock();

  await until('the changes made while away', () => events.includes('add born-while-away') && events.includes('delete doomed'));
  t.ok((await counter('ptah_operator_informer_lists_total', { resource, reason: 'error' })) >= 1, 'it relisted');
  t.ok(informer.get(`${ns}/born-while-away`));
  t.equal(informer.get(`${ns}/doomed`), undefined);
  await admin.create(configMap(ns, 'after-recovery', {}));
  await until('watching again', () => events.includes('add after-recovery'));
});

t.test('a watch that falls silent is reopened by the watchdog, and nothing is lost', async (t) => {
  const ns = await testNamespace(t);
  const kc = sharedCluster().kubeConfig('admin');
  const target = new URL(kc.getCurrentCluster()?.server as string);
  const proxy = new Proxy({ host: target.hostname, port: Number(target.port) });
  const port = await proxy.start();
  t.teardown(() => proxy.close());
  const { informer, events } = await started(t, { kubeConfig: kubeConfigVia(kc, `https://127.0.0.1:${port}`), namespace: ns, watchdogMs: 1500 });
  // A watch event proves the watch itself (not just the LIST before it) runs through the proxy.
  await admin.create(configMap(ns, 'probe', {}));
  await until('the watch delivers through the proxy', () => events.includes('add probe'));
  const resource = informer.resource;
  const watchdogBefore = await counter('ptah_operator_informer_watches_total', { resource, reason: 'watchdog' });
  const failuresBefore = await counter('ptah_operator_informer_failures_total', { resource });

  proxy.stall();
  await admin.create(configMap(ns, 'sent-into-silence', {}));
  await until('the event, through a reopened watch', () => events.includes('add sent-into-silence'));
  t.ok((await counter('ptah_operator_informer_watches_total', { resource, reason: 'watchdog' })) > watchdogBefore, 'the watchdog reopened the watch');
  t.equal(await counter('ptah_operator_informer_failures_total', { resource }), failuresBefore, 'no failure: the silent watch was reopened, not errored out');
});
