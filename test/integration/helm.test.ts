// The Helm chart (charts/ptah, generated beside manifests/) with the real helm CLI (tools/helm/build.sh): `helm lint`;
// `helm template` with default values holds the objects of `kubectl kustomize manifests/` but for what the chart
// documents (docs/helm.md); values the schema does not know are refused, named; and on a control plane of its own (the
// chart's cluster-wide webhooks would fail closed for every other test on the shared one) `helm install`, `helm
// upgrade` with changed values and with a changed CRD, `helm rollback` and `helm uninstall`, which leaves the CRDs and
// the resources; and a kustomize install moved to the chart (docs/helm.md). The operator working under the chart —
// a PtahSchema and a PtahMigration converging, an upgrade adopting an Apply in flight — is helm-operator.test.ts's.
import t, { type Test } from 'tap';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api, ApiException, ApiextensionsV1Api, AppsV1Api, CoreV1Api, type V1Deployment, type V1Secret, type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { API_VERSION, GROUP, INSTALL, KINDS } from '../../src/shared/api/names.js';
import { restClient, type KubeObject } from '../../src/shared/kube-client.js';
import { startControlPlane } from '../../tools/stack/controlplane.js';
import { helm } from '../../tools/stack/helm.js';
import { kubectl } from '../../tools/stack/manifests.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { waitFor } from '../../tools/stack/wait.js';
import { runCommand, type CommandRun } from '../harness/command.js';

const CHART = join(REPO_ROOT, 'charts/ptah');
const NS = INSTALL.namespace;
const KEEP = 'helm.sh/resource-policy';
const MARK = 'ptah.run/helm-test';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  [field: string]: unknown;
}
const helmRun = async (args: string[]): Promise<CommandRun> => runCommand(await helm(), args);

const parseObjects = (text: string): Obj[] => parseAllDocuments(text).map((d) => d.toJS() as Obj | null).filter((o): o is Obj => o !== null);
const idOf = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byId = (objects: Obj[]): Map<string, Obj> => new Map(objects.map((o) => [idOf(o), o]));

/** `helm template` of the chart with `args`: the objects, or a failed assertion with helm's message. */
async function template(t: Test, args: string[] = []): Promise<Obj[]> {
  const r = await helmRun(['template', 'ptah', CHART, '--namespace', NS, ...args]);
  t.equal(r.code, 0, `helm template ${args.join(' ')} succeeds ${r.stderr.trim()}`);
  return parseObjects(r.stdout);
}
const find = <T>(objects: Obj[], kind: string, name?: string): T | undefined =>
  objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name)) as T | undefined;
const envOf = (d: V1Deployment | undefined): Record<string, string | undefined> =>
  Object.fromEntries((d?.spec?.template.spec?.containers[0]?.env ?? []).map((e) => [e.name, e.value]));

t.test('helm lint passes on the chart', async (t) => {
  const r = await helmRun(['lint', '--strict', CHART]);
  t.equal(r.code, 0, `helm lint --strict: ${r.stdout.trim()} ${r.stderr.trim()}`);
  t.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
});

t.test('with default values the chart holds the objects of kubectl kustomize manifests/, but for what docs/helm.md says', async (t) => {
  const kustomized = await runCommand(await kubectl(), ['kustomize', join(REPO_ROOT, 'manifests')]);
  t.equal(kustomized.code, 0, `kubectl kustomize manifests/ ${kustomized.stderr.trim()}`);
  const kustomize = byId(parseObjects(kustomized.stdout));
  const chart = byId(await template(t));
  t.ok(kustomize.has(`Namespace//${NS}`), 'kustomize creates the Namespace');
  kustomize.delete(`Namespace//${NS}`);
  t.strictSame([...chart.keys()].sort(), [...kustomize.keys()].sort(), 'the same objects, but the Namespace (the release\'s)');
  for (const [id, object] of chart) {
    if (object.kind === 'CustomResourceDefinition') {
      t.equal(object.metadata.annotations?.[KEEP], 'keep', `${id}: kept by helm uninstall`);
      delete object.metadata.annotations;
    }
    t.strictSame(object, kustomize.get(id), `${id} as kustomize renders it`);
  }
});

