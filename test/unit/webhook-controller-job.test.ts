// /validate/controller-write, Jobs: a create only for the persisted, undispatched claim it rebuilds to; an update
// only for the cleanup TTL on the Job a claim or retained record names. Every refusal has a case.
import type { V1Job } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { Refusal, type Operation } from '../../src/webhook/admission.js';
import { judgeControllerWrite } from '../../src/webhook/controller-write/index.js';
import { MANAGER, MANAGER_IMAGES, harness, review, type Harness } from '../harness/webhook.js';
import { EPOCH, JOB_UID, NS, OLD_EPOCH, finished, install, stored, withTtl, world, type World } from '../harness/webhook-world.js';

const ROUTE = WEBHOOK_PATHS.controllerWrite;

function jobReview(operation: Operation, job: V1Job, oldJob?: V1Job, username = MANAGER) {
  return review({
    operation,
    kind: { group: 'batch', version: 'v1', kind: 'Job' },
    resource: { group: 'batch', version: 'v1', resource: 'jobs' },
    namespace: job.metadata?.namespace,
    name: job.metadata?.name,
    object: job,
    ...(oldJob ? { oldObject: oldJob } : {}),
    userInfo: { username, groups: ['system:serviceaccounts'] },
  });
}

// The API server has assigned the UID by the time validating admission sees a create.
const submitted = (w: World): V1Job => ({ ...w.job, metadata: { ...w.job.metadata, uid: JOB_UID } });

const CLAIMS: [World['family'], string][] = [
  ['schema', 'Observe'],
  ['schema', 'Plan'],
  ['schema', 'Apply'],
  ['migration', 'History'],
  ['migration', 'Apply'],
];

async function expectRefused(t: Test, h: Harness, body: unknown, code: number, message: RegExp, name: string): Promise<void> {
  const response = await h.admit(ROUTE, body);
  t.equal(response.allowed, false, name);
  t.equal(response.status?.code, code, `${name}: ${code}`);
  t.match(response.status?.message, message, `${name}: message`);
}

t.test('the Job each persisted claim builds is admitted, and only with uncached reads', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const [family, type] of CLAIMS) {
    const w = world(family, type);
    h.reader.objects.clear();
    h.reader.reads.length = 0;
    install(h.reader, w);
    const response = await h.admit(ROUTE, jobReview('CREATE', submitted(w)));
    t.equal(response.allowed, true, `${family} ${type}: ${response.status?.message ?? ''}`);
    t.same(h.reader.reads.length, type === 'Apply' ? 2 : 1, `${family} ${type}: the owner${type === 'Apply' ? ' and its plan were' : ' was'} read`);
    const withoutUid = await h.admit(ROUTE, jobReview('CREATE', w.job));
    t.equal(withoutUid.allowed, true, `${family} ${type}: also before a UID is assigned`);
  }
});

t.test('anyone but the manager is admitted here; other rules judge them', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const w = world('schema', 'Apply');
  const tampered = structuredClone(w.job);
  tampered.spec!.template.spec!.containers[0]!.image = 'evil:latest';
  const response = await h.admit(ROUTE, jobReview('CREATE', tampered, undefined, 'alice'));
  t.equal(response.allowed, true);
  t.equal(h.reader.reads.length, 0, 'without reading anything');
});

