// The service under clients that hold what it gives them (issue #23, the second fuzz run): pipelined scrapes on a
// connection that never reads, and connections that sit idle, half-sent or half-shaken in every slot. Each attack
// runs against the real listener on 127.0.0.1 with the production limits; during it a kubelet-like probe (GET
// /healthz on a fresh connection) must answer within PROBE_BOUND_MS, the process's RSS must stay within the bound
// the attack states, and the service must still answer afterwards. Deterministic: no randomness, fixed sizes.
import https from 'node:https';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import { Gauge } from 'prom-client';
import t, { type Test } from 'tap';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { registry } from '../../src/shared/metrics.js';
import { MAX_PIPELINED } from '../../src/webhook/connections.js';
import { MAX_CONNECTIONS } from '../../src/webhook/server.js';
import { MANAGER, connectTls, harness, postText, review, type Endpoint } from '../harness/webhook.js';

/** A probe's answer on a fresh connection, handshake included; a healthy one takes milliseconds. */
const PROBE_BOUND_MS = 2000;
const MiB = 2 ** 20;
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** GET `path` on a connection of its own, as the kubelet probes; rejects when the whole answer takes over `timeoutMs`. */
function probe(endpoint: Endpoint, path = '/healthz', timeoutMs = PROBE_BOUND_MS): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port: endpoint.port, path, ca: endpoint.ca, servername: 'localhost', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('close', () => clearTimeout(timer));
    req.on('error', reject);
  });
}

/** Runs `step` until stopped (by the test, or at its teardown when an assertion threw first). */
function repeating(t: Test, everyMs: number, step: () => Promise<void>): () => Promise<void> {
  let running = true;
  const loop = (async () => {
    while (running) {
      await step();
      await delay(everyMs);
    }
  })();
  const stop = async () => {
    running = false;
    await loop;
  };
  t.teardown(stop);
  return stop;
}

interface Probes {
  count: number;
  /** What went wrong with each probe that did not answer 200 within PROBE_BOUND_MS. */
  failures: string[];
  slowestMs: number;
}

/** Probes every `everyMs` until `stop()`. */
function probing(t: Test, endpoint: Endpoint, everyMs: number): { stop: () => Promise<Probes> } {
  const probes: Probes = { count: 0, failures: [], slowestMs: 0 };
  const stop = repeating(t, everyMs, async () => {
    probes.count++;
    const since = performance.now();
    const failure = await probe(endpoint).then((status) => (status === 200 ? undefined : `HTTP ${status}`), (e: Error) => e.message);
    probes.slowestMs = Math.max(probes.slowestMs, performance.now() - since);
    if (failure) probes.failures.push(failure);
  });
  return { stop: () => stop().then(() => probes) };
}

const described = (p: Probes) => `${p.count} probes, ${p.failures.length} failed${p.failures.length ? ` (${[...new Set(p.failures)].join('; ')})` : ''}, the slowest ${p.slowestMs.toFixed(0)} ms`;

/** Samples the process's RSS every 20 ms until stopped; returns how far its peak rose above the start. */
function rssGrowth(): { stop: () => number } {
  const start = process.memoryUsage.rss();
  let peak = start;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, process.memoryUsage.rss()) - start;
    },
  };
}

/** The service with the production limits, listening on 127.0.0.1 until the test ends. */
async function listening(t: Test): Promise<Endpoint> {
  const h = await harness();
  t.teardown(h.close);
  return h.listen();
}

