// Who the test identities are to the API server, what RBAC lets the manager do once the project's manifests are
// applied, and that the API server really calls a webhook registered by URL and the test CA's bundle.
import t from 'tap';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { AdmissionregistrationV1Api, AuthenticationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { IDENTITIES, MANAGER_NAMESPACE, type IdentityName } from '../../tools/stack/controlplane.js';
import { applyManifestFile } from '../../tools/stack/manifests.js';
import { registerWebhooks } from '../../tools/stack/webhooks.js';

const cluster = sharedCluster();
const admin = cluster.kubeConfig('admin');

t.test('each kubeconfig authenticates as its identity (SelfSubjectReview)', async (t) => {
  const table: { identity: IdentityName; username: string; groups: string[] }[] = [
    { identity: 'admin', username: 'ptah-test-admin', groups: ['system:masters', 'system:authenticated'] },
    {
      identity: 'manager',
      username: 'system:serviceaccount:ptah-system:ptah-manager',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:ptah-system', 'system:authenticated'],
    },
    { identity: 'approver', username: 'alice', groups: ['ptah-approvers', 'system:authenticated'] },
  ];
  t.same(table.map((row) => row.identity).sort(), Object.keys(IDENTITIES).sort(), 'every identity the harness issues is checked');
  for (const row of table) {
    const review = await cluster.kubeConfig(row.identity).makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    t.equal(review.status?.userInfo?.username, row.username, `${row.identity}: username`);
    t.same(review.status?.userInfo?.groups, row.groups, `${row.identity}: groups`);
  }
});

t.test('with manifests/rbac.yaml applied the manager reads ConfigMaps but is forbidden Secrets', async (t) => {
  const ns = await testNamespace(t);
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'visible' }, data: { k: 'v' } } });
  await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'hidden' }, stringData: { k: 'v' } } });
  await applyManifestFile(admin, 'manifests/rbac.yaml');

  const manager = cluster.kubeConfig('manager').makeApiClient(CoreV1Api);
  const cm = await manager.readNamespacedConfigMap({ name: 'visible', namespace: ns });
  t.equal(cm.data?.k, 'v', 'the manager reads a ConfigMap (so its bindings are in effect)');
  for (const [what, attempt] of [
    ['get', () => manager.readNamespacedSecret({ name: 'hidden', namespace: ns })],
    ['list', () => manager.listNamespacedSecret({ namespace: ns })],
    ['list in its own namespace', () => manager.listNamespacedSecret({ namespace: MANAGER_NAMESPACE })],
  ] as const) {
    await t.rejects(attempt(), { code: 403 }, `secrets ${what} is forbidden`);
  }
});

t.test('registerWebhooks: the API server calls a webhook registered by URL and CA bundle, in its namespace only', async (t) => {
  const ns = await testNamespace(t);
  await applyManifestFile(admin, 'manifests/rbac.yaml');
  const pki = await cluster.pki();
  const serving = await pki.issueServing('test-webhook', { ips: ['127.0.0.1'] });
  const seen: { path: string; username: string; namespace: string; dryRun: boolean }[] = [];
  const server = createServer({ cert: await readFile(serving.cert), key: await readFile(serving.key) }, (req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => {
      const review = JSON.parse(body) as { request: { uid: string; namespace: string; dryRun: boolean; userInfo: { username: string } } };
      seen.push({ path: req.url ?? '', username: review.request.userInfo.username, namespace: review.request.namespace, dryRun: review.request.dryRun });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const hooks = await registerWebhooks(url, pki.caPem, { answered: () => seen.length, namespace: ns });
  t.teardown(hooks.unregister);
  t.match(seen[0], { path: '/validate/controller-write', username: 'system:serviceaccount:ptah-system:ptah-manager', namespace: ns, dryRun: true },
    'the probe reached the controller-write webhook');

  const before = seen.length;
  const manager = cluster.kubeConfig('manager').makeApiClient(CoreV1Api);
  await manager.createNamespacedConfigMap({ namespace: MANAGER_NAMESPACE, body: { metadata: { generateName: 'elsewhere-' } }, dryRun: 'All' });
  t.equal(seen.length, before, 'a request in another namespace does not reach the webhook');

  await hooks.unregister();
  const admission = admin.makeApiClient(AdmissionregistrationV1Api);
  await t.rejects(admission.readValidatingWebhookConfiguration({ name: hooks.validating.metadata?.name ?? '' }), { code: 404 }, 'unregister removes the validating configuration');
  await t.rejects(admission.readMutatingWebhookConfiguration({ name: hooks.mutating.metadata?.name ?? '' }), { code: 404 }, 'and the mutating one');
});
