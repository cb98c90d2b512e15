// `npm run local`: the operator on a local control plane. Starts PostgreSQL, etcd, kube-apiserver,
// kube-controller-manager and the fake kubelet (tools/stack, which the tests run on too), installs the CRDs, RBAC and admission
// policies, runs the manager as a child process with the manager's own identity, registers its webhooks with the
// API server by URL, applies the sample PtahMigration against a fresh database, approves its plan as the approver
// identity, and follows it until it converges. The same migrations are pushed to a local registry (TLS, basic auth)
// with `kubectl ptah push` and run by a second PtahMigration from there (docs/oci-artifacts.md). Ctrl-C (or SIGTERM) tears everything down. The manager and the
// runner run from the compiled build (dist/) under plain node, as in production; it is brought up to date first.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile, copyFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { generateCertificates } from '../../certs/generate.js';
import { buildDist } from '../stack/build.js';
import { applyManifestFile, crdManifestFiles } from '../stack/manifests.js';
import { REPO_ROOT } from '../stack/paths.js';
import { createTestDatabase } from '../stack/postgres.js';
import { startStack, type Stack } from '../stack/stack.js';
import { registerWebhooks } from '../stack/webhooks.js';
import { startRegistry, type RunningRegistry } from '../stack/registry.js';
import { run as kubectlPtah } from '../../src/cli/kubectl-ptah.js';
import { defaultImages, RUNNER_IMAGE } from '../stack/kubelet/images.js';
import { API_VERSION, INSTALL, KINDS } from '../../src/shared/api/names.js';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { registerResource, restClient, type KubeClient, type KubeObject } from '../../src/shared/kube-client.js';

const LOCAL_DIR = join(REPO_ROOT, '.local');
const DEMO_NAMESPACE = 'ptah-demo';
const SAMPLE = 'examples/ptahmigration-orders.yaml';
const SCHEMA_SAMPLE = 'examples/ptahschema-catalog.yaml';

/** The local registry, once started: stopped with the stack. */
let localRegistry: RunningRegistry | undefined;

const say = (line: string): void => {
  process.stdout.write(`[local] ${line}\n`);
};

