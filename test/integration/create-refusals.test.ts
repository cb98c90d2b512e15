// Every refusal before storage of a Job create, as the real API server answers it, withdraws a mutating claim's
// marker, and only those do (issue #8): a webhook denial with the codes the manager's own webhook answers (400,
// 404, 500), a fail-closed webhook that cannot be called, a ValidatingAdmissionPolicy denial (whatever the code
// its reason picks), an exhausted ResourceQuota, a validation refusal, RBAC and a namespace that does not exist;
// an AlreadyExists and a create that got no answer stay uncertain. Then end to end: an Apply refused by admission
// keeps its claim and its spent approval, records nothing unresolved, and is created exactly once, by the next
// pass after the refusal lifts, applying each migration once under that claim.
import t, { type Test } from 'tap';
import type { PtahMigration, PtahMigrationApproval } from '../../src/shared/api/migration-kinds.js';
import { ApiError, refOf, restClient, type KubeClient } from '../../src/shared/kube-client.js';
import { classifyCreate, failureOf, type CreateFailure, type CreateVerdict } from '../../src/shared/lifecycle/classify.js';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { applyManifestFile } from '../../tools/stack/manifests.js';
import { denyingPolicy, exhaustedJobQuota, jobNamed, testWebhook, unreachableWebhook, type Labels } from './create-refusals-world.js';
import { jobsOf, migrationWorld, type MigrationWorld } from './migration-world.js';

const cluster = sharedCluster();
const CASE = 'create-refusals.test/case';
const caseLabels = (name: string): Labels => ({ [CASE]: name });

interface Attempt {
  failure: CreateFailure;
  /** The Job under the name after the create failed, as an uncached GET found it. */
  stored: boolean;
}

/** Creates the Job with `client` (the manager's, as the controller does); it must fail. */
async function failedCreate(client: KubeClient, reader: KubeClient, job: ReturnType<typeof jobNamed>): Promise<Attempt> {
  const error = await client.create(job).then(() => undefined, (e: unknown) => e);
  if (!(error instanceof ApiError)) throw new Error(`the create of Job ${job.metadata?.name} was ${error === undefined ? 'admitted' : `not answered as an ApiError: ${String(error)}`}`);
  return { failure: failureOf(error), stored: (await reader.tryGet(refOf(job))) !== undefined };
}

interface Expected {
  code: number;
  stored: boolean;
  mutating: CreateVerdict;
  readOnly: CreateVerdict;
}

function expectVerdicts(t: Test, what: string, attempt: Attempt, expected: Expected): void {
  const { failure } = attempt;
  t.comment(`${what}: ${failure.code} ${failure.reason ?? ''} ${failure.message ?? ''}`);
  t.equal(failure.code, expected.code, `${what}: the API server answers ${expected.code}`);
  t.equal(attempt.stored, expected.stored, `${what}: ${expected.stored ? 'a Job stands under the name' : 'nothing was stored under the name'}`);
  t.equal(classifyCreate(failure, true), expected.mutating, `${what}: a mutating claim's verdict (${failure.message})`);
  t.equal(classifyCreate(failure, false), expected.readOnly, `${what}: a read-only claim's verdict`);
}

/** A refusal before storage: nothing under the name, a mutating claim withdraws, a read-only one comes back later. */
const withdrawn = (code: number): Expected => ({ code, stored: false, mutating: 'withdraw', readOnly: 'requeue' });

