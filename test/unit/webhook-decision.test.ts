// /validate/decision: the stamp must be this caller's and this request's, and what the decision names must be
// current, read uncached. Every refusal has a case; read failures refuse (404, 403, 500).
import t from 'tap';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { Refusal, type Operation, type UserInfo } from '../../src/webhook/admission.js';
import { judgeDecision } from '../../src/webhook/decision.js';
import { identityOf } from '../../src/webhook/identity.js';
import { harness, review, type Harness } from '../harness/webhook.js';
import {
  ALICE, API, DECISION_RESOURCE, DECISION_SPEC, FP, GROUP, MFP, NS, OP, decisionCreate, digestOf, installDecisionWorld, stampedFor, type DecisionKindName,
} from '../harness/webhook-world.js';

const world = (h: Harness): void => installDecisionWorld(h.reader);
type Kind = DecisionKindName;
const RESOURCE = DECISION_RESOURCE;
const BASE_SPEC = DECISION_SPEC;
const stamped = stampedFor;
const create = decisionCreate;

const valid = (kind: Kind, overrides: Record<string, unknown> = {}) => ({ ...BASE_SPEC[kind], ...stamped(kind, ALICE, 'req-1'), ...overrides });

t.test('a stamped decision naming the current state is admitted', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  world(h);
  for (const kind of Object.keys(RESOURCE) as Kind[]) {
    const response = await h.admit(WEBHOOK_PATHS.decision, create(kind, valid(kind)));
    t.equal(response.allowed, true, kind);
  }
  t.equal(h.reader.reads.length, 5, 'judged on uncached reads: schema+plan, migration+plan, migration');
});

t.test('the stamp must be present and be this caller', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  world(h);
  for (const kind of Object.keys(RESOURCE) as Kind[]) {
    const identityField = kind === 'PtahMigrationRunAcknowledgment' ? 'acknowledgedBy' : 'approver';
    const timeField = kind === 'PtahMigrationRunAcknowledgment' ? 'acknowledgedAt' : 'approvedAt';
    const cases: [string, ReturnType<typeof create>, RegExp][] = [
      ['not stamped at all', create(kind, BASE_SPEC[kind]), /was not stamped by the mutating admission webhook/],
      ['stamped for someone else', create(kind, { ...BASE_SPEC[kind], ...stamped(kind, { username: 'bob', groups: ['dba'] }, 'req-1') }), /does not match the authenticated request/],
      ['groups differ', create(kind, valid(kind, { [identityField]: { ...identityOf(ALICE), groups: ['system:masters'] } })), /does not match the authenticated request/],
      ['uid differs', create(kind, valid(kind, { [identityField]: { ...identityOf(ALICE), uid: 'u-other' } })), /does not match the authenticated request/],
      ['no request UID stamped', create(kind, valid(kind, { mutationRequestUID: '' })), /was not stamped by the mutating admission webhook/],
      ['no time', create(kind, valid(kind, { [timeField]: undefined })), new RegExp(`spec\\.${timeField} was not stamped`)],
      ['a time that is not a time', create(kind, valid(kind, { [timeField]: 'yesterday' })), new RegExp(`spec\\.${timeField} was not stamped`)],
      ['an anonymous caller', create(kind, valid(kind), { username: '' }), /no authenticated username/],
    ];
    for (const [name, body, message] of cases) {
      const response = await h.admit(WEBHOOK_PATHS.decision, body);
      t.equal(response.allowed, false, `${kind}: ${name}`);
      t.equal(response.status?.code, 403, `${kind}: ${name}: 403`);
      t.match(response.status?.message, message, `${kind}: ${name}: message`);
    }
  }
});

