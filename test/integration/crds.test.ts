// The generated manifests on the real API server: every CRD installs with `kubectl apply` and becomes Established,
// the API server itself refuses bad objects with the CRD's own messages and fills in its defaults, the immutable
// kinds refuse spec edits, and the RBAC, Deployment, webhook and status-write policy manifests are accepted. The
// status-write policy is also proven in force, on a copy scoped to one test namespace (the real one is
// cluster-wide and would govern every test file running beside this one).
import { HISTORY_TABLE_PATTERN } from '../../src/shared/migration-adoption.js';
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';
import { ANNOTATIONS, API_VERSION, GROUP, KIND_NAMES, KINDS } from '../../src/shared/api/names.js';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { ApiError, restClient, type KubeClient, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
// Registers the Ptah kinds with the REST client.
import '../../src/shared/kube.js';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { buildOrLocateBinaries } from '../../tools/stack/controlplane.js';
import { applyManifestFile, crdManifestFiles } from '../../tools/stack/manifests.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { waitFor } from '../../tools/stack/wait.js';

const cluster = sharedCluster();
const KUBECTL = join(process.env.PTAH_CONTROLPLANE_BIN ?? (await buildOrLocateBinaries()), 'kubectl');
const d = (seed: string): string => sha256Digest(seed);

let admin: KubeClient;
let manager: KubeClient;
t.before(async () => {
  admin = await restClient(cluster.kubeConfig('admin'), { fieldManager: 'ptah-crds-test' });
  manager = await restClient(cluster.kubeConfig('manager'), { fieldManager: 'ptah-crds-test' });
});

interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs kubectl as the administrator from the repository root; never throws on a non-zero exit. */
function kubectl(args: string[], stdin?: string): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(KUBECTL, ['--kubeconfig', cluster.state.kubeconfigs.admin, ...args], { cwd: REPO_ROOT, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      if (code === -1) reject(new Error(`kubectl ${args.join(' ')} did not run: ${error?.message}`));
      else resolve({ code, stdout, stderr });
    });
    child.stdin?.end(stdin ?? '');
  });
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const lines = (text: string): string[] => text.split('\n').map((l) => l.trim()).filter((l) => l !== '');

/** Expects exit 0 and returns stdout's lines. */
function succeeded(t: Test, result: KubectlResult, what: string): string[] {
  t.equal(result.code, 0, `${what} exits 0${result.code === 0 ? '' : `: ${result.stderr.trim()}`}`);
  return lines(result.stdout);
}

const crdName = (kind: keyof typeof KINDS) => `${KINDS[kind].plural}.${GROUP}`;

t.test('every CRD in manifests/crds applies with kubectl apply -k, becomes Established, and applies again unchanged', async (t) => {
  const files = await crdManifestFiles();
  const inFiles: string[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(join(REPO_ROOT, 'manifests/crds', file), 'utf8'))) {
      inFiles.push((doc.toJS() as { metadata: { name: string } }).metadata.name);
    }
  }
  t.same(inFiles.sort(), KIND_NAMES.map(crdName).sort(), 'manifests/crds holds one CRD per kind of the API');

  // Other test files install the CRDs too, so a create here can lose the race to one of theirs; the object then
  // exists, and applying again must succeed.
  let first = await kubectl(['apply', '-k', 'manifests/crds/']);
  if (first.code !== 0 && lines(first.stderr).every((l) => /\(AlreadyExists\)/.test(l))) first = await kubectl(['apply', '-k', 'manifests/crds/']);
  const applied = succeeded(t, first, 'kubectl apply -k manifests/crds/');
  t.same(applied.map((l) => l.replace(/ (created|configured|unchanged)$/, '')).sort(), inFiles.map((n) => `customresourcedefinition.apiextensions.k8s.io/${n}`).sort(),
    'kubectl reports every CRD');

  const waited = succeeded(t, await kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...inFiles.map((n) => `crd/${n}`)]), 'kubectl wait --for=condition=Established');
  t.same(waited.sort(), inFiles.map((n) => `customresourcedefinition.apiextensions.k8s.io/${n} condition met`).sort(), 'every CRD is Established');

  const api = cluster.kubeConfig('admin').makeApiClient(ApiextensionsV1Api);
  for (const kind of KIND_NAMES) {
    const crd = await api.readCustomResourceDefinition({ name: crdName(kind) });
    t.equal(crd.status?.acceptedNames?.kind, kind, `${crdName(kind)} serves kind ${kind}`);
  }

  // Unchanged is judged by each CRD's generation, which moves only when its spec does: kubectl's own word
  // ("unchanged") also reflects its last-applied annotation, which other test files' server-side applies of the
  // same files, running side by side, rewrite.
  const generations = async () => Object.fromEntries(await Promise.all(inFiles.map(async (n) => [n, (await api.readCustomResourceDefinition({ name: n })).metadata?.generation] as const)));
  const before = await generations();
  const again = succeeded(t, await kubectl(['apply', '-k', 'manifests/crds/']), 'applying the CRDs again');
  t.same(again.map((l) => l.replace(/ (configured|unchanged)$/, '')).sort(), inFiles.map((n) => `customresourcedefinition.apiextensions.k8s.io/${n}`).sort(), 'kubectl applies every CRD again');
  t.same(await generations(), before, 'applying again changes no CRD\'s spec (no generation moved)');
});