t.test('each refusal before storage that the API server gives a Job create withdraws; AlreadyExists and no answer stay uncertain', async (t) => {
  const admin = await restClient(cluster.kubeConfig('admin'));
  const manager = await restClient(cluster.kubeConfig('manager'));
  await applyManifestFile(cluster.kubeConfig('admin'), 'manifests/rbac.yaml');
  const ns = await testNamespace(t);
  const job = (name: string, labels: Labels = caseLabels(name)) => jobNamed(ns, name, labels);

  const webhook = await testWebhook(t, ns, caseLabels('webhook'), { allow: false, code: 400, message: 'probe' });
  // The codes the manager's own controller-write webhook denies with (src/webhook/reads.ts), each passed through.
  for (const [code, reason] of [[400, 'BadRequest'], [404, 'NotFound'], [500, 'InternalError']] as const) {
    webhook.answer = { allow: false, code, reason, message: `refused with ${code} as a read the webhook could not make` };
    const attempt = await failedCreate(manager, admin, job(`webhook-${code}`, caseLabels('webhook')));
    expectVerdicts(t, `webhook denial ${code}`, attempt, withdrawn(code));
    t.match(attempt.failure.message, `admission webhook "${webhook.name}" denied the request`, `webhook denial ${code}: the API server names the webhook`);
  }

  const unreachable = await unreachableWebhook(t, ns, caseLabels('unreachable'));
  const down = await failedCreate(manager, admin, job('unreachable'));
  expectVerdicts(t, 'fail-closed webhook not called', down, withdrawn(500));
  t.match(down.failure.message, `failed calling webhook "${unreachable}"`);

  for (const [reason, code] of [[undefined, 422], ['RequestEntityTooLarge', 413]] as const) {
    const labels = caseLabels(`policy-${code}`);
    const { policy, lift } = await denyingPolicy(t, ns, labels, { message: 'Jobs here are held by the test', reason });
    const attempt = await failedCreate(manager, admin, job(`policy-${code}`, labels));
    expectVerdicts(t, `ValidatingAdmissionPolicy denial ${code}`, attempt, withdrawn(code));
    t.match(attempt.failure.message, `ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request`);
    await lift();
  }

  const invalid = job('invalid');
  invalid.spec!.backoffLimit = -1;
  expectVerdicts(t, 'validation refusal', await failedCreate(manager, admin, invalid), withdrawn(422));

  const approver = await restClient(cluster.kubeConfig('approver'));
  expectVerdicts(t, 'authorization refusal', await failedCreate(approver, admin, job('unauthorized')), withdrawn(403));

  const gone = `${ns}-gone`;
  expectVerdicts(t, 'namespace does not exist', await failedCreate(manager, admin, jobNamed(gone, 'elsewhere')), withdrawn(404));

  // Uncertain: the same name created twice. The second answer cannot tell this create from an earlier one of ours.
  const twice = job('twice');
  await manager.create(twice);
  expectVerdicts(t, 'AlreadyExists', await failedCreate(manager, admin, twice), { code: 409, stored: true, mutating: 'uncertain', readOnly: 'retry' });

  // Uncertain: no answer at all. The client gave up while admission was still deciding.
  webhook.answer = { allow: true, delayMs: 3_000 };
  const impatient = await restClient(cluster.kubeConfig('manager'), { timeoutMs: 1_000 });
  const unanswered = await impatient.create(job('unanswered', caseLabels('webhook'))).then(() => undefined, (e: unknown) => e);
  t.ok(unanswered instanceof ApiError && unanswered.code === undefined, `no answer came back (${String(unanswered)})`);
  t.equal(classifyCreate(failureOf(unanswered), true), 'uncertain', 'no answer: a mutating claim is uncertain');

  // In a namespace of its own, since a quota counts every Job in it.
  const quotaNs = await testNamespace({ name: `${t.name} quota`, teardown: (fn) => t.teardown(fn) });
  await exhaustedJobQuota(t, quotaNs);
  const quota = await failedCreate(manager, admin, jobNamed(quotaNs, 'over-quota'));
  expectVerdicts(t, 'ResourceQuota exceeded', quota, withdrawn(403));
  t.match(quota.failure.message, 'exceeded quota');
});

// --- End to end: the migration family's Apply refused by admission, then created once. ---

const FILES = {
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY);\n',
  '0002_create_orders.up.sql': 'CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id));\n',
};
const APPLY = { 'operator.ptah.run/operation': 'apply' };

/** A refusal of Apply Job creates, put in force by a `Refusal`. */
interface InForce {
  lift(): Promise<void>;
  /** How many creates of the Job `name` it refused, when it can tell. */
  refusedCreates?(name: string): number;
}
type Refusal = (t: Test, w: MigrationWorld) => Promise<InForce>;

/** How many times the Apply claim `id` withdrew its dispatch marker, over the stored states in order. */
function withdrawals(states: readonly PtahMigration[], id: string): number {
  let marked = false;
  let count = 0;
  for (const m of states) {
    const claim = m.status?.activeOperation;
    const now = claim?.id === id && claim.dispatchStarted === true;
    if (marked && !now && claim?.id === id) count += 1;
    marked = now;
  }
  return count;
}

