// The service around the judges: the envelope, bodies it refuses, probes, metrics, and TLS on a real socket.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { InjectOptions } from 'fastify';
import { KubeConfig } from '@kubernetes/client-node';
import t from 'tap';
import { generateCertificates } from '../../certs/generate.js';
import { createUncachedReader } from '../../src/shared/kube.js';
import { webhookMetrics } from '../../src/shared/metrics.js';
import { createLogger } from '../../src/shared/logger.js';
import { ServingCertificate } from '../../src/shared/tls.js';
import { WEBHOOK_PATHS as ROUTES, WEBHOOK_TIMEOUT_SECONDS } from '../../src/shared/api/webhooks.js';
import { MAX_MESSAGE_LENGTH, type Operation } from '../../src/webhook/admission.js';
import { BODY_LIMIT, CONNECTION_CHECK_INTERVAL_MS, MAX_CONNECTIONS, REQUEST_TIMEOUT_MS, buildServer } from '../../src/webhook/server.js';
import { MANAGER, MANAGER_IMAGES, NOW, connectTls, harness, postText, review, reviewOf, tempDir, whenClosed, type PostResult } from '../harness/webhook.js';
import { chunkObjects, install, projections, world } from '../harness/webhook-world.js';

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const statusUpdate = (username: string, uid = 'req-status') =>
  review({
    uid,
    operation: 'UPDATE',
    kind: { group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahSchema' },
    resource: { group: 'operator.ptah.run', version: 'v1alpha1', resource: 'ptahschemas' },
    subResource: 'status',
    namespace: 'team-a',
    name: 'orders',
    object: { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', metadata: { name: 'orders', namespace: 'team-a' } },
    oldObject: { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', metadata: { name: 'orders', namespace: 'team-a' } },
    userInfo: { username },
  });

t.test('an AdmissionReview gets an AdmissionReview back, uid echoed, HTTP 200 even when refused', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const res = await h.app.inject({ method: 'POST', url: ROUTES.statusWrite, payload: statusUpdate('mallory', 'uid-123') });
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.equal(body.apiVersion, 'admission.k8s.io/v1');
  t.equal(body.kind, 'AdmissionReview');
  t.equal(body.response.uid, 'uid-123');
  t.equal(body.response.allowed, false);
  t.equal(body.response.status.code, 403);
  t.equal(res.headers['x-content-type-options'], 'nosniff', 'helmet headers are set');
});

t.test('malformed, misaddressed and oversized requests get a 4xx, never a crash', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, InjectOptions, number, RegExp?][] = [
    ['invalid JSON', { method: 'POST', url: ROUTES.decision, headers: { 'content-type': 'application/json' }, payload: '{"apiVersion":' }, 400],
    ['not an AdmissionReview', { method: 'POST', url: ROUTES.decision, payload: { apiVersion: 'v1', kind: 'Pod' } }, 400, /apiVersion|request/],
    ['admission v1beta1', { method: 'POST', url: ROUTES.decision, payload: { ...statusUpdate('x'), apiVersion: 'admission.k8s.io/v1beta1' } }, 400, /apiVersion/],
    ['a review without a request uid', { method: 'POST', url: ROUTES.statusWrite, payload: { ...statusUpdate('x'), request: { ...statusUpdate('x').request, uid: '' } } }, 400, /uid/],
    ['an unknown operation', { method: 'POST', url: ROUTES.statusWrite, payload: { ...statusUpdate('x'), request: { ...statusUpdate('x').request, operation: 'PATCH' } } }, 400, /operation/],
    ['object that is not an object', { method: 'POST', url: ROUTES.statusWrite, payload: { ...statusUpdate('x'), request: { ...statusUpdate('x').request, object: 'x' } } }, 400, /object/],
    ['a body that is not JSON', { method: 'POST', url: ROUTES.decision, headers: { 'content-type': 'text/plain' }, payload: 'hello' }, 415],
    ['GET on an admission route', { method: 'GET', url: ROUTES.decision }, 404],
    ['an unknown path', { method: 'POST', url: '/validate/anything', payload: statusUpdate('x') }, 404],
  ];
  for (const [name, request, code, message] of cases) {
    const res = await h.app.inject(request);
    t.equal(res.statusCode, code, name);
    if (message) t.match(res.json().message, message, `${name}: the answer says what is wrong`);
  }

  const huge = statusUpdate('x');
  (huge.request.object as { data?: string }).data = 'x'.repeat(BODY_LIMIT + 1);
  const res = await h.app.inject({ method: 'POST', url: ROUTES.statusWrite, payload: huge });
  t.equal(res.statusCode, 413, 'a body over the limit is 413');
  t.match(res.json(), { error: 'Payload Too Large', message: /body/i });

  const justUnder = statusUpdate(MANAGER);
  (justUnder.request.object as { data?: string }).data = 'x'.repeat(BODY_LIMIT - 2048);
  t.equal((await h.app.inject({ method: 'POST', url: ROUTES.statusWrite, payload: justUnder })).statusCode, 200, 'a review just under the limit is accepted');
});