const TARGET = { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } };
const ARTIFACT_SOURCE = { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'policy.json' } };

function migration(namespace: string, name: string, spec: Record<string, unknown> = {}): KubeObject {
  return { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, metadata: { name, namespace }, spec: { target: TARGET, artifact: ARTIFACT_SOURCE, ...spec } } as KubeObject;
}

/** The API server's refusal of `attempt`; a failed assertion (not a throw) when it was accepted. */
async function refusal(t: Test, attempt: Promise<unknown>, what: string): Promise<ApiError | undefined> {
  const outcome = await attempt.then(() => 'accepted', (e: unknown) => e);
  if (outcome instanceof ApiError) return outcome;
  t.fail(`${what}: expected the API server to refuse, got ${outcome instanceof Error ? outcome.message : String(outcome)}`);
  return undefined;
}

t.test('the API server refuses bad PtahMigrations with the CRD\'s own messages and stores the valid ones', async (t) => {
  const ns = await testNamespace(t);
  // The API server's prefix, then the causes: the CRD's own among them (a value that fails its pattern also fails
  // the duration rule, and a failed enum leaves the object-level rules unchecked, each adding a cause of its own).
  const invalid = (name: string, cause: string) => new RegExp(`^${escapeRegExp(`PtahMigration.operator.ptah.run "${name}" is invalid: `)}\\[?(.*, )?${escapeRegExp(cause)}(, .*)?\\]?$`);
  const table: { name: string; what: string; spec?: Record<string, unknown>; message: RegExp }[] = [
    {
      name: 'bad-interval-format', what: 'an interval that is not a duration', spec: { interval: '5 minutes' },
      message: invalid('bad-interval-format', `spec.interval: Invalid value: "5 minutes": spec.interval in body should match '^([0-9]{1,9}(\\.[0-9]{1,9})?(ns|us|ms|s|m|h))+$'`),
    },
    {
      name: 'bad-interval-range', what: 'an interval outside 10s..24h', spec: { interval: '5s' },
      message: invalid('bad-interval-range', 'spec.interval: Invalid value: "5s": must be between 10s and 24h'),
    },
    {
      name: 'x'.repeat(64), what: 'a 64-character name',
      message: invalid('x'.repeat(64), '<nil>: Invalid value: metadata.name must be at most 63 characters: it is carried whole in the labels of the Jobs this resource dispatches'),
    },
    {
      name: 'empty-secret-key', what: 'an empty Secret key', spec: { target: { ...TARGET, urlFrom: { name: 'orders-db', key: '' } } },
      message: invalid('empty-secret-key', `spec.target.urlFrom.key: Invalid value: "": spec.target.urlFrom.key in body should match '^[-._a-zA-Z0-9]+$'`),
    },
    {
      name: 'unknown-apply-policy', what: 'an unknown policy.apply', spec: { policy: { apply: 'Sometimes' } },
      message: invalid('unknown-apply-policy', 'spec.policy.apply: Unsupported value: "Sometimes": supported values: "Never", "OnApproval", "Always"'),
    },
    {
      name: 'unknown-format', what: 'a directory format no reader reads', spec: { artifact: { ...ARTIFACT_SOURCE, format: 'liquibase' } },
      message: invalid('unknown-format', 'spec.artifact.format: Unsupported value: "liquibase": supported values: "ptah", "golang-migrate", "goose", "dbmate", "flyway"'),
    },
    {
      name: 'baseline-no-version', what: 'a baseline adoption without its version', spec: { adoption: { from: 'baseline' } },
      message: invalid('baseline-no-version', 'spec.adoption: Invalid value: from: baseline needs baselineVersion and reads no table; a history tool takes no baselineVersion'),
    },
    {
      name: 'tool-with-baseline', what: 'a history tool given a baseline version', spec: { adoption: { from: 'goose', baselineVersion: '3' } },
      message: invalid('tool-with-baseline', 'spec.adoption: Invalid value: from: baseline needs baselineVersion and reads no table; a history tool takes no baselineVersion'),
    },
    {
      name: 'adoption-table-injection', what: 'an adoption table that is not an identifier', spec: { adoption: { from: 'flyway', table: 'x; DROP TABLE y' } },
      message: invalid('adoption-table-injection', `spec.adoption.table: Invalid value: "x; DROP TABLE y": spec.adoption.table in body should match '${HISTORY_TABLE_PATTERN}'`),
    },
    {
      name: 'adoption-unknown-tool', what: 'an adoption from a tool no reader reads', spec: { adoption: { from: 'liquibase' } },
      message: invalid('adoption-unknown-tool', 'spec.adoption.from: Unsupported value: "liquibase": supported values: "golang-migrate", "goose", "dbmate", "flyway", "baseline"'),
    },
    {
      name: 'repair-forced', what: 'a repair that is no resolution', spec: { repair: { version: '2', resolution: 'forced' } },
      message: invalid('repair-forced', 'spec.repair.resolution: Unsupported value: "forced": supported values: "finished", "undone"'),
    },
    {
      name: 'repair-no-version', what: 'a repair of a version that is not digits', spec: { repair: { version: 'v2', resolution: 'undone' } },
      message: invalid('repair-no-version', `spec.repair.version: Invalid value: "v2": spec.repair.version in body should match '^[0-9]{1,32}$'`),
    },
    {
      name: 'lock-outlives-job', what: 'a lock timeout longer than the Job deadline', spec: { policy: { lockTimeout: '10m' }, execution: { activeDeadlineSeconds: 60 } },
      message: invalid('lock-outlives-job', 'spec: Invalid value: policy.lockTimeout must not exceed execution.activeDeadlineSeconds'),
    },
  ];
  for (const row of table) {
    const error = await refusal(t, admin.create(migration(ns, row.name, row.spec)), row.what);
    if (!error) continue;
    t.equal(error.code, 422, `${row.what}: 422 Invalid`);
    t.match(error.status.message ?? '', row.message, `${row.what}: the API server's message`);
  }

  // Each refusal above has its accepted neighbour.
  const accepted: { name: string; what: string; spec?: Record<string, unknown> }[] = [
    { name: 'y'.repeat(63), what: 'a 63-character name' },
    { name: 'interval-bounds', what: 'an interval of exactly 10s and a composite lock timeout', spec: { interval: '10s', policy: { lockTimeout: '1m30s' } } },
    { name: 'secret-key', what: 'a Secret key with dots and dashes', spec: { target: { ...TARGET, urlFrom: { name: 'orders-db', key: 'url.primary-1' } } } },
    { name: 'apply-always', what: 'policy.apply Always', spec: { policy: { apply: 'Always' } } },
    { name: 'goose-format', what: 'a goose directory', spec: { artifact: { ...ARTIFACT_SOURCE, format: 'goose' } } },
    { name: 'adopt-baseline', what: 'a baseline adoption', spec: { adoption: { from: 'baseline', baselineVersion: '240' } } },
    { name: 'adopt-goose-table', what: 'a goose adoption of a schema-qualified table', spec: { adoption: { from: 'goose', table: 'ops.goose_db_version' } } },
    { name: 'repair-finished', what: 'a repair of row 2, finished by hand', spec: { repair: { version: '2', resolution: 'finished' } } },
    { name: 'lock-within-job', what: 'a lock timeout equal to the Job deadline', spec: { policy: { lockTimeout: '60s' }, execution: { activeDeadlineSeconds: 60 } } },
  ];
  for (const row of accepted) {
    const stored = await admin.create(migration(ns, row.name, row.spec));
    t.ok(stored.metadata?.uid, `${row.what} is stored`);
  }
});