t.test('a schema approval must name the current plan of a waiting schema', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, (h: Harness) => void, Record<string, unknown>, RegExp][] = [
    ['no schemaRef', () => {}, { schemaRef: undefined }, /must name spec\.schemaRef by name and uid/],
    ['a planRef without uid', () => {}, { planRef: { name: 'ptah-plan-a' } }, /must name spec\.planRef by name and uid/],
    ['no fingerprint', () => {}, { planFingerprint: 'abc' }, /spec\.planFingerprint as a sha256: digest/],
    ['the schema was re-created', () => {}, { schemaRef: { name: 'orders', uid: 'uid-old' } }, /PtahSchema team-a\/orders is not the object the approval names: its uid is uid-orders, not uid-old/],
    ['the plan was replaced', () => {}, { planRef: { name: 'ptah-plan-a', uid: 'uid-old' } }, /PtahSchemaPlan team-a\/ptah-plan-a was replaced/],
    ['the fingerprint differs', () => {}, { planFingerprint: digestOf('f') }, /has fingerprint sha256:1+, not the planFingerprint sha256:f+/],
    [
      'the schema is being deleted',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahSchema', metadata: { name: 'orders', namespace: NS, uid: 'uid-orders', deletionTimestamp: '2030-01-01T00:00:00Z' }, spec: {}, status: {} }),
      {},
      /is being deleted/,
    ],
    [
      'the plan belongs to another schema',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahSchemaPlan', metadata: { name: 'ptah-plan-a', namespace: NS, uid: 'uid-plan-a' }, spec: { schemaRef: { name: 'other', uid: 'uid-other' }, fingerprint: FP } }),
      {},
      /belongs to another PtahSchema/,
    ],
    [
      'the schema has moved on to another plan',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahSchema', metadata: { name: 'orders', namespace: NS, uid: 'uid-orders' }, spec: {}, status: { plan: { name: 'ptah-plan-b', uid: 'uid-plan-b', fingerprint: FP } } }),
      {},
      /current plan is ptah-plan-b \(uid uid-plan-b\), not ptah-plan-a/,
    ],
    [
      'the schema has no plan',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahSchema', metadata: { name: 'orders', namespace: NS, uid: 'uid-orders' }, spec: {}, status: {} }),
      {},
      /current plan is none/,
    ],
    [
      'the schema is already applying',
      (h) =>
        h.reader.put({
          apiVersion: API,
          kind: 'PtahSchema',
          metadata: { name: 'orders', namespace: NS, uid: 'uid-orders' },
          spec: {},
          status: { plan: { name: 'ptah-plan-a', uid: 'uid-plan-a', fingerprint: FP }, activeOperation: { type: 'Apply', id: OP } },
        }),
      {},
      /already applying \(operation sha256:3+\); it is not waiting for an approval/,
    ],
  ];
  for (const [name, arrange, overrides, message] of cases) {
    world(h);
    arrange(h);
    const response = await h.admit(WEBHOOK_PATHS.decision, create('PtahSchemaApproval', valid('PtahSchemaApproval', overrides)));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 403, `${name}: 403`);
    t.match(response.status?.message, message, `${name}: message`);
  }

  world(h);
  h.reader.put({
    apiVersion: API,
    kind: 'PtahSchema',
    metadata: { name: 'orders', namespace: NS, uid: 'uid-orders' },
    spec: {},
    status: { plan: { name: 'ptah-plan-a', uid: 'uid-plan-a', fingerprint: FP }, activeOperation: { type: 'Observe', id: OP } },
  });
  t.equal((await h.admit(WEBHOOK_PATHS.decision, create('PtahSchemaApproval', valid('PtahSchemaApproval')))).allowed, true, 'a read-only claim does not block an approval');
});

t.test('a migration approval must name the current plan of a waiting migration', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, (h: Harness) => void, Record<string, unknown>, RegExp][] = [
    ['no migrationRef', () => {}, { migrationRef: { uid: 'uid-billing' } }, /must name spec\.migrationRef by name and uid/],
    ['the migration was re-created', () => {}, { migrationRef: { name: 'billing', uid: 'uid-old' } }, /PtahMigration team-a\/billing is not the object the approval names/],
    ['the plan was replaced', () => {}, { planRef: { name: 'ptah-mplan-a', uid: 'uid-old' } }, /PtahMigrationPlan team-a\/ptah-mplan-a was replaced/],
    ['the fingerprint differs', () => {}, { planFingerprint: FP }, /not the planFingerprint/],
    [
      'the plan belongs to another migration',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahMigrationPlan', metadata: { name: 'ptah-mplan-a', namespace: NS, uid: 'uid-mplan-a' }, spec: { migrationRef: { name: 'billing', uid: 'uid-old' }, fingerprint: MFP } }),
      {},
      /belongs to another PtahMigration/,
    ],
    [
      'the migration has moved on',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahMigration', metadata: { name: 'billing', namespace: NS, uid: 'uid-billing' }, spec: {}, status: { plan: { name: 'ptah-mplan-b', uid: 'uid-mplan-b' } } }),
      {},
      /current plan is ptah-mplan-b/,
    ],
    [
      'the migration is applying',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahMigration', metadata: { name: 'billing', namespace: NS, uid: 'uid-billing' }, spec: {}, status: { plan: { name: 'ptah-mplan-a', uid: 'uid-mplan-a' }, activeOperation: { type: 'Apply', id: OP } } }),
      {},
      /already applying/,
    ],
  ];
  for (const [name, arrange, overrides, message] of cases) {
    world(h);
    arrange(h);
    const response = await h.admit(WEBHOOK_PATHS.decision, create('PtahMigrationApproval', valid('PtahMigrationApproval', overrides)));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 403, `${name}: 403`);
    t.match(response.status?.message, message, `${name}: message`);
  }
});