async function refusedThenCreatedOnce(t: Test, refuse: Refusal): Promise<void> {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('create_refused');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'OnApproval' });
  await w.waitFor('orders', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  const refusal = await refuse(t, w);
  const states = await w.watchMigration('orders');
  const approval = await w.approve('orders');

  // Two withdrawals: the first refused pass withdrew its marker, and the next made the create again and was refused.
  const held = await w.waitFor('orders', 'an Apply refused twice (or a run recorded unresolved)', (m) => {
    const claim = m.status?.activeOperation;
    return m.status?.unresolvedRun || (claim?.type === 'Apply' && withdrawals(states, claim.id) >= 2) ? m : undefined;
  });
  // A run recorded unresolved is the defect this proves absent; nothing after it could pass.
  if (!t.notOk(held.status?.unresolvedRun, `no unresolved run was recorded (${JSON.stringify(held.status?.unresolvedRun)})`)) return;
  const claim = held.status!.activeOperation!;
  t.equal(claim.type, 'Apply', 'the Apply claim stands');
  t.equal(claim.approvalRef?.uid, approval.metadata.uid, 'under the approval that was given');
  const spent = await w.admin.get<PtahMigrationApproval>(w.ref('PtahMigrationApproval', approval.metadata.name!));
  const consumed = spent.status?.conditions?.find((c) => c.type === 'Consumed');
  t.match(consumed, { status: 'True', reason: 'DispatchCommitted' }, 'the approval is spent');
  t.match(consumed?.message, claim.id, 'by this claim');
  const still = (await w.get('orders')).status;
  t.equal(still?.activeOperation?.id, claim.id, 'still the same claim');
  t.notOk(still?.activeOperation?.dispatchStarted, 'its dispatch marker is withdrawn');
  t.notOk(still?.activeOperation?.jobUID, 'no Job UID is recorded');
  t.notOk(still?.unresolvedRun, 'nothing is recorded unresolved');
  t.equal(jobsOf(w, 'apply').length, 0, 'no Apply Job was ever stored');
  if (refusal.refusedCreates) t.ok(refusal.refusedCreates(claim.jobName) >= 2, `the refusal turned away each create (${refusal.refusedCreates(claim.jobName)})`);

  await refusal.lift();
  const done = await w.waitFor('orders', 'applied and in sync', (m) =>
    (m.status?.phase === 'InSync' && !m.status.activeOperation && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
  t.equal(done.status?.lastRun?.operationID, claim.id, 'the run recorded is the claim that was refused');
  const applies = jobsOf(w, 'apply');
  t.equal(applies.length, 1, 'exactly one Apply Job was ever created');
  t.equal(applies[0]?.metadata?.name, claim.jobName, 'under the name the claim reserved');
  t.same((await w.history(db)).map((r) => [r.version, r.operationId]), [['0001', claim.id], ['0002', claim.id]], 'each migration applied once, under the claim\'s operation ID');
  const applyClaims = new Set(states.map((m) => m.status?.activeOperation).filter((c) => c?.type === 'Apply').map((c) => c?.id));
  t.same([...applyClaims], [claim.id], 'every stored state held the one Apply claim');
  t.notOk(states.some((m) => m.status?.unresolvedRun), 'no stored state ever held an unresolved run');
}

t.test('an Apply whose create a webhook denies with 500 keeps its claim and its spent approval, and is created once after the webhook admits it', async (t) => {
  await refusedThenCreatedOnce(t, async (t, w) => {
    // As the manager's own webhook answers a read it could not make (src/webhook/reads.ts).
    const webhook = await testWebhook(t, w.ns, APPLY, { allow: false, code: 500, message: 'could not read PtahMigration from the API server (HTTP 503); refusing until it can be read' });
    return {
      async lift() {
        webhook.answer = { allow: true };
      },
      refusedCreates: (name) => webhook.received.filter((r) => r.name === name && !r.dryRun).length,
    };
  });
});

t.test('an Apply whose create an exhausted ResourceQuota refuses keeps its claim and its spent approval, and is created once after the quota is lifted', async (t) => {
  await refusedThenCreatedOnce(t, (t, w) => exhaustedJobQuota(t, w.ns));
});
