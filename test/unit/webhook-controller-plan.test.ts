// /validate/controller-write, the plan store: plans and chunks only from the harvested Plan operation, projection
// ConfigMaps only for an undispatched Apply of the current plan and only with the plan's own bytes.
import type { V1ConfigMap } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { MANAGER, harness, review, type Harness, type StoredObject } from '../harness/webhook.js';
import { API, JOB_UID, NS, OLD_EPOCH, chunkObjects, d, finished, install, projections, stored, world, type World } from '../harness/webhook-world.js';

const ROUTE = WEBHOOK_PATHS.controllerWrite;
const GROUP = 'operator.ptah.run';

async function expectRefused(t: Test, h: Harness, body: unknown, code: number, message: RegExp, name: string): Promise<void> {
  const response = await h.admit(ROUTE, body);
  t.equal(response.allowed, false, name);
  t.equal(response.status?.code, code, `${name}: ${code}`);
  t.match(response.status?.message, message, `${name}: message`);
}

function configMapReview(configMap: V1ConfigMap, username = MANAGER) {
  return review({
    operation: 'CREATE',
    kind: { group: '', version: 'v1', kind: 'ConfigMap' },
    resource: { group: '', version: 'v1', resource: 'configmaps' },
    namespace: configMap.metadata?.namespace,
    name: configMap.metadata?.name,
    object: configMap,
    userInfo: { username },
  });
}

function ptahReview(kind: 'PtahSchemaPlan' | 'PtahSchemaPlanChunk', object: StoredObject) {
  return review({
    operation: 'CREATE',
    kind: { group: GROUP, version: 'v1alpha1', kind },
    resource: { group: GROUP, version: 'v1alpha1', resource: kind === 'PtahSchemaPlan' ? 'ptahschemaplans' : 'ptahschemaplanchunks' },
    namespace: object.metadata.namespace,
    name: object.metadata.name,
    object,
    userInfo: { username: MANAGER },
  });
}

/** A schema whose Apply claim is persisted but not dispatched, its current plan, and the plan's chunks. */
function applyWorld(h: Harness): World {
  const w = world('schema', 'Apply');
  h.reader.objects.clear();
  h.reader.failures.clear();
  install(h.reader, w);
  for (const chunk of chunkObjects(w.plan!)) h.reader.put(chunk);
  return w;
}

const OWNER_KEY = { apiVersion: API, kind: 'PtahSchema', namespace: NS, name: 'orders' };

t.test('projections of the current plan for an undispatched Apply are admitted', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const w = applyWorld(h);
  const wanted = projections(w.plan!);
  t.equal(wanted.length, 2, 'the fixture plan has two chunks');
  for (const configMap of wanted) {
    const response = await h.admit(ROUTE, configMapReview(configMap));
    t.equal(response.allowed, true, `${configMap.metadata?.name}: ${response.status?.message ?? ''}`);
  }
});

