// The installation as one unit (`kubectl apply -k manifests/`), on the local control plane: the control plane's own
// kubectl renders it; the rendered objects are checked for what an operator's install owes (two replicas, a
// disruption budget, the NetworkPolicies, a non-root read-only manager, fail-closed webhooks); the API server
// validates every object in a server-side dry run; and the rendered webhook configurations, with the caBundle the
// ca-bundle component put in, are registered (renamed, scoped to this test's namespace, pointed at a manager process
// by URL instead of the Service no cluster network routes here) and the API server calls every route of that
// manager. Not proven: the Deployment's Pods running (the fake kubelet has no image for them; the image test runs
// the image's node and main), NetworkPolicy enforcement (there is no CNI), and cert-manager's injection (there is
// no cert-manager: the component is checked as rendered only).
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api, type V1Deployment, type V1MutatingWebhookConfiguration, type V1PodDisruptionBudget, type V1Service, type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { generateCertificates } from '../../certs/generate.js';
import { MANAGER_PORT, METRICS_PORT } from '../../src/shared/api/deployment.js';
import { API_SERVER_SOURCE_RANGES, DATABASE_PORTS, METRICS_SCRAPER_RANGES, type NetworkPolicyManifest } from '../../src/shared/api/install.js';
import { API_VERSION, INSTALL, KINDS } from '../../src/shared/api/names.js';
import { WEBHOOK_PATHS, WEBHOOK_TIMEOUT_SECONDS, type WebhookPath } from '../../src/shared/api/webhooks.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { operatorLabels } from '../../src/shared/job/metadata.js';
import { ApiError, restClient, type KubeClient, type KubeObject } from '../../src/shared/kube-client.js';
import { bindApprovers, sharedCluster, testNamespace, waitForCrdsEstablished } from '../../tools/stack/cluster.js';
import { httpsText, startManagerProcess, type ManagerProcess } from '../harness/manager-process.js';
import { applyManifestFile, kubectl as kubectlPath } from '../../tools/stack/manifests.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { freePort } from '../../tools/stack/ports.js';
import { waitFor } from '../../tools/stack/wait.js';
import { TEST_MANAGER_IMAGES } from './manager-service.js';

