// The operator working under a chart install, on a control plane of its own (the chart's cluster-wide webhooks would
// fail closed for every other test on the shared one), with its own fake kubelet and the run's PostgreSQL: `helm
// install` of charts/ptah, then the manager process run as the chart's Deployment says — the environment, the
// certificate volume and the ServiceAccount the installed Deployment object holds, resolved the way the fake kubelet
// resolves a Pod's — and reached by the API server through the chart's own webhook configurations and Service (the
// Service's ClusterIP is on loopback, tools/stack/controlplane.ts; a forwarder from its port to the container's stands
// in for kube-proxy). The plane runs no Deployment controller, so the chart's Deployment (one replica) makes no Pod:
// the process is that replica. A PtahSchema and a PtahMigration converge, held to PostgreSQL's own tables; then
// `helm upgrade` to a new manager build (another image tag; tools/stack/variants.ts's manager-only release, its
// executor the same) lands while a migration Apply sleeps in its database: the old process is stopped with SIGTERM,
// as a Recreate rollout stops it, and the new one, started from the upgraded Deployment, adopts the Apply. Last, `helm
// uninstall` leaves the CRDs, every resource and every database as they were.
import t from 'tap';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, AppsV1Api, CoreV1Api, type V1ConfigMap, type V1Job, type V1Lease, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import pg from 'pg';
import { pino } from 'pino';
import { Informer } from '../../src/controller/informer.js';
import type { PtahMigration, PtahMigrationApproval, PtahMigrationPlan } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, INSTALL, KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema, PtahSchemaApproval, PtahSchemaPlan } from '../../src/shared/api/schema-kinds.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { JOB_ANNOTATIONS } from '../../src/shared/job/metadata.js';
import { restClient, type KubeObject } from '../../src/shared/kube-client.js';
import { bindApprovers, testNamespace, type SharedCluster } from '../../tools/stack/cluster.js';
import { helm } from '../../tools/stack/helm.js';
import { checkoutRunnerImages } from '../../tools/stack/kubelet/images.js';
import { containerEnv, PodObjects, writeVolumes } from '../../tools/stack/kubelet/pod-config.js';
import { writeKubeconfig } from '../../tools/stack/kubeconfig.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { createTestDatabase, sharedPostgresUrl, type TestDatabase } from '../../tools/stack/postgres.js';
import { startStack } from '../../tools/stack/stack.js';
import { variantDir, variantExecutorIdentity } from '../../tools/stack/variants.js';
import { waitFor } from '../../tools/stack/wait.js';
import { runCommand } from '../harness/command.js';
import { launchManagerProcess, LEADING, managerEnv, sourceEntry, type ManagerProcess } from '../harness/manager-process.js';
import { catalogFacts } from './executor-helpers.js';
import { sampleObjects } from './operator-install.js';
import { slowFiles, sleepingSessions, VERSIONS } from './slow-apply.js';

const CHART = join(REPO_ROOT, 'charts/ptah');
// Not ptah-system, where the control plane keeps the harness's manager ServiceAccount: the release's own namespace.
const NS = 'ptah';
const IMAGE = 'localhost/ptah-operator';
/** The source tree each manager image reference runs: the chart's default tag is this checkout, `next` another build. */
const RELEASES = new Map([[`${IMAGE}:dev`, REPO_ROOT], [`${IMAGE}:next`, variantDir('manager')]]);
const WAIT_MS = 150_000;
const FIELD_MANAGER = 'ptah-helm-operator-test';

