// /validate/status-write: status subresources and the unresolved-run annotation are the manager's alone.
import t from 'tap';
import { ANNOTATIONS } from '../../src/shared/api/names.js';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import type { Operation } from '../../src/webhook/admission.js';
import { MANAGER, harness, review } from '../harness/webhook.js';

const GROUP = 'operator.ptah.run';
const OP_ID = `sha256:${'ab'.repeat(32)}`;

function migration(annotation?: string, unresolved = false) {
  return {
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'PtahMigration',
    metadata: { name: 'billing', namespace: 'team-a', uid: 'uid-billing', ...(annotation === undefined ? {} : { annotations: { [ANNOTATIONS.unresolvedRun]: annotation } }) },
    spec: {},
    ...(unresolved ? { status: { unresolvedRun: { outcome: 'Unknown', operationID: OP_ID, recordedAt: '2030-01-01T00:00:00Z' } } } : {}),
  };
}

function statusWrite(kind: string, resource: string, username: string, old: unknown = { apiVersion: `${GROUP}/v1alpha1`, kind, metadata: { name: 'x', namespace: 'team-a' } }) {
  return review({
    operation: 'UPDATE',
    kind: { group: GROUP, version: 'v1alpha1', kind },
    resource: { group: GROUP, version: 'v1alpha1', resource },
    subResource: 'status',
    namespace: 'team-a',
    name: 'billing',
    object: old,
    oldObject: old,
    userInfo: { username, groups: ['system:masters'] },
  });
}

function migrationWrite(operation: Operation, username: string, before: unknown, after: unknown) {
  return review({
    operation,
    kind: { group: GROUP, version: 'v1alpha1', kind: 'PtahMigration' },
    resource: { group: GROUP, version: 'v1alpha1', resource: 'ptahmigrations' },
    namespace: 'team-a',
    name: 'billing',
    object: after,
    ...(before === undefined ? {} : { oldObject: before }),
    userInfo: { username },
  });
}

t.test('status subresources', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const [kind, resource] of [
    ['PtahSchema', 'ptahschemas'],
    ['PtahMigration', 'ptahmigrations'],
    ['PtahSchemaApproval', 'ptahschemaapprovals'],
    ['PtahMigrationRunAcknowledgment', 'ptahmigrationrunacknowledgments'],
    ['PtahFutureKind', 'ptahfuturekinds'],
  ] as const) {
    const admitted = await h.admit(WEBHOOK_PATHS.statusWrite, statusWrite(kind, resource, MANAGER));
    t.equal(admitted.allowed, true, `the manager writes ${resource}/status`);

    const refused = await h.admit(WEBHOOK_PATHS.statusWrite, statusWrite(kind, resource, 'kubernetes-admin'));
    t.equal(refused.allowed, false, `a cluster admin may not write ${resource}/status`);
    t.equal(refused.status?.code, 403);
    t.match(refused.status?.message, /written only by the operator's manager, not by kubernetes-admin/);
    // Its own family's way, or both ways for a kind that waits on neither.
    if (kind !== 'PtahSchema') t.match(refused.status?.message, /create a PtahMigrationRunAcknowledgment .*spec\.operationID/, 'and is told how to settle a run instead');
    if (kind !== 'PtahMigration') t.match(refused.status?.message, /create a PtahSchemaRunAcknowledgment .*spec\.operationID/, 'and how to end a schema proof instead');
  }
});

t.test('a status write of a migration with an unresolved run names the exact acknowledgment to create', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const refused = await h.admit(WEBHOOK_PATHS.statusWrite, statusWrite('PtahMigration', 'ptahmigrations', 'alice', migration(undefined, true)));
  t.equal(refused.allowed, false);
  t.match(refused.status?.message, `spec.migrationRef {name: billing, uid: uid-billing} and spec.operationID ${OP_ID}`);
});