t.test('a projection is refused unless it is exactly the plan’s chunk, before the dispatch boundary', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const setClaim = (w: World, h: Harness, claim: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}) =>
    h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: claim, ...extra } });
  const cases: [string, (w: World, h: Harness, cm: V1ConfigMap) => V1ConfigMap, number, RegExp][] = [
    ['after dispatchStarted', (w, h, cm) => (setClaim(w, h, { ...w.claim, dispatchStarted: true }), cm), 403, /does not belong to an Apply that can still be dispatched: the active Apply has already crossed its dispatch boundary/],
    ['after the Job UID is recorded', (w, h, cm) => (setClaim(w, h, { ...w.claim, jobUID: JOB_UID }), cm), 403, /already crossed its dispatch boundary/],
    ['under a Plan claim', (w, h, cm) => (setClaim(w, h, { ...w.claim, type: 'Plan' }), cm), 403, /PtahSchema orders's claim is a Plan/],
    ['without a claim', (w, h, cm) => (setClaim(w, h, undefined), cm), 403, /PtahSchema orders's claim is absent/],
    ['for a plan that is no longer current', (w, h, cm) => (setClaim(w, h, w.claim, { plan: { name: 'ptah-plan-ffffffffffffffffffffffff', uid: 'uid-newer' } }), cm), 403, /is not the schema's current plan/],
    ['for an Apply that runs another plan', (w, h, cm) => (setClaim(w, h, { ...w.claim, planRef: { name: 'ptah-plan-ffffffffffffffffffffffff', uid: 'x' } }), cm), 403, /the Apply claim runs another plan/],
    [
      'holding another chunk’s bytes',
      (w, _h, cm) => ({ ...cm, binaryData: projections(w.plan!)[1]!.binaryData }),
      403,
      /does not match its immutable plan chunk: projection .* holds other bytes than the plan's chunk/,
    ],
    ['not immutable', (_w, _h, cm) => ({ ...cm, immutable: false }), 403, /is not immutable/],
    ['with text data besides', (_w, _h, cm) => ({ ...cm, data: { extra: 'x' } }), 403, /holds other bytes/],
    ['with another label', (_w, _h, cm) => ({ ...cm, metadata: { ...cm.metadata, labels: { ...cm.metadata!.labels, extra: 'x' } } }), 403, /carries other labels/],
    ['with an annotation', (_w, _h, cm) => ({ ...cm, metadata: { ...cm.metadata, annotations: { note: 'x' } } }), 403, /a projection carries no annotations or finalizers/],
    ['under a name the plan does not list', (_w, _h, cm) => ({ ...cm, metadata: { ...cm.metadata, name: 'ptah-plan-0123456789abcdef01234567-007' } }), 403, /is not a chunk PtahSchemaPlan ptah-plan-0123456789abcdef01234567 lists/],
    [
      'when the stored chunks do not reconstruct the content digest',
      (w, h, cm) => {
        const chunks = chunkObjects(w.plan!, Buffer.alloc(600 * 1024, 7));
        for (const c of chunks) h.reader.put(c);
        return cm;
      },
      403,
      /the plan's stored chunks do not reconstruct its content digest: the chunks do not hash to the plan content digest/,
    ],
    ['when a chunk is missing', (w, h, cm) => (h.reader.objects.delete(`${API}/PtahSchemaPlanChunk/${NS}/${(w.plan!.spec.chunks as string[])[1]}`), cm), 404, /^PtahSchemaPlanChunk team-a\/ptah-plan-0123456789abcdef01234567-001 not found$/],
    ['when the plan was re-created', (w, h, cm) => (h.reader.put({ ...w.plan!, metadata: { ...w.plan!.metadata, uid: 'uid-new' } }), cm), 403, /PtahSchemaPlan team-a\/ptah-plan-.* has uid uid-new, not uid-plan/],
    ['when the schema was re-created', (w, h, cm) => (h.reader.put({ ...w.owner, metadata: { ...w.owner.metadata, uid: 'uid-new' } }), cm), 403, /is not the schema PtahSchemaPlan .* was computed for/],
    ['when the schema cannot be read (fail closed)', (_w, h, cm) => (h.reader.fail(OWNER_KEY, 500, 'boom'), cm), 500, /could not read PtahSchema team-a\/orders from the API server \(HTTP 500: boom\)/],
    ['when the plan cannot be read (fail closed)', (w, h, cm) => (h.reader.fail({ apiVersion: API, kind: 'PtahSchemaPlan', namespace: NS, name: w.plan!.metadata.name }, undefined, 'timeout'), cm), 500, /could not read PtahSchemaPlan/],
    [
      'a ConfigMap that is no projection',
      (_w, _h, cm) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: NS }, data: { a: 'b' } }),
      403,
      /is not a plan projection \(no operator\.ptah\.run\/plan label, no PtahSchemaPlan owner\)/,
    ],
    [
      'a labelled ConfigMap without its plan owner',
      (_w, _h, cm) => ({ ...cm, metadata: { ...cm.metadata, ownerReferences: [] } }),
      403,
      /must have exactly one owner reference, a controller reference to a PtahSchemaPlan/,
    ],
  ];
  for (const [name, arrange, code, message] of cases) {
    const w = applyWorld(h);
    const configMap = arrange(w, h, projections(w.plan!)[0]!);
    await expectRefused(t, h, configMapReview(configMap), code, message, name);
  }
});

/** A schema whose Plan claim dispatched a Job that finished, and the plan that Job produced. */
function planWorld(h: Harness, jobState: 'Complete' | 'Failed' | 'running' = 'Complete') {
  const w = world('schema', 'Plan');
  w.owner.status.activeOperation = { ...w.claim, jobUID: JOB_UID };
  h.reader.objects.clear();
  h.reader.failures.clear();
  install(h.reader, w);
  const job = stored(w.job);
  h.reader.put((jobState === 'running' ? job : finished(job, jobState)) as unknown as StoredObject);
  const apply = world('schema', 'Apply');
  const plan = structuredClone(apply.plan!);
  plan.spec.producedBy = { operationID: w.claim.id, jobName: w.claim.jobName };
  return { w, plan };
}

t.test('a plan published by its harvested Plan operation is admitted, and so are its chunks', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const state of ['Complete', 'Failed'] as const) {
    const { plan } = planWorld(h, state);
    const response = await h.admit(ROUTE, ptahReview('PtahSchemaPlan', plan));
    t.equal(response.allowed, true, `Job ${state}: ${response.status?.message ?? ''}`);
    h.reader.put(plan);
    for (const chunk of chunkObjects(plan)) {
      const chunkResponse = await h.admit(ROUTE, ptahReview('PtahSchemaPlanChunk', chunk));
      t.equal(chunkResponse.allowed, true, `Job ${state}: chunk ${chunk.metadata.name}: ${chunkResponse.status?.message ?? ''}`);
    }
  }
});

