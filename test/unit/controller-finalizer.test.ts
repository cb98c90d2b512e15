// The exact JSON Patches the finalizer helper sends; what the API server makes of them (a failed test op is a 422,
// nothing clobbered) is proven in test/integration/controller-manager.test.ts.
import t from 'tap';
import { FinalizerError, addFinalizer, hasFinalizer, removeFinalizer } from '../../src/controller/finalizer.js';
import type { KubeClient, KubeObject, PatchType, ResourceRef } from '../../src/shared/kube-client.js';

function recordingClient() {
  const patches: Array<{ ref: ResourceRef; ops: unknown; type: PatchType }> = [];
  const client: Pick<KubeClient, 'patch'> = {
    async patch<T extends KubeObject>(ref: ResourceRef, ops: unknown, type: PatchType) {
      patches.push({ ref, ops, type });
      return { metadata: { name: 'patched' } } as T;
    },
  };
  return { client, patches };
}

const F = 'operator.ptah.run/active-operation';
const obj = (meta: NonNullable<KubeObject['metadata']>): KubeObject => ({ apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', metadata: { name: 'app', namespace: 'ns', resourceVersion: '7', ...meta } });

t.test('add: the guard tests the list as read (null when there is none) before appending', async (t) => {
  const cases: Array<[string, KubeObject, boolean, unknown[]]> = [
    ['no finalizers', obj({}), false, [{ op: 'test', path: '/metadata/finalizers', value: null }, { op: 'add', path: '/metadata/finalizers', value: [F] }]],
    ['an empty list reads as none', obj({ finalizers: [] }), false, [{ op: 'test', path: '/metadata/finalizers', value: null }, { op: 'add', path: '/metadata/finalizers', value: [F] }]],
    ['someone else\'s finalizer', obj({ finalizers: ['x/y'] }), false, [{ op: 'test', path: '/metadata/finalizers', value: ['x/y'] }, { op: 'add', path: '/metadata/finalizers/-', value: F }]],
    [
      'with the resourceVersion guard',
      obj({}),
      true,
      [{ op: 'test', path: '/metadata/resourceVersion', value: '7' }, { op: 'test', path: '/metadata/finalizers', value: null }, { op: 'add', path: '/metadata/finalizers', value: [F] }],
    ],
  ];
  for (const [what, o, guardResourceVersion, ops] of cases) {
    const { client, patches } = recordingClient();
    await addFinalizer(client, o, F, { guardResourceVersion });
    t.same(patches, [{ ref: { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', namespace: 'ns', name: 'app' }, ops, type: 'json' }], what);
  }
});

t.test('remove: by index, with a test that the index still holds our finalizer', async (t) => {
  const { client, patches } = recordingClient();
  await removeFinalizer(client, obj({ finalizers: ['x/y', F, 'z/w'] }), F);
  t.same(patches[0]?.ops, [{ op: 'test', path: '/metadata/finalizers/1', value: F }, { op: 'remove', path: '/metadata/finalizers/1' }]);
  await removeFinalizer(client, obj({ finalizers: [F] }), F, { guardResourceVersion: true });
  t.same(patches[1]?.ops, [{ op: 'test', path: '/metadata/resourceVersion', value: '7' }, { op: 'test', path: '/metadata/finalizers/0', value: F }, { op: 'remove', path: '/metadata/finalizers/0' }]);
});

t.test('no write when there is nothing to do; refusals for what the API server would refuse', async (t) => {
  const { client, patches } = recordingClient();
  const has = obj({ finalizers: [F] });
  t.equal(await addFinalizer(client, has, F), has, 'already present');
  const without = obj({ finalizers: ['x/y'] });
  t.equal(await removeFinalizer(client, without, F), without, 'not present');
  t.same(patches, []);
  t.equal(hasFinalizer(has, F), true);
  t.equal(hasFinalizer(without, F), false);
  t.equal(hasFinalizer({ metadata: {} }, F), false);

  await t.rejects(addFinalizer(client, obj({ deletionTimestamp: new Date(0) }), F), FinalizerError, 'being deleted');
  await t.rejects(addFinalizer(client, obj({ resourceVersion: undefined }), F, { guardResourceVersion: true }), /no resourceVersion/);
  await t.rejects(addFinalizer(client, obj({}), ''), /finalizer name is empty/);
  await t.rejects(removeFinalizer(client, obj({}), ''), /finalizer name is empty/);
  t.same(patches, [], 'refusals send nothing');
});