t.test('a judge that throws fails closed with 500 inside the review', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  // A reader that throws a non-API error: the judge cannot complete, the request is refused.
  h.reader.get = async () => {
    throw new TypeError('boom');
  };
  const response = await h.admit(
    ROUTES.decision,
    review({
      operation: 'CREATE',
      kind: { group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahMigrationRunAcknowledgment' },
      resource: { group: 'operator.ptah.run', version: 'v1alpha1', resource: 'ptahmigrationrunacknowledgments' },
      namespace: 'team-a',
      name: 'ack',
      object: {
        apiVersion: 'operator.ptah.run/v1alpha1',
        kind: 'PtahMigrationRunAcknowledgment',
        metadata: { name: 'ack', namespace: 'team-a' },
        spec: {
          migrationRef: { name: 'm', uid: 'uid-m' },
          operationID: `sha256:${'1'.repeat(64)}`,
          acknowledgedBy: { username: 'alice', uid: 'u-alice', groups: ['dba', 'system:authenticated'] },
          acknowledgedAt: '2030-01-01T00:00:00Z',
          mutationRequestUID: 'req-0001',
        },
      },
    }),
  );
  t.equal(response.allowed, false);
  t.equal(response.status?.code, 500);
  t.match(response.status?.message, /could not read PtahMigration team-a\/m/);
});

t.test('/healthz, /readyz and, on its own listener, /metrics', async (t) => {
  let ready = true;
  const h = await harness({ ready: () => ready });
  t.teardown(h.close);
  t.equal((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  t.equal((await h.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'certificate loaded and the callback agrees');
  ready = false;
  const notReady = await h.app.inject({ method: 'GET', url: '/readyz' });
  t.equal(notReady.statusCode, 503, 'the readiness callback can hold the service back');
  t.match(notReady.json().problems, [/readiness check/]);

  await h.admit(ROUTES.statusWrite, statusUpdate(MANAGER));
  await h.admit(ROUTES.statusWrite, statusUpdate('mallory'));
  t.equal((await h.app.inject({ method: 'GET', url: '/metrics' })).statusCode, 404, 'the admission service serves no scrape');
  t.equal((await h.metrics.inject({ method: 'GET', url: '/healthz' })).statusCode, 404, 'the metrics service serves no probe');
  t.equal((await h.metrics.inject({ method: 'POST', url: ROUTES.statusWrite, payload: statusUpdate(MANAGER) })).statusCode, 404, 'nor admission');
  const metrics = await h.metrics.inject({ method: 'GET', url: '/metrics' });
  t.equal(metrics.statusCode, 200);
  t.match(metrics.headers['content-type'], /text\/plain/);
  const text = metrics.body;
  t.match(text, /controller_runtime_webhook_requests_total\{webhook="\/validate\/status-write",code="200"\} \d+/);
  t.match(text, /controller_runtime_webhook_latency_seconds_count\{webhook="\/validate\/status-write"\} \d+/);
  t.match(text, /controller_runtime_webhook_requests_in_flight\{webhook="\/validate\/status-write"\} 0/);
  t.match(text, /ptah_operator_admission_decisions_total\{webhook="\/validate\/status-write",decision="allowed"\} \d+/);
  t.match(text, /ptah_operator_admission_decisions_total\{webhook="\/validate\/status-write",decision="denied"\} \d+/);
  t.match(text, /ptah_operator_webhook_certificate_expiry_timestamp_seconds \d+/);
  t.notMatch(text, /controller_runtime_webhook_requests_total\{webhook="\/healthz"/, 'probes are not webhook requests');
});

t.test('/readyz fails once the serving certificate has expired', async (t) => {
  let now = NOW;
  const h = await harness({ now: () => now });
  t.teardown(h.close);
  t.equal((await h.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  now = new Date(h.certificate.current.notAfter.getTime() + 1000);
  const res = await h.app.inject({ method: 'GET', url: '/readyz' });
  t.equal(res.statusCode, 503);
  t.match(res.json().problems, [/expired/]);
});

function get(port: number, ca: string, path: string): Promise<{ status: number; body: string; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path, ca, method: 'GET', agent: false, servername: 'localhost' }, (res) => {
      const cert = (res.socket as import('node:tls').TLSSocket).getPeerCertificate();
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), fingerprint: createHash('sha256').update(cert.raw).digest('hex') }));
    });
    req.on('error', reject);
    req.end();
  });
}