t.test('defaults are filled in on a minimal valid PtahMigration', async (t) => {
  const ns = await testNamespace(t);
  await admin.create(migration(ns, 'minimal'));
  const stored = await admin.get<PtahMigration>({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: ns, name: 'minimal' });
  t.same(stored.spec, {
    target: TARGET,
    artifact: { ...ARTIFACT_SOURCE, format: 'ptah' },
    policy: { apply: 'OnApproval', lockTimeout: '5m' },
    interval: '10m',
    execution: { activeDeadlineSeconds: 900, failureRetryInterval: '30s', connectTimeout: '10s' },
    suspend: false,
  }, 'the stored spec carries every default');
});

/** A PtahMigrationPlan's spec as the manager publishes it, planning file 2 unless `change` says otherwise. */
function migrationPlanSpec(ref: { name: string; uid: string }, change: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    migrationRef: ref, fingerprint: d('fingerprint'), migrations: [{ version: '2', name: 'add_index', checksum: d('m2') }], historyFingerprint: d('history'),
    currentVersion: '1', artifactDigest: d('artifact'), coordinationDigest: d('realm'), targetIdentityDigest: d('target'), policyFingerprint: d('policy'),
    verificationPolicyUID: 'uid-of-policy', verificationPolicyDigest: d('policy content'), executionBindingID: `v1-${'a'.repeat(32)}`, createdAt: '2030-01-01T00:00:00Z',
    ...change,
  };
}