t.test('a run acknowledgment must name the migration’s unresolved run', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, (h: Harness) => void, Record<string, unknown>, RegExp][] = [
    ['no operationID', () => {}, { operationID: 'op-1' }, /spec\.operationID as a sha256: digest/],
    ['the migration was re-created', () => {}, { migrationRef: { name: 'billing', uid: 'uid-old' } }, /is not the object the acknowledgment names/],
    ['another operation', () => {}, { operationID: digestOf('4') }, /unresolved run is operation sha256:3+, not sha256:4+ which this acknowledgment names/],
    [
      'nothing unresolved',
      (h) => h.reader.put({ apiVersion: API, kind: 'PtahMigration', metadata: { name: 'billing', namespace: NS, uid: 'uid-billing' }, spec: {}, status: {} }),
      {},
      /records no unresolved run; there is nothing to acknowledge/,
    ],
  ];
  for (const [name, arrange, overrides, message] of cases) {
    world(h);
    arrange(h);
    const response = await h.admit(WEBHOOK_PATHS.decision, create('PtahMigrationRunAcknowledgment', valid('PtahMigrationRunAcknowledgment', overrides)));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 403, `${name}: 403`);
    t.match(response.status?.message, message, `${name}: message`);
  }
});

t.test('reads that fail refuse: NotFound 404, Forbidden 403, anything else 500', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const schemaRef = { apiVersion: API, kind: 'PtahSchema', namespace: NS, name: 'orders' };
  const planRef = { apiVersion: API, kind: 'PtahSchemaPlan', namespace: NS, name: 'ptah-plan-a' };
  const cases: [string, (h: Harness) => void, number, RegExp][] = [
    ['the schema does not exist', (h) => h.reader.objects.clear(), 404, /^PtahSchema team-a\/orders not found$/],
    ['the plan does not exist', (h) => h.reader.fail(planRef, 404), 404, /^PtahSchemaPlan team-a\/ptah-plan-a not found$/],
    ['reading the schema is forbidden', (h) => h.reader.fail(schemaRef, 403, 'no RBAC'), 403, /reading PtahSchema team-a\/orders is forbidden to the webhook: no RBAC/],
    ['the API server is unavailable', (h) => h.reader.fail(schemaRef, 503, 'etcd down'), 500, /could not read PtahSchema team-a\/orders from the API server \(HTTP 503: etcd down\); refusing/],
    ['no answer at all', (h) => h.reader.fail(planRef, undefined, 'timed out after 8000 ms'), 500, /could not read PtahSchemaPlan team-a\/ptah-plan-a from the API server \(no response: timed out/],
  ];
  for (const [name, arrange, code, message] of cases) {
    h.reader.failures.clear();
    world(h);
    arrange(h);
    const response = await h.admit(WEBHOOK_PATHS.decision, create('PtahSchemaApproval', valid('PtahSchemaApproval')));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, code, `${name}: ${code}`);
    t.match(response.status?.message, message, `${name}: message`);
  }

  h.reader.failures.clear();
  world(h);
  h.reader.fail({ apiVersion: API, kind: 'PtahMigration', namespace: NS, name: 'billing' }, 500, 'boom');
  const ack = await h.admit(WEBHOOK_PATHS.decision, create('PtahMigrationRunAcknowledgment', valid('PtahMigrationRunAcknowledgment')));
  t.equal(ack.allowed, false, 'an acknowledgment fails closed too');
  t.equal(ack.status?.code, 500);
  t.match(ack.status?.message, /could not read PtahMigration team-a\/billing/);
});

function update(kind: Kind, before: Record<string, unknown>, after: Record<string, unknown>, metadataChange = false) {
  return review({
    operation: 'UPDATE',
    kind: { group: GROUP, version: 'v1alpha1', kind },
    resource: { group: GROUP, version: 'v1alpha1', resource: RESOURCE[kind] },
    namespace: NS,
    name: 'd1',
    oldObject: { apiVersion: API, kind, metadata: { name: 'd1', namespace: NS }, spec: before },
    object: { apiVersion: API, kind, metadata: { name: 'd1', namespace: NS, ...(metadataChange ? { labels: { team: 'a' }, finalizers: ['x'] } : {}) }, spec: after },
    userInfo: { username: 'bob' },
  });
}