t.test('pipelined scrapes on connections that never read: bounded per connection, one render at a time', async (t) => {
  const CONNECTIONS = 4;
  /** One TLS record's worth of pipelined GETs per connection, what the fuzz run sent (about 450). */
  const PIPELINED = 450;
  /** The whole attack may add this much RSS; before the fix each connection held ~450 rendered scrapes. */
  const RSS_BOUND = 48 * MiB;

  // An exposition of about 200 KiB (the fuzz run's 450 queued scrapes cost 77 MB, ~170 KB each), and a count of
  // renders: prom-client calls collect() once per render.
  let renders = 0;
  const padding = new Gauge({ name: 'ptah_test_padding', help: 'Makes a scrape as large as a production one.', labelNames: ['series'] as const, registers: [registry] });
  for (let i = 0; i < 2000; i++) padding.set({ series: `s${String(i).padStart(60, '0')}` }, i);
  new Gauge({ name: 'ptah_test_renders', help: 'Counts renders.', registers: [registry], collect: () => void renders++ });
  t.teardown(() => {
    registry.removeSingleMetric('ptah_test_padding');
    registry.removeSingleMetric('ptah_test_renders');
  });

  const h = await harness();
  const sockets: TLSSocket[] = [];
  t.teardown(async () => {
    sockets.forEach((s) => s.destroy());
    await h.close();
  });
  const endpoint = await h.listen();
  const scrapes = await h.listenMetrics();
  t.equal(await probe(scrapes, '/metrics'), 200, 'a scrape is served');
  await delay(1100);
  renders = 0;

  const rss = rssGrowth();
  const probes = probing(t, endpoint, 100);
  const since = performance.now();
  const closes: Promise<number>[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const socket = await connectTls(scrapes);
    socket.on('error', () => {});
    sockets.push(socket);
    closes.push(new Promise((resolve) => socket.once('close', () => resolve(performance.now() - since))));
    // Never read: no 'data' listener, so the client's buffers fill and the server's writes stall.
    socket.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(PIPELINED));
  }
  const closed = await Promise.all(closes.map((c) => Promise.race([c, delay(4000).then(() => Infinity)])));
  await delay(500);
  const probed = await probes.stop();
  const grew = rss.stop();
  const seconds = (performance.now() - since) / 1000;

  t.comment(`${CONNECTIONS} connections x ${PIPELINED} pipelined scrapes: ${renders} renders in ${seconds.toFixed(1)} s, RSS +${(grew / MiB).toFixed(0)} MiB at the peak, connections closed after ${closed.map((ms) => ms.toFixed(0)).join(', ')} ms; ${described(probed)}`);
  t.ok(closed.every((ms) => ms < 4000), 'the server closes a connection that pipelines past its bound');
  // Each connection has one scrape in hand and at most MAX_PIPELINED waiting before it is closed; before the bound
  // every one of the 1,800 pipelined scrapes was rendered.
  const answerable = CONNECTIONS * (1 + MAX_PIPELINED);
  t.ok(renders <= answerable, `${renders} renders for ${CONNECTIONS * PIPELINED} pipelined scrapes, at most ${answerable}`);
  t.ok(grew <= RSS_BOUND, `RSS grew ${(grew / MiB).toFixed(0)} MiB, within ${RSS_BOUND / MiB} MiB`);
  t.ok(probed.count > 0 && probed.failures.length === 0, `every probe during the attack answered within ${PROBE_BOUND_MS} ms`);
  t.equal(await probe(endpoint), 200, 'the service answers afterwards');
  t.equal(await probe(scrapes, '/metrics'), 200, 'and so does /metrics');
});

t.test('a client that pipelines a few requests and reads gets every answer, in order', async (t) => {
  const endpoint = await listening(t);
  const socket = await connectTls(endpoint);
  t.teardown(() => socket.destroy());
  // One answered and as many waiting as the service lets wait; the last one is unknown, so the order shows.
  const paths = [...Array.from({ length: MAX_PIPELINED }, (_, i) => ['/healthz', '/readyz'][i % 2]!), '/nowhere'];
  let received = '';
  socket.on('data', (c: Buffer) => (received += c.toString()));
  socket.write(paths.map((p, i) => `GET ${p} HTTP/1.1\r\nHost: localhost\r\n${i === paths.length - 1 ? 'Connection: close\r\n' : ''}\r\n`).join(''));
  await new Promise((resolve) => socket.once('close', resolve));
  t.same([...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]), [...paths.slice(1).map(() => '200'), '404'], 'every answer, in the order asked');
});

/** Opens `count` TLS connections, one at a time, and runs `greet` on each; they stay open until teardown. */
async function hold(t: Test, endpoint: Endpoint, count: number, greet: (socket: TLSSocket) => Promise<void> | void): Promise<TLSSocket[]> {
  const sockets: TLSSocket[] = [];
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  for (let i = 0; i < count; i++) {
    const socket = await connectTls(endpoint);
    socket.on('error', () => {});
    sockets.push(socket);
    await greet(socket);
  }
  return sockets;
}

/** Milliseconds until every socket is closed (by the server), or Infinity after `timeoutMs`. */
async function allClosed(sockets: readonly (TLSSocket | net.Socket)[], since: number, timeoutMs: number): Promise<number> {
  const closes = sockets.map((s) => (s.closed ? Promise.resolve() : new Promise<void>((resolve) => s.once('close', () => resolve()))));
  const done = await Promise.race([Promise.all(closes).then(() => true), delay(timeoutMs).then(() => false)]);
  return done ? performance.now() - since : Infinity;
}

/** One request and its whole answer on a kept-alive connection; the connection is left idle after it. */
function requestOn(socket: TLSSocket, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let received = '';
    const onData = (c: Buffer) => {
      received += c.toString();
      if (!/\r\n\r\n/.test(received)) return;
      const length = Number(/content-length: (\d+)/i.exec(received)?.[1] ?? NaN);
      if (received.length - received.indexOf('\r\n\r\n') - 4 < length) return;
      socket.off('data', onData);
      resolve();
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error('closed before the answer')));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  });
}

/** The API server's way: one kept-alive connection, an admission request every `everyMs`; counts what failed. */
function apiServer(t: Test, endpoint: Endpoint, everyMs: number): { stop: () => Promise<{ sent: number; failures: string[] }> } {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const result = { sent: 0, failures: [] as string[] };
  const stop = repeating(t, everyMs, async () => {
    result.sent++;
    const failure = await postText({ ...endpoint, agent }, WEBHOOK_PATHS.statusWrite, JSON.stringify(statusUpdate(`api-${result.sent}`)), PROBE_BOUND_MS)
      .then((r) => (r.status === 200 ? undefined : `HTTP ${r.status}`), (e: Error) => e.message);
    if (failure) result.failures.push(failure);
  });
  return { stop: () => stop().then(() => result) };
}

