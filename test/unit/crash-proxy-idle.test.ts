// The crash proxy keeps an idle connection as long as kube-apiserver does (90 s), not node's 5 s: a manager behind
// it makes the TLS handshakes it would make against the API server, so the benchmarks that count its CPU do not
// count the proxy's reconnects. Two requests 6 s apart on one keep-alive agent must share one connection.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startCrashProxy } from '../harness/crash-proxy.js';
import { createPki } from '../../tools/stack/pki.js';

t.test('an idle manager connection outlives node\'s 5 s keep-alive timeout', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'crash-proxy-idle-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pki = await createPki(dir);
  const [serving, client] = await Promise.all([pki.issueServing('upstream', { ips: ['127.0.0.1'] }), pki.issueClient('manager', { user: 'manager', groups: [] })]);
  const upstream = https.createServer({ cert: readFileSync(serving.cert), key: readFileSync(serving.key) }, (req, res) => {
    req.resume();
    res.setHeader('content-type', 'application/json');
    res.end('{"kind":"Status"}');
  });
  // It stands in for the API server, which keeps its side idle as long: node's 5 s would race the proxy's reuse.
  upstream.keepAliveTimeout = 90_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  t.teardown(() => upstream.close());
  const proxy = await startCrashProxy({
    upstream: `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`, caPem: pki.caPem, client, serving, namespace: 'ns',
  });
  t.teardown(() => proxy.close());

  const agent = new https.Agent({ keepAlive: true, ca: pki.caPem });
  t.teardown(() => agent.destroy());
  const get = () => new Promise<number>((resolve, reject) => {
    const req = https.request(`${proxy.url}/api/v1/namespaces/ns/configmaps/a`, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
  t.equal(await get(), 200, 'the first request is answered');
  t.equal(proxy.connections, 1, 'over one connection');
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  t.equal(await get(), 200, 'the second, 6 s later, is answered');
  t.equal(proxy.connections, 1, 'over the same connection: the proxy did not close it while idle');
  t.equal(proxy.requests.length, 2, 'both requests were recorded');
});