async function main(): Promise<void> {
  await mkdir(LOCAL_DIR, { recursive: true });
  say(`build in dist/ is current (${await buildDist()} ms)`);
  say('starting PostgreSQL, etcd, kube-apiserver, kube-controller-manager and the fake kubelet…');
  const stack = await startStack({ log: (line) => say(line), images: defaultImages(REPO_ROOT, 'compiled') });
  let manager: ChildProcess | undefined;
  let stopping = false;
  const stop = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      say('tearing down');
      manager?.kill('SIGTERM');
      await localRegistry?.stop();
      await stack.stop();
    }
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  try {
    manager = await run(stack);
  } catch (e) {
    process.stderr.write(`[local] ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
    await stop(1);
  }
}

async function run(stack: Stack): Promise<ChildProcess> {
  const t = stack.timings;
  say(`control plane ready: etcd ${t.etcdReadyMs} ms, kube-apiserver ${t.apiserverReadyMs} ms, kube-controller-manager ${t.controllerManagerReadyMs} ms (state in ${stack.state.dir})`);
  for (const id of ['admin', 'manager', 'approver'] as const) await copyFile(stack.state.kubeconfigs[id], join(LOCAL_DIR, `${id}.kubeconfig`));
  const pgUrl = stack.postgres?.url ?? '';
  await writeFile(
    join(LOCAL_DIR, 'env'),
    `export KUBECONFIG=${join(LOCAL_DIR, 'admin.kubeconfig')}\nexport PTAH_LOCAL_PG_URL='${pgUrl}'\n`,
    { mode: 0o600 },
  );

  const admin = stack.controlPlane.kubeConfig('admin');
  for (const file of await crdManifestFiles()) await applyManifestFile(admin, join('manifests/crds', file));
  await applyManifestFile(admin, 'manifests/rbac.yaml');
  await applyManifestFile(admin, 'manifests/status-write-policy.yaml');
  const client = await restClient(admin);
  await waitFor('the Ptah CRDs to be served', async () => (await client.list(API_VERSION, KINDS.PtahMigration.kind, undefined).then(() => true, () => false)) || undefined);

  // The manager: its own process, its own identity (no Secret permission), its own serving certificate.
  const certs = await generateCertificates({ outDir: join(LOCAL_DIR, 'certs') });
  const [port, metricsPort] = [await freePort(), await freePort()];
  const manager = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'dist/src/main.js'),
      '--kubeconfig', join(LOCAL_DIR, 'manager.kubeconfig'),
      '--cert-dir', certs.dir,
      '--listen-host', '127.0.0.1',
      '--port', String(port),
      '--metrics-port', String(metricsPort),
      '--lease-namespace', INSTALL.namespace,
      '--runner-image', RUNNER_IMAGE,
      '--controller-image', 'localhost/ptah-operator:local',
      '--revision', 'local',
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const managerLog = join(LOCAL_DIR, 'manager.log');
  await writeFile(managerLog, '');
  const { appendFileSync } = await import('node:fs');
  manager.stdout?.on('data', (chunk: Buffer) => appendFileSync(managerLog, chunk));
  manager.stderr?.on('data', (chunk: Buffer) => appendFileSync(managerLog, chunk));
  manager.on('exit', (code, signal) => say(`the manager exited (${signal ?? code}); see ${managerLog}`));
  const base = `https://127.0.0.1:${port}`;
  const ca = await readFile(certs.caCert, 'utf8');
  await waitFor('the manager to serve /healthz', async () => ((await httpsGet(`${base}/healthz`, ca)).status === 200 ? true : undefined));
  // The API server calls the webhooks once it has picked the configuration up: a manager ConfigMap create (dry
  // run) is then refused by the controller-write webhook, which names itself in the refusal.
  let answered = 0;
  const managerClient = await restClient(stack.controlPlane.kubeConfig('manager'));
  const probe = () => managerClient
    .create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { generateName: 'ptah-webhook-probe-', namespace: INSTALL.namespace } }, { dryRun: true })
    .catch((e: unknown) => {
      if (e instanceof Error && e.message.includes('controller-write.operator.ptah.run')) answered++;
      throw e;
    });
  const cluster = { state: stack.state, kubeConfig: (id: 'admin' | 'manager' | 'approver') => stack.controlPlane.kubeConfig(id), pki: async () => stack.controlPlane.pki };
  await registerWebhooks(base, ca, { answered: () => answered, probe, name: 'ptah-local', cluster });
  say(`manager serving admission at ${base}, /metrics at https://127.0.0.1:${metricsPort}/metrics; its log is ${managerLog}`);

  await prepareNamespace(client);
  await applySample(client, pgUrl, SCHEMA_SAMPLE, 'catalog');
  await applySample(client, pgUrl, SAMPLE, 'orders');
  localRegistry = await startRegistry(stack.controlPlane.pki);
  await applyRegistrySample(client, pgUrl, localRegistry);
  say('');
  say('Point kubectl at it:   source .local/env && kubectl get ptahschemas,ptahmigrations -A');
  say(`PostgreSQL superuser:  $PTAH_LOCAL_PG_URL (in .local/env)`);
  say('');
  const approver = await restClient(stack.controlPlane.kubeConfig('approver'));
  await Promise.all([followSchemaSample(client, approver), followSample(client, approver, 'orders'), followSample(client, approver, 'orders-oci')]);
  say('the three samples converged; the stack keeps running until Ctrl-C');
  return manager;
}

/** The approver identity (group ptah-approvers) may approve in the demo namespace, as an installation grants it. */
async function prepareNamespace(client: KubeClient): Promise<void> {
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: DEMO_NAMESPACE } }).catch(() => undefined);
  registerResource('rbac.authorization.k8s.io/v1', 'RoleBinding', { plural: 'rolebindings', namespaced: true });
  await client.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'ptah-approvers', namespace: DEMO_NAMESPACE },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: INSTALL.approverRole },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'ptah-approvers' }],
  } as KubeObject);
}