t.test('a value outside values.schema.json is refused, named', async (t) => {
  const refusals: [string, RegExp][] = [
    ['replica=3', /replica\b/],
    ['webhook.certificate.sorce=generate', /sorce/],
    ['replicas=0', /replicas/],
    ['webhook.certificate.source=vault', /source/],
    ['image.digest=latest', /digest/],
  ];
  for (const [set, named] of refusals) {
    const r = await helmRun(['template', 'ptah', CHART, '--namespace', NS, '--set', set]);
    t.not(r.code, 0, `--set ${set} is refused`);
    t.match(r.stderr, /values don't meet the specifications of the schema/, `${set}: by the schema`);
    t.match(r.stderr, named, `${set}: naming the value`);
  }
});

t.test('values choose the image, the manager settings, scheduling, the NetworkPolicy, the PDB and monitoring', async (t) => {
  const digest = `sha256:${'a'.repeat(64)}`;
  const objects = await template(t, [
    '--set', `image.repository=registry.example/ptah,image.tag=1.2.3,runnerImage.repository=registry.example/runner,runnerImage.digest=${digest}`,
    '--set', 'replicas=3,leaderElection=false,watchNamespace=shop,logLevel=debug,readTimeoutMs=5000',
    '--set', 'nodeSelector.pool=system,tolerations[0].key=dedicated,tolerations[0].operator=Exists',
    '--set', 'resources.limits.memory=1Gi,podSecurityContext.runAsUser=1000',
    '--set', 'networkPolicy.apiServerCidrs={203.0.113.10/32},networkPolicy.metricsCidrs={198.51.100.0/24},podDisruptionBudget.enabled=false',
    '--set', 'serviceMonitor.enabled=true,prometheusRule.enabled=true',
  ]);
  const deployment = find<V1Deployment>(objects, 'Deployment');
  const pod = deployment?.spec?.template.spec;
  t.equal(deployment?.spec?.replicas, 3);
  t.equal(pod?.containers[0]?.image, 'registry.example/ptah:1.2.3', 'repository:tag');
  t.match(envOf(deployment), {
    PTAH_CONTROLLER_IMAGE: 'registry.example/ptah:1.2.3', PTAH_RUNNER_IMAGE: `registry.example/runner@${digest}`,
    PTAH_LEADER_ELECTION: 'false', PTAH_WATCH_NAMESPACE: 'shop', PTAH_LOG_LEVEL: 'debug', PTAH_READ_TIMEOUT_MS: '5000',
  }, 'each setting reaches the manager as its PTAH_* variable');
  t.equal(envOf(deployment).PTAH_MANAGER_USERNAME, undefined, 'in ptah-system the manager\'s default identity is right');
  t.same(pod?.nodeSelector, { pool: 'system' });
  t.same(pod?.tolerations, [{ key: 'dedicated', operator: 'Exists' }]);
  t.same(pod?.containers[0]?.resources?.limits, { memory: '1Gi' });
  t.equal(pod?.securityContext?.runAsUser, 1000);
  t.equal(pod?.containers[0]?.securityContext?.readOnlyRootFilesystem, true, 'the container\'s own security context stays');
  const policy = find<Obj & { spec: { ingress: { from: unknown[] }[] } }>(objects, 'NetworkPolicy');
  t.same(policy?.spec.ingress[0]?.from, [{ ipBlock: { cidr: '203.0.113.10/32' } }], 'the API server\'s ranges');
  t.same(policy?.spec.ingress[1]?.from, [{ ipBlock: { cidr: '198.51.100.0/24' } }], 'the scrapers\' ranges, on their own');
  t.equal(find(objects, 'PodDisruptionBudget'), undefined, 'no PDB when disabled');
  const monitoring = async (file: string) => parseObjects(await readFile(join(REPO_ROOT, 'manifests/monitoring', file), 'utf8'))[0];
  t.strictSame(find(objects, 'ServiceMonitor'), await monitoring('servicemonitor.yaml'), 'the ServiceMonitor of manifests/monitoring');
  t.strictSame(find(objects, 'PrometheusRule'), await monitoring('prometheusrule.yaml'), 'the PrometheusRule, its {{ $labels }} kept for Prometheus');

  const digestOnly = find<V1Deployment>(await template(t, ['--set', `image.digest=${digest}`]), 'Deployment');
  t.equal(digestOnly?.spec?.template.spec?.containers[0]?.image, `localhost/ptah-operator@${digest}`, 'a digest pins the image');
  t.equal(envOf(digestOnly).PTAH_RUNNER_IMAGE, `localhost/ptah-operator@${digest}`, 'and the runner, the same image');

  const elsewhere = await helmRun(['template', 'ptah', CHART, '--namespace', 'ops']);
  const moved = parseObjects(elsewhere.stdout);
  t.equal(envOf(find<V1Deployment>(moved, 'Deployment')).PTAH_MANAGER_USERNAME, 'system:serviceaccount:ops:ptah-manager', 'another namespace: the manager is told its identity');
  const validating = find<V1ValidatingWebhookConfiguration>(moved, 'ValidatingWebhookConfiguration');
  t.ok(validating?.webhooks?.every((h) => h.clientConfig.service?.namespace === 'ops'), 'the webhooks call the release\'s Service');
  t.match(validating?.webhooks?.find((h) => h.matchConditions)?.matchConditions?.[0]?.expression, /"system:serviceaccount:ops:ptah-manager"/);
});

t.test('the webhook certificate: a Secret you bring, cert-manager, or one the chart generates', async (t) => {
  const hooks = (objects: Obj[]) => [find<V1ValidatingWebhookConfiguration>(objects, 'MutatingWebhookConfiguration'), find<V1ValidatingWebhookConfiguration>(objects, 'ValidatingWebhookConfiguration')]
    .flatMap((c) => c?.webhooks ?? []);
  const bundle = Buffer.from('-----BEGIN CERTIFICATE-----\n').toString('base64');
  const brought = await template(t, ['--set', `webhook.certificate.caBundle=${bundle},webhook.certificate.secretName=my-tls`]);
  t.ok(hooks(brought).every((h) => h.clientConfig.caBundle === bundle), 'secret: the caBundle given');
  t.equal(find<V1Deployment>(brought, 'Deployment')?.spec?.template.spec?.volumes?.find((v) => v.name === 'tls')?.secret?.secretName, 'my-tls', 'the Secret mounted is the one named');
  t.equal(find(brought, 'Secret'), undefined, 'and the chart writes no Secret');

  const managed = await template(t, ['--set', 'webhook.certificate.source=cert-manager']);
  t.match(find<Obj>(managed, 'Certificate'), { spec: { secretName: INSTALL.tlsSecret } }, 'cert-manager: a Certificate into the mounted Secret');
  t.ok(find(managed, 'Issuer'), 'from its Issuer');
  for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
    t.equal(find<Obj>(managed, kind)?.metadata.annotations?.['cert-manager.io/inject-ca-from'], `${NS}/${INSTALL.webhookService}`, `${kind}: CA injected`);
  }

  const generated = await template(t, ['--set', 'webhook.certificate.source=generate']);
  const secret = find<V1Secret>(generated, 'Secret', INSTALL.tlsSecret);
  t.ok(secret?.data?.['tls.crt'] && secret.data['tls.key'] && secret.data['ca.crt'], 'generate: a Secret with the certificate, its key and its CA');
  t.ok(hooks(generated).every((h) => h.clientConfig.caBundle === secret?.data?.['ca.crt']), 'every webhook trusts that CA');
  t.equal(find(generated, 'Certificate'), undefined, 'no cert-manager object');
});