t.test('a PtahMigrationPlan runs at least one migration, or is a repair plan that runs none and adopts nothing', async (t) => {
  const ns = await testNamespace(t);
  const ref = { name: 'orders', uid: 'uid-of-orders' };
  const repair = { version: '2', checksum: d('m2'), resolution: 'finished' };
  const adopted = { from: 'goose', count: 1, firstVersion: '1', lastVersion: '1' };
  const create = (name: string, change: Record<string, unknown>) =>
    admin.create({ apiVersion: API_VERSION, kind: 'PtahMigrationPlan', metadata: { name, namespace: ns }, spec: migrationPlanSpec(ref, change) } as KubeObject);
  const rule = 'spec: Invalid value: a plan runs at least one migration, or is a repair plan, which runs none and adopts nothing';
  const refused: [string, string, Record<string, unknown>, string][] = [
    ['empty', 'a plan of no migration and no repair', { migrations: [] }, rule],
    ['repair-and-files', 'a repair plan that also runs a file', { repair }, rule],
    ['repair-and-adoption', 'a repair plan that adopts', { migrations: [], repair, adopted }, rule],
    ['repair-forced', 'a repair that is no resolution', { migrations: [], repair: { ...repair, resolution: 'forced' } }, 'spec.repair.resolution: Unsupported value: "forced": supported values: "finished", "undone"'],
  ];
  for (const [name, what, change, message] of refused) {
    const error = await refusal(t, create(name, change), what);
    if (!error) continue;
    t.equal(error.code, 422, `${what}: 422 Invalid`);
    t.match(error.status.message ?? '', message, `${what}: the CRD's message`);
  }
  t.ok((await create('files', {})).metadata?.uid, 'a plan of files is stored');
  t.ok((await create('repair', { migrations: [], repair })).metadata?.uid, 'a repair plan of no file is stored');
  t.ok((await create('undone', { migrations: [], repair: { ...repair, resolution: 'undone' } })).metadata?.uid, 'and so is one that undoes');
});