/** A status write as the manager: admitted without a read. */
function statusUpdate(uid: string) {
  const object = { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', metadata: { name: 'orders', namespace: 'team-a' } };
  return review({
    uid, operation: 'UPDATE', subResource: 'status', namespace: 'team-a', name: 'orders', object, oldObject: object, userInfo: { username: MANAGER },
    kind: { group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahSchema' },
    resource: { group: 'operator.ptah.run', version: 'v1alpha1', resource: 'ptahschemas' },
  });
}

t.test('idle kept-alive connections in every slot: probes and the API server are served, and the idle ones close soon', async (t) => {
  /** Idle connections must be closed within this (Fastify's default was 72 s). */
  const IDLE_BOUND_MS = 7000;
  const RSS_BOUND = 64 * MiB;
  const endpoint = await listening(t);
  const api = apiServer(t, endpoint, 200);
  await delay(300);

  const rss = rssGrowth();
  // With the API server's, every slot is taken.
  const idle = await hold(t, endpoint, MAX_CONNECTIONS - 1, (socket) => requestOn(socket, '/healthz'));
  const since = performance.now();
  const probes = probing(t, endpoint, 100);
  await delay(3000);
  const probed = await probes.stop();
  const served = await api.stop();
  const closedAfter = await allClosed(idle, since, IDLE_BOUND_MS);
  const grew = rss.stop();

  t.comment(`${MAX_CONNECTIONS - 1} idle connections and the API server's: ${described(probed)}; the API server's ${served.sent} requests, ${served.failures.length} failed; the idle ones closed after ${closedAfter.toFixed(0)} ms; RSS +${(grew / MiB).toFixed(0)} MiB`);
  t.ok(probed.count > 0 && probed.failures.length === 0, `every probe answered within ${PROBE_BOUND_MS} ms`);
  t.same(served.failures, [], 'every request of the API server\'s connection was answered');
  t.ok(closedAfter <= IDLE_BOUND_MS, `the idle connections were closed within ${IDLE_BOUND_MS} ms`);
  t.ok(grew <= RSS_BOUND, `RSS grew within ${RSS_BOUND / MiB} MiB`);
});

t.test('a wave of half-open handshakes, then one of half-sent headers, in every slot: probes are served', async (t) => {
  /** A handshake, or a request's headers, not done within this is cut (both had the 10 s request timeout). */
  const HANDSHAKE_BOUND_MS = 5000;
  const RSS_BOUND = 64 * MiB;
  const endpoint = await listening(t);
  const rss = rssGrowth();

  // TCP connections that never start TLS.
  const raw: net.Socket[] = [];
  t.teardown(() => raw.forEach((s) => s.destroy()));
  for (let i = 0; i < MAX_CONNECTIONS; i++) {
    const socket = net.connect({ host: '127.0.0.1', port: endpoint.port });
    socket.on('error', () => {});
    raw.push(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
  }
  const since = performance.now();
  const handshakes = probing(t, endpoint, 100);
  await delay(2000);
  const duringHandshakes = await handshakes.stop();
  const handshakesClosed = await allClosed(raw, since, HANDSHAKE_BOUND_MS);
  raw.forEach((s) => s.destroy());
  await delay(200);

  // TLS connections whose first request never finishes its headers.
  // They read (and drop) what comes, so a server that ends one is seen to.
  const halfSent = await hold(t, endpoint, MAX_CONNECTIONS, (socket) => void socket.resume().write('GET /healthz HTTP/1.1\r\nHost: loc'));
  const sent = performance.now();
  const headers = probing(t, endpoint, 100);
  await delay(2000);
  const duringHeaders = await headers.stop();
  const headersClosed = await allClosed(halfSent, sent, HANDSHAKE_BOUND_MS);
  const grew = rss.stop();

  t.comment(`${MAX_CONNECTIONS} half-open handshakes: ${described(duringHandshakes)}, all closed after ${handshakesClosed.toFixed(0)} ms; ${MAX_CONNECTIONS} half-sent headers: ${described(duringHeaders)}, all closed after ${headersClosed.toFixed(0)} ms; RSS +${(grew / MiB).toFixed(0)} MiB`);
  t.ok(duringHandshakes.count > 0 && duringHandshakes.failures.length === 0, `behind half-open handshakes every probe answered within ${PROBE_BOUND_MS} ms`);
  t.ok(handshakesClosed <= HANDSHAKE_BOUND_MS, `the half-open handshakes were cut within ${HANDSHAKE_BOUND_MS} ms`);
  t.ok(duringHeaders.count > 0 && duringHeaders.failures.length === 0, `behind half-sent headers every probe answered within ${PROBE_BOUND_MS} ms`);
  t.ok(headersClosed <= HANDSHAKE_BOUND_MS, `the half-sent headers were cut within ${HANDSHAKE_BOUND_MS} ms`);
  t.ok(grew <= RSS_BOUND, `RSS grew within ${RSS_BOUND / MiB} MiB`);
  t.equal(await probe(endpoint), 200, 'the service answers afterwards');
});