function post(port: number, ca: string, path: string, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = https.request(
      { host: '127.0.0.1', port, path, ca, method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

t.test('serves over real TLS and follows a replaced certificate', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = h.app.server.address() as AddressInfo;
  const ca = await readFile(h.files.caCert, 'utf8');

  const health = await get(port, ca, '/healthz');
  t.equal(health.status, 200, 'the CA verifies the served certificate');
  t.equal(health.fingerprint, h.certificate.current.fingerprint);
  const admitted = await post(port, ca, ROUTES.statusWrite, statusUpdate(MANAGER, 'tls-1'));
  t.equal(admitted.status, 200);
  t.match(JSON.parse(admitted.body), { response: { uid: 'tls-1', allowed: true } });

  await t.rejects(get(port, '', '/healthz'), 'a client without the CA does not trust it');

  const before = health.fingerprint;
  h.certificate.start();
  await generateCertificates({ outDir: h.files.dir, reuseCa: true, commonName: 'rotated' });
  let served = before;
  for (let i = 0; i < 400 && served === before; i++) {
    await new Promise((r) => setTimeout(r, 25));
    served = (await get(port, ca, '/healthz')).fingerprint;
  }
  t.not(served, before, 'a new connection gets the new certificate');
  t.equal(served, h.certificate.current.fingerprint, 'and it is the one now on disk');
});

t.test('logs never carry credentials or admission payloads', async (t) => {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
  logger.info({ req: { headers: { authorization: 'Bearer token-abc', cookie: 'session=xyz' } } }, 'request');
  logger.info({ url: 'postgres://app:s3cr3t@db.example:5432/orders?sslmode=require&sslpassword=pw1' }, 'dialing');
  logger.info('dialing postgresql://app:hunter2@db/orders');
  logger.error({ err: new TypeError('connect to postgres://app:p4ss@db failed', { cause: new Error('postgres://x:c4use@h') }) }, 'failed');
  logger.info({ secret: { data: { password: 'cGFzcw==' } }, stringData: { url: 'x' }, token: 'tok-1', nested: { password: 'pw2' } }, 'objects');

  const h = await harness({ logger });
  t.teardown(h.close);
  const body = statusUpdate('mallory', 'log-1');
  (body.request.object as Record<string, unknown>).data = { password: 'payload-secret-value' };
  await h.admit(ROUTES.statusWrite, body);

  const out = lines.join('');
  for (const secret of ['token-abc', 'session=xyz', 's3cr3t', 'pw1', 'hunter2', 'p4ss', 'c4use', 'cGFzcw==', 'tok-1', 'pw2', 'payload-secret-value']) {
    t.notMatch(out, secret, `${secret} is not logged`);
  }
  t.match(out, /postgres:\/\/app:\[REDACTED\]@db\.example:5432\/orders\?sslmode=require&sslpassword=\[REDACTED\]/, 'the rest of the URL stays readable');
  const failed = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'failed');
  t.match(failed.err, { type: 'TypeError', message: 'connect to postgres://app:[REDACTED]@db failed' }, 'the error keeps its type and a readable message');
  const decision = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'admission decision');
  t.match(decision, { admissionUID: 'log-1', webhook: ROUTES.statusWrite, username: 'mallory', decision: 'denied', code: 403 }, 'each answer is logged once with its decision');
  t.notOk('object' in decision, 'the object itself is not logged');
});