/** A sample's objects into the demo namespace, its Secret pointed at a fresh database on the local server. */
async function applySample(client: KubeClient, pgUrl: string, sample: string, database: string): Promise<void> {
  const db = await createTestDatabase(pgUrl, database);
  const docs = parseAllDocuments(await readFile(join(REPO_ROOT, sample), 'utf8')).map((d) => d.toJS() as KubeObject & { stringData?: Record<string, string> });
  for (const doc of docs) {
    if (!doc) continue;
    doc.metadata = { ...doc.metadata, namespace: DEMO_NAMESPACE };
    if (doc.kind === 'Secret' && doc.stringData) doc.stringData.url = db.url;
    await client.create(doc);
  }
  say(`applied ${sample} in namespace ${DEMO_NAMESPACE} (database ${db.name})`);
}

/**
 * The sample's migrations as an OCI artifact: pushed to the local registry with `kubectl ptah push`, and PtahMigration
 * orders-oci naming it by tag, with the registry's Secret and CA and a policy that requires the artifact type and
 * the source and revision annotations, against a fresh database.
 */
async function applyRegistrySample(client: KubeClient, pgUrl: string, registry: RunningRegistry): Promise<void> {
  const docs = parseAllDocuments(await readFile(join(REPO_ROOT, SAMPLE), 'utf8')).map((d) => d.toJS() as KubeObject & { data?: Record<string, string>; spec?: PtahMigration['spec'] });
  const files = docs.find((d) => d?.kind === 'ConfigMap' && d.metadata?.name === 'orders-migrations-r1')?.data ?? {};
  const dir = join(LOCAL_DIR, 'orders-migrations');
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  const reference = `${registry.host}/shop/orders-migrations:r1`;
  const out: string[] = [];
  const code = await kubectlPtah(['push', dir, reference, '--registry-config', join(registry.dockerConfigDir, 'config.json'), '--ca-file', registry.caFile,
    '--annotation', 'org.opencontainers.image.source=https://git.example.com/shop/orders', '--annotation', 'org.opencontainers.image.revision=r1'],
  { out: (line) => out.push(line), err: (line) => out.push(line) });
  if (code !== 0) throw new Error(`kubectl ptah push failed: ${out.join('\n')}`);
  say(`pushed the sample's migrations to the local registry: ${out[0]}`);

  const db = await createTestDatabase(pgUrl, 'orders_oci');
  const ns = DEMO_NAMESPACE;
  await client.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'orders-oci-db', namespace: ns }, stringData: { url: db.url } } as KubeObject);
  await client.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'local-registry', namespace: ns }, type: 'kubernetes.io/dockerconfigjson',
    stringData: { '.dockerconfigjson': await readFile(join(registry.dockerConfigDir, 'config.json'), 'utf8') } } as KubeObject);
  await client.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'local-registry-ca', namespace: ns }, data: { 'ca.pem': registry.caPem } } as KubeObject);
  await client.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'orders-oci-policy', namespace: ns }, immutable: true, data: {
    'policy.yaml': 'version: 1\nartifactTypes: [application/vnd.ptah-operator.migrations.v1]\nrequiredAnnotations: [org.opencontainers.image.source, org.opencontainers.image.revision]\n',
  } } as KubeObject);
  const sample = docs.find((d) => d?.kind === KINDS.PtahMigration.kind)!;
  await client.create({
    ...sample,
    metadata: { name: 'orders-oci', namespace: ns },
    spec: {
      ...sample.spec!,
      target: { ...sample.spec!.target, coordinationKey: 'orders-oci-db', urlFrom: { name: 'orders-oci-db', key: 'url' } },
      artifact: {
        oci: { reference, registryAuthFrom: { name: 'local-registry' }, caFrom: { name: 'local-registry-ca', key: 'ca.pem' } },
        verificationPolicyRef: { name: 'orders-oci-policy', key: 'policy.yaml' },
      },
    },
  } as KubeObject);
  say(`applied PtahMigration orders-oci in namespace ${ns} from ${reference} (database ${db.name})`);
}