t.test('a Job create that is not its claim’s is refused', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, World, (w: World, h: Harness) => V1Job, number, RegExp][] = [
    ['no owner reference', world('schema', 'Plan'), (w) => ({ ...submitted(w), metadata: { ...submitted(w).metadata, ownerReferences: [] } }), 403, /must have exactly one owner reference, a controller reference to a PtahSchema or PtahMigration/],
    [
      'owned by something else',
      world('schema', 'Plan'),
      (w) => ({ ...submitted(w), metadata: { ...submitted(w).metadata, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'x', uid: 'u', controller: true }] } }),
      403,
      /owned by apps\/v1 Deployment x, not by a operator\.ptah\.run\/v1alpha1 PtahSchema or PtahMigration/,
    ],
    ['the owner was re-created', world('schema', 'Plan'), (w, h) => (h.reader.put({ ...w.owner, metadata: { ...w.owner.metadata, uid: 'uid-new' } }), submitted(w)), 403, /has uid uid-new, not uid-schema-orders as the owner reference names/],
    ['the owner has no claim', world('schema', 'Plan'), (w, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: undefined } }), submitted(w)), 403, /does not match a not-yet-created active operation: PtahSchema orders has no claim/],
    [
      'the claim reserves another Job',
      world('schema', 'Plan'),
      (w, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: { ...w.claim, jobName: 'ptah-plan-orders-0000000000000000' } } }), submitted(w)),
      403,
      /the claim of PtahSchema orders reserves Job ptah-plan-orders-0000000000000000/,
    ],
    [
      'the claim already recorded its Job (no second create)',
      world('migration', 'Apply'),
      (w, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: { ...w.claim, jobUID: 'uid-earlier' } } }), submitted(w)),
      403,
      /the claim already recorded Job UID uid-earlier/,
    ],
    ['the owner records no execution binding', world('schema', 'Observe'), (w, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, executionBinding: undefined } }), submitted(w)), 403, /records no execution binding/],
    [
      'the claim was made under an epoch no longer in force',
      world('schema', 'Plan', OLD_EPOCH),
      (w) => submitted(w),
      403,
      /outside its schema operation claim: the claim was made under an execution epoch that is no longer in force/,
    ],
    [
      'the runner image was swapped',
      world('schema', 'Apply'),
      (w) => {
        const job = submitted(w);
        job.spec!.template.spec!.containers[0]!.image = 'registry.example/evil@sha256:' + 'e'.repeat(64);
        return job;
      },
      403,
      /outside its schema operation claim: the Job's spec is not the one its claim builds \(first at spec\.template\.spec\.containers/,
    ],
    [
      'the runner image and the image it records were swapped together',
      world('migration', 'Apply'),
      (w) => {
        const job = submitted(w);
        const evil = 'registry.example/evil@sha256:' + 'e'.repeat(64);
        job.spec!.template.spec!.containers[0]!.image = evil;
        job.metadata!.annotations!['operator.ptah.run/runner-image'] = evil;
        job.spec!.template.metadata!.annotations!['operator.ptah.run/runner-image'] = evil;
        return job;
      },
      403,
      // The runner image is recorded, not bound (docs/execution-binding.md): the rebuild takes the Job's own, and
      // the admission snapshot the claim persisted before the create pins the template it was built with.
      /outside its migration operation claim: the Job's Pod template is not the one the admission snapshot recorded/,
    ],
    [
      'the Job names another executor than the binding in force',
      world('schema', 'Apply'),
      (w) => {
        const job = submitted(w);
        job.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === 'PTAH_EXECUTOR_IDENTITY')!.value = 'sha256:' + 'f'.repeat(64);
        return job;
      },
      403,
      /outside its schema operation claim: the Job's spec is not the one its claim builds \(first at spec\.template\.spec\.containers/,
    ],
    [
      'an extra environment variable',
      world('schema', 'Observe'),
      (w) => {
        const job = submitted(w);
        job.spec!.template.spec!.containers[0]!.env!.push({ name: 'PGOPTIONS', value: '-c search_path=evil' });
        return job;
      },
      403,
      /the Job's spec is not the one its claim builds/,
    ],
    [
      'an extra label',
      world('migration', 'History'),
      (w) => {
        const job = submitted(w);
        job.metadata!.labels!['sneaky'] = 'yes';
        return job;
      },
      403,
      /the Job's labels are not the ones its claim builds/,
    ],
    [
      'another name than the claim reserves',
      world('schema', 'Plan'),
      (w) => ({ ...submitted(w), metadata: { ...submitted(w).metadata, name: 'ptah-plan-orders-ffffffffffffffff' } }),
      403,
      /reserves Job ptah-plan-orders-/,
    ],
    [
      'a cleanup TTL already on the create',
      world('schema', 'Plan'),
      (w) => withTtl(submitted(w)),
      403,
      /the Job's spec is not the one its claim builds \(first at spec\.ttlSecondsAfterFinished/,
    ],
    [
      'an Apply whose plan the claim does not name',
      world('schema', 'Apply'),
      (w, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: { ...w.claim, planRef: undefined } } }), submitted(w)),
      403,
      /the schema Apply claim of orders names no plan/,
    ],
    [
      'an Apply whose plan was replaced',
      world('migration', 'Apply'),
      (w, h) => (h.reader.put({ ...w.plan!, metadata: { ...w.plan!.metadata, uid: 'uid-other' } }), submitted(w)),
      403,
      /cannot rebuild the submitted Job team-a\/.*: the plan given is not the one the claim names/,
    ],
    ['an Apply whose plan is gone', world('schema', 'Apply'), (w, h) => (h.reader.objects.delete(`${w.plan!.apiVersion}/PtahSchemaPlan/${NS}/${w.plan!.metadata.name}`), submitted(w)), 404, /^PtahSchemaPlan team-a\/ptah-plan-0123456789abcdef01234567 not found$/],
    ['the owner is gone', world('schema', 'Observe'), (w, h) => (h.reader.objects.clear(), submitted(w)), 404, /^PtahSchema team-a\/orders not found$/],
    [
      'the owner cannot be read (fail closed)',
      world('migration', 'History'),
      (w, h) => (h.reader.fail({ apiVersion: w.owner.apiVersion, kind: 'PtahMigration', namespace: NS, name: 'orders' }, 503, 'etcd leader changed'), submitted(w)),
      500,
      /could not read PtahMigration team-a\/orders from the API server \(HTTP 503: etcd leader changed\)/,
    ],
    [
      'reading the plan is forbidden',
      world('migration', 'Apply'),
      (w, h) => (h.reader.fail({ apiVersion: w.plan!.apiVersion, kind: 'PtahMigrationPlan', namespace: NS, name: w.plan!.metadata.name }, 403, 'rbac'), submitted(w)),
      403,
      /reading PtahMigrationPlan team-a\/ptah-mplan-.* is forbidden to the webhook/,
    ],
  ];
  for (const [name, w, arrange, code, message] of cases) {
    h.reader.objects.clear();
    h.reader.failures.clear();
    install(h.reader, w);
    const job = arrange(w, h);
    await expectRefused(t, h, jobReview('CREATE', job), code, message, name);
  }
});