t.test('the production reader: direct GETs to the API server, its answers mapped to admission answers', async (t) => {
  const tmp = await tempDir('ptah-apiserver');
  t.teardown(tmp.remove);
  const pki = await generateCertificates({ outDir: tmp.dir });
  const seen: { path: string; authorization?: string }[] = [];
  const migration = {
    apiVersion: 'operator.ptah.run/v1alpha1',
    kind: 'PtahMigration',
    metadata: { name: 'billing', namespace: 'team-a', uid: 'uid-billing' },
    spec: {},
    status: { unresolvedRun: { outcome: 'Unknown', operationID: `sha256:${'1'.repeat(64)}`, recordedAt: '2030-01-01T00:00:00Z' } },
  };
  const apiserver = https.createServer({ key: await readFile(pki.key), cert: await readFile(pki.cert) }, (req, res) => {
    seen.push({ path: req.url ?? '', authorization: req.headers.authorization });
    res.setHeader('content-type', 'application/json');
    if (req.method === 'GET' && req.url === '/apis/operator.ptah.run/v1alpha1/namespaces/team-a/ptahmigrations/billing') return res.end(JSON.stringify(migration));
    res.statusCode = 404;
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: 'not found' }));
  });
  await new Promise<void>((resolve) => apiserver.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => apiserver.close(() => resolve())));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `https://127.0.0.1:${(apiserver.address() as AddressInfo).port}`, caData: (await readFile(pki.caCert)).toString('base64') }],
    users: [{ name: 'u', token: 'manager-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });

  const certificate = await ServingCertificate.load(pki.dir);
  const app = await buildServer({
    reader: createUncachedReader(kc, 2000),
    config: { managerUsername: MANAGER, manager: MANAGER_IMAGES },
    logger: false,
    clock: { now: () => NOW },
    certificate,
  });
  t.teardown(() => app.close());

  const ack = (name: string) =>
    review({
      operation: 'CREATE',
      kind: { group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahMigrationRunAcknowledgment' },
      resource: { group: 'operator.ptah.run', version: 'v1alpha1', resource: 'ptahmigrationrunacknowledgments' },
      namespace: 'team-a',
      name: 'ack',
      object: {
        apiVersion: 'operator.ptah.run/v1alpha1',
        kind: 'PtahMigrationRunAcknowledgment',
        metadata: { name: 'ack', namespace: 'team-a' },
        spec: {
          migrationRef: { name, uid: 'uid-billing' },
          operationID: `sha256:${'1'.repeat(64)}`,
          acknowledgedBy: { username: 'alice', uid: 'u-alice', groups: ['dba', 'system:authenticated'] },
          acknowledgedAt: '2030-01-01T00:00:00Z',
          mutationRequestUID: 'req-0001',
        },
      },
    });
  const admitted = (await app.inject({ method: 'POST', url: ROUTES.decision, payload: ack('billing') })).json().response;
  t.equal(admitted.allowed, true, 'admitted on what the API server said');
  t.same(seen[0], { path: '/apis/operator.ptah.run/v1alpha1/namespaces/team-a/ptahmigrations/billing', authorization: 'Bearer manager-token' });
  const missing = (await app.inject({ method: 'POST', url: ROUTES.decision, payload: ack('gone') })).json().response;
  t.equal(missing.allowed, false);
  t.equal(missing.status.code, 404);
  t.equal(missing.status.message, 'PtahMigration team-a/gone not found');
  t.equal(seen.length, 2, 'every decision read the API server again: nothing is cached');
});

// ---- hostile clients: the limits of the service itself (issue #8) ----

const MiB = 1024 * 1024;

t.test('the body limit admits the largest review the API server sends and refuses what is much larger', async (t) => {
  t.ok(BODY_LIMIT <= MiB, `the limit is ${BODY_LIMIT} bytes, at most 1 MiB (it was 3 MiB)`);
  const h = await harness();
  t.teardown(h.close);
  const endpoint = await h.listen();

  // The largest: the projection of a full 512 KiB plan chunk (683 KiB of base64), with the managedFields the API
  // server adds, sent without an oldObject.
  const w = world('schema', 'Apply');
  install(h.reader, w);
  for (const chunk of chunkObjects(w.plan!)) h.reader.put(chunk);
  const full = projections(w.plan!)[0]!;
  const projection = {
    ...full,
    metadata: {
      ...full.metadata,
      uid: 'uid-projection',
      creationTimestamp: '2030-01-01T00:00:00Z',
      managedFields: [{ manager: 'ptah-manager', operation: 'Update', apiVersion: 'v1', time: '2030-01-01T00:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:binaryData': { '.': {}, 'f:chunk': {} }, 'f:immutable': {} } }],
    },
  };
  const largest = reviewOf({ group: '', version: 'v1', kind: 'ConfigMap', resource: 'configmaps' }, 'CREATE', projection.metadata.name!, {
    object: projection as unknown as Record<string, unknown>,
    userInfo: { username: MANAGER, groups: ['system:serviceaccounts', 'system:authenticated'] },
  });
  const text = JSON.stringify(largest);
  t.ok(text.length > 690_000, `the largest legitimate review is ${text.length} bytes`);
  const admitted = await postText(endpoint, ROUTES.controllerWrite, text);
  t.equal(admitted.status, 200, 'it is read, not refused as too large');
  t.equal(JSON.parse(admitted.body).response.allowed, true, 'and judged on its merits');

  // An UPDATE carries two copies; the API server caps an object's annotations at 256 KiB in total.
  const annotated = { metadata: { name: 'billing', namespace: 'team-a', annotations: { 'example.com/notes': 'n'.repeat(256 * 1024 - 64) } }, spec: {} };
  const update = reviewOf({ group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahMigration', resource: 'ptahmigrations' }, 'UPDATE', 'billing', {
    object: annotated,
    oldObject: annotated,
    userInfo: { username: 'alice' },
  });
  const answered = await postText(endpoint, ROUTES.statusWrite, JSON.stringify(update));
  t.equal(answered.status, 200, 'an update of an object at the annotation cap is read');
  t.equal(JSON.parse(answered.body).response.allowed, true);

  const oversized = statusUpdate(MANAGER);
  (oversized.request.object as { data?: string }).data = 'x'.repeat(1.5 * MiB);
  const refused = await postText(endpoint, ROUTES.statusWrite, JSON.stringify(oversized));
  t.equal(refused.status, 413, 'a 1.5 MiB review is 413');
  t.match(JSON.parse(refused.body), { error: 'Payload Too Large' });
});