/** Follows a sample PtahMigration through its lifecycle, approving its plans as the approver identity. */
async function followSample(client: KubeClient, approver: KubeClient, name: string): Promise<void> {
  const ref = { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: DEMO_NAMESPACE, name };
  let lastPhase = '';
  let approvedPlan = '';
  await waitFor(`the sample PtahMigration ${name} to converge`, async () => {
    const m = await client.get<PtahMigration>(ref);
    const s = m.status ?? {};
    const ready = s.conditions?.find((c) => c.type === 'Ready');
    const phase = `${s.phase ?? 'Pending'}${ready?.reason ? ` (${ready.reason})` : ''}`;
    if (phase !== lastPhase) say(`${name}: ${(lastPhase = phase)}`);
    if (s.phase === 'AwaitingApproval' && s.plan && s.plan.name !== approvedPlan) {
      const plan = await client.get<KubeObject & { spec: { fingerprint: string; migrations: { version: string }[] } }>({ apiVersion: API_VERSION, kind: KINDS.PtahMigrationPlan.kind, namespace: DEMO_NAMESPACE, name: s.plan.name });
      await approver.create({
        apiVersion: API_VERSION,
        kind: KINDS.PtahMigrationApproval.kind,
        metadata: { generateName: `${name}-approval-`, namespace: DEMO_NAMESPACE },
        spec: { migrationRef: { name, uid: m.metadata.uid }, planRef: s.plan, planFingerprint: plan.spec.fingerprint },
      });
      approvedPlan = s.plan.name;
      say(`approved plan ${s.plan.name} (versions ${plan.spec.migrations.map((x) => x.version).join(', ')}) as the approver identity`);
    }
    if (s.phase === 'InSync' && s.lastRun?.outcome === 'Applied') {
      if (s.artifact?.oci) say(`${name}: from ${s.artifact.oci.pinnedReference} (resolved from ${s.artifact.oci.reference})`);
      say(`${name}: applied ${s.lastRun.appliedVersions?.join(', ')} in Job ${s.lastRun.jobName}; history at version ${s.history?.currentVersion}`);
      return true;
    }
    return undefined;
  }, 300_000);
}

/** Follows the sample schema through observe, plan, approval, apply and the proof, approving its plan. */
async function followSchemaSample(client: KubeClient, approver: KubeClient): Promise<void> {
  const ref = { apiVersion: API_VERSION, kind: KINDS.PtahSchema.kind, namespace: DEMO_NAMESPACE, name: 'catalog' };
  let lastPhase = '';
  let approvedPlan = '';
  await waitFor('the sample PtahSchema to converge', async () => {
    const schema = await client.get<PtahSchema>(ref);
    const s = schema.status ?? {};
    const ready = s.conditions?.find((c) => c.type === 'Ready');
    const phase = `${s.phase ?? 'Pending'}${ready?.reason ? ` (${ready.reason})` : ''}`;
    if (phase !== lastPhase) say(`catalog: ${(lastPhase = phase)}`);
    if (s.phase === 'AwaitingApproval' && s.plan && s.plan.name !== approvedPlan) {
      await approver.create({
        apiVersion: API_VERSION,
        kind: KINDS.PtahSchemaApproval.kind,
        metadata: { generateName: 'catalog-approval-', namespace: DEMO_NAMESPACE },
        spec: { schemaRef: { name: 'catalog', uid: schema.metadata.uid }, planRef: { name: s.plan.name, uid: s.plan.uid }, planFingerprint: s.plan.fingerprint },
      });
      approvedPlan = s.plan.name;
      say(`approved plan ${s.plan.name} (${s.plan.statementCount} statements) as the approver identity`);
    }
    if (s.phase === 'InSync' && s.applied) {
      say(`catalog: plan ${s.applied.planRef.name} applied by operation ${s.applied.operationID} and proven converged by a fresh reading`);
      return true;
    }
    return undefined;
  }, 300_000);
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (e) {
      last = e instanceof Error ? e.message : String(e);
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ''}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

function httpsGet(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

void main();