/** The stored Job of a dispatched claim: the owner's claim has recorded its UID. */
function dispatched(w: World, h: Harness): V1Job {
  w.owner.status.activeOperation = { ...w.claim, jobUID: JOB_UID, ...(w.type === 'Apply' ? { dispatchStarted: true } : {}) };
  install(h.reader, w);
  return finished(stored(w.job));
}

t.test('the cleanup TTL on the claim’s Job is admitted', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const [family, type] of CLAIMS) {
    const w = world(family, type);
    h.reader.objects.clear();
    const old = dispatched(w, h);
    const response = await h.admit(ROUTE, jobReview('UPDATE', withTtl(old), old));
    t.equal(response.allowed, true, `${family} ${type}: ${response.status?.message ?? ''}`);
  }
});

t.test('the cleanup TTL on a Job only a retained record names', async (t) => {
  const h = await harness();
  t.teardown(h.close);

  const w = world('schema', 'Apply');
  const old = finished(stored(w.job));
  const claim = w.claim as Record<string, unknown>;
  w.owner.status.activeOperation = undefined;
  w.owner.status.pendingObservation = {
    outcome: 'OutcomeUnknown',
    applyOperationID: w.claim.id,
    applyJobName: w.claim.jobName,
    applyJobUID: JOB_UID,
    applyGeneration: 3,
    admissionSnapshot: claim.admissionSnapshot,
    plan: w.owner.status.plan,
    executionBindingID: EPOCH,
    recordedAt: '2030-01-01T00:20:00Z',
  };
  install(h.reader, w);
  t.equal((await h.admit(ROUTE, jobReview('UPDATE', withTtl(old), old))).allowed, true, 'an Apply awaiting its proof, named by status.pendingObservation');

  const other = stored(w.job, 'uid-other-instance');
  await expectRefused(t, h, jobReview('UPDATE', withTtl(other), other), 403, /\(uid uid-other-instance\) is named by no claim or retained record of PtahSchema orders/, 'another instance under the same name');

  // An execution-binding rotation retired the epoch the claim was made under.
  const r = world('schema', 'Plan', OLD_EPOCH);
  const retiredOld = finished(stored(r.job));
  r.owner.status.activeOperation = { ...r.claim, jobUID: JOB_UID };
  r.owner.status.pendingBindingRetirement = { retiredEpoch: OLD_EPOCH, job: { operation: 'Plan', name: r.claim.jobName, uid: JOB_UID } };
  h.reader.objects.clear();
  install(h.reader, r);
  t.equal((await h.admit(ROUTE, jobReview('UPDATE', withTtl(retiredOld), retiredOld))).allowed, true, 'a retired claim’s Job, named by pendingBindingRetirement');

  r.owner.status.pendingBindingRetirement = { retiredEpoch: OLD_EPOCH };
  install(h.reader, r);
  await expectRefused(t, h, jobReview('UPDATE', withTtl(retiredOld), retiredOld), 403, /neither in force on PtahSchema orders nor the retired epoch its pendingBindingRetirement names for this Job/, 'a retirement record that names no Job');

  r.owner.status.pendingBindingRetirement = undefined;
  install(h.reader, r);
  await expectRefused(t, h, jobReview('UPDATE', withTtl(retiredOld), retiredOld), 403, /claimed under execution epoch v1-b+, which is neither in force/, 'an old epoch nothing names');
});

