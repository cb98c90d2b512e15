// ptah_operator_api_requests_total: the verb and resource every request path is counted under, and that the requests
// the manager really sends count once each: restClient's against a loopback HTTPS stand-in for the API server (its
// answers, a refusal and a connection that never answers), the informer's LIST and WATCH against an HTTP one.
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import t from 'tap';
import { generateCertificates } from '../../certs/generate.js';
import { Informer } from '../../src/controller/informer.js';
import { apiRequestLabels, countApiRequest } from '../../src/shared/api-request-metrics.js';
import { restClient } from '../../src/shared/kube-client.js';
import { registry } from '../../src/shared/metrics.js';

const METRIC = 'ptah_operator_api_requests_total';

async function counted(labels: { verb: string; resource: string; code: string }): Promise<number> {
  const data = await registry.getSingleMetric(METRIC)?.get();
  return data?.values.find((v) => v.labels.verb === labels.verb && v.labels.resource === labels.resource && v.labels.code === labels.code)?.value ?? 0;
}

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser({ name: 'loopback', server, skipTLSVerify: true }, { name: 'u', token: 'test-token' });
  return kc;
}

t.test('verb and resource from the request path', async (t) => {
  const rows: [method: string, path: string, verb: string, resource: string][] = [
    ['GET', '/api/v1/namespaces/ns/pods/p1', 'get', 'pods'],
    ['GET', '/api/v1/namespaces/ns/pods', 'list', 'pods'],
    ['GET', '/api/v1/namespaces/ns/pods?labelSelector=a%3Db&limit=500', 'list', 'pods'],
    ['GET', '/api/v1/namespaces/ns/pods?watch=true&resourceVersion=12&allowWatchBookmarks=true', 'watch', 'pods'],
    ['GET', '/api/v1/namespaces/ns/pods?watch=1', 'watch', 'pods'],
    ['GET', '/api/v1/namespaces/ns/pods?watch=false', 'list', 'pods'],
    ['GET', '/api/v1/watch/namespaces/ns/pods', 'watch', 'pods'],
    ['GET', '/api/v1/namespaces/ns/pods/p1/log?container=runner&limitBytes=65536', 'get', 'pods/log'],
    ['PATCH', '/api/v1/namespaces/ns/pods/p1', 'patch', 'pods'],
    ['POST', '/apis/batch/v1/namespaces/ns/jobs?fieldManager=ptah-operator', 'create', 'jobs'],
    ['DELETE', '/apis/batch/v1/namespaces/ns/jobs/j1', 'delete', 'jobs'],
    ['DELETE', '/apis/batch/v1/namespaces/ns/jobs', 'deletecollection', 'jobs'],
    ['PUT', '/apis/coordination.k8s.io/v1/namespaces/ns/leases/l1', 'update', 'leases'],
    ['PUT', '/apis/operator.ptah.run/v1alpha1/namespaces/ns/ptahmigrations/m1/status?fieldManager=x', 'update', 'ptahmigrations/status'],
    ['PATCH', '/apis/operator.ptah.run/v1alpha1/namespaces/ns/ptahschemas/s1', 'patch', 'ptahschemas'],
    ['GET', '/apis/operator.ptah.run/v1alpha1/ptahrealms', 'list', 'ptahrealms'],
    ['GET', '/apis/operator.ptah.run/v1alpha1/ptahrealms/r1', 'get', 'ptahrealms'],
    ['GET', '/apis/operator.ptah.run/v1alpha1/ptahschemas', 'list', 'ptahschemas'],
    ['GET', '/apis/scheduling.k8s.io/v1/priorityclasses', 'list', 'priorityclasses'],
    ['POST', '/apis/events.k8s.io/v1/namespaces/ns/events', 'create', 'events'],
    ['GET', '/api/v1/namespaces', 'list', 'namespaces'],
    ['GET', '/api/v1/namespaces/ns', 'get', 'namespaces'],
    ['PUT', '/api/v1/namespaces/ns/status', 'update', 'namespaces/status'],
    ['PUT', '/api/v1/namespaces/ns/finalize', 'update', 'namespaces/finalize'],
    ['GET', '/api/v1/nodes/n1', 'get', 'nodes'],
    ['GET', '/version', 'other', 'nonresource'],
    ['GET', '/apis', 'other', 'nonresource'],
    ['GET', '/apis/batch/v1', 'other', 'nonresource'],
    ['GET', '/api/v1/namespaces/ns/pods/p1/log/extra', 'other', 'nonresource'],
    ['OPTIONS', '/api/v1/namespaces/ns/pods', 'other', 'pods'],
  ];
  for (const [method, path, verb, resource] of rows) t.same(apiRequestLabels(method, path), { verb, resource }, `${method} ${path}`);
});

