// The security headers of every answer the service gives: the set @fastify/helmet 13 (helmet 8, CSP off) put on
// each response, written out here so that a change in how they are set cannot drop or alter one unnoticed.
import https from 'node:https';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import t, { type Test } from 'tap';
import { WEBHOOK_PATHS as ROUTES } from '../../src/shared/api/webhooks.js';
import { BODY_LIMIT } from '../../src/webhook/server.js';
import { harness, review, type Endpoint, type MemoryReader } from '../harness/webhook.js';
import { install, world } from '../harness/webhook-world.js';
import { jobCreateReview } from './job-create-review.js';

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'origin-agent-cluster': '?1',
  'referrer-policy': 'no-referrer',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-dns-prefetch-control': 'off',
  'x-download-options': 'noopen',
  'x-frame-options': 'SAMEORIGIN',
  'x-permitted-cross-domain-policies': 'none',
  'x-xss-protection': '0',
};

type Headers = LightMyRequestResponse['headers'];

function hasSecurityHeaders(t: Test, headers: Headers, what: string): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) t.equal(headers[name], value, `${what}: ${name}`);
  t.notOk('x-powered-by' in headers, `${what}: no x-powered-by`);
  t.notOk('content-security-policy' in headers, `${what}: no content-security-policy (it is off, as before)`);
}

/** The Job a schema Apply claim names (admitted after both reads, the rebuild and match), or under `name` (refused). */
function jobCreate(reader: MemoryReader, name?: string) {
  const w = world('schema', 'Apply');
  install(reader, w);
  return jobCreateReview(w, { name });
}

t.test('every answer carries the security headers: admission, probes, metrics and errors', async (t) => {
  let ready = false;
  const h = await harness({ ready: () => ready });
  t.teardown(h.close);
  const admission = jobCreate(h.reader);
  const unclaimed = jobCreate(h.reader, 'ptah-unclaimed-job');
  const huge = review({ operation: 'CREATE', kind: { group: 'batch', version: 'v1', kind: 'Job' }, resource: { group: 'batch', version: 'v1', resource: 'jobs' }, object: { data: 'x'.repeat(BODY_LIMIT) } });
  const cases: [string, InjectOptions, number, ((res: LightMyRequestResponse) => void)?][] = [
    ['an allowed Job create', { method: 'POST', url: ROUTES.controllerWrite, payload: admission }, 200, (res) => t.equal(res.json().response.allowed, true, 'it is admitted')],
    ['a refused Job create', { method: 'POST', url: ROUTES.controllerWrite, payload: unclaimed }, 200, (res) => t.equal(res.json().response.allowed, false, 'it is refused')],
    ['/healthz', { method: 'GET', url: '/healthz' }, 200],
    ['/readyz, not ready', { method: 'GET', url: '/readyz' }, 503],
    ['invalid JSON', { method: 'POST', url: ROUTES.controllerWrite, headers: { 'content-type': 'application/json' }, payload: '{"apiVersion":' }, 400],
    ['not an AdmissionReview', { method: 'POST', url: ROUTES.controllerWrite, payload: { apiVersion: 'v1', kind: 'Pod' } }, 400],
    ['not JSON', { method: 'POST', url: ROUTES.controllerWrite, headers: { 'content-type': 'text/plain' }, payload: 'hello' }, 415],
    ['an unknown path', { method: 'POST', url: '/validate/anything', payload: admission }, 404],
    ['a body over the limit', { method: 'POST', url: ROUTES.controllerWrite, payload: huge }, 413],
  ];
  for (const [what, request, status, check] of cases) {
    const res = await h.app.inject(request);
    t.equal(res.statusCode, status, `${what}: HTTP ${status}`);
    check?.(res);
    hasSecurityHeaders(t, res.headers, what);
  }
  ready = true;
  hasSecurityHeaders(t, (await h.app.inject({ method: 'GET', url: '/readyz' })).headers, '/readyz, ready');
  for (const [what, url, status] of [['/metrics', '/metrics', 200], ['the metrics service, an unknown path', '/healthz', 404]] as const) {
    const res = await h.metrics.inject({ method: 'GET', url });
    t.equal(res.statusCode, status, `${what}: HTTP ${status}`);
    hasSecurityHeaders(t, res.headers, what);
  }
});

t.test('a failure inside the service (HTTP 500) carries them too', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  // Any route of the app goes through the same hooks; this one fails as an unexpected bug would.
  h.app.get('/fails', async () => {
    throw new Error('boom');
  });
  const res = await h.app.inject({ method: 'GET', url: '/fails' });
  t.equal(res.statusCode, 500);
  t.equal(res.json().message, 'internal error');
  hasSecurityHeaders(t, res.headers, 'HTTP 500');
});

/** One request over the real TLS listener, on `agent`'s connections. */
function overTls(endpoint: Endpoint, agent: https.Agent, method: string, path: string, body?: string): Promise<{ status: number; headers: Headers; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port: endpoint.port, path, method, ca: endpoint.ca, servername: 'localhost', agent, headers: body ? { 'content-type': 'application/json' } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers as Headers, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

t.test('over the real TLS listener, on a kept-alive connection, each answer carries them', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const endpoint = await h.listen();
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const body = JSON.stringify(jobCreate(h.reader));
  for (let i = 0; i < 2; i++) {
    const res = await overTls(endpoint, agent, 'POST', ROUTES.controllerWrite, body);
    t.equal(res.status, 200);
    t.equal(JSON.parse(res.body).response.allowed, true, 'it is admitted');
    hasSecurityHeaders(t, res.headers, `admission ${i + 1} over TLS`);
  }
  hasSecurityHeaders(t, (await overTls(endpoint, agent, 'GET', '/healthz')).headers, '/healthz over TLS');
  const invalid = await overTls(endpoint, agent, 'POST', ROUTES.controllerWrite, '{"apiVersion":');
  t.equal(invalid.status, 400);
  hasSecurityHeaders(t, invalid.headers, 'invalid JSON over TLS');
});

t.test('a URL the router cannot decode (FST_ERR_BAD_URL, answered before any hook runs) carries them too', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const url of ['/%zz', '/healthz%', `${ROUTES.controllerWrite}%E0%A4%A`]) {
    const res = await h.app.inject({ method: 'GET', url });
    t.equal(res.statusCode, 400, `${url}: HTTP 400`);
    t.match(res.json(), { statusCode: 400, error: 'Bad Request', code: 'FST_ERR_BAD_URL' }, `${url}: the answer names the error`);
    hasSecurityHeaders(t, res.headers, url);
  }
});
