// The manager's `patch` on Pods exists only to take off the run-evidence finalizer it keeps on a migration Apply's
// Pod (src/shared/api/status-policy.ts, ptah-manager-pod-guard). The API server refuses every other change the
// manager tries, so the right cannot be used to change what a judged Job's Pod runs.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { EVIDENCE_FINALIZER } from '../../src/shared/job/metadata.js';
import { restClient, type ResourceRef } from '../../src/shared/kube-client.js';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';
import { installOperator } from './operator-install.js';

const cluster = sharedCluster();
const OTHER_FINALIZER = 'example.com/keep';

t.test('the manager may remove the run-evidence finalizer from a Pod, and change nothing else', async (t) => {
  await installOperator();
  const ns = await testNamespace(t);
  const admin = await restClient(cluster.kubeConfig('admin'));
  const manager = await restClient(cluster.kubeConfig('manager'));
  const ref: ResourceRef = { apiVersion: 'v1', kind: 'Pod', namespace: ns, name: 'guarded' };
  await admin.create<V1Pod>({
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: 'guarded', namespace: ns, labels: { app: 'guarded' }, finalizers: [EVIDENCE_FINALIZER, OTHER_FINALIZER] },
    spec: { restartPolicy: 'Never', terminationGracePeriodSeconds: 0, containers: [{ name: 'main', image: 'ptah-fixture/sh:test', args: ['sleep 60'] }] },
  });
  t.teardown(async () => {
    await admin.patch(ref, { metadata: { finalizers: null } }, 'merge').catch(() => undefined);
    await admin.delete(ref).catch(() => undefined);
  });
  const refusal = /ptah-manager-pod-guard.*may change a Pod only to remove its operator\.ptah\.run\/run-evidence finalizer/;
  const refused = async (what: string, patch: unknown, type: 'merge' | 'json' = 'merge') => {
    const e = await manager.patch(ref, patch, type).then(() => undefined, (err: Error) => err);
    t.match(e?.message ?? 'admitted', refusal, `refused: ${what}`);
  };

  // A policy reaches the admission chain asynchronously: a refused dry run shows it is in force.
  await waitFor(async () => (await manager.patch(ref, { metadata: { labels: { app: 'other' } } }, 'merge', { dryRun: true }).then(() => undefined, (e: Error) => (refusal.test(e.message) ? true : undefined))),
    { what: 'the manager Pod policy to be in force', timeoutMs: 30_000 });

  await refused('another image', [{ op: 'replace', path: '/spec/containers/0/image', value: 'ptah-fixture/job-script:test' }], 'json');
  await refused('a shorter deadline', [{ op: 'add', path: '/spec/activeDeadlineSeconds', value: 5 }], 'json');
  await refused('a label', { metadata: { labels: { app: 'other' } } });
  await refused('an annotation', { metadata: { annotations: { note: 'x' } } });
  await refused('removing another finalizer', { metadata: { finalizers: [EVIDENCE_FINALIZER] } });
  await refused('adding a finalizer', { metadata: { finalizers: [EVIDENCE_FINALIZER, OTHER_FINALIZER, 'example.com/more'] } });

  const released = await manager.patch<V1Pod>(ref, { metadata: { finalizers: [OTHER_FINALIZER] } }, 'merge');
  t.same(released.metadata?.finalizers, [OTHER_FINALIZER], 'removing the run-evidence finalizer is admitted');
  const stored = await admin.get<V1Pod>(ref);
  t.equal(stored.spec?.containers[0]?.image, 'ptah-fixture/sh:test', 'the Pod still runs what it was created with');
  t.same(stored.metadata?.labels, { app: 'guarded' }, 'and keeps its labels');

  const byAdmin = await admin.patch<V1Pod>(ref, { metadata: { labels: { app: 'relabelled' } } }, 'merge');
  t.equal(byAdmin.metadata?.labels?.app, 'relabelled', 'other identities are not judged by the policy');
});