const work = await mkdtemp(join(tmpdir(), 'ptah-helm-operator-'));
// A /24 of its own inside 127.0.0.0/8, so its ClusterIPs collide with nobody else's listeners.
const serviceRange = `127.${100 + randomInt(100)}.${randomInt(256)}.0/24`;
const stack = await startStack({
  postgres: false, images: checkoutRunnerImages([...RELEASES.keys()]), serviceClusterIpRange: serviceRange, log: (line) => t.comment(line),
});
const cluster: SharedCluster = { state: stack.state, kubeConfig: (id) => stack.controlPlane.kubeConfig(id), pki: () => Promise.resolve(stack.controlPlane.pki) };
const kc = cluster.kubeConfig('admin');
const [core, apps] = [kc.makeApiClient(CoreV1Api), kc.makeApiClient(AppsV1Api)];
const admin = await restClient(kc, { fieldManager: FIELD_MANAGER });
const approver = await restClient(cluster.kubeConfig('approver'), { fieldManager: FIELD_MANAGER });
const databases: TestDatabase[] = [];
let manager: ManagerProcess | undefined;
let proxy: Server | undefined;
t.teardown(async () => {
  await manager?.kill();
  proxy?.close();
  await stack.stop({ keepDir: !t.passing() });
  for (const db of databases) await db.drop();
  if (t.passing()) await rm(work, { recursive: true, force: true });
  else t.comment(`kept: manager logs in ${work}, the stack in ${stack.state.dir}`);
});

const helmRun = async (args: string[]) => runCommand(await helm(), [...args, '--kubeconfig', stack.controlPlane.kubeconfigs.admin]);

async function sql<R extends pg.QueryResultRow>(db: TestDatabase, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}
const database = async (prefix: string) => {
  const db = await createTestDatabase(sharedPostgresUrl(), prefix);
  databases.push(db);
  return db;
};
/** The database's own account of the migration versions it applied: [version, operation ID], in order. */
const historyIn = async (db: TestDatabase) =>
  (await sql<{ version: string; operation_id: string }>(db, 'SELECT version, operation_id FROM ptah_migrations.history ORDER BY seq')).map((r) => [r.version, r.operation_id]);
const tablesIn = async (db: TestDatabase) => (await sql<{ name: string }>(db, 'SELECT tablename AS name FROM pg_tables WHERE schemaname = \'public\' ORDER BY 1')).map((r) => r.name);

const deployment = () => apps.readNamespacedDeployment({ namespace: NS, name: INSTALL.deployment });

/** The Service's address and port, and the container port its named targetPort resolves to in the Deployment. */
async function serviceRoute(): Promise<{ ip: string; port: number; targetPort: number }> {
  const service = await core.readNamespacedService({ namespace: NS, name: INSTALL.webhookService });
  const port = service.spec?.ports?.[0];
  const container = (await deployment()).spec?.template.spec?.containers[0];
  const targetPort = typeof port?.targetPort === 'number' ? port.targetPort : container?.ports?.find((p) => p.name === port?.targetPort)?.containerPort;
  if (!service.spec?.clusterIP || !port || targetPort === undefined) throw new Error(`the Service ${INSTALL.webhookService} routes nowhere: ${JSON.stringify(service.spec)}`);
  return { ip: service.spec.clusterIP, port: port.port, targetPort };
}

/** kube-proxy's part: the Service's port forwarded to the container's, on the same address. */
function forward(route: { ip: string; port: number; targetPort: number }): Promise<Server> {
  const server = createServer((socket) => {
    const upstream = connect(route.targetPort, route.ip);
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(route.port, route.ip, () => resolve(server));
  });
}

/**
 * Starts the process the installed Deployment describes: its image's release, its container's environment and
 * volumes resolved as the fake kubelet resolves a Pod's (fieldRef, the Secret volume written out), paths under a
 * mount mapped to where that volume was written. Three things stand in for the Pod itself, and the chart renders
 * none of them: the kubeconfig (in-cluster config: a token of the Deployment's ServiceAccount), the listen address
 * (the Pod's own: the Service's ClusterIP) and the harness's PATH and HOME.
 */