t.test('a count is published once: scraping again adds nothing, a later request adds one', async (t) => {
  const labels = { verb: 'get', resource: 'widgets/status', code: '200' };
  t.equal(await counted(labels), 0, 'nothing before the first request');
  for (let i = 0; i < 3; i++) countApiRequest('GET', '/apis/example.com/v1/namespaces/a/widgets/w/status', 200);
  countApiRequest('GET', '/apis/example.com/v1/namespaces/a/widgets/w/status', undefined);
  t.equal(await counted(labels), 3, 'three answered requests');
  t.equal(await counted(labels), 3, 'a second scrape publishes nothing twice');
  t.equal(await counted({ ...labels, code: 'error' }), 1, 'the unanswered one apart');
  countApiRequest('GET', '/apis/example.com/v1/namespaces/b/widgets/v/status?watch=false', 200);
  t.equal(await counted(labels), 4, 'a later request adds one');
  const text = await registry.metrics();
  t.match(text, /ptah_operator_api_requests_total\{verb="get",resource="widgets\/status",code="200"\} 4/, 'the exposition says the same');
});

t.test('restClient counts every request once, by the status it got or as an error', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ptah-api-requests-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const files = await generateCertificates({ outDir: dir });
  const [cert, key] = await Promise.all([readFile(files.cert), readFile(files.key)]);
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const path = req.url ?? '';
    if (path.endsWith('/configmaps/present')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'present', namespace: 'ns' } }));
    } else if (path.endsWith('/configmaps/hang')) {
      req.socket.destroy();
    } else {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: 404, reason: 'NotFound' }));
    }
  };
  const server = createHttpsServer({ cert, key }, handle);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => {
    server.closeAllConnections();
    server.close(r);
  }));
  const client = await restClient(kubeConfig(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), { timeoutMs: 5_000 });
  const ref = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name });
  const got = { verb: 'get', resource: 'configmaps', code: '200' };
  const notFound = { ...got, code: '404' };
  const failed = { ...got, code: 'error' };
  const logs = { verb: 'get', resource: 'pods/log', code: '404' };
  const before = await Promise.all([got, notFound, failed, logs].map(counted));

  await client.get(ref('present'));
  t.equal(await client.tryGet(ref('absent')), undefined);
  await t.rejects(client.get(ref('hang')), /socket hang up|ECONNRESET/);
  await t.rejects(client.readPodLog('ns', 'p1', { container: 'runner' }), /404/);

  const after = await Promise.all([got, notFound, failed, logs].map(counted));
  t.same(after.map((n, i) => n - before[i]!), [1, 1, 1, 1], 'a 200, a 404, a request no answer came to, and a pods/log read: one each');
});

t.test('the informer counts its LIST and its WATCH', async (t) => {
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://loopback');
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'SecretList', apiVersion: 'v1', metadata: { resourceVersion: '7' }, items: [] }));
  };
  const server = createHttpServer(handle);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const list = { verb: 'list', resource: 'secrets', code: '200' };
  const watch = { verb: 'watch', resource: 'secrets', code: '200' };
  const before = await Promise.all([list, watch].map(counted));
  const informer = new Informer({ kubeConfig: kubeConfig(`http://127.0.0.1:${(server.address() as AddressInfo).port}`), apiVersion: 'v1', kind: 'Secret', namespace: 'counted', logger: pino({ level: 'silent' }) });
  t.teardown(async () => {
    await informer.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  informer.start();
  await informer.waitForSync();
  for (let i = 0; i < 200 && (await counted(watch)) === before[1]; i++) await new Promise((r) => setTimeout(r, 5));
  const after = await Promise.all([list, watch].map(counted));
  t.same(after.map((n, i) => n - before[i]!), [1, 1], 'one LIST page and one WATCH');
});