t.test('a status write of a schema owing a proof names the exact schema acknowledgment to create', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const schema = (pendingObservation?: unknown) => ({
    apiVersion: `${GROUP}/v1alpha1`, kind: 'PtahSchema', metadata: { name: 'billing', namespace: 'team-a', uid: 'uid-schema' }, spec: {},
    ...(pendingObservation ? { status: { pendingObservation } } : {}),
  });
  const owing = await h.admit(WEBHOOK_PATHS.statusWrite, statusWrite('PtahSchema', 'ptahschemas', 'alice', schema({ applyOperationID: OP_ID, outcome: 'OutcomeUnknown' })));
  t.equal(owing.allowed, false);
  t.match(owing.status?.message, `create a PtahSchemaRunAcknowledgment whose spec.schemaRef names the PtahSchema`);
  t.match(owing.status?.message, `spec.schemaRef {name: billing, uid: uid-schema} and spec.operationID ${OP_ID}`);
  const none = await h.admit(WEBHOOK_PATHS.statusWrite, statusWrite('PtahSchema', 'ptahschemas', 'alice', schema()));
  t.equal(none.allowed, false);
  t.notMatch(none.status?.message, /spec\.schemaRef \{name/, 'a schema owing no proof gets no operation to name');
});

t.test('the unresolved-run annotation', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const copy = JSON.stringify({ operationID: OP_ID, outcome: 'Unknown' });
  const other = JSON.stringify({ operationID: `sha256:${'cd'.repeat(32)}`, outcome: 'Partial' });
  const cases: [string, Operation, string, unknown, unknown, boolean, RegExp?][] = [
    ['the manager adds it', 'UPDATE', MANAGER, migration(), migration(copy), true],
    ['the manager changes it', 'UPDATE', MANAGER, migration(copy), migration(other), true],
    ['the manager removes it', 'UPDATE', MANAGER, migration(copy), migration(), true],
    ['a user edits something else and leaves it alone', 'UPDATE', 'alice', migration(copy), { ...migration(copy), spec: { suspend: true } }, true],
    ['a user edits a migration that has none', 'UPDATE', 'alice', migration(), { ...migration(), spec: { suspend: true } }, true],
    ['a user adds it', 'UPDATE', 'alice', migration(), migration(copy), false, /only the operator's manager may set it, not alice/],
    ['a user changes it', 'UPDATE', 'alice', migration(copy), migration(other), false, /may change it/],
    ['a user removes it', 'UPDATE', 'alice', migration(copy), migration(), false, /may remove it/],
    ['a user empties it', 'UPDATE', 'alice', migration(copy), migration(''), false, /may change it/],
  ];
  for (const [name, operation, user, before, after, allowed, message] of cases) {
    const response = await h.admit(WEBHOOK_PATHS.statusWrite, migrationWrite(operation, user, before, after));
    t.equal(response.allowed, allowed, name);
    if (message) {
      t.equal(response.status?.code, 403, `${name}: 403`);
      t.match(response.status?.message, message, `${name}: message`);
      t.match(response.status?.message, /PtahMigrationRunAcknowledgment/, `${name}: says how to settle instead`);
    }
  }
});