t.test('on a control plane of its own: install, upgrade with changed values, rollback, and an uninstall that leaves CRDs and resources', async (t) => {
  const plane = await startControlPlane({ log: (line) => t.comment(line) });
  t.teardown(() => plane.stop());
  const kubeconfig = plane.kubeconfigs.admin;
  // Not ptah-system, where the control plane keeps the manager identity's ServiceAccount: the release's own namespace.
  const NS = 'ptah';
  const h = (args: string[]) => helmRun([...args, '--kubeconfig', kubeconfig]);
  const crds = plane.kubeConfig('admin').makeApiClient(ApiextensionsV1Api);
  const admin = await restClient(plane.kubeConfig('admin'), { fieldManager: 'ptah-helm-test' });
  const kc = plane.kubeConfig('admin');
  const [apps, core, registrations] = [kc.makeApiClient(AppsV1Api), kc.makeApiClient(CoreV1Api), kc.makeApiClient(AdmissionregistrationV1Api)];
  const deployment = () => apps.readNamespacedDeployment({ namespace: NS, name: INSTALL.deployment });
  const tlsSecret = () => core.readNamespacedSecret({ namespace: NS, name: INSTALL.tlsSecret });
  const crdNames = (await template(t)).filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name).sort();

  const installed = await h(['install', 'ptah', CHART, '--namespace', NS, '--create-namespace', '--set', 'webhook.certificate.source=generate']);
  t.equal(installed.code, 0, `helm install ${installed.stderr.trim()}`);
  const established: string[] = [];
  for (const name of crdNames) {
    established.push(await waitFor(async () => {
      const crd = await crds.readCustomResourceDefinition({ name });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? name : undefined;
    }, { what: `CRD ${name} established`, timeoutMs: 60_000 }));
  }
  const expected = Object.values(KINDS).map((k) => `${k.plural}.${GROUP}`).sort();
  t.same(crdNames, expected, `the chart installs one CRD per kind (${expected.length})`);
  t.same(established, expected, 'and the API server reports each Established');
  t.equal((await deployment()).spec?.replicas, 2, 'the Deployment, two replicas');
  t.equal(envOf(await deployment()).PTAH_MANAGER_USERNAME, `system:serviceaccount:${NS}:${INSTALL.serviceAccount}`, 'the manager told its identity');
  const certificate = (await tlsSecret()).data?.['tls.crt'];
  const validating = await registrations.readValidatingWebhookConfiguration({ name: 'ptah-operator' });
  const ca = (await tlsSecret()).data?.['ca.crt'];
  t.ok(validating.webhooks?.every((w) => w.clientConfig.caBundle === ca), 'the webhooks trust the generated CA');

  // A person's resources, which outlive the chart.
  await core.createNamespace({ body: { metadata: { name: 'shop' } } });
  const migration = await admin.create({
    apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, metadata: { name: 'orders', namespace: 'shop' },
    spec: { target: { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } }, artifact: { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'policy.json' } } },
  } as KubeObject);

  const upgraded = await h(['upgrade', 'ptah', CHART, '--namespace', NS, '--reuse-values', '--set', 'replicas=1,logLevel=debug,image.tag=next']);
  t.equal(upgraded.code, 0, `helm upgrade ${upgraded.stderr.trim()}`);
  const after = await deployment();
  t.equal(after.spec?.replicas, 1, 'upgrade: one replica');
  t.equal(envOf(after).PTAH_LOG_LEVEL, 'debug', 'upgrade: the log level reaches the manager');
  t.equal(after.spec?.template.spec?.containers[0]?.image, 'localhost/ptah-operator:next', 'upgrade: the new manager image');
  t.equal(envOf(after).PTAH_RUNNER_IMAGE, 'localhost/ptah-operator:next', 'upgrade: and its runner');
  t.equal((await tlsSecret()).data?.['tls.crt'], certificate, 'upgrade keeps the generated certificate');

  const refused = await h(['upgrade', 'ptah', CHART, '--namespace', NS, '--reuse-values', '--set', 'replicaCount=3']);
  t.not(refused.code, 0, 'an upgrade with a value outside the schema is refused');
  t.match(refused.stderr, /replicaCount/, 'naming it');
  t.equal((await deployment()).spec?.replicas, 1, 'and changes nothing');

  // A release whose CRD changed: the upgrade applies it (Helm's crds/ directory would not), the rollback takes it back.
  const changed = await mkdtemp(join(tmpdir(), 'ptah-chart-'));
  t.teardown(() => rm(changed, { recursive: true, force: true }));
  await cp(CHART, changed, { recursive: true });
  const crdFile = join(changed, 'templates/crds', `${KINDS.PtahSchema.plural}.yaml`);
  await writeFile(crdFile, (await readFile(crdFile, 'utf8')).replace(`    ${KEEP}: keep\n`, `    ${KEEP}: keep\n    ${MARK}: changed\n`));
  const schemaCrd = `${KINDS.PtahSchema.plural}.${GROUP}`;
  const mark = async () => (await crds.readCustomResourceDefinition({ name: schemaCrd })).metadata?.annotations?.[MARK];
  t.equal(await mark(), undefined, 'the installed CRD is unmarked');
  const crdUpgrade = await h(['upgrade', 'ptah', changed, '--namespace', NS, '--reuse-values']);
  t.equal(crdUpgrade.code, 0, `helm upgrade to a chart whose CRD changed ${crdUpgrade.stderr.trim()}`);
  t.equal(await mark(), 'changed', 'the upgrade applied the changed CRD');

  const rolledBack = await h(['rollback', 'ptah', '1', '--namespace', NS]);
  t.equal(rolledBack.code, 0, `helm rollback ${rolledBack.stderr.trim()}`);
  const restored = await deployment();
  t.equal(restored.spec?.replicas, 2, 'rollback: two replicas again');
  t.equal(envOf(restored).PTAH_LOG_LEVEL, undefined, 'rollback: the default log level again');
  t.equal(restored.spec?.template.spec?.containers[0]?.image, 'localhost/ptah-operator:dev', 'rollback: the first image again');
  t.equal(await mark(), undefined, 'rollback: the first revision\'s CRD again');

  const uninstalled = await h(['uninstall', 'ptah', '--namespace', NS]);
  t.equal(uninstalled.code, 0, `helm uninstall ${uninstalled.stderr.trim()}`);
  t.match(uninstalled.stdout + uninstalled.stderr, /kept due to the resource policy/, 'helm reports the CRDs kept');
  const gone = await deployment().then(() => 'present', (e: unknown) => (e instanceof ApiException ? e.code : e));
  t.equal(gone, 404, 'the Deployment is gone');
  for (const name of crdNames) {
    const crd = await crds.readCustomResourceDefinition({ name });
    t.equal(crd.metadata?.deletionTimestamp, undefined, `CRD ${name} stays`);
  }
  const kept = await admin.get<KubeObject>({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: 'shop', name: 'orders' });
  t.equal(kept.metadata?.uid, migration.metadata?.uid, 'the PtahMigration stays, the same object');
  t.strictSame((kept as { spec?: unknown }).spec, (migration as { spec?: unknown }).spec, 'as it was');

  const reinstalled = await h(['install', 'ptah', CHART, '--namespace', NS]);
  t.equal(reinstalled.code, 0, `a reinstall adopts the kept CRDs ${reinstalled.stderr.trim()}`);
});