t.test('the immutable kinds refuse a spec edit with their own message, and still take labels and status', async (t) => {
  const ns = await testNamespace(t);
  // Status is the manager's to write (the installation's status-write policy, which other files install, refuses
  // anyone else): the manager writes it here, with its RBAC in place whichever test applied it first.
  await applyManifestFile(cluster.kubeConfig('admin'), 'manifests/rbac.yaml');
  const ref = { name: 'orders', uid: 'uid-of-orders' };
  const plan = { name: 'ptah-mplan-0123', uid: 'uid-of-plan' };
  const table: { kind: keyof typeof KINDS; spec: Record<string, unknown>; edit: Record<string, unknown>; message: string }[] = [
    {
      kind: 'PtahMigrationApproval',
      spec: { migrationRef: ref, planRef: plan, planFingerprint: d('fingerprint') },
      edit: { planFingerprint: d('another fingerprint') },
      message: 'an approval is immutable; create a new approval instead',
    },
    {
      kind: 'PtahSchemaApproval',
      spec: { schemaRef: ref, planRef: plan, planFingerprint: d('fingerprint') },
      edit: { planRef: { name: plan.name, uid: 'uid-of-another-plan' } },
      message: 'an approval is immutable; create a new approval instead',
    },
    {
      kind: 'PtahMigrationRunAcknowledgment',
      spec: { migrationRef: ref, operationID: d('operation') },
      edit: { operationID: d('another operation') },
      message: 'an acknowledgment is immutable; create a new acknowledgment instead',
    },
    {
      kind: 'PtahMigrationPlan',
      spec: migrationPlanSpec(ref),
      edit: { currentVersion: '0' },
      message: 'a plan is immutable; publish a new plan instead',
    },
    {
      kind: 'PtahSchemaPlanChunk',
      spec: { data: Buffer.from('CREATE TABLE t ();').toString('base64') },
      edit: { data: Buffer.from('DROP TABLE t;').toString('base64') },
      message: 'a plan chunk is immutable',
    },
  ];
  for (const row of table) {
    const name = `${row.kind.toLowerCase()}-1`;
    const objectRef: ResourceRef = { apiVersion: API_VERSION, kind: row.kind, namespace: ns, name };
    await admin.create({ apiVersion: API_VERSION, kind: row.kind, metadata: { name, namespace: ns }, spec: row.spec } as KubeObject);
    const error = await refusal(t, admin.patch(objectRef, { spec: row.edit }, 'merge'), `${row.kind}: a spec edit`);
    if (error) {
      t.equal(error.code, 422, `${row.kind}: a spec edit is 422 Invalid`);
      t.equal(error.status.message, `${row.kind}.operator.ptah.run "${name}" is invalid: spec: Invalid value: ${row.message}`, `${row.kind}: the CRD's message`);
    }
    const stored = await admin.get<KubeObject & { spec: unknown }>(objectRef);
    t.same(stored.spec, row.spec, `${row.kind}: the spec is unchanged`);
    const labelled = await admin.patch(objectRef, { metadata: { labels: { reviewed: 'yes' } } }, 'merge');
    t.equal(labelled.metadata?.labels?.reviewed, 'yes', `${row.kind}: a label edit is accepted`);
    if (KINDS[row.kind].status) {
      const condition = { type: 'Consumed', status: 'False', reason: 'NotYet', message: '', lastTransitionTime: '2030-01-01T00:00:00Z' };
      const withStatus = await manager.patch<KubeObject & { status?: { conditions?: unknown[] } }>(objectRef, { status: { conditions: [condition] } }, 'merge', { subresource: 'status' });
      t.same(withStatus.status?.conditions, [condition], `${row.kind}: a status write is accepted`);
    }
  }
});