t.test('a client that stalls in the middle of a request is disconnected within the request timeout', async (t) => {
  const requestTimeoutMs = 1000;
  const h = await harness({ limits: { requestTimeoutMs } });
  t.teardown(h.close);
  const endpoint = await h.listen();
  // Node checks for expired requests once per check interval, so the bound is timeout + interval + slack.
  const bound = requestTimeoutMs + CONNECTION_CHECK_INTERVAL_MS + 1500;

  for (const [name, sent] of [
    ['headers and part of a body', `POST ${ROUTES.statusWrite} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"apiVersion":"admission.k8s.io/v1",`],
    ['part of the headers', `POST ${ROUTES.statusWrite} HTTP/1.1\r\nHost: localhost\r\nContent-Ty`],
    ['nothing after the TLS handshake', ''],
  ] as const) {
    const socket = await connectTls(endpoint);
    const since = performance.now();
    if (sent) socket.write(sent);
    const closed = await whenClosed(socket, since, 10_000).catch((e: Error) => ({ afterMs: Infinity, received: e.message }));
    t.ok(closed.afterMs <= bound, `${name}: disconnected after ${closed.afterMs.toFixed(0)} ms (bound ${bound} ms): ${closed.received.split('\r\n')[0]}`);
    t.ok(closed.afterMs >= requestTimeoutMs * 0.9, `${name}: not before the timeout`);
  }

  // A slow but steady client that finishes within the timeout is answered.
  const socket = await connectTls(endpoint);
  const body = JSON.stringify(statusUpdate(MANAGER, 'slow-1'));
  socket.write(`POST ${ROUTES.statusWrite} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`);
  const quarter = Math.ceil(body.length / 4);
  for (let i = 0; i < 4; i++) {
    socket.write(body.slice(i * quarter, (i + 1) * quarter));
    await delay(100);
  }
  const answer = await whenClosed(socket, performance.now(), 5000);
  t.match(answer.received, /^HTTP\/1\.1 200/, 'a body sent in pieces within the timeout is answered');
  t.match(answer.received, /"uid":"slow-1","allowed":true/);
});