t.test('a kustomize install moves to the chart: its objects, labelled and annotated for the release, are adopted as they are', async (t) => {
  const plane = await startControlPlane({ log: (line) => t.comment(line) });
  t.teardown(() => plane.stop());
  const kubeconfig = plane.kubeconfigs.admin;
  const kc = plane.kubeConfig('admin');
  const admin = await restClient(kc, { fieldManager: 'ptah-helm-test' });
  const k = async (args: string[]) => runCommand(await kubectl(), ['--kubeconfig', kubeconfig, ...args]);
  const h = (args: string[]) => helmRun([...args, '--kubeconfig', kubeconfig]);
  const manifests = join(REPO_ROOT, 'manifests');
  const applied = await k(['apply', '-k', manifests]);
  t.equal(applied.code, 0, `kubectl apply -k manifests/ ${applied.stderr.trim()}`);
  // What the chart will own: every object kustomize made but the Namespace, which stays the person's.
  const owned = parseObjects((await k(['kustomize', manifests])).stdout).filter((o) => o.kind !== 'Namespace').map(idOf).sort();
  const uids = async () => {
    const live = (JSON.parse((await k(['get', '-k', manifests, '-o', 'json'])).stdout) as { items: (Obj & { metadata: { uid: string } })[] }).items;
    return new Map(live.filter((o) => o.kind !== 'Namespace').map((o) => [idOf(o), o.metadata.uid]));
  };
  const before = await uids();
  t.same([...before.keys()].sort(), owned, `kustomize made all ${owned.length} objects`);
  await plane.kubeConfig('admin').makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'shop' } } });
  const migration = await admin.create({
    apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, metadata: { name: 'orders', namespace: 'shop' },
    spec: { target: { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } }, artifact: { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'policy.json' } } },
  } as KubeObject);

  const refused = await h(['install', 'ptah', CHART, '--namespace', NS]);
  t.not(refused.code, 0, 'helm install over the unmarked kustomize install is refused');
  t.match(refused.stderr, /exists and cannot be imported into the current release/, 'helm names an object it does not own');

  // docs/helm.md: Helm's adoption rule, applied to the whole kustomize install through its rendered file
  // (kubectl v1.37's `annotate -k` refuses to run: "the -k flag can't be used with -f or -R").
  const dir = await mkdtemp(join(tmpdir(), 'ptah-adopt-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'install.yaml');
  await writeFile(file, (await k(['kustomize', manifests])).stdout);
  const labelled = await k(['label', '--overwrite', '-f', file, 'app.kubernetes.io/managed-by=Helm']);
  t.equal(labelled.code, 0, `kubectl label ${labelled.stderr.trim()}`);
  const annotated = await k(['annotate', '--overwrite', '-f', file, 'meta.helm.sh/release-name=ptah', `meta.helm.sh/release-namespace=${NS}`]);
  t.equal(annotated.code, 0, `kubectl annotate ${annotated.stderr.trim()}`);
  // Client-side (docs/helm.md): kubectl's client-side apply owns every field, and Helm's default server-side apply
  // refused the install and a later upgrade with conflicts on those (a fieldRef, admission policies' matchConstraints).
  const adopted = await h(['install', 'ptah', CHART, '--namespace', NS, '--server-side=false']);
  t.equal(adopted.code, 0, `helm install --server-side=false adopts the kustomize install ${adopted.stderr.trim()}`);
  t.same(await uids(), before, 'every object is the one kustomize made: adopted, none replaced');
  const manifest = await h(['get', 'manifest', 'ptah', '--namespace', NS]);
  t.same([...byId(parseObjects(manifest.stdout)).keys()].sort(), owned, 'the release holds every object of the kustomize install but the Namespace');
  const kept = await admin.get<KubeObject>({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: 'shop', name: 'orders' });
  t.equal(kept.metadata?.uid, migration.metadata?.uid, 'a person\'s PtahMigration stays, the same object');

  const upgraded = await h(['upgrade', 'ptah', CHART, '--namespace', NS, '--reuse-values', '--set', 'image.tag=next']);
  t.equal(upgraded.code, 0, `helm upgrade of the adopted release ${upgraded.stderr.trim()}`);
  const deployment = await kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: NS, name: INSTALL.deployment });
  t.equal(deployment.spec?.template.spec?.containers[0]?.image, 'localhost/ptah-operator:next', 'and the chart now changes it');
});
