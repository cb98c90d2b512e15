import { ApiException } from '@kubernetes/client-node';
import t from 'tap';
import { classifyCreate, failureOf, refusedBeforeStorage, type CreateFailure, type CreateVerdict } from '../../src/shared/lifecycle/classify.js';
import { ApiError } from '../../src/shared/kube-client.js';

const webhookDown =
  'Internal error occurred: failed calling webhook "controller-write.operator.ptah.run": failed to call webhook: Post "https://127.0.0.1:9443/validate/controller-write?timeout=10s": dial tcp 127.0.0.1:9443: connect: connection refused';

const deniedBy = 'admission webhook "controller-write.operator.ptah.run" denied the request';
const vap = 'jobs.batch "orders-apply-1" is forbidden: ValidatingAdmissionPolicy \'no-apply\' with binding \'no-apply\' denied request: Apply Jobs are held';
const quota = 'jobs.batch "orders-apply-1" is forbidden: exceeded quota: no-jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0';

// failure → [mutating verdict, read-only verdict]; every class that withdraws has a near miss that does not.
const table: { name: string; failure: CreateFailure; mutating: CreateVerdict; readOnly: CreateVerdict }[] = [
  { name: '401 Unauthorized', failure: { code: 401, reason: 'Unauthorized' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '403 Forbidden (RBAC)', failure: { code: 403, reason: 'Forbidden', message: 'jobs.batch is forbidden' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '403 exceeded quota', failure: { code: 403, reason: 'Forbidden', message: quota }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '403 webhook denial', failure: { code: 403, reason: 'Forbidden', message: `${deniedBy}: no` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '422 Invalid', failure: { code: 422, reason: 'Invalid' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '400 BadRequest (decoding)', failure: { code: 400, reason: 'BadRequest', message: 'Job in version "v1" cannot be handled as a Job' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: '429 shed by priority and fairness', failure: { code: 429, reason: 'TooManyRequests' }, mutating: 'withdraw', readOnly: 'requeue' },

  // A webhook denial: the webhook picks the code, the API server writes the head of the message.
  { name: 'webhook denial 400', failure: { code: 400, message: `${deniedBy}: Job x is not its claim's` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'webhook denial 404', failure: { code: 404, reason: 'NotFound', message: `${deniedBy}: PtahMigration ns/orders not found` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'webhook denial 500', failure: { code: 500, reason: 'InternalError', message: `${deniedBy}: could not read PtahMigration ns/orders` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'webhook denial 409 AlreadyExists', failure: { code: 409, reason: 'AlreadyExists', message: `${deniedBy}: taken` }, mutating: 'withdraw', readOnly: 'retry' },
  { name: 'webhook denial without explanation', failure: { code: 503, message: `${deniedBy} without explanation` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'webhook denial, newer 500 head', failure: { code: 500, message: `Internal error occurred: ${deniedBy}: x` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'webhook denial, newer forbidden head', failure: { code: 404, message: `jobs.batch "orders-apply-1" is forbidden: ${deniedBy}: x` }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'not a denial: the denial text further in', failure: { code: 500, message: `etcdserver: ${deniedBy}: x` }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a denial: a 500 that mentions a webhook', failure: { code: 500, reason: 'InternalError', message: 'Internal error occurred: webhook controller-write is slow' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a denial: an unnamed webhook', failure: { code: 500, message: 'admission webhook denied the request: x' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a denial: the text without a code', failure: { message: `${deniedBy}: x` }, mutating: 'uncertain', readOnly: 'requeue' },

  // A fail-closed webhook the API server could not call.
  {
    name: '500 fail-closed webhook unreachable',
    failure: { code: 500, reason: 'InternalError', message: webhookDown },
    mutating: 'withdraw',
    readOnly: 'requeue',
  },
  { name: '500 fail-closed webhook, no details', failure: { code: 500, message: 'Internal error occurred: failed calling webhook "w.example"; no further details available' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'not a call failure: "failed to call webhook" alone', failure: { code: 500, message: 'Internal error occurred: failed to call webhook: context deadline exceeded' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a call failure: without the API server\'s head', failure: { code: 500, message: 'failed calling webhook "w.example": EOF' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a call failure: on a 504', failure: { code: 504, message: 'Internal error occurred: failed calling webhook "w.example": x' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a call failure: without a code', failure: { message: 'Internal error occurred: failed calling webhook "w.example": x' }, mutating: 'uncertain', readOnly: 'requeue' },

  // A ValidatingAdmissionPolicy denial: its reason picks the code.
  { name: 'ValidatingAdmissionPolicy 422', failure: { code: 422, reason: 'Invalid', message: vap }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'ValidatingAdmissionPolicy 413', failure: { code: 413, reason: 'RequestEntityTooLarge', message: vap }, mutating: 'withdraw', readOnly: 'requeue' },
  {
    name: 'ValidatingAdmissionPolicy 413 without a binding, unnamed object',
    failure: { code: 413, message: 'jobs.batch is forbidden: ValidatingAdmissionPolicy \'no-apply\' denied request: held' },
    mutating: 'withdraw',
    readOnly: 'requeue',
  },
  { name: 'not a policy denial: a 413 body limit', failure: { code: 413, reason: 'RequestEntityTooLarge', message: 'Request entity too large: limit is 3145728' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a policy denial: the policy text further in', failure: { code: 500, message: `Internal error occurred: ${vap}` }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not a policy denial: a policy named without quotes', failure: { code: 413, message: 'forbidden: ValidatingAdmissionPolicy no-apply denied request: x' }, mutating: 'uncertain', readOnly: 'requeue' },

  // ResourceQuota admission that gave up.
  { name: '500 quota evaluation timed out', failure: { code: 500, reason: 'InternalError', message: 'Internal error occurred: resource quota evaluation timed out' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'not quota: the text with more after it', failure: { code: 500, message: 'Internal error occurred: resource quota evaluation timed out; etcd too' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not quota: on a 504', failure: { code: 504, message: 'Internal error occurred: resource quota evaluation timed out' }, mutating: 'uncertain', readOnly: 'requeue' },

  // NamespaceLifecycle: the namespace does not exist.
  { name: '404 namespace not found', failure: { code: 404, reason: 'NotFound', message: 'namespaces "gone" not found' }, mutating: 'withdraw', readOnly: 'requeue' },
  { name: 'not the namespace: a bare 404', failure: { code: 404, reason: 'NotFound' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not the namespace: another 404', failure: { code: 404, reason: 'NotFound', message: 'jobs.batch "x" not found' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'not the namespace: a 500 saying it', failure: { code: 500, message: 'namespaces "gone" not found' }, mutating: 'uncertain', readOnly: 'requeue' },

  // Answers that may follow the write.
  { name: '500 other internal error', failure: { code: 500, reason: 'InternalError', message: 'etcdserver: request timed out' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '500 storage internal error', failure: { code: 500, reason: 'InternalError', message: 'Internal error occurred: etcdserver: leader changed' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '500 ServerTimeout', failure: { code: 500, reason: 'ServerTimeout', message: 'The create operation against jobs.batch could not be completed at this time, please try again.' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '500 without a message', failure: { code: 500 }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '409 AlreadyExists', failure: { code: 409, reason: 'AlreadyExists', message: 'jobs.batch "x" already exists' }, mutating: 'uncertain', readOnly: 'retry' },
  { name: '409 without a reason', failure: { code: 409 }, mutating: 'uncertain', readOnly: 'retry' },
  { name: 'AlreadyExists reason without a code', failure: { reason: 'AlreadyExists' }, mutating: 'uncertain', readOnly: 'retry' },
  { name: '409 Conflict', failure: { code: 409, reason: 'Conflict' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '504 Timeout', failure: { code: 504, reason: 'Timeout', message: 'Timeout: request did not complete within requested timeout' }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: '503 ServiceUnavailable', failure: { code: 503 }, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'no response at all', failure: {}, mutating: 'uncertain', readOnly: 'requeue' },
  { name: 'network error', failure: { message: 'connect ECONNRESET' }, mutating: 'uncertain', readOnly: 'requeue' },
];

t.test('classifyCreate', async (t) => {
  for (const row of table) {
    t.equal(classifyCreate(row.failure, true), row.mutating, `mutating: ${row.name}`);
    t.equal(classifyCreate(row.failure, false), row.readOnly, `read-only: ${row.name}`);
  }
});

t.test('refusedBeforeStorage names the stage that refused', async (t) => {
  t.equal(refusedBeforeStorage({ code: 403 }), 'HTTP 403');
  t.equal(refusedBeforeStorage({ code: 500, message: `${deniedBy}: x` }), 'webhook denial');
  t.equal(refusedBeforeStorage({ code: 500, message: webhookDown }), 'fail-closed webhook not called');
  t.equal(refusedBeforeStorage({ code: 413, message: vap }), 'ValidatingAdmissionPolicy denial');
  t.equal(refusedBeforeStorage({ code: 404, message: 'namespaces "gone" not found' }), 'namespace does not exist');
  t.equal(refusedBeforeStorage({ code: 500, message: 'Internal error occurred: resource quota evaluation timed out' }), 'ResourceQuota evaluation timed out');
  t.equal(refusedBeforeStorage({ code: 504, message: `${deniedBy}: x`.slice(1) }), undefined, 'a near miss names none');
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