const cluster = sharedCluster();
const MANIFESTS = join(REPO_ROOT, 'manifests');
const FIELD_MANAGER = 'ptah-install-test';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  [field: string]: unknown;
}
type WebhookConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The control plane's kubectl as the administrator. */
async function kubectl(args: string[]): Promise<Run> {
  const bin = await kubectlPath();
  return new Promise((resolve) => {
    execFile(bin, ['--kubeconfig', cluster.state.kubeconfigs.admin, ...args], { timeout: 120_000, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

const parseObjects = (text: string): Obj[] => parseAllDocuments(text).map((d) => d.toJS() as Obj | null).filter((o): o is Obj => o !== null);
const idOf = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byKind = <T>(objects: Obj[], kind: string): T[] => objects.filter((o) => o.kind === kind) as unknown as T[];
const one = <T>(t: Test, objects: Obj[], kind: string): T => {
  const found = byKind<T>(objects, kind);
  t.equal(found.length, 1, `one ${kind}`);
  return found[0]!;
};

/** `kubectl kustomize dir`: the objects, or a failed assertion with kubectl's message. */
async function render(t: Test, dir: string): Promise<Obj[]> {
  const run = await kubectl(['kustomize', dir]);
  t.equal(run.code, 0, `kubectl kustomize ${dir.replace(`${REPO_ROOT}/`, '')} succeeds ${run.stderr.trim()}`);
  return parseObjects(run.stdout);
}

/**
 * An installer's own kustomization beside a copy of manifests/: the installation plus `component`, with `caPem` as
 * the ca-bundle component's ca.crt. Returns the directory to render.
 */
async function overlay(t: Test, component: 'ca-bundle' | 'cert-manager', caPem?: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `ptah-install-${component}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await cp(MANIFESTS, join(dir, 'manifests'), { recursive: true });
  if (caPem !== undefined) await writeFile(join(dir, 'manifests/ca-bundle/ca.crt'), caPem);
  const install = join(dir, 'install');
  await mkdir(install);
  await writeFile(join(install, 'kustomization.yaml'), `resources:\n  - ../manifests\ncomponents:\n  - ../manifests/${component}\n`);
  return install;
}

/** The objects of every manifest file the installation is made of (top level and crds/, the kustomizations aside). */
async function manifestFileObjects(): Promise<Obj[]> {
  const files = [
    ...(await readdir(MANIFESTS)).filter((f) => f.endsWith('.yaml')),
    ...(await readdir(join(MANIFESTS, 'crds'))).filter((f) => f.endsWith('.yaml')).map((f) => `crds/${f}`),
  ].filter((f) => !f.endsWith('kustomization.yaml'));
  const objects: Obj[] = [];
  for (const file of files) objects.push(...parseObjects(await readFile(join(MANIFESTS, file), 'utf8')));
  return objects;
}

t.test('kubectl kustomize manifests/ renders every manifest file, the Namespace first', async (t) => {
  const rendered = await render(t, MANIFESTS);
  t.same(rendered.map(idOf).sort(), (await manifestFileObjects()).map(idOf).sort(), 'exactly the objects of the manifest files');
  t.equal(rendered[0]?.kind, 'Namespace', 'the Namespace comes first');
  t.equal(rendered[0]?.metadata.name, INSTALL.namespace);
  const crds = rendered.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name).sort();
  const crdFiles = (await readdir(join(MANIFESTS, 'crds'))).filter((f) => f !== 'kustomization.yaml');
  t.equal(crds.length, crdFiles.length, 'one CRD per file in manifests/crds');
  t.ok(crds.includes(`${KINDS.PtahSchema.plural}.${API_VERSION.split('/')[0]}`), 'the PtahSchema CRD among them');
});

t.test('the rendered manager: two non-root replicas on a read-only root, a disruption budget, only the API server in', async (t) => {
  const rendered = await render(t, MANIFESTS);
  const deployment = one<V1Deployment>(t, rendered, 'Deployment');
  const spec = deployment.spec!;
  t.equal(spec.replicas, 2, 'two replicas');
  const podLabels = spec.template.metadata!.labels!;
  t.same(spec.selector.matchLabels, podLabels, 'the Deployment selects its own Pods');
  const pod = spec.template.spec!;
  t.equal(pod.serviceAccountName, INSTALL.serviceAccount);
  t.not(pod.automountServiceAccountToken, false, 'the manager keeps its ServiceAccount token (it is the API client); operation Pods run without one');
  t.equal(pod.securityContext?.runAsNonRoot, true, 'the Pod runs as non-root');
  t.equal(pod.containers.length, 1);
  const container = pod.containers[0]!;
  t.match(container.securityContext, {
    runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' },
  }, 'uid 65532, read-only root, no privilege escalation, no capabilities');
  t.same(container.volumeMounts?.map((m) => m.mountPath).sort(), ['/etc/ptah/tls', '/tmp'], 'writable only where a volume is: /tmp (and the certificate, read-only)');
  const https = container.ports?.find((p) => p.name === 'https');
  t.equal(https?.containerPort, MANAGER_PORT);
  t.equal(container.ports?.find((p) => p.name === 'metrics')?.containerPort, METRICS_PORT, '/metrics on a port of its own');
  t.equal(container.env?.find((e) => e.name === 'PTAH_METRICS_PORT')?.value, String(METRICS_PORT), 'the port the manager is told');
  t.match(container.livenessProbe, { httpGet: { path: '/healthz', port: 'https', scheme: 'HTTPS' } }, 'liveness on /healthz');
  t.match(container.readinessProbe, { httpGet: { path: '/readyz', port: 'https', scheme: 'HTTPS' } }, 'readiness on /readyz');
  t.ok(pod.volumes?.some((v) => v.secret?.secretName === INSTALL.tlsSecret), `the serving certificate from Secret ${INSTALL.tlsSecret}`);

  const service = one<V1Service>(t, rendered, 'Service');
  t.same(service.spec?.selector, podLabels, 'the Service selects the manager Pods');
  t.same(service.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]), [['https', 443, 'https'], ['metrics', METRICS_PORT, 'metrics']],
    'port 443 to the https container port, the metrics port to the metrics one');

  const pdb = one<V1PodDisruptionBudget>(t, rendered, 'PodDisruptionBudget');
  t.equal(pdb.metadata?.namespace, INSTALL.namespace);
  t.equal(pdb.spec?.minAvailable, 1, 'minAvailable 1');
  t.same(pdb.spec?.selector?.matchLabels, podLabels, 'the budget covers the manager Pods');

  const policy = one<NetworkPolicyManifest>(t, rendered, 'NetworkPolicy');
  t.equal(policy.metadata?.namespace, INSTALL.namespace);
  t.same(policy.spec.podSelector?.matchLabels, podLabels, 'the policy selects the manager Pods');
  t.same(policy.spec?.policyTypes, ['Ingress'], 'it restricts what comes in (the manager reaches the API server freely)');
  t.equal(policy.spec.ingress?.length, 2, 'two ingress rules, narrowed one by one');
  const [rule, scrapes] = policy.spec.ingress!;
  t.same(rule!.ports, [{ protocol: 'TCP', port: MANAGER_PORT }], 'the first to the webhook port only');
  t.same(scrapes!.ports, [{ protocol: 'TCP', port: METRICS_PORT }], 'the second to the metrics port only');
  for (const [what, from, ranges] of [['the API server', rule!.from, API_SERVER_SOURCE_RANGES], ['scrapers', scrapes!.from, METRICS_SCRAPER_RANGES]] as const) {
    t.same(from.map((peer) => Object.keys(peer)), from.map(() => ['ipBlock']), `${what}: from address ranges only, no Pod or namespace is admitted`);
    t.same(from.map((peer) => peer.ipBlock?.cidr), [...ranges], `${what}: the default private ranges (README says how to narrow them)`);
  }
});

t.test('the rendered webhooks fail closed within their timeout and reach the manager through its Service', async (t) => {
  const rendered = await render(t, MANIFESTS);
  const configurations = [...byKind<WebhookConfiguration>(rendered, 'MutatingWebhookConfiguration'), ...byKind<WebhookConfiguration>(rendered, 'ValidatingWebhookConfiguration')];
  t.equal(configurations.length, 2, 'a mutating and a validating configuration');
  const paths: string[] = [];
  for (const hook of configurations.flatMap((c) => c.webhooks ?? [])) {
    t.equal(hook.failurePolicy, 'Fail', `${hook.name}: failurePolicy Fail`);
    t.equal(hook.timeoutSeconds, WEBHOOK_TIMEOUT_SECONDS, `${hook.name}: timeoutSeconds ${WEBHOOK_TIMEOUT_SECONDS}`);
    t.equal(hook.sideEffects, 'None', `${hook.name}: no side effects`);
    t.match(hook.clientConfig.service, { namespace: INSTALL.namespace, name: INSTALL.webhookService, port: 443 }, `${hook.name}: through the Service`);
    paths.push(hook.clientConfig.service?.path ?? '');
  }
  t.same(paths.sort(), Object.values(WEBHOOK_PATHS).sort(), 'every route the manager serves, once');
});

t.test('the operation Pods\' NetworkPolicy: applied per namespace, it lets them reach only a database port and DNS', async (t) => {
  const ns = await testNamespace(t);
  const dir = join(MANIFESTS, 'operation-pods');
  const applied = await kubectl(['apply', '--server-side', '--field-manager', FIELD_MANAGER, '-n', ns, '-k', dir]);
  t.equal(applied.code, 0, `kubectl apply -n <namespace> -k manifests/operation-pods ${applied.stderr.trim()}`);
  const stored = await kubectl(['get', 'networkpolicy', '-n', ns, '-o', 'json']);
  const items = (JSON.parse(stored.stdout) as { items: NetworkPolicyManifest[] }).items;
  t.same(items.map((p) => p.metadata?.name), ['ptah-operation-pods'], 'the policy lands in the namespace kubectl names');
  const policy = items[0]!;
  const selector = policy.spec.podSelector?.matchLabels ?? {};
  t.ok(Object.keys(selector).length > 0, 'it selects some Pods, not every Pod of the namespace');
  for (const family of ['schema', 'migration'] as const) {
    const labels = operatorLabels(family, 'orders', 'Apply', 'op-1');
    t.ok(Object.entries(selector).every(([k, v]) => labels[k] === v), `it selects a ${family} operation Pod by the labels the Job builder gives it`);
  }
  t.same(policy.spec.policyTypes, ['Ingress', 'Egress'], 'both directions are restricted');
  t.same(policy.spec.ingress, undefined, 'nothing may connect to an operation Pod');
  t.same(policy.spec.egress, [
    { ports: DATABASE_PORTS.map((port) => ({ protocol: 'TCP', port })) },
    { ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] },
  ], 'egress: the database port and DNS, nothing else (no API server: the Pods have no token)');
});

t.test('the cert-manager component: a Certificate for the Service into the Secret the Deployment mounts, injected into both configurations', async (t) => {
  const rendered = await render(t, await overlay(t, 'cert-manager'));
  const certificate = one<Obj & { spec: { secretName: string; dnsNames: string[]; issuerRef: { kind: string; name: string } } }>(t, rendered, 'Certificate');
  t.equal(certificate.metadata.namespace, INSTALL.namespace);
  t.equal(certificate.spec.secretName, INSTALL.tlsSecret, 'cert-manager writes the Secret the Deployment mounts');
  t.ok(certificate.spec.dnsNames.includes(`${INSTALL.webhookService}.${INSTALL.namespace}.svc`), 'the name the API server dials');
  const issuer = one<Obj>(t, rendered, 'Issuer');
  t.same(certificate.spec.issuerRef, { kind: 'Issuer', name: issuer.metadata.name }, 'issued by the Issuer the component ships');
  for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
    const config = one<Obj>(t, rendered, kind);
    t.equal(config.metadata.annotations?.['cert-manager.io/inject-ca-from'], `${INSTALL.namespace}/${certificate.metadata.name}`, `${kind}: cert-manager injects the Certificate's CA`);
  }
  t.same(rendered.filter((o) => !['Certificate', 'Issuer'].includes(o.kind)).map(idOf).sort(), (await render(t, MANIFESTS)).map(idOf).sort(),
    'otherwise the plain installation');
});

t.test('the installation passes a server-side dry run: every object against the real schemas and admission', async (t) => {
  // The namespace must exist for the dry run of what goes in it; other test files apply rbac.yaml the same way.
  await applyManifestFile(cluster.kubeConfig('admin'), 'manifests/rbac.yaml');
  const rendered = await render(t, MANIFESTS);
  const dir = await mkdtemp(join(tmpdir(), 'ptah-install-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'install.yaml');
  await writeFile(file, (await kubectl(['kustomize', MANIFESTS])).stdout);
  const run = await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager', FIELD_MANAGER, '--dry-run=server', '-f', file]);
  t.equal(run.code, 0, `kubectl apply --server-side --dry-run=server succeeds ${run.stderr.trim()}`);
  const lines = run.stdout.trim().split('\n');
  t.ok(lines.every((l) => l.endsWith(' serverside-applied (server dry run)')), 'every line is a dry-run apply');
  const kindOf = (o: Obj) => `${o.kind.toLowerCase()}${o.apiVersion.includes('/') ? `.${o.apiVersion.split('/')[0]}` : ''}`;
  t.same(lines.map((l) => l.replace(/ serverside-applied \(server dry run\)$/, '')).sort(), rendered.map((o) => `${kindOf(o)}/${o.metadata.name}`).sort(),
    'the API server accepted every rendered object');

  // The check can fail: an object the schema refuses is reported, not passed.
  const broken = rendered.map((o) => (o.kind === 'PodDisruptionBudget' ? { ...o, spec: { minAvailable: 'one' } } : o));
  await writeFile(file, broken.map((o) => JSON.stringify(o)).join('\n---\n'));
  const refused = await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager', FIELD_MANAGER, '--dry-run=server', '-f', file]);
  t.not(refused.code, 0, 'a PodDisruptionBudget with an invalid minAvailable fails the dry run');
  t.match(refused.stderr, /minAvailable/, 'naming the field');
});

/** controller_runtime_webhook_requests_total by route: how many admission requests the manager has answered. */
async function answeredByRoute(url: string, caPem: string): Promise<Record<string, number>> {
  const { body } = await httpsText(`${url}/metrics`, caPem);
  const counts: Record<string, number> = {};
  for (const line of body.split('\n')) {
    const m = /^controller_runtime_webhook_requests_total\{.*webhook="([^"]+)".*\} (\d+)/.exec(line);
    if (m) counts[m[1]!] = (counts[m[1]!] ?? 0) + Number(m[2]);
  }
  return counts;
}
const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/**
 * The rendered webhook configurations as this test registers them: renamed, each hook sent to `url` + its Service
 * path and called only for objects labelled `scope` in `ns` (the label alone scopes the cluster-scoped PtahRealm hook,
 * which a namespaceSelector does not), everything else (rules, caBundle, failurePolicy, timeouts, match conditions)
 * as rendered.
 */
function scopedCopy<C extends WebhookConfiguration>(config: C, name: string, ns: string, url: string): C {
  const copy = structuredClone(config);
  copy.metadata = { name };
  for (const hook of copy.webhooks ?? []) {
    hook.clientConfig = { url: new URL(hook.clientConfig.service?.path ?? '/', url).toString(), caBundle: hook.clientConfig.caBundle };
    hook.namespaceSelector = { matchLabels: { 'kubernetes.io/metadata.name': ns } };
    hook.objectSelector = { matchLabels: { [SCOPE_LABEL]: ns } };
  }
  return copy;
}
const SCOPE_LABEL = 'ptah.run/install-test';

t.test('the rendered webhooks, with the ca-bundle component\'s caBundle, are called by the API server; another CA fails closed', async (t) => {
  const crdNames: string[] = [];
  for (const file of (await readdir(join(MANIFESTS, 'crds'))).filter((f) => f !== 'kustomization.yaml')) {
    for (const crd of await applyManifestFile(cluster.kubeConfig('admin'), `manifests/crds/${file}`)) crdNames.push(crd.metadata?.name ?? '');
  }
  await waitForCrdsEstablished(crdNames);
  await applyManifestFile(cluster.kubeConfig('admin'), 'manifests/rbac.yaml');
  const ns = await testNamespace(t);
  // The manager reconciles another namespace: the objects the probes write here stay as written.
  const managerNs = await testNamespace(t);
  await bindApprovers(ns);
  const dir = await mkdtemp(join(tmpdir(), 'ptah-install-manager-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const [serving, stranger, port, metricsPort] = await Promise.all([
    generateCertificates({ outDir: join(dir, 'serving'), sans: ['IP:127.0.0.1'], commonName: 'ptah-install-manager' }),
    generateCertificates({ outDir: join(dir, 'stranger'), sans: ['IP:127.0.0.1'], commonName: 'not the manager' }),
    freePort(),
    freePort(),
  ]);
  const caPem = await readFile(serving.caCert, 'utf8');
  const strangerCa = await readFile(stranger.caCert, 'utf8');
  const manager: ManagerProcess = await startManagerProcess({
    name: 'install-manager', logFile: join(dir, 'manager.log'), kubeconfig: cluster.state.kubeconfigs.manager, certDir: serving.dir, caPem, port, metricsPort,
    leaseNamespace: managerNs, watchNamespace: managerNs, ...TEST_MANAGER_IMAGES, revision: TEST_MANAGER_IMAGES.controllerRevision,
  });
  t.teardown(() => manager.kill());

  const registrations = cluster.kubeConfig('admin').makeApiClient(AdmissionregistrationV1Api);
  const as = (identity: 'admin' | 'manager' | 'approver'): Promise<KubeClient> => restClient(cluster.kubeConfig(identity), { fieldManager: FIELD_MANAGER });
  const [admin, managerClient, approver] = await Promise.all([as('admin'), as('manager'), as('approver')]);
  const register = async (pem: string, suffix: string): Promise<() => Promise<void>> => {
    const rendered = await render(t, await overlay(t, 'ca-bundle', pem));
    const mutating = one<V1MutatingWebhookConfiguration>(t, rendered, 'MutatingWebhookConfiguration');
    const validating = one<V1ValidatingWebhookConfiguration>(t, rendered, 'ValidatingWebhookConfiguration');
    const bundles = [...mutating.webhooks ?? [], ...validating.webhooks ?? []].map((h) => Buffer.from(h.clientConfig.caBundle ?? '', 'base64').toString('utf8'));
    t.same(bundles, Object.values(WEBHOOK_PATHS).map(() => pem), `ca-bundle (${suffix}): every rendered webhook carries ca.crt as its caBundle`);
    const name = `ptah-install-${suffix}-${ns}`.slice(0, 63);
    await registrations.createMutatingWebhookConfiguration({ body: scopedCopy(mutating, name, ns, manager.url) });
    await registrations.createValidatingWebhookConfiguration({ body: scopedCopy(validating, name, ns, manager.url) });
    return async () => {
      await registrations.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
      await registrations.deleteValidatingWebhookConfiguration({ name }).catch(() => undefined);
    };
  };
  const labels = { [SCOPE_LABEL]: ns };
  const probeControllerWrite = () => managerClient.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'ptah-install-probe-', namespace: ns, labels } }, { dryRun: true });

  // Another CA in ca.crt: the API server cannot verify the manager, and the webhooks fail closed.
  const unregisterStranger = await register(strangerCa, 'stranger');
  const before = total(await answeredByRoute(manager.metricsUrl, caPem));
  const refusal = await waitFor(async () => {
    const outcome = await probeControllerWrite().then(() => undefined, (e: unknown) => e);
    return outcome instanceof ApiError && /failed calling webhook/.test(outcome.status.message ?? '') ? outcome : undefined;
  }, { what: 'the API server to call the webhooks registered with another CA', timeoutMs: 30_000 });
  t.match(refusal.status.message, /controller-write\.operator\.ptah\.run.*(x509|certificate)/, 'refused: the certificate is not signed by the bundle\'s CA');
  t.equal(total(await answeredByRoute(manager.metricsUrl, caPem)), before, 'and the manager answered nothing');
  await unregisterStranger();

  const unregister = await register(caPem, 'manager');
  t.teardown(unregister);
  // Until the stranger's configurations are gone from the API server's cache a probe may still be refused by them.
  await waitFor(async () => {
    const seen = total(await answeredByRoute(manager.metricsUrl, caPem));
    const outcome = await probeControllerWrite().then(() => 'admitted', (e: Error) => e.message);
    return total(await answeredByRoute(manager.metricsUrl, caPem)) > seen && !/x509|certificate/.test(outcome) ? true : undefined;
  }, { what: 'the API server to call the manager through the rendered webhooks only', timeoutMs: 30_000 });

  const migration = await admin.create({
    apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, metadata: { name: 'orders', namespace: ns },
    spec: { target: { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } }, artifact: { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'policy.json' } } },
  } as KubeObject);
  // Writes of the kinds and verbs the routes' rules name; refusals are fine, calls are counted.
  const probes: { routes: WebhookPath[]; write: () => Promise<unknown> }[] = [
    { routes: [WEBHOOK_PATHS.controllerWrite], write: probeControllerWrite },
    {
      routes: [WEBHOOK_PATHS.statusWrite],
      write: () => admin.patch({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: ns, name: 'orders' }, { metadata: { labels } }, 'merge', { dryRun: true }),
    },
    {
      // A decision kind's CREATE: the mutating stamp route first, then the validating decision route.
      routes: [WEBHOOK_PATHS.stamp, WEBHOOK_PATHS.decision],
      write: () => approver.create({
        apiVersion: API_VERSION, kind: KINDS.PtahMigrationApproval.kind, metadata: { name: 'probe', namespace: ns, labels },
        spec: { migrationRef: { name: 'orders', uid: migration.metadata?.uid }, planRef: { name: 'ptah-mplan-probe', uid: 'no-such-plan' }, planFingerprint: sha256Digest('probe') },
      } as KubeObject, { dryRun: true }),
    },
    {
      routes: [WEBHOOK_PATHS.realm],
      write: () => admin.create({
        apiVersion: API_VERSION, kind: KINDS.PtahRealm.kind, metadata: { name: `ptah-install-probe-${ns}`.slice(0, 63), labels },
        spec: { engine: 'PostgreSQL', namespaces: [ns], sharing: 'Exclusive' },
      } as KubeObject, { dryRun: true }),
    },
  ];
  t.same(probes.flatMap((p) => p.routes).sort(), Object.values(WEBHOOK_PATHS).sort(), 'a probe for every route');
  const start = await answeredByRoute(manager.metricsUrl, caPem);
  const outcomes: string[] = [];
  for (const probe of probes) outcomes.push(await probe.write().then(() => 'admitted', (e: Error) => e.message));
  const end = await answeredByRoute(manager.metricsUrl, caPem);
  for (const path of Object.values(WEBHOOK_PATHS)) {
    t.ok((end[path] ?? 0) > (start[path] ?? 0), `the API server called ${path} through the rendered configuration`, { outcomes });
  }
});
