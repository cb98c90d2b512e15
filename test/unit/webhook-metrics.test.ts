// The webhook's series, value by value, after a known mix of answers: which requests each series counts (every
// answer of an admission route, whatever its code; never a probe or an unknown path) and that one a client gives
// up on leaves the in-flight gauge as it found it.
import type { InjectOptions } from 'fastify';
import t from 'tap';
import { WEBHOOK_PATHS as ROUTES } from '../../src/shared/api/webhooks.js';
import { connectTls, harness } from '../harness/webhook.js';
import { install, world } from '../harness/webhook-world.js';
import { jobCreateReview } from './job-create-review.js';

const ROUTE = ROUTES.controllerWrite;

/** The value of the one sample of `series` whose labels are exactly `labels` (in the order prom-client writes them); undefined when absent. */
function sample(text: string, series: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

t.test('each series counts every answer of an admission route, by code and decision, and nothing else', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const w = world('schema', 'Apply');
  install(h.reader, w);
  const jobCreate = (name?: string) => jobCreateReview(w, { name });
  const requests: [string, InjectOptions, number][] = [
    ['allowed', { method: 'POST', url: ROUTE, payload: jobCreate() }, 200],
    ['allowed again', { method: 'POST', url: ROUTE, payload: jobCreate() }, 200],
    ['refused', { method: 'POST', url: ROUTE, payload: jobCreate('ptah-unclaimed-job') }, 200],
    ['not an AdmissionReview', { method: 'POST', url: ROUTE, payload: { apiVersion: 'v1', kind: 'Pod' } }, 400],
    ['invalid JSON', { method: 'POST', url: ROUTE, headers: { 'content-type': 'application/json' }, payload: '{' }, 400],
    ['not JSON', { method: 'POST', url: ROUTE, headers: { 'content-type': 'text/plain' }, payload: 'x' }, 415],
    ['an unknown path', { method: 'POST', url: '/validate/anything', payload: jobCreate() }, 404],
    ['a probe', { method: 'GET', url: '/healthz' }, 200],
  ];
  for (const [what, request, status] of requests) t.equal((await h.app.inject(request)).statusCode, status, what);

  const text = (await h.metrics.inject({ method: 'GET', url: '/metrics' })).body;
  const webhook = `webhook="${ROUTE}"`;
  t.equal(sample(text, 'controller_runtime_webhook_requests_total', `${webhook},code="200"`), 3, 'three answers with HTTP 200');
  t.equal(sample(text, 'controller_runtime_webhook_requests_total', `${webhook},code="400"`), 2, 'two 400s');
  t.equal(sample(text, 'controller_runtime_webhook_requests_total', `${webhook},code="415"`), 1, 'one 415');
  t.equal(sample(text, 'controller_runtime_webhook_latency_seconds_count', webhook), 6, 'a latency for each of the six');
  t.ok(sample(text, 'controller_runtime_webhook_latency_seconds_sum', webhook)! > 0, 'the latencies add up to some time');
  t.equal(sample(text, 'controller_runtime_webhook_latency_seconds_bucket', `le="+Inf",${webhook}`), 6, 'all six under +Inf');
  t.equal(sample(text, 'controller_runtime_webhook_requests_in_flight', webhook), 0, 'none in flight');
  t.equal(sample(text, 'ptah_operator_admission_decisions_total', `${webhook},decision="allowed"`), 2, 'two allowed');
  t.equal(sample(text, 'ptah_operator_admission_decisions_total', `${webhook},decision="denied"`), 1, 'one denied');
  t.equal(sample(text, 'ptah_operator_admission_decisions_total', `${webhook},decision="invalid"`), undefined, 'a body the schema refuses reaches no judge');
  t.notMatch(text, /webhook="\/validate\/anything"|webhook="\/healthz"/, 'an unknown path and a probe are no webhook\'s requests');
});

t.test('a request the client abandons is in flight until it does, and is then not counted as answered', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const endpoint = await h.listen();
  const metrics = async () => (await h.metrics.inject({ method: 'GET', url: '/metrics' })).body;
  const webhook = `webhook="${ROUTES.statusWrite}"`;

  const socket = await connectTls(endpoint);
  socket.write(`POST ${ROUTES.statusWrite} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"apiVersion":`);
  let inFlight: number | undefined;
  for (let i = 0; i < 200 && inFlight !== 1; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    inFlight = sample(await metrics(), 'controller_runtime_webhook_requests_in_flight', webhook);
  }
  t.equal(inFlight, 1, 'in flight while its body is still arriving');

  socket.destroy();
  for (let i = 0; i < 200 && inFlight !== 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    inFlight = sample(await metrics(), 'controller_runtime_webhook_requests_in_flight', webhook);
  }
  t.equal(inFlight, 0, 'no longer in flight once the client is gone');
  const text = await metrics();
  t.notMatch(text, new RegExp(`controller_runtime_webhook_requests_total\\{${webhook}`), 'no answer is counted');
  t.equal(sample(text, 'controller_runtime_webhook_latency_seconds_count', webhook), undefined, 'and no latency');
});