t.test('after creation the spec never changes', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const kind of Object.keys(RESOURCE) as Kind[]) {
    const spec = valid(kind);
    const same = await h.admit(WEBHOOK_PATHS.decision, update(kind, spec, structuredClone(spec), true));
    t.equal(same.allowed, true, `${kind}: a metadata-only update is admitted`);
    const changed = await h.admit(WEBHOOK_PATHS.decision, update(kind, spec, { ...spec, mutationRequestUID: 'req-2' }));
    t.equal(changed.allowed, false, `${kind}: a spec change is refused`);
    t.match(changed.status?.message, /spec is immutable; create a new (approval|acknowledgment) instead/);
    const emptied = await h.admit(WEBHOOK_PATHS.decision, update(kind, { ...spec, extra: [] }, spec));
    t.equal(emptied.allowed, false, `${kind}: an empty list removed is a change`);
  }
  t.equal(h.reader.reads.length, 0, 'an update is judged without reads');
});

t.test('operations and resources this route does not judge are 400', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const del = { ...create('PtahSchemaApproval', valid('PtahSchemaApproval')), request: { ...create('PtahSchemaApproval', valid('PtahSchemaApproval')).request, operation: 'DELETE' as Operation } };
  const response = await h.admit(WEBHOOK_PATHS.decision, del);
  t.equal(response.status?.code, 400);
  t.match(response.status?.message, /not DELETE/);
  const job = review({ operation: 'CREATE', kind: { group: 'batch', version: 'v1', kind: 'Job' }, resource: { group: 'batch', version: 'v1', resource: 'jobs' }, object: {} });
  const wrong = await h.admit(WEBHOOK_PATHS.decision, job);
  t.equal(wrong.status?.code, 400);
  t.match(wrong.status?.message, /got batch\/v1 jobs/);
});

t.test('a decision stamped for an anonymous caller is refused', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  world(h);
  for (const user of [{ username: 'system:anonymous', groups: ['system:unauthenticated'] }, { username: 'bob', groups: ['system:unauthenticated'] }] as UserInfo[]) {
    const kind: Kind = 'PtahMigrationRunAcknowledgment';
    const response = await h.admit(WEBHOOK_PATHS.decision, create(kind, { ...BASE_SPEC[kind], ...stamped(kind, user, 'req-1') }, user));
    t.equal(response.allowed, false, `${user.username}: refused`);
    t.equal(response.status?.code, 403);
    t.match(response.status?.message, /not authenticated \(system:anonymous or group system:unauthenticated\); an anonymous caller cannot be this acknowledgment's author/);
  }
  t.equal(h.reader.reads.length, 0, 'refused before anything is read');
});

t.test('the request kind version and the object metadata are checked', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  world(h);
  const wrongVersion = create('PtahSchemaApproval', valid('PtahSchemaApproval'));
  wrongVersion.request.kind = { ...wrongVersion.request.kind, version: 'v2' };
  const cases: [string, ReturnType<typeof create>, RegExp][] = [['a kind of another version', wrongVersion, /admission request kind operator\.ptah\.run\/v2 PtahSchemaApproval does not match its resource/]];
  for (const metadata of ['orders', [], 3]) {
    const body = create('PtahSchemaApproval', valid('PtahSchemaApproval'));
    (body.request.object as { metadata: unknown }).metadata = metadata;
    cases.push([`metadata ${JSON.stringify(metadata)}`, body, /object\.metadata is an? (string|list|number), not an object/]);
  }
  for (const [name, body, message] of cases) {
    const response = await h.admit(WEBHOOK_PATHS.decision, body);
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 400, `${name}: 400`);
    t.match(response.status?.message, message, `${name}: message`);
  }
});

t.test('a spec with no canonical form is a 400 from the judge itself, behind the envelope check', async (t) => {
  // The envelope check refuses these before any judge runs; the judge still turns canonical JSON's typed
  // refusal into a 400 naming the spec, so a value that reaches it some other way is not a 500.
  const kind: Kind = 'PtahSchemaApproval';
  const deep = JSON.parse(`${'['.repeat(5000)}${']'.repeat(5000)}`) as unknown;
  for (const [name, spec, message] of [
    ['Infinity', { n: Infinity }, /oldObject\.spec\.n: Infinity has no JSON representation/],
    ['a lone surrogate', { s: '\ud800' }, /oldObject\.spec\.s: string holds a lone UTF-16 surrogate/],
    ['5000 levels of nesting', { d: deep }, /oldObject\.spec\.d(\[0\])+: nests more than \d+ levels deep/],
    ['an array of 500,000 values', { a: new Array(500_000).fill(0) }, /oldObject\.spec\.a\[\d+\]: more than 1000 values/],
  ] as const) {
    const body = update(kind, spec as Record<string, unknown>, {});
    const thrown = await judgeDecision(body.request, {} as never).catch((e: unknown) => e);
    t.ok(thrown instanceof Refusal, `${name}: refused`);
    t.match((thrown as Refusal).verdict, { code: 400, message }, `${name}: 400 naming the field`);
  }
});