t.test('a plan is refused unless the claim is the Plan that produced it and its Job finished', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  type Arrange = (ctx: ReturnType<typeof planWorld>, h: Harness) => StoredObject & { spec: Record<string, unknown> };
  const cases: [string, 'Complete' | 'running', Arrange, number, RegExp][] = [
    ['while the Plan Job still runs', 'running', ({ plan }) => plan, 403, /does not come from the harvested Plan operation of PtahSchema team-a\/orders: Plan Job .* has not finished/],
    ['under an Observe claim', 'Complete', ({ w, plan }, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: { ...w.claim, type: 'Observe', jobUID: JOB_UID } } }), plan), 403, /its claim is a Observe/],
    ['without a claim', 'Complete', ({ w, plan }, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: undefined } }), plan), 403, /its claim is absent/],
    ['before the claim recorded its Job', 'Complete', ({ w, plan }, h) => (h.reader.put({ ...w.owner, status: { ...w.owner.status, activeOperation: w.claim } }), plan), 403, /the claim has not recorded its Job's UID/],
    ['produced by another operation', 'Complete', ({ plan }) => ({ ...plan, spec: { ...plan.spec, producedBy: { operationID: d('other'), jobName: 'ptah-plan-orders-1111111111111111' } } }), 403, /the plan names operation sha256:.* \(Job ptah-plan-orders-1111111111111111\), the claim is/],
    ['computed under another epoch', 'Complete', ({ plan }) => ({ ...plan, spec: { ...plan.spec, executionBindingID: OLD_EPOCH } }), 403, /computed under another execution epoch than the claim/],
    [
      'from another instance of the Job',
      'Complete',
      ({ w, plan }, h) => (h.reader.put(finished(stored(w.job, 'uid-other')) as unknown as StoredObject), plan),
      403,
      /Job ptah-plan-orders-.* is not the instance the claim recorded/,
    ],
    [
      'from a Job that drifted from its claim',
      'Complete',
      ({ w, plan }, h) => {
        const job = finished(stored(w.job));
        job.metadata!.annotations!['operator.ptah.run/operation-id'] = d('other');
        h.reader.put(job as unknown as StoredObject);
        return plan;
      },
      403,
      /Plan Job .* is outside its claim: the Job's annotations are not its claim's/,
    ],
    ['naming another schema', 'Complete', ({ plan }) => ({ ...plan, spec: { ...plan.spec, schemaRef: { name: 'orders', uid: 'uid-other' } } }), 403, /spec\.schemaRef does not name its owner orders/],
    ['owned by something else', 'Complete', ({ plan }) => ({ ...plan, metadata: { ...plan.metadata, ownerReferences: [] } }), 403, /must have exactly one owner reference, a controller reference to a PtahSchema/],
    ['when the Job is gone', 'Complete', ({ w, plan }, h) => (h.reader.objects.delete(`batch/v1/Job/${NS}/${w.claim.jobName}`), plan), 404, /^Job team-a\/ptah-plan-orders-.* not found$/],
    ['when the Job cannot be read (fail closed)', 'Complete', ({ w, plan }, h) => (h.reader.fail({ apiVersion: 'batch/v1', kind: 'Job', namespace: NS, name: w.claim.jobName }, 503, 'x'), plan), 500, /could not read Job team-a\/ptah-plan-orders-/],
    ['when the schema cannot be read (fail closed)', 'Complete', ({ plan }, h) => (h.reader.fail(OWNER_KEY, 429, 'throttled'), plan), 500, /could not read PtahSchema team-a\/orders from the API server \(HTTP 429: throttled\)/],
  ];
  for (const [name, state, arrange, code, message] of cases) {
    const ctx = planWorld(h, state);
    const plan = arrange(ctx, h);
    await expectRefused(t, h, ptahReview('PtahSchemaPlan', plan), code, message, name);
  }
});

t.test('a chunk is refused outside its plan’s publication', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, (ctx: ReturnType<typeof planWorld>, h: Harness, chunk: StoredObject) => StoredObject, number, RegExp][] = [
    ['a name the plan does not list', (_c, _h, chunk) => ({ ...chunk, metadata: { ...chunk.metadata, name: 'ptah-plan-0123456789abcdef01234567-009' } }), 403, /is not a chunk PtahSchemaPlan ptah-plan-0123456789abcdef01234567 lists/],
    ['after the schema moved on to its Apply', (ctx, h, chunk) => (h.reader.put({ ...ctx.w.owner, status: { ...ctx.w.owner.status, activeOperation: { ...ctx.w.claim, type: 'Apply', jobUID: JOB_UID } } }), chunk), 403, /does not come from the harvested Plan operation .*: its claim is a Apply/],
    ['when its plan is gone', (ctx, h, chunk) => (h.reader.objects.delete(`${API}/PtahSchemaPlan/${NS}/${ctx.plan.metadata.name}`), chunk), 404, /^PtahSchemaPlan team-a\/ptah-plan-0123456789abcdef01234567 not found$/],
    ['owned by a re-created plan', (ctx, h, chunk) => (h.reader.put({ ...ctx.plan, metadata: { ...ctx.plan.metadata, uid: 'uid-new' } }), chunk), 403, /has uid uid-new, not uid-plan/],
  ];
  for (const [name, arrange, code, message] of cases) {
    const ctx = planWorld(h);
    h.reader.put(ctx.plan);
    const chunk = arrange(ctx, h, chunkObjects(ctx.plan)[0]!);
    await expectRefused(t, h, ptahReview('PtahSchemaPlanChunk', chunk), code, message, name);
  }
});