async function startReplica(name: string, caPem: string): Promise<{ process: ManagerProcess; env: Record<string, string> }> {
  const template = (await deployment()).spec!.template;
  const container = template.spec!.containers[0]!;
  const root = RELEASES.get(container.image ?? '');
  if (!root) throw new Error(`the Deployment runs image ${container.image}, which names no release here (${[...RELEASES.keys()].join(', ')})`);
  const pod: V1Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { ...template.metadata, name: `${INSTALL.deployment}-${name}`, namespace: NS }, spec: template.spec };
  const objects = new PodObjects(core, NS);
  const dir = join(work, name);
  const volumes = await writeVolumes(pod, objects, core, join(dir, 'volumes'));
  const env = Object.fromEntries(await containerEnv(pod, container, objects));
  const onHost = (path: string) => {
    const mount = container.volumeMounts?.find((m) => path === m.mountPath || path.startsWith(`${m.mountPath}/`));
    const volume = mount && volumes.get(mount.name);
    return mount && volume ? volume + path.slice(mount.mountPath.length) : path;
  };
  const token = await core.createNamespacedServiceAccountToken({
    namespace: NS, name: template.spec!.serviceAccountName!, body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const kubeconfig = join(dir, 'kubeconfig');
  await writeKubeconfig(kubeconfig, { server: stack.state.server, caPem: stack.controlPlane.pki.caPem, client: { token: token.status!.token }, name: template.spec!.serviceAccountName! });
  const route = await serviceRoute();
  const process = await launchManagerProcess({
    name, logFile: join(work, `${name}.log`), args: sourceEntry(root), url: `https://${route.ip}:${env.PTAH_PORT}`,
    metricsUrl: `https://${route.ip}:${env.PTAH_METRICS_PORT}`, caPem,
    env: { ...managerEnv(), ...env, PTAH_CERT_DIR: onHost(env.PTAH_CERT_DIR ?? ''), PTAH_KUBECONFIG: kubeconfig, PTAH_LISTEN_HOST: route.ip },
  });
  return { process, env };
}

// ---- a person's resources, from the samples ----

const migrationSample = await sampleObjects('examples/ptahmigration-orders.yaml');
const schemaSample = await sampleObjects('examples/ptahschema-catalog.yaml');
const ref = (kind: keyof typeof KINDS, ns: string, name: string) => ({ apiVersion: API_VERSION, kind: KINDS[kind].kind, namespace: ns, name });

/** The sample's objects in `ns`, its Secret naming `db`, passed through `edit` (which may rename them). */
async function createSample(ns: string, sample: KubeObject[], db: TestDatabase, edit: (o: KubeObject) => KubeObject | undefined = (o) => o): Promise<void> {
  for (const original of sample) {
    const obj = edit(structuredClone({ ...original, metadata: { ...original.metadata, namespace: ns } }));
    if (!obj) continue;
    if (obj.kind === 'Secret') (obj as V1Secret).stringData = { url: db.url };
    await admin.create(obj).catch((e: { code?: number }) => {
      if (e.code !== 409) throw e; // the policy ConfigMaps are shared by the namespace's resources
    });
  }
}

async function waitResource<T extends PtahMigration | PtahSchema, R>(kind: 'PtahMigration' | 'PtahSchema', ns: string, name: string, what: string, ready: (o: T) => R | undefined): Promise<R> {
  let last = '';
  try {
    return await waitFor(async () => {
      const o = await admin.get<T>(ref(kind, ns, name));
      last = JSON.stringify({ phase: o.status?.phase, conditions: o.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}: ${c.message}`) });
      return ready(o);
    }, { what: `${kind} ${name}: ${what}`, timeoutMs: WAIT_MS, intervalMs: 500 });
  } catch (e) {
    const pods = (await core.listNamespacedPod({ namespace: ns })).items.map((p) => `${p.metadata?.name}: ${JSON.stringify(p.status?.containerStatuses?.[0]?.state)}`);
    throw new Error(`${(e as Error).message}; last status: ${last}; the namespace's Pods: ${pods.join('; ')}; manager log: ${manager?.logTail(10)}`);
  }
}

/** The published plan `status.plan` names, read as an approver reads it. */
const planOf = <P extends PtahMigrationPlan | PtahSchemaPlan>(kind: 'PtahMigrationPlan' | 'PtahSchemaPlan', ns: string, o: PtahMigration | PtahSchema) =>
  admin.get<P>(ref(kind, ns, o.status!.plan!.name));

/** `planRef` given: an approval naming another plan than the one published. */
async function approveMigration(ns: string, name: string, planRef?: { name: string; uid: string }): Promise<PtahMigrationApproval> {
  const m = await admin.get<PtahMigration>(ref('PtahMigration', ns, name));
  const plan = await planOf<PtahMigrationPlan>('PtahMigrationPlan', ns, m);
  return approver.create<PtahMigrationApproval>({
    apiVersion: API_VERSION, kind: KINDS.PtahMigrationApproval.kind, metadata: { name: `${name}-approval-${randomBytes(3).toString('hex')}`, namespace: ns },
    spec: { migrationRef: { name, uid: m.metadata.uid! }, planRef: planRef ?? { name: plan.metadata.name!, uid: plan.metadata.uid! }, planFingerprint: plan.spec.fingerprint },
  } as PtahMigrationApproval);
}

const conditionOf = (a: PtahMigrationApproval, type: string) => a.status?.conditions?.find((c) => c.type === type);
const applyJobs = (migration: string) => [...jobsSeen.values()].filter((j) => j.metadata?.labels?.['operator.ptah.run/operation'] === 'apply' &&
  j.metadata.labels['operator.ptah.run/migration'] === migration);

// A person's namespace for both tests; it goes with the plane.
const shop = await testNamespace({ name: 'shop', teardown: () => undefined }, cluster);
// The test's own record of the namespace's Jobs: the operator's finished Jobs may be gone by the time it looks.
const jobsSeen = new Map<string, V1Job>();
const jobs = new Informer<V1Job>({ kubeConfig: kc, apiVersion: 'batch/v1', kind: 'Job', namespace: shop, logger: pino({ level: 'silent' }) });
jobs.on('add', (job) => void jobsSeen.set(job.metadata!.uid!, job));
jobs.start();
t.teardown(() => jobs.stop());
await jobs.waitForSync();

t.test('under a chart install, the manager the Deployment describes converges a PtahSchema and a PtahMigration', async (t) => {
  const pki = stack.controlPlane.pki;
  const installed = await helmRun(['install', 'ptah', CHART, '--namespace', NS, '--create-namespace',
    '--set', `replicas=1,webhook.certificate.caBundle=${Buffer.from(pki.caPem).toString('base64')}`]);
  t.equal(installed.code, 0, `helm install, the certificate a Secret we bring ${installed.stderr.trim()}`);
  const route = await serviceRoute();
  t.ok(route.ip.startsWith(serviceRange.replace(/0\/24$/, '')), `the webhook Service's ClusterIP ${route.ip} is in the plane's range`);
  // The Secret the Deployment mounts: a certificate for the Service's names (and its address, for the health probe).
  const serving = await pki.issueServing('ptah-webhook', { ips: [route.ip], dns: [`${INSTALL.webhookService}.${NS}.svc`, `${INSTALL.webhookService}.${NS}.svc.cluster.local`] });
  await core.createNamespacedSecret({ namespace: NS, body: {
    metadata: { name: INSTALL.tlsSecret }, type: 'kubernetes.io/tls',
    stringData: { 'tls.crt': await readFile(serving.cert, 'utf8'), 'tls.key': await readFile(serving.key, 'utf8') },
  } });
  proxy = await forward(route);
  t.same((await core.listNamespacedPod({ namespace: NS })).items, [], 'no Pod of the chart\'s runs here: the process is its replica');

  const started = await startReplica('manager-1', pki.caPem);
  manager = started.process;
  t.equal(started.env.PTAH_LEASE_NAMESPACE, NS, 'the Deployment\'s fieldRef gives the release namespace for the Lease');
  t.equal(started.env.PTAH_MANAGER_USERNAME, `system:serviceaccount:${NS}:${INSTALL.serviceAccount}`, 'and names the ServiceAccount the process runs as');
  t.equal(started.env.PTAH_RUNNER_IMAGE, `${IMAGE}:dev`, 'the chart\'s default runner image');
  await manager.waitForLog(LEADING, 60_000);
  const lease = await admin.get<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: NS, name: 'ptah-operator.operator.ptah.run' });
  t.ok(lease.spec?.holderIdentity, `it leads, under the chart's RBAC, on a Lease in ${NS}`);

  await bindApprovers(shop, cluster);
  const [ordersDb, catalogDb] = await Promise.all([database('helm_orders'), database('helm_catalog')]);
  await createSample(shop, migrationSample, ordersDb);
  await createSample(shop, schemaSample, catalogDb);

  const planned = await waitResource<PtahMigration, PtahMigration>('PtahMigration', shop, 'orders', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' && m.status.plan ? m : undefined));
  const forged = await approveMigration(shop, 'orders', { name: planned.status!.plan!.name, uid: planned.metadata.uid! }).then(() => 'admitted', (e: Error) => e.message);
  t.match(forged, /denied the request/, 'the manager, called through the chart\'s webhooks, refuses an approval of a plan that is not the one published');
  const approval = await approveMigration(shop, 'orders');
  t.equal((approval.spec as { approver?: { username?: string } }).approver?.username, 'alice', 'and stamps the approval with who made it');

  const schemaPlanned = await waitResource<PtahSchema, PtahSchema>('PtahSchema', shop, 'catalog', 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  const schemaPlan = await planOf<PtahSchemaPlan>('PtahSchemaPlan', shop, schemaPlanned);
  await approver.create<PtahSchemaApproval>({
    apiVersion: API_VERSION, kind: KINDS.PtahSchemaApproval.kind, metadata: { name: 'catalog-approval', namespace: shop },
    spec: { schemaRef: { name: 'catalog', uid: schemaPlanned.metadata.uid! }, planRef: { name: schemaPlan.metadata.name!, uid: schemaPlan.metadata.uid! }, planFingerprint: schemaPlan.spec.fingerprint },
  } as PtahSchemaApproval);

  const applied = await waitResource<PtahMigration, PtahMigration>('PtahMigration', shop, 'orders', 'Applied', (m) => (m.status?.lastRun?.outcome === 'Applied' ? m : undefined));
  const operation = applied.status!.lastRun!.operationID;
  t.same(await historyIn(ordersDb), VERSIONS.map((v) => [v, operation]), 'PtahMigration: the database\'s history holds each version once, under the Apply');
  t.same(await tablesIn(ordersDb), ['customers', 'orders'], 'and its tables');
  t.equal(applyJobs('orders')[0]?.spec?.template.spec?.containers[0]?.image, `${IMAGE}:dev`, 'the Apply ran in the image the chart named');

  const synced = await waitResource<PtahSchema, PtahSchema>('PtahSchema', shop, 'catalog', 'InSync, its Apply proven', (s) => (s.status?.phase === 'InSync' && s.status.applied && !s.status.pendingObservation ? s : undefined));
  const schemaApplies = await sql<{ operation_id: string }>(catalogDb, 'SELECT operation_id FROM ptah_migrations.schema_applies ORDER BY seq');
  t.same(schemaApplies.map((r) => r.operation_id), [synced.status!.applied!.operationID], 'PtahSchema: the database recorded the one Apply');
  t.same(await tablesIn(catalogDb), ['product_tags', 'products'], 'and holds the desired tables');
});

t.test('helm upgrade to a new manager build while an Apply runs: the new replica adopts it', async (t) => {
  t.equal(variantExecutorIdentity('manager'), ownExecutorIdentity(), 'fixture: the new build carries the same executor');
  const [slowDb, waitingDb] = await Promise.all([database('helm_slow'), database('helm_waiting')]);
  const rename = (to: string, db: string, artifact?: string) => (o: KubeObject): KubeObject | undefined => {
    if (o.kind === 'ConfigMap' && (o as V1ConfigMap).data?.['policy.yaml']) return o;
    if (o.kind === 'ConfigMap') return artifact ? undefined : o;
    o.metadata!.name = o.kind === 'Secret' ? db : to;
    if (o.kind === KINDS.PtahMigration.kind) {
      const m = o as PtahMigration;
      m.spec.target = { ...m.spec.target, coordinationKey: 'slow-db', urlFrom: { ...m.spec.target.urlFrom, name: db } };
      if (artifact) m.spec.artifact.configMapRef!.name = artifact;
      m.spec.execution = { ...m.spec.execution, activeDeadlineSeconds: 120 };
      m.spec.policy = { ...m.spec.policy, lockTimeout: '1m' };
    }
    return o;
  };
  const sampleArtifact = migrationSample.find((o) => o.kind === 'ConfigMap' && o.metadata?.name === 'orders-migrations-r1') as V1ConfigMap;
  await admin.create<V1ConfigMap>({ ...sampleArtifact, metadata: { ...sampleArtifact.metadata, name: 'slow-r1', namespace: shop }, data: slowFiles(20) });
  await createSample(shop, migrationSample, slowDb, rename('slow', 'slow-db-url', 'slow-r1'));
  await waitResource<PtahMigration, true>('PtahMigration', shop, 'slow', 'a plan awaiting approval', (m) => (m.status?.plan ? true : undefined));
  const slowApproval = await approveMigration(shop, 'slow');
  const running = await waitResource<PtahMigration, PtahMigration>('PtahMigration', shop, 'slow', 'its Apply dispatched', (m) => (m.status?.activeOperation?.type === 'Apply' && m.status.activeOperation.jobUID ? m : undefined));
  const claim = running.status!.activeOperation!;
  await waitFor(async () => ((await sleepingSessions({ sql }, slowDb)) > 0 ? true : undefined), { what: 'the slow Apply to sleep in its database', timeoutMs: WAIT_MS });
  // Approved, and waiting on the same database's realm when the upgrade lands.
  await createSample(shop, migrationSample, waitingDb, rename('waiting', 'waiting-db-url'));
  await waitResource<PtahMigration, true>('PtahMigration', shop, 'waiting', 'a plan awaiting approval', (m) => (m.status?.plan ? true : undefined));
  const waitingApproval = await approveMigration(shop, 'waiting');
  const waiting = await waitResource<PtahMigration, PtahMigration>('PtahMigration', shop, 'waiting', 'its Apply claimed, waiting for the realm', (m) => (m.status?.activeOperation?.type === 'Apply' ? m : undefined));
  const before = running.status!.executionBinding!;

  const upgraded = await helmRun(['upgrade', 'ptah', CHART, '--namespace', NS, '--reuse-values', '--set', 'image.tag=next']);
  t.equal(upgraded.code, 0, `helm upgrade to image tag next ${upgraded.stderr.trim()}`);
  const stoppedAt = Date.now();
  const exit = await manager!.stop();
  manager = undefined;
  t.equal(exit.signal ?? exit.code, 0, `the old replica stopped on SIGTERM (${JSON.stringify(exit)})`);
  t.ok((await sleepingSessions({ sql }, slowDb)) > 0, 'the Apply still sleeps in its database: the upgrade lands while it runs');
  const next = await startReplica('manager-2', stack.controlPlane.pki.caPem);
  manager = next.process;
  t.equal(next.env.PTAH_RUNNER_IMAGE, `${IMAGE}:next`, 'the upgraded Deployment names the new runner image');
  t.equal(next.env.PTAH_CONTROLLER_IMAGE, `${IMAGE}:next`, 'and the new manager image');
  const ledAt = await manager.waitForLog(LEADING, 60_000);
  t.comment(`the new replica led ${ledAt - stoppedAt} ms after the old one was told to stop`);

  const adopted = await waitResource<PtahMigration, PtahMigration>('PtahMigration', shop, 'slow', 'its Apply settled', (m) => (m.status?.activeOperation?.id !== claim.id && m.status?.lastRun?.operationID === claim.id ? m : undefined));
  t.equal(adopted.status?.lastRun?.outcome, 'Applied', 'the Apply in flight is recorded Applied, not Unknown');
  t.equal(adopted.status?.lastRun?.jobUID, claim.jobUID, 'by the Job the old replica created');
  t.equal(adopted.status?.lastRun?.dispatchedBy?.controllerImage, `${IMAGE}:dev`, 'which the old release dispatched');
  t.notOk(adopted.status?.unresolvedRun, 'nothing is left unresolved');
  t.same(applyJobs('slow').map((j) => j.metadata?.uid), [claim.jobUID], 'no other Apply Job was created');
  t.same(await historyIn(slowDb), VERSIONS.map((v) => [v, claim.id]), 'the database applied each version once, under the one Apply');
  t.equal(adopted.status?.executionBinding?.epoch, before.epoch, 'the execution binding\'s epoch is kept');
  t.equal(adopted.status?.executionBinding?.runnerImage, `${IMAGE}:next`, 'and records the new runner image');

  const waitingApplied = await waitResource<PtahMigration, PtahMigration>('PtahMigration', shop, 'waiting', 'Applied', (m) => (m.status?.lastRun?.outcome === 'Applied' ? m : undefined));
  const waitingJobs = applyJobs('waiting');
  t.equal(waitingJobs.length, 1, 'the waiting migration: one Apply Job');
  t.equal(waitingJobs[0]?.metadata?.annotations?.[JOB_ANNOTATIONS.planUid], waiting.status?.plan?.uid, 'running the plan approved before the upgrade');
  t.equal(waitingApplied.status?.lastRun?.dispatchedBy?.controllerImage, `${IMAGE}:next`, 'dispatched by the new release');
  t.equal(waitingJobs[0]?.spec?.template.spec?.containers[0]?.image, `${IMAGE}:next`, 'in the new runner image');
  t.same(await historyIn(waitingDb), VERSIONS.map((v) => [v, waitingApplied.status!.lastRun!.operationID]), 'each of its versions once');
  for (const [name, made] of [['slow', slowApproval], ['waiting', waitingApproval]] as const) {
    const approval = await admin.get<PtahMigrationApproval>(ref('PtahMigrationApproval', shop, made.metadata.name!));
    t.equal(conditionOf(approval, 'Consumed')?.status, 'True', `${name}: its approval was spent`);
    t.notOk(conditionOf(approval, 'Stale'), `${name}: and never went Stale`);
  }
});

t.test('helm uninstall leaves the CRDs, the resources and the databases as they were', async (t) => {
  const kinds = [KINDS.PtahMigration.kind, KINDS.PtahSchema.kind, KINDS.PtahMigrationPlan.kind, KINDS.PtahSchemaPlan.kind];
  const resources = async () => (await Promise.all(kinds.map(async (kind) => (await admin.list(API_VERSION, kind, shop)).map((o) => `${kind}/${o.metadata?.name} ${o.metadata?.uid}`)))).flat().sort();
  // Each database's schema, as the catalog reads it, and the executor's own records in it.
  const databaseState = async () => Promise.all(databases.map(async (db) => ({
    facts: await catalogFacts(db.url),
    history: await sql(db, 'SELECT to_regclass(\'ptah_migrations.history\') IS NOT NULL AS present').then(async ([r]) => (r?.present ? historyIn(db) : [])),
  })));
  // Nothing runs while the chart goes: the replica is stopped first, as the Deployment's deletion would stop it.
  await manager?.stop();
  manager = undefined;
  const [resourcesBefore, databasesBefore] = [await resources(), await databaseState()];
  t.ok(resourcesBefore.length >= 4 && databasesBefore.some((d) => d.history.length > 0), `fixture: ${resourcesBefore.length} resources, and databases with history`);

  const uninstalled = await helmRun(['uninstall', 'ptah', '--namespace', NS]);
  t.equal(uninstalled.code, 0, `helm uninstall ${uninstalled.stderr.trim()}`);
  await waitFor(async () => ((await apps.listNamespacedDeployment({ namespace: NS })).items.length === 0 ? true : undefined), { what: 'the chart\'s Deployment to go', timeoutMs: 60_000 });
  const crds = (await kc.makeApiClient(ApiextensionsV1Api).listCustomResourceDefinition()).items;
  t.equal(crds.filter((c) => c.metadata?.name?.endsWith('.operator.ptah.run')).length, Object.keys(KINDS).length, 'every CRD is kept');
  t.same(await resources(), resourcesBefore, 'every resource and plan is kept, with its UID');
  t.same(await databaseState(), databasesBefore, 'every database holds what it held: the same catalog, the same history');
});