t.test('manifests/rbac.yaml applies; the Deployment, Service, webhook configurations and status-write policy pass a server-side dry run', async (t) => {
  const rbac = succeeded(t, await kubectl(['apply', '-f', 'manifests/rbac.yaml']), 'kubectl apply -f manifests/rbac.yaml');
  t.same(rbac.map((l) => l.replace(/ (created|configured|unchanged)$/, '')), [
    'namespace/ptah-system',
    'serviceaccount/ptah-manager',
    'clusterrole.rbac.authorization.k8s.io/ptah-manager',
    'clusterrolebinding.rbac.authorization.k8s.io/ptah-manager',
    'clusterrole.rbac.authorization.k8s.io/ptah-approver',
  ], 'every object of rbac.yaml is applied');

  // Installed for real these would act on the whole shared cluster: the Deployment's Pods, webhooks no Service
  // answers (failing closed), a status guard against every test file. A dry run is the whole API server check.
  const table: { file: string; objects: string[] }[] = [
    { file: 'manifests/deployment.yaml', objects: ['deployment.apps/ptah-manager', 'service/ptah-webhook'] },
    {
      file: 'manifests/webhooks.yaml',
      objects: ['mutatingwebhookconfiguration.admissionregistration.k8s.io/ptah-operator', 'validatingwebhookconfiguration.admissionregistration.k8s.io/ptah-operator'],
    },
    {
      file: 'manifests/status-write-policy.yaml',
      objects: [
        'validatingadmissionpolicy.admissionregistration.k8s.io/ptah-status-write-guard',
        'validatingadmissionpolicybinding.admissionregistration.k8s.io/ptah-status-write-guard',
        'validatingadmissionpolicy.admissionregistration.k8s.io/ptah-unresolved-run-guard',
        'validatingadmissionpolicybinding.admissionregistration.k8s.io/ptah-unresolved-run-guard',
        'validatingadmissionpolicy.admissionregistration.k8s.io/ptah-manager-pod-guard',
        'validatingadmissionpolicybinding.admissionregistration.k8s.io/ptah-manager-pod-guard',
      ],
    },
  ];
  for (const row of table) {
    const out = succeeded(t, await kubectl(['apply', '--dry-run=server', '-f', row.file]), `kubectl apply --dry-run=server -f ${row.file}`);
    t.same(out.map((l) => l.replace(/ (created|configured|unchanged) \(server dry run\)$/, '')), row.objects, `${row.file}: every object passes the server's validation`);
  }
});

interface PolicyDoc {
  kind: string;
  metadata: { name: string };
  spec: { policyName?: string; matchConstraints?: Record<string, unknown>; validations?: { message: string }[] };
}

interface ScopedPolicy {
  yaml: string;
  /** kubectl's resource/name of every object. */
  names: string[];
  /** The API server's denial for a PtahMigration `name`, by the original policy name. */
  denial(policy: string, name: string): string;
  /**
   * The denials either copy of the policy gives: this namespace's, or the installation's own (cluster-wide), which
   * other test files install and which may answer first.
   */
  denials(policy: string, name: string): string[];
}

const denialBy = (policy: string, name: string, message: string) =>
  `ptahmigrations.operator.ptah.run "${name}" is forbidden: ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request: ${message}`;

/** manifests/status-write-policy.yaml with every object renamed for `namespace` and each policy matching only it. */
async function policyScopedTo(namespace: string): Promise<ScopedPolicy> {
  const docs = parseAllDocuments(await readFile(join(REPO_ROOT, 'manifests/status-write-policy.yaml'), 'utf8')).map((doc) => doc.toJS() as PolicyDoc);
  const names: string[] = [];
  const messages = new Map<string, string>();
  for (const doc of docs) {
    if (doc.kind === 'ValidatingAdmissionPolicy') messages.set(doc.metadata.name, doc.spec.validations?.[0]?.message ?? '');
    doc.metadata.name = `${doc.metadata.name}-${namespace}`;
    names.push(`${doc.kind.toLowerCase()}.admissionregistration.k8s.io/${doc.metadata.name}`);
    if (doc.kind === 'ValidatingAdmissionPolicy') {
      doc.spec.matchConstraints = { ...doc.spec.matchConstraints, namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } };
    } else {
      doc.spec.policyName = `${doc.spec.policyName}-${namespace}`;
    }
  }
  return {
    yaml: docs.map((doc) => stringify(doc)).join('---\n'),
    names,
    denial: (policy, name) => denialBy(`${policy}-${namespace}`, name, messages.get(policy) ?? `(no policy ${policy} in the manifest)`),
    denials: (policy, name) => [`${policy}-${namespace}`, policy].map((copy) => denialBy(copy, name, messages.get(policy) ?? `(no policy ${policy} in the manifest)`)),
  };
}

