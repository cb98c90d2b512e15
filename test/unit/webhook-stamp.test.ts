// /mutate/stamp: the authenticated identity, the time and the request uid, overwriting what the client wrote.
import t from 'tap';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { Refusal, type Operation, type UserInfo } from '../../src/webhook/admission.js';
import { admissionTime } from '../../src/webhook/identity.js';
import { judgeStamp } from '../../src/webhook/stamp.js';
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

t.test('anonymous callers are refused: system:anonymous, or anyone in system:unauthenticated', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const many = [...Array.from({ length: 70 }, (_, i) => `a${String(i).padStart(2, '0')}`), 'system:unauthenticated'];
  const refused: [string, UserInfo][] = [
    ['the anonymous user as the API server sends it', { username: 'system:anonymous', groups: ['system:unauthenticated'] }],
    ['the anonymous user without groups', { username: 'system:anonymous' }],
    ['the anonymous user with padding', { username: ' system:anonymous ', groups: [] }],
    ['a named user in the unauthenticated group', { username: 'bob', groups: ['dba', 'system:unauthenticated'] }],
    ['the unauthenticated group past the 64 groups that are stamped', { username: 'bob', groups: many }],
  ];
  for (const [name, user] of refused) {
    const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, user));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 403, `${name}: 403`);
    t.match(response.status?.message, /not authenticated \(system:anonymous or group system:unauthenticated\); an anonymous caller cannot be this approval's author/, `${name}: says why`);
    t.equal(response.patch, undefined, `${name}: nothing is stamped`);
  }
  const admitted: [string, UserInfo][] = [
    ['an authenticated user', { username: 'bob', groups: ['system:authenticated'] }],
    ['a user whose name only starts like the anonymous one', { username: 'system:anonymous-auditor', groups: ['system:unauthenticated-readers'] }],
  ];
  for (const [name, user] of admitted) {
    const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, user));
    t.equal(response.allowed, true, `${name} is stamped`);
  }
});

t.test('an absurd userInfo is refused with 400 before anything is sorted', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  // 300,000 groups blocked the event loop 2-4 s in the sort. They do not fit a request body any more, so the
  // judge is called directly; 100,000 short ones do fit and go through the route.
  const huge = Array.from({ length: 300_000 }, (_, i) => `g${i}`);
  const start = performance.now();
  const thrown = await judgeStamp(decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob', groups: huge }).request, { now: () => NOW } as never).catch((e: unknown) => e);
  const ms = performance.now() - start;
  t.ok(thrown instanceof Refusal, 'refused');
  t.match((thrown as Refusal).verdict, { code: 400, message: /userInfo\.groups lists 300000 groups; at most 1024/ });
  t.ok(ms < 500, `in ${ms.toFixed(1)} ms (a stall detector; it was 2-4 s)`);

  const cases: [string, UserInfo, RegExp][] = [
    ['100,000 groups', { username: 'bob', groups: Array.from({ length: 100_000 }, (_, i) => `g${i}`) }, /userInfo\.groups lists 100000 groups; at most 1024/],
    ['a group of 100 KB', { username: 'bob', groups: ['dba', 'x'.repeat(100 * 1024)] }, /userInfo\.groups\[1\] is 102400 characters long; at most 1024/],
    ['a username of 100 KB', { username: 'b'.repeat(100 * 1024) }, /userInfo\.username is 102400 characters long; at most 1024/],
    ['a uid of 100 KB', { username: 'bob', uid: 'u'.repeat(100 * 1024) }, /userInfo\.uid is 102400 characters long; at most 1024/],
  ];
  for (const [name, user, message] of cases) {
    const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, user));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 400, `${name}: 400`);
    t.match(response.status?.message, message, `${name}: names the field`);
  }

  // At the bound: 1024 long groups that differ only at the end still sort quickly.
  const prefix = 'p'.repeat(900);
  const groups = Array.from({ length: 1024 }, (_, i) => `${prefix}${String(1023 - i).padStart(24, '0')}`);
  const sortStart = performance.now();
  const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob', groups }));
  t.ok(performance.now() - sortStart < 1000, 'judged well within a second');
  t.equal(response.allowed, true, '1024 groups are an identity');
  t.same(decode(response.patch)[0].value.groups, [...groups].reverse().slice(0, 64), 'sorted and capped at 64');
});

t.test('groups sort in UTF-8 byte order, not in UTF-16 code unit order', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  // U+FF5E encodes as EF BD 9E, U+1F600 as F0 9F 98 80; in UTF-16 the emoji's D83D sorts first.
  const response = await h.admit(WEBHOOK_PATHS.stamp, decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob', groups: ['\u{1F600}', '\uFF5E', 'a', 'Z', 'ab', '\u00E9'] }));
  t.same(decode(response.patch)[0].value.groups, ['Z', 'a', 'ab', '\u00E9', '\uFF5E', '\u{1F600}']);
});

t.test('the request kind must match the resource in group, version and kind', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const body = decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' });
  body.request.kind = { group: GROUP, version: 'v1beta1', kind: 'PtahSchemaApproval' };
  const response = await h.admit(WEBHOOK_PATHS.stamp, body);
  t.equal(response.allowed, false);
  t.equal(response.status?.code, 400);
  t.match(response.status?.message, /admission request kind operator\.ptah\.run\/v1beta1 PtahSchemaApproval does not match its resource/);
});

t.test('metadata that is not an object is refused', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const [name, metadata, message] of [
    ['a list', [], /object\.metadata is a list, not an object/],
    ['a number', 5, /object\.metadata is a number, not an object/],
    ['a name that is not a string', { name: 7 }, /object\.metadata\.name is a number, not a string/],
  ] as const) {
    const body = decision('PtahSchemaApproval', 'ptahschemaapprovals', {}, { username: 'bob' });
    (body.request.object as { metadata: unknown }).metadata = metadata;
    const response = await h.admit(WEBHOOK_PATHS.stamp, body);
    t.equal(response.status?.code, 400, `${name}: 400`);
    t.match(response.status?.message, message, `${name}: names the field`);
  }
});
