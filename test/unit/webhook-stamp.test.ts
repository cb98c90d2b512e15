// /mutate/stamp: the authenticated identity, the time and the request uid, overwriting what the client wrote.
import t from 'tap';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import type { Operation, UserInfo } from '../../src/webhook/admission.js';
import { admissionTime } from '../../src/webhook/identity.js';
import { NOW, harness, review } from '../harness/webhook.js';

const GROUP = 'operator.ptah.run';

function decision(kind: string, resource: string, spec: Record<string, unknown>, userInfo: UserInfo, operation: Operation = 'CREATE', uid = 'req-stamp') {
  const object = { apiVersion: `${GROUP}/v1alpha1`, kind, metadata: { name: 'd1', namespace: 'team-a' }, spec };
  return review({
    uid,
    operation,
    kind: { group: GROUP, version: 'v1alpha1', kind },
    resource: { group: GROUP, version: 'v1alpha1', resource },
    namespace: 'team-a',
    name: 'd1',
    object,
    ...(operation === 'UPDATE' ? { oldObject: object } : {}),
    userInfo,
  });
}

const decode = (patch: string | undefined) => JSON.parse(Buffer.from(patch ?? '', 'base64').toString('utf8'));

t.test('each decision kind is stamped with exactly its fields', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const user: UserInfo = { username: ' alice ', uid: ' u-1 ', groups: ['zeta', 'dba', '', ' dba ', 'Admins', 'système'] };
  const expectedIdentity = { username: 'alice', uid: 'u-1', groups: ['Admins', 'dba', 'système', 'zeta'] };
  for (const [kind, resource, identityField, timeField] of [
    ['PtahSchemaApproval', 'ptahschemaapprovals', 'approver', 'approvedAt'],
    ['PtahMigrationApproval', 'ptahmigrationapprovals', 'approver', 'approvedAt'],
    ['PtahMigrationRunAcknowledgment', 'ptahmigrationrunacknowledgments', 'acknowledgedBy', 'acknowledgedAt'],
  ] as const) {
    const forged = { [identityField]: { username: 'root', groups: ['system:masters'] }, [timeField]: '1999-01-01T00:00:00Z', mutationRequestUID: 'forged' };
    const response = await h.admit(WEBHOOK_PATHS.stamp, decision(kind, resource, { planFingerprint: 'x', ...forged }, user, 'CREATE', `uid-${kind}`));
    t.equal(response.allowed, true, kind);
    t.equal(response.patchType, 'JSONPatch');
    t.same(
      decode(response.patch),
      [
        { op: 'add', path: `/spec/${identityField}`, value: expectedIdentity },
        { op: 'add', path: `/spec/${timeField}`, value: admissionTime(NOW) },
        { op: 'add', path: '/spec/mutationRequestUID', value: `uid-${kind}` },
      ],
      `${kind}: identity trimmed, groups deduplicated and byte-sorted, time in whole seconds, forged values overwritten`,
    );
  }
  t.match(admissionTime(NOW), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

t.test('a user without a uid or groups is stamped without them', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }));
  t.same(decode(response.patch)[0], { op: 'add', path: '/spec/approver', value: { username: 'bob', groups: [] } });
});

t.test('groups are capped at 64', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const groups = Array.from({ length: 80 }, (_, i) => `g${String(i).padStart(3, '0')}`);
  const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob', groups }));
  t.same(decode(response.patch)[0].value.groups, groups.slice(0, 64));
});

t.test('refusals', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, ReturnType<typeof review>, number, RegExp][] = [
    ['an anonymous request', decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: '  ' }), 403, /no authenticated username/],
    ['an UPDATE', decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }, 'UPDATE'), 400, /only when it is created, not on UPDATE/],
    ['another kind', decision('PtahSchema', 'ptahschemas', {}, { username: 'bob' }), 400, /judges only ptahschemaapprovals/],
    [
      'a subresource',
      { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }), request: { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }).request, subResource: 'status' } },
      400,
      /not its status subresource/,
    ],
    [
      'a kind that does not match the resource',
      { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }), request: { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }).request, kind: { group: GROUP, version: 'v1alpha1', kind: 'PtahMigrationApproval' } } },
      400,
      /does not match its resource/,
    ],
    [
      'an object without a spec',
      { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }), request: { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }).request, object: { apiVersion: `${GROUP}/v1alpha1`, kind: 'PtahSchemaApproval', metadata: {} } } },
      400,
      /has no spec object/,
    ],
    [
      'an object of another kind than the request says',
      { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }), request: { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }).request, object: { apiVersion: 'v1', kind: 'Secret', spec: {} } } },
      400,
      /not operator\.ptah\.run\/v1alpha1 PtahSchemaApproval/,
    ],
    [
      'an object in another namespace than the request',
      { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }), request: { ...decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' }).request, namespace: 'team-b' } },
      400,
      /namespace team-a does not match the admission request's team-b/,
    ],
  ];
  for (const [name, body, code, message] of cases) {
    const response = await h.admit(WEBHOOK_PATHS.stamp, body);
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, code, `${name}: ${code}`);
    t.match(response.status?.message, message, `${name}: message`);
    t.equal(response.patch, undefined, `${name}: no patch`);
  }
});
