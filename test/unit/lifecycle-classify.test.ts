import { ApiException } from '@kubernetes/client-node';
import t from 'tap';
import { classifyCreate, failureOf, type CreateFailure, type CreateVerdict } from '../../src/shared/lifecycle/classify.js';
import { ApiError } from '../../src/shared/kube-client.js';

const webhookDown =
  'Internal error occurred: failed calling webhook "controller-write.operator.ptah.run": failed to call webhook: Post "https://127.0.0.1:9443/validate/controller-write?timeout=10s": dial tcp 127.0.0.1:9443: connect: connection refused';

// failure → [mutating verdict, read-only verdict]
const table: { name: string; failure: CreateFailure; mutating: CreateVerdict; readOnly: CreateVerdict }[] = [
  { name: '401 Unauthorized', failure: { code: 401, reason: 'Unauthorized' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '403 Forbidden (RBAC)', failure: { code: 403, reason: 'Forbidden', message: 'jobs.batch is forbidden' }, mutating: 'withdraw', readOnly: 'requeue' },
  {
    name: '403 admission denial',
    failure: { code: 403, reason: 'Forbidden', message: 'admission webhook "controller-write.operator.ptah.run" denied the request' },
    mutating: 'withdraw',
    readOnly: 'requeue',
  },
  { name: '422 Invalid', failure: { code: 422, reason: 'Invalid' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '429 shed by priority and fairness', failure: { code: 429, reason: 'TooManyRequests' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '500 fail-closed webhook unreachable', failure: { code: 500, reason: 'InternalError', message: webhookDown }, mutating: 'withdraw', readOnly: 'requeue' },
  {
    name: '500 "failed to call webhook" alone',
    failure: { code: 500, message: 'Internal error occurred: failed to call webhook: context deadline exceeded' },
    mutating: 'withdraw',
    readOnly: 'requeue',
  },
  { name: '500 other internal error', failure: { code: 500, reason: 'InternalError', message: 'etcdserver: request timed out' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '500 without a message', failure: { code: 500 }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'webhook text on a 504', failure: { code: 504, message: webhookDown }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'webhook text without a code', failure: { message: webhookDown }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '409 AlreadyExists', failure: { code: 409, reason: 'AlreadyExists' }, mutating: 'uncertain', readOnly: 'retry' },
  { name: '409 without a reason', failure: { code: 409 }, mutating: 'uncertain', readOnly: 'retry' },
  { name: 'AlreadyExists reason without a code', failure: { reason: 'AlreadyExists' }, mutating: 'uncertain', readOnly: 'retry' },
  { name: '409 Conflict', failure: { code: 409, reason: 'Conflict' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '504 Timeout', failure: { code: 504, reason: 'Timeout' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '503 ServiceUnavailable', failure: { code: 503 }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '400 BadRequest', failure: { code: 400, reason: 'BadRequest' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '404 NotFound (namespace gone)', failure: { code: 404, reason: 'NotFound' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'no response at all', failure: {}, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'network error', failure: { message: 'connect ECONNRESET' }, mutating: 'uncertain', readOnly: 'requeue' },
];

t.test('classifyCreate', async (t) => {
  for (const row of table) {
    t.equal(classifyCreate(row.failure, true), row.mutating, `mutating: ${row.name}`);
    t.equal(classifyCreate(row.failure, false), row.readOnly, `read-only: ${row.name}`);
  }
});

t.test('failureOf the project client’s ApiError', async (t) => {
  const status = { code: 403, reason: 'Forbidden', message: 'denied' };
  t.strictSame(failureOf(new ApiError(status, 'POST /apis/batch/v1/namespaces/x/jobs')), status);
  t.strictSame(failureOf(new ApiError({ message: 'socket hang up' }, 'POST /x')), { message: 'socket hang up' }, 'no answer: no code');
});

t.test('failureOf a client-node ApiException', async (t) => {
  const body = JSON.stringify({ kind: 'Status', code: 409, reason: 'AlreadyExists', message: 'jobs.batch "x" already exists' });
  t.strictSame(failureOf(new ApiException(409, 'Unknown API Status Code!', body, {})), {
    code: 409,
    reason: 'AlreadyExists',
    message: 'jobs.batch "x" already exists',
  });
  t.strictSame(failureOf(new ApiException(401, 'Unauthorized', undefined, {})), { code: 401 }, '401 carries no body');
  t.strictSame(failureOf(new ApiException(502, 'Unknown API Status Code!', '<html>bad gateway</html>', {})), { code: 502 }, 'a body that is not JSON');
  t.strictSame(
    failureOf(new ApiException(500, 'x', { code: 500, reason: 'InternalError', message: webhookDown }, {})),
    { code: 500, reason: 'InternalError', message: webhookDown },
    'a body already decoded',
  );
  t.strictSame(failureOf(new ApiException(422, 'x', JSON.stringify({ code: 'bogus', reason: 7 }), {})), { code: 422 }, 'ill-typed Status fields are dropped');
});

t.test('failureOf anything else', async (t) => {
  t.strictSame(failureOf(Object.assign(new Error('request to https://x failed'), { code: 'ECONNREFUSED' })), { message: 'request to https://x failed' });
  t.strictSame(failureOf(new TypeError('fetch failed')), { message: 'fetch failed' });
  t.strictSame(failureOf(Object.assign(new Error('odd'), { code: 9999, body: '{}' })), { message: 'odd' }, 'a code that is no HTTP status is no answer');
  for (const value of [undefined, null, 'boom', 42]) t.strictSame(failureOf(value), {}, String(value));
});

t.test('end to end: thrown errors classify as the table says', async (t) => {
  const refused = new ApiException(500, 'x', JSON.stringify({ code: 500, message: webhookDown }), {});
  t.equal(classifyCreate(failureOf(refused), true), 'withdraw');
  t.equal(classifyCreate(failureOf(new Error('ETIMEDOUT')), true), 'uncertain');
  t.equal(classifyCreate(failureOf(new ApiError({ code: 409, reason: 'AlreadyExists' }, 'POST /x')), false), 'retry');
});