t.test('the status-write policy, scoped to one namespace, refuses a person\'s status and unresolved-run writes and admits the manager\'s', async (t) => {
  const ns = await testNamespace(t);
  // The manager's writes below need its RBAC, whichever test applied it first.
  await applyManifestFile(cluster.kubeConfig('admin'), 'manifests/rbac.yaml');
  const policy = await policyScopedTo(ns);
  succeeded(t, await kubectl(['apply', '-f', '-'], policy.yaml), 'applying the namespace-scoped copy of the policy');
  t.teardown(async () => {
    const result = await kubectl(['delete', '--ignore-not-found', ...policy.names]);
    if (result.code !== 0) throw new Error(`could not delete the scoped status-write policy: ${result.stderr}`);
  });

  const ref: ResourceRef = { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: ns, name: 'guarded' };
  await admin.create(migration(ns, 'guarded'));
  const statusGuard = policy.denial('ptah-status-write-guard', 'guarded');
  t.match(statusGuard, /settle an unresolved migration run with a PtahMigrationRunAcknowledgment/, 'the status guard\'s message says how to settle instead');
  const adminStatus = (dryRun: boolean) => admin.patch(ref, { status: { phase: 'InSync' } }, 'merge', { subresource: 'status', dryRun });
  // A policy reaches the admission chain asynchronously; a dry run shows when it is in force.
  await waitFor(async () => {
    const outcome = await adminStatus(true).then(() => 'admitted', (e: ApiError) => e.status.message ?? e.message);
    if (policy.denials('ptah-status-write-guard', 'guarded').includes(outcome)) return true;
    throw new Error(`the administrator's dry-run status write: ${outcome}`);
  }, { what: 'the scoped status-write policy to be in force', timeoutMs: 30_000 });

  const statusError = await refusal(t, adminStatus(false), 'the administrator\'s status write');
  t.equal(statusError?.code, 403, 'the administrator\'s status write is 403');
  t.ok(policy.denials('ptah-status-write-guard', 'guarded').includes(statusError?.status.message ?? ''), `with the policy's message (${statusError?.status.message})`);
  const managed = await manager.patch<PtahMigration>(ref, { status: { phase: 'InSync' } }, 'merge', { subresource: 'status' });
  t.equal(managed.status?.phase, 'InSync', 'the manager\'s status write is admitted');

  const annotationGuards = policy.denials('ptah-unresolved-run-guard', 'guarded');
  const copy = JSON.stringify({ outcome: 'Unknown', operationID: d('run'), recordedAt: '2030-01-01T00:00:00Z' });
  const annotate = (client: KubeClient, annotations: Record<string, string | null>) => client.patch<PtahMigration>(ref, { metadata: { annotations } }, 'merge');
  const annotationError = await refusal(t, annotate(admin, { [ANNOTATIONS.unresolvedRun]: copy }), 'the administrator setting the unresolved-run annotation');
  t.equal(annotationError?.code, 403, 'the administrator setting the annotation is 403');
  t.ok(annotationGuards.includes(annotationError?.status.message ?? ''), `with the policy's message (${annotationError?.status.message})`);
  const set = await annotate(manager, { [ANNOTATIONS.unresolvedRun]: copy });
  t.equal(set.metadata?.annotations?.[ANNOTATIONS.unresolvedRun], copy, 'the manager setting it is admitted');
  const removal = await refusal(t, annotate(admin, { [ANNOTATIONS.unresolvedRun]: null }), 'the administrator removing the annotation');
  t.ok(annotationGuards.includes(removal?.status.message ?? ''), `the administrator removing it is refused with the policy's message (${removal?.status.message})`);
  const other = await annotate(admin, { 'example.com/note': 'checked' });
  t.equal(other.metadata?.annotations?.['example.com/note'], 'checked', 'the administrator\'s edit of another annotation is admitted');
  t.equal(other.metadata?.annotations?.[ANNOTATIONS.unresolvedRun], copy, 'and leaves the manager\'s copy');
});