t.test('the service defaults bound request time and connections below what the API server and the pod allow', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  t.equal(h.app.server.requestTimeout, REQUEST_TIMEOUT_MS, 'the request timeout is set');
  t.ok(REQUEST_TIMEOUT_MS <= WEBHOOK_TIMEOUT_SECONDS * 1000, 'and no longer than the API server waits for an answer');
  t.ok(h.app.server.headersTimeout <= REQUEST_TIMEOUT_MS, 'headers are bounded too');
  t.equal(h.app.server.maxConnections, MAX_CONNECTIONS, 'connections are capped');
  t.ok(MAX_CONNECTIONS * BODY_LIMIT * 2 <= 320 * MiB, 'every connection holding a full body fits the pod memory (512 Mi) with room for the rest');
  t.ok(h.app.server.keepAliveTimeout > 0, 'keep-alive stays on');
});

t.test('connections beyond the cap are dropped, and a freed slot serves again', async (t) => {
  const maxConnections = 3;
  const h = await harness({ limits: { maxConnections } });
  const open: TLSSocket[] = [];
  // The sockets go first: closing the server waits for its connections.
  t.teardown(async () => {
    open.forEach((s) => s.destroy());
    await h.close();
  });
  const endpoint = await h.listen();
  // Each holds a request whose body is still arriving: an idle connection would be evicted for the newcomer
  // (webhook-hostile.test.ts), one in the middle of a request is not.
  const gauge = async () => (await webhookMetrics.inFlight.get()).values.find((v) => v.labels.webhook === ROUTES.statusWrite)?.value ?? 0;
  const before = await gauge();
  const inFlight = async () => (await gauge()) - before;
  for (let i = 1; i <= maxConnections; i++) {
    const socket = await connectTls(endpoint);
    open.push(socket);
    socket.write(`POST ${ROUTES.statusWrite} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"apiVersion":`);
    for (let tries = 0; tries < 200 && (await inFlight()) < i; tries++) await delay(10);
  }
  t.equal(await inFlight(), maxConnections, 'every slot holds a request in flight');
  await t.rejects(connectTls(endpoint).then((s) => open.push(s)), 'the connection over the cap is dropped');
  open.shift()!.destroy();
  let answered: PostResult | undefined;
  for (let i = 0; i < 40 && !answered; i++) {
    answered = await postText(endpoint, ROUTES.statusWrite, JSON.stringify(statusUpdate(MANAGER, 'after-cap'))).catch(() => undefined);
    if (!answered) await delay(50);
  }
  t.equal(answered?.status, 200, 'once one closes, a new connection is served');
});

t.test('keep-alive works for the API server: a connection serves request after request, idle longer than the request timeout', async (t) => {
  const requestTimeoutMs = 1000;
  const h = await harness({ limits: { requestTimeoutMs } });
  t.teardown(h.close);
  const endpoint = await h.listen();
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const first = await postText({ ...endpoint, agent }, ROUTES.statusWrite, JSON.stringify(statusUpdate(MANAGER, 'ka-1')));
  t.equal(first.status, 200);
  await delay(requestTimeoutMs + CONNECTION_CHECK_INTERVAL_MS + 200);
  const second = await postText({ ...endpoint, agent }, ROUTES.statusWrite, JSON.stringify(statusUpdate(MANAGER, 'ka-2')));
  t.equal(second.status, 200);
  t.equal(second.reusedSocket, true, 'the second request went over the first one’s connection');
});