t.test('requests this route does not judge are 400, not a silent admit', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const cases: [string, ReturnType<typeof review>, RegExp][] = [
    ['a core resource', review({ operation: 'UPDATE', kind: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: { group: '', version: 'v1', resource: 'configmaps' }, subResource: 'status', object: {}, oldObject: {} }), /only operator\.ptah\.run/],
    ['a migration CREATE (restores carry the copy; creates are not registered)', migrationWrite('CREATE', 'alice', undefined, migration(JSON.stringify({ operationID: OP_ID, outcome: 'Unknown' }))), /not CREATE/],
    ['a status CREATE', { ...statusWrite('PtahSchema', 'ptahschemas', 'alice'), request: { ...statusWrite('PtahSchema', 'ptahschemas', 'alice').request, operation: 'CREATE' } }, /not CREATE/],
    ['another subresource', review({ operation: 'UPDATE', kind: { group: GROUP, version: 'v1alpha1', kind: 'PtahSchema' }, resource: { group: GROUP, version: 'v1alpha1', resource: 'ptahschemas' }, subResource: 'scale', object: {}, oldObject: {} }), /not ptahschemas\/scale/],
    ['the main resource of another kind', review({ operation: 'UPDATE', kind: { group: GROUP, version: 'v1alpha1', kind: 'PtahSchema' }, resource: { group: GROUP, version: 'v1alpha1', resource: 'ptahschemas' }, object: {}, oldObject: {} }), /got ptahschemas/],
    ['a migration DELETE', migrationWrite('DELETE', 'alice', migration(), undefined), /not DELETE/],
    ['a migration UPDATE without oldObject', migrationWrite('UPDATE', 'alice', undefined, migration()), /carries no oldObject/],
  ];
  for (const [name, body, message] of cases) {
    const response = await h.admit(WEBHOOK_PATHS.statusWrite, body);
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 400, `${name}: 400`);
    t.match(response.status?.message, message, `${name}: message`);
  }
});

t.test('the annotation is compared as a string only when it is one', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  const withValue = (value: unknown) => ({ ...migration(), metadata: { ...migration().metadata, annotations: { [ANNOTATIONS.unresolvedRun]: value } } });
  const cases: [string, string, unknown, unknown, RegExp][] = [
    // String(123) === '123' let a user swap the manager's string for a number the API server would store.
    ['a string replaced by the number it spells', 'alice', withValue('123'), withValue(123), /object\.metadata\.annotations\["operator\.ptah\.run\/unresolved-run"\] is a number, not a string/],
    ['a value with no string form', 'alice', withValue('x'), withValue({ toString: 1 }), /object\.metadata\.annotations\["operator\.ptah\.run\/unresolved-run"\] is an object, not a string/],
    ['an old value that is not a string', MANAGER, withValue(['x']), withValue('x'), /oldObject\.metadata\.annotations\["operator\.ptah\.run\/unresolved-run"\] is a list, not a string/],
    ['annotations that are not a map', 'alice', migration(), { ...migration(), metadata: { ...migration().metadata, annotations: 'x' } }, /object\.metadata\.annotations is a string, not an object/],
    ['metadata that is not an object', 'alice', migration(), { ...migration(), metadata: [] }, /object\.metadata is a list, not an object/],
  ];
  for (const [name, user, before, after, message] of cases) {
    const response = await h.admit(WEBHOOK_PATHS.statusWrite, migrationWrite('UPDATE', user, before, after));
    t.equal(response.allowed, false, name);
    t.equal(response.status?.code, 400, `${name}: 400`);
    t.match(response.status?.message, message, `${name}: names the field`);
  }
  const missing = await h.admit(WEBHOOK_PATHS.statusWrite, { ...migrationWrite('UPDATE', 'alice', migration(), migration()), request: { ...migrationWrite('UPDATE', 'alice', migration(), migration()).request, object: undefined } });
  t.equal(missing.status?.code, 400, 'an update without an object is a 400');
  t.match(missing.status?.message, /carries no object/);
});

t.test('a status write whose oldObject is malformed is still refused with a way to settle, not a 500', async (t) => {
  const h = await harness();
  t.teardown(h.close);
  for (const old of [
    { ...migration(undefined, true), status: { unresolvedRun: { operationID: { toString: 1 } } } },
    { ...migration(undefined, true), metadata: { name: 'billing', uid: { toString: 1 } } },
    { ...migration(undefined, true), status: 'x' },
  ]) {
    const response = await h.admit(WEBHOOK_PATHS.statusWrite, statusWrite('PtahMigration', 'ptahmigrations', 'alice', old));
    t.equal(response.status?.code, 403, 'refused on the merits');
    t.match(response.status?.message, /create a PtahMigrationRunAcknowledgment/);
  }
});
