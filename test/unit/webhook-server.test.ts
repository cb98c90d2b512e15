// The service around the judges: the envelope, bodies it refuses, probes, metrics, and TLS on a real socket.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { InjectOptions } from 'fastify';
import { KubeConfig } from '@kubernetes/client-node';
import t from 'tap';
import { generateCertificates } from '../../certs/generate.js';
import { createUncachedReader } from '../../src/shared/kube.js';
import { createLogger } from '../../src/shared/logger.js';
import { ServingCertificate } from '../../src/shared/tls.js';
import { WEBHOOK_PATHS as ROUTES } from '../../src/shared/api/webhooks.js';
import { BODY_LIMIT, buildServer } from '../../src/webhook/server.js';
import { MANAGER, MANAGER_IMAGES, NOW, harness, review, tempDir } from '../harness/webhook.js';

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
  (justUnder.request.object as { data?: string }).data = 'x'.repeat(2 * 1024 * 1024);
  t.equal((await h.app.inject({ method: 'POST', url: ROUTES.statusWrite, payload: justUnder })).statusCode, 200, 'a 2 MiB review is accepted');
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

t.test('/healthz, /readyz and /metrics', async (t) => {
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
  const metrics = await h.app.inject({ method: 'GET', url: '/metrics' });
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