t.test('every other Job update is refused', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, (w: World, old: V1Job, h: Harness) => [V1Job, V1Job], number, RegExp][] = [
    ['a TTL other than 300', (_w, old) => [withTtl(old, 60), old], 403, /may only set ttlSecondsAfterFinished from unset to 300/],
    ['a TTL that was already set', (_w, old) => [withTtl(old), withTtl(old)], 403, /may only set ttlSecondsAfterFinished from unset to 300/],
    [
      'the TTL and a label',
      (_w, old) => {
        const next = withTtl(old);
        next.metadata!.labels!['x'] = 'y';
        return [next, old];
      },
      403,
      /this update is not that/,
    ],
    [
      'the TTL and the Pod template',
      (_w, old) => {
        const next = withTtl(old);
        next.spec!.template.spec!.containers[0]!.args = ['--operation', 'apply'];
        return [next, old];
      },
      403,
      /this update is not that/,
    ],
    ['a Job no record names', (w, old, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: undefined } }), [withTtl(old), old]), 403, /is named by no claim or retained record/],
    ['a claim that has not recorded the Job', (w, old, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: w.claim } }), [withTtl(old), old]), 403, /is named by no claim or retained record/],
    [
      'a Job whose labels drifted from its claim',
      (w, old, h) => {
        const o = structuredClone(old);
        o.metadata!.labels!['operator.ptah.run/operation'] = 'apply';
        h.reader.put(w.owner);
        return [withTtl(o), o];
      },
      403,
      /is outside the claim that names it: the Job's labels are not its claim's/,
    ],
    ['the owner cannot be read (fail closed)', (w, old, h) => (h.reader.fail({ apiVersion: w.owner.apiVersion, kind: 'PtahSchema', namespace: NS, name: 'orders' }, undefined, 'socket hang up'), [withTtl(old), old]), 500, /could not read PtahSchema team-a\/orders from the API server \(no response: socket hang up\)/],
  ];
  for (const [name, arrange, code, message] of cases) {
    const w = world('schema', 'Plan');
    h.reader.objects.clear();
    h.reader.failures.clear();
    const old = dispatched(w, h);
    const [next, before] = arrange(w, old, h);
    await expectRefused(t, h, jobReview('UPDATE', next, before), code, message, name);
  }
});