t.test('attacker-sized strings are cut in answers and in log lines', async (t) => {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
  const h = await harness({ logger });
  t.teardown(h.close);
  // Not one run of URL-scheme characters: this case measures sizes; the redaction time has its own test.
  const username = 'u_'.repeat(300_000);
  const response = await h.admit(ROUTES.statusWrite, statusUpdate(username, 'big-1'));
  t.equal(response.allowed, false);
  t.ok((response.status?.message ?? '').length <= MAX_MESSAGE_LENGTH, `the message is ${response.status?.message?.length} characters (at most ${MAX_MESSAGE_LENGTH})`);
  t.match(response.status?.message, /written only by the operator's manager, not by (u_)+…/, 'it still says what is wrong');
  const longest = Math.max(...lines.map((l) => l.length));
  t.ok(longest < 16 * 1024, `the longest log line is ${longest} characters`);
});

// Bodies with a value in a place the API server never sends one; each reached a TypeError, a RangeError or a
// CanonicalJsonError in a judge and was answered 500 with a stack trace in the log.
t.test('malformed input is a 400 naming the field, never a 5xx, never a stack trace in the log', async (t) => {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
  const h = await harness({ logger });
  t.teardown(h.close);
  const noPrimitive = { toString: 1, valueOf: 1 };
  const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
  const G = 'operator.ptah.run';
  const ACK = { group: G, version: 'v1alpha1', kind: 'PtahMigrationRunAcknowledgment', resource: 'ptahmigrationrunacknowledgments' };
  const ack = (object: Record<string, unknown>, operation: Operation = 'CREATE') =>
    reviewOf(ACK, operation, 'ack', { object: { spec: {}, ...object }, ...(operation === 'UPDATE' ? { oldObject: { spec: {} } } : {}) });
  const migrationUpdate = (annotation: unknown) =>
    reviewOf({ group: G, version: 'v1alpha1', kind: 'PtahMigration', resource: 'ptahmigrations' }, 'UPDATE', 'billing', {
      object: { metadata: { name: 'billing', namespace: 'team-a', annotations: { 'operator.ptah.run/unresolved-run': annotation } } },
      oldObject: {},
      userInfo: { username: 'alice' },
    });
  const manager = { username: MANAGER };
  const job = (metadata: Record<string, unknown>) =>
    reviewOf({ group: 'batch', version: 'v1', kind: 'Job', resource: 'jobs' }, 'CREATE', 'j', { object: { metadata: { name: 'j', namespace: 'team-a', ...metadata } }, userInfo: manager });
  const configMap = (ownerReferences: unknown) =>
    reviewOf({ group: '', version: 'v1', kind: 'ConfigMap', resource: 'configmaps' }, 'CREATE', 'c', { object: { metadata: { name: 'c', namespace: 'team-a', ownerReferences } }, userInfo: manager });
  const withRaw = (body: unknown, placeholder: string, raw: string) => JSON.stringify(body).replace(JSON.stringify(placeholder), raw);
  const owner = { apiVersion: `${G}/v1alpha1`, kind: 'PtahSchema', name: 'orders', uid: 'u', controller: true };

  const cases: [string, string, string | unknown, RegExp][] = [
    ['status-write: an annotation value with no string form', ROUTES.statusWrite, migrationUpdate(noPrimitive), /metadata\.annotations\["operator\.ptah\.run\/unresolved-run"\] is an object, not a string/],
    ['status-write: an annotation that is a number', ROUTES.statusWrite, migrationUpdate(123), /is a number, not a string/],
    ['decision: an apiVersion with no string form', ROUTES.decision, ack({ apiVersion: noPrimitive }), /object\.apiVersion is an object, not a string/],
    ['decision: a metadata.namespace with no string form', ROUTES.decision, ack({ metadata: { namespace: noPrimitive } }), /object\.metadata\.namespace is an object, not a string/],
    ['stamp: metadata that is not an object', ROUTES.stamp, ack({ metadata: 'x' }), /object\.metadata is a string, not an object/],
    ['controller-write: an apiVersion with no string form', ROUTES.controllerWrite, { ...job({}), request: { ...job({}).request, object: { ...(job({}).request.object as object), apiVersion: noPrimitive } } }, /object\.apiVersion is an object, not a string/],
    ['controller-write: an owner reference field with no string form', ROUTES.controllerWrite, job({ ownerReferences: [{ ...owner, kind: noPrimitive }] }), /object\.metadata\.ownerReferences\[0\]\.kind is an object, not a string/],
    ['controller-write: owner references that are not a list', ROUTES.controllerWrite, job({ ownerReferences: { 0: owner, length: 1 } }), /object\.metadata\.ownerReferences is an object, not a list/],
    ['controller-write: an owner reference that is not an object', ROUTES.controllerWrite, job({ ownerReferences: [null] }), /object\.metadata\.ownerReferences\[0\] is null, not an object/],
    ['controller-write: projection owner references that are not a list', ROUTES.controllerWrite, configMap('x'), /object\.metadata\.ownerReferences is a string, not a list/],
    ['controller-write: a projection owner reference that is null', ROUTES.controllerWrite, configMap([null]), /object\.metadata\.ownerReferences\[0\] is null, not an object/],
    ['controller-write: a Job nested deeper than any Kubernetes object', ROUTES.controllerWrite, withRaw(job({ ownerReferences: [owner], annotations: { x: '@@' } }), '@@', deep(5000)), /request\.object\.metadata\.annotations\.x(\[0\])+ nests more than \d+ levels deep/],
    ['decision: 1e400 in a spec', ROUTES.decision, withRaw(ack({ spec: { n: '@@' } }, 'UPDATE'), '@@', '1e400'), /request\.object\.spec\.n is a number JSON cannot hold \(Infinity\)/],
    ['decision: a lone surrogate in a spec', ROUTES.decision, withRaw(ack({ spec: { s: '@@' } }, 'UPDATE'), '@@', '"a\\ud800b"'), /request\.object\.spec\.s holds a lone UTF-16 surrogate/],
    ['decision: a lone surrogate in a key', ROUTES.decision, withRaw(ack({ spec: { '@@': 1 } }, 'UPDATE'), '@@', '"\\udc00"'), /request\.object\.spec holds a property name with a lone UTF-16 surrogate/],
    ['decision: a spec nested 5000 deep', ROUTES.decision, withRaw(ack({ spec: { d: '@@' } }, 'UPDATE'), '@@', deep(5000)), /request\.object\.spec\.d(\[0\])+ nests more than \d+ levels deep/],
  ];
  for (const [name, route, body, message] of cases) {
    const before = lines.length;
    const res = await h.app.inject({ method: 'POST', url: route, headers: { 'content-type': 'application/json' }, payload: typeof body === 'string' ? body : JSON.stringify(body) });
    t.equal(res.statusCode, 200, `${name}: answered with an AdmissionReview`);
    const answer = res.json().response;
    t.equal(answer?.allowed, false, `${name}: refused`);
    t.equal(answer?.status?.code, 400, `${name}: 400`);
    t.match(answer?.status?.message, message, `${name}: the message names the field`);
    const logged = lines.slice(before).map((l) => JSON.parse(l) as { level: string; err?: unknown; msg: string });
    t.same(logged.filter((l) => l.level === 'error' || l.err !== undefined), [], `${name}: no error and no stack trace logged`);
  }

  // A genuine internal failure stays a 500 (fail closed), and is the one that logs its error.
  h.reader.get = async () => {
    throw new TypeError('reader broke');
  };
  const res = await h.app.inject({ method: 'POST', url: ROUTES.controllerWrite, payload: job({ ownerReferences: [owner] }) });
  t.equal(res.json().response.status.code, 500, 'a failed read is still a 500');
});