t.test('framing: subresources, other operations and kinds, mismatched objects', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const w = world('schema', 'Plan');
  install(h.reader, w);
  const base = jobReview('CREATE', submitted(w));
  const cases: [string, unknown, number, RegExp][] = [
    ['a status write', { ...base, request: { ...base.request, subResource: 'status' } }, 403, /writes to subresources are not permitted here \(batch\/v1 jobs\/status\)/],
    ['a Job delete', { ...base, request: { ...base.request, operation: 'DELETE' } }, 403, /the DELETE of batch\/v1 jobs team-a\/.* is outside the operator manager's write contract/],
    [
      'a Secret',
      review({ operation: 'CREATE', kind: { group: '', version: 'v1', kind: 'Secret' }, resource: { group: '', version: 'v1', resource: 'secrets' }, namespace: NS, name: 's', object: {}, userInfo: { username: MANAGER } }),
      403,
      /the CREATE of core\/v1 secrets team-a\/s is outside the operator manager's write contract/,
    ],
    [
      'a PtahMigrationPlan',
      review({ operation: 'CREATE', kind: { group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahMigrationPlan' }, resource: { group: 'operator.ptah.run', version: 'v1alpha1', resource: 'ptahmigrationplans' }, namespace: NS, name: 'p', object: {}, userInfo: { username: MANAGER } }),
      403,
      /ptahmigrationplans .* is outside the operator manager's write contract/,
    ],
    ['a kind that does not match the resource', { ...base, request: { ...base.request, kind: { group: 'batch', version: 'v1', kind: 'CronJob' } } }, 400, /kind CronJob does not match its resource jobs/],
    ['a converted request', { ...base, request: { ...base.request, requestKind: { group: 'batch', version: 'v1beta1', kind: 'Job' } } }, 400, /converted or equivalent kind requests are not judged/],
    ['an object in another namespace', { ...base, request: { ...base.request, namespace: 'team-b' } }, 400, /namespace and name do not match the admission request's team-b\//],
    ['an object under another name', { ...base, request: { ...base.request, name: 'other' } }, 400, /do not match the admission request's team-a\/other/],
    ['no object', { ...base, request: { ...base.request, object: undefined } }, 400, /carries no object/],
    ['an object of another kind', { ...base, request: { ...base.request, object: { ...submitted(w), kind: 'Pod' } } }, 400, /the object is batch\/v1 Pod, not batch\/v1 Job/],
    ['an update without oldObject', jobReview('UPDATE', withTtl(stored(w.job))), 400, /carries no oldObject/],
  ];
  for (const [name, body, code, message] of cases) await expectRefused(t, h, body, code, message, name);
});

t.test('a Job nested past what plain JSON comparison takes is a 400 from the judge, behind the envelope check', async (t) => {
  // The envelope check refuses this before any judge runs; the judge still turns toPlain's typed refusal into a
  // 400, so such a value that reaches it some other way is not a RangeError and a 500.
  const h = await harness();
  t.teardown(h.close);
  const w = world('schema', 'Observe');
  install(h.reader, w);
  const job = submitted(w);
  const deep = JSON.parse(`${'['.repeat(5000)}${']'.repeat(5000)}`) as unknown;
  (job.spec!.template.metadata!.annotations as Record<string, unknown>).deep = deep;
  const body = jobReview('CREATE', job);
  const thrown = await judgeControllerWrite(body.request, { reader: h.reader, managerUsername: MANAGER, manager: MANAGER_IMAGES, now: () => new Date(), log: undefined as never }).catch((e: unknown) => e);
  t.ok(thrown instanceof Refusal, 'refused');
  t.match((thrown as Refusal).verdict, { code: 400, message: /the CREATE of team-a\/.* holds a value with no plain JSON form: \$: cannot be copied as plain JSON: Maximum call stack size exceeded/ });
});
