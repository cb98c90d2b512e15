// PtahMigrations whose artifact is an OCI artifact, on the real control plane with a real registry (TLS from its own
// CA, basic auth), the real runner and PostgreSQL. A Resolve Job (registry Secret and policy, no database URL) pins
// the tag's digest; each database Job gets the files from a fetch init container (registry Secret, no database URL)
// and its runner (database URL, no registry Secret) checks their content digest. A directory of 1,000 files
// converges; a moved tag retires the plan before anyone approves it; each refusal (type, annotation, unsigned, wrong
// key, digest, credentials, registry down) is Blocked with its own reason and no database Job ever runs. The database's own history table is the witness; no status, Event, plan or Job
// holds a registry credential.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import type { V1ConfigMap, V1Job, V1Pod, V1Secret } from '@kubernetes/client-node';
import { RegistryClient } from '../../src/shared/oci/registry-client.js';
import { FIXTURE_FILE, pushFixture, replay, type SignatureFixtures } from '../fixtures/oci/signature-fixtures.js';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import { sampleObjects, sampleOf } from './operator-install.js';
import { startRegistry } from '../../tools/stack/registry.js';
import { ociWorld, type OciWorld } from './oci-world.js';
import { migrationWorld, SAMPLE, WAIT_MS, type MigrationWorld } from './migration-world.js';

const POLICY = 'version: 1\nrequiredAnnotations: [org.opencontainers.image.source]\nartifactTypes: [application/vnd.ptah-operator.migrations.v1]\n';

const samples = await sampleObjects(SAMPLE);

async function createOciMigration(w: MigrationWorld, o: OciWorld, name: string, reference: string, secret: string,
  options: { apply: 'Always' | 'OnApproval' | 'Never'; auth?: string; interval?: string; host?: string; policy?: string }): Promise<PtahMigration> {
  const sample = sampleOf<PtahMigration>(samples, KINDS.PtahMigration.kind);
  sample.metadata = { name, namespace: w.ns };
  sample.spec.artifact = {
    oci: o.source(reference, options),
    verificationPolicyRef: { name: options.policy ?? 'oci-policy', key: 'policy.yaml' },
    format: 'ptah',
  };
  sample.spec.target.urlFrom.name = secret;
  sample.spec.target.coordinationKey = `oci-${name}`;
  sample.spec.policy.apply = options.apply;
  sample.spec.execution = { ...sample.spec.execution, failureRetryInterval: '5s' };
  if (options.interval) sample.spec.interval = options.interval;
  return w.admin.create(sample);
}

const jobsFor = (w: MigrationWorld, name: string): V1Job[] => [...w.jobsSeen.values()].filter((j) => j.metadata?.ownerReferences?.[0]?.name === name);
const operationOf = (job: V1Job): string | undefined => job.spec?.template?.spec?.containers?.[0]?.args?.[1];

t.test('a directory of 1,000 files converges from the registry; only the registry-facing containers hold the registry Secret', async (t) => {
  const w = await migrationWorld(t);
  const o = await ociWorld(t);
  const { registry } = o;
  await o.install(w.admin, w.ns, POLICY);
  await w.startController();
  const db = await w.database('oci_many');
  const secret = await w.installSample(db);
  const FILES = 1000;
  const digest = await o.push(Object.fromEntries(Array.from({ length: FILES }, (_, i) => [`${i + 1}_t${i + 1}.up.sql`, `CREATE TABLE t${i + 1} (x int);\n`])), 'app/many:v1');
  await createOciMigration(w, o, 'many', 'app/many:v1', secret, { apply: 'Always' });
  const synced = await w.waitFor('many', 'in sync', (m) => (m.status?.phase === 'InSync' && !m.status.activeOperation ? m : undefined), 4 * WAIT_MS);
  t.equal(synced.status?.artifact?.oci?.manifestDigest, digest, 'the pin is the pushed digest');
  t.equal(synced.status?.artifact?.oci?.pinnedReference, `${registry.host}/app/many@${digest}`);
  t.match(synced.status?.conditions?.find((c) => c.type === 'ArtifactVerified'), { status: 'True', reason: 'Verified' });

  const rows = await w.history(db);
  t.equal(rows.length, FILES, 'the database\'s history holds one row per file');
  t.equal(new Set(rows.map((r) => r.version)).size, FILES, 'each version once');
  const [{ n }] = await w.sql<{ n: string }>(db, "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'");
  t.equal(Number(n), FILES, 'every table exists');

  const jobs = jobsFor(w, 'many');
  const resolves = jobs.filter((j) => operationOf(j) === 'resolve');
  const databaseJobs = jobs.filter((j) => operationOf(j) !== 'resolve');
  t.ok(resolves.length >= 1 && databaseJobs.length >= 5, `${resolves.length} Resolve Job(s), ${databaseJobs.length} database Jobs`);
  const env = (c: { env?: { name: string; valueFrom?: unknown }[] } | undefined) => (c?.env ?? []).map((e) => e.name);
  for (const job of resolves) {
    const spec = job.spec!.template.spec!;
    t.notOk(env(spec.containers[0]).includes('PTAH_DB_URL'), 'a Resolve Job holds no database URL');
    t.ok(spec.volumes?.some((v) => v.secret?.secretName === 'registry'), 'it mounts the registry Secret');
  }
  for (const job of databaseJobs) {
    const spec = job.spec!.template.spec!;
    const [fetch] = spec.initContainers ?? [];
    t.equal(fetch?.args?.[0], '--fetch-artifact', `${job.metadata?.name}: a fetch init container`);
    t.notOk(env(fetch).includes('PTAH_DB_URL'), 'which holds no database URL');
    t.ok(fetch?.volumeMounts?.some((m) => m.name === 'registry-auth'), 'and mounts the registry Secret');
    t.notOk(spec.containers[0].volumeMounts?.some((m) => m.name === 'registry-auth'), 'the runner does not mount it');
    t.ok(env(spec.containers[0]).includes('PTAH_DB_URL'), 'the runner holds the database URL');
  }
});

t.test('a moved tag retires the plan before its approval; each refusal is Blocked with its reason and runs nothing', async (t) => {
  const w = await migrationWorld(t);
  const o = await ociWorld(t);
  const { registry } = o;
  await o.install(w.admin, w.ns, POLICY);
  await w.startController();
  const db = await w.database('oci_moved');
  const secret = await w.installSample(db);

  const first = await o.push({ '1_old_only.up.sql': 'CREATE TABLE old_only (x int);\n' }, 'app/moving:v1');
  await createOciMigration(w, o, 'moving', 'app/moving:v1', secret, { apply: 'OnApproval', interval: '10s' });
  const awaiting = await w.waitFor('moving', 'the first plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  t.equal(awaiting.status?.artifact?.oci?.manifestDigest, first);
  const firstPlan = await w.plan('moving');

  // Refusals, all at once, against a database of their own: each resource gets its own Resolve and nothing else.
  const refusedDb = await w.database('oci_refused');
  const refusedSecret = await w.installSample(refusedDb, 'refused-db');
  const down = await startRegistry(o.pki);
  await down.stop();
  await o.push({ 'schema.sql': 'CREATE TABLE s (x int);\n' }, 'app/schema:v1');
  await o.push({ '1_a.up.sql': 'CREATE TABLE a (x int);\n' }, 'app/bare:v1', {});
  await o.push({ '1_g.up.sql': 'CREATE TABLE g (x int);\n' }, 'app/good:v1');
  // cosign's own signatures (test/fixtures/oci): the fixture signed by the `signer` key, replayed byte for byte.
  const fixtures = JSON.parse(await readFile(FIXTURE_FILE, 'utf8')) as SignatureFixtures;
  t.equal(await pushFixture(registry, 'app/signed', 'signed'), fixtures.signed.digest, 'the fixture cosign signed');
  await replay(new RegistryClient(registry.host, { ca: registry.caPem, credentials: { username: registry.username, password: registry.password } }), 'app/signed', fixtures.signed.withReferrersApi);
  const keyPolicy = (key: string) => `version: 1\nsignatureKeys:\n  - name: release\n    publicKey: |\n${key.trim().split('\n').map((l) => `      ${l}`).join('\n')}\n`;
  for (const [name, key] of [['signer-policy', fixtures.keys.signer], ['stranger-policy', fixtures.keys.stranger]] as const) {
    await w.admin.create<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: w.ns }, immutable: true, data: { 'policy.yaml': keyPolicy(key) } });
  }
  await w.admin.create<V1Secret>({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'registry-down', namespace: w.ns }, type: 'kubernetes.io/dockerconfigjson',
    stringData: { '.dockerconfigjson': JSON.stringify({ auths: { [down.host]: { auth: Buffer.from('u:p').toString('base64') } } }) } });
  const refusals: { name: string; reference: string; reason: string; message: RegExp; auth?: string; host?: string; policy?: string }[] = [
    { name: 'wrong-type', reference: 'app/schema:v1', reason: 'ArtifactTypeMismatch', message: /schema\.v1/ },
    { name: 'no-annotation', reference: 'app/bare:v1', reason: 'ArtifactRefused', message: /org\.opencontainers\.image\.source/ },
    { name: 'unsigned', reference: 'app/good:v1', reason: 'ArtifactRefused', message: /signature/i, policy: 'signer-policy' },
    { name: 'wrong-key', reference: 'app/signed:v1', reason: 'ArtifactRefused', message: /signature/i, policy: 'stranger-policy' },
    { name: 'wrong-digest', reference: `app/good:v1@sha256:${'0'.repeat(64)}`, reason: 'DigestMismatch', message: /resolves it to/ },
    { name: 'refused-credentials', reference: 'app/good:v1', reason: 'RegistryUnauthorized', message: /./, auth: 'registry-wrong' },
    { name: 'registry-down', reference: 'app/good:v1', reason: 'RegistryUnreachable', message: /./, auth: 'registry-down', host: down.host },
  ];
  for (const r of refusals) {
    await createOciMigration(w, o, r.name, r.reference, refusedSecret, { apply: 'Always', ...(r.auth ? { auth: r.auth } : {}), ...(r.host ? { host: r.host } : {}), ...(r.policy ? { policy: r.policy } : {}) });
  }
  // The control: the signed fixture under the signer's key resolves (its files are only read, never applied).
  const signedSecret = await w.installSample(await w.database('oci_signed'), 'signed-db');
  await createOciMigration(w, o, 'signed', 'app/signed:v1', signedSecret, { apply: 'Never', policy: 'signer-policy' });
  for (const r of refusals) {
    const blocked = await w.waitFor(r.name, `Blocked with ${r.reason}`, (m) => (m.status?.phase === 'Blocked' && m.status.conditions?.some((c) => c.reason === r.reason) ? m : undefined));
    const verified = blocked.status?.conditions?.find((c) => c.type === 'ArtifactVerified');
    t.match(verified, { status: 'False', reason: r.reason }, `${r.name}: ArtifactVerified False, ${r.reason}`);
    t.match(verified?.message, r.message, `${r.name}: the message names the check`);
    t.equal(blocked.status?.artifact, undefined, `${r.name}: nothing is pinned`);
  }
  const signed = await w.waitFor('signed', 'the signed artifact pinned', (m) => (m.status?.artifact ? m : undefined));
  t.same(signed.status?.artifact?.oci?.verifiedKeys, ['release'], 'control: cosign\'s signature verifies with the policy\'s key');
  t.equal(signed.status?.artifact?.oci?.manifestDigest, fixtures.signed.digest);

  // The tag moves before anyone approves the first plan.
  const second = await o.push({ '1_old_only.up.sql': 'CREATE TABLE old_only (x int);\n', '2_new_only.up.sql': 'CREATE TABLE new_only (x int);\n' }, 'app/moving:v1');
  t.not(second, first, 'the tag names new content');
  const moved = await w.waitFor('moving', 'the plan of the moved tag', (m) =>
    (m.status?.phase === 'AwaitingApproval' && m.status.plan && m.status.plan.name !== firstPlan.metadata.name ? m : undefined));
  t.equal(moved.status?.artifact?.oci?.manifestDigest, second, 'the pin moved with the tag');
  const stale = await w.approvalFor('moving', { name: firstPlan.metadata.name!, uid: firstPlan.metadata.uid!, fingerprint: firstPlan.spec.fingerprint })
    .then(() => 'admitted', (e: Error) => `refused: ${e.message}`);
  t.match(stale, /^refused: .*current plan is .*approve the plan it names now/, 'an approval of the retired plan is refused at admission');
  await new Promise((r) => setTimeout(r, 3_000));
  t.same(await w.history(db), [], 'the retired plan never ran, approved or not');
  t.notOk(jobsFor(w, 'moving').some((j) => operationOf(j) === 'migration-apply'), 'no Apply Job for the retired plan');

  await w.approve('moving');
  await w.waitFor('moving', 'in sync', (m) => (m.status?.phase === 'InSync' && !m.status.activeOperation ? m : undefined));
  t.same((await w.history(db)).map((r) => r.version), ['1', '2'], 'the approved plan of the new digest ran, each file once');

  for (const r of refusals) {
    t.same(jobsFor(w, r.name).map(operationOf).filter((op) => op !== 'resolve'), [], `${r.name}: no database Job ever ran`);
  }
  t.same(await w.history(refusedDb), [], 'the refusals\' database holds no migration history');
  t.same(await w.sql(refusedDb, "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('public', 'information_schema')"), [],
    'and no schema of any kind: nothing was ever run against it');

  // No status, Event, plan or Job holds the registry's password or its base64 auth.
  const auth = Buffer.from(`${registry.username}:${registry.password}`).toString('base64');
  const migrations = await w.admin.list<PtahMigration>(API_VERSION, KINDS.PtahMigration.kind, w.ns);
  const plans = await w.admin.list(API_VERSION, KINDS.PtahMigrationPlan.kind, w.ns);
  const events = await w.admin.list('events.k8s.io/v1', 'Event', w.ns);
  // The logs of every container of every operation Pod: the runner's, and the fetch's that held the Secret.
  const pods = await w.admin.list<V1Pod>('v1', 'Pod', w.ns);
  const logs = await Promise.all(pods.flatMap((pod) => [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((c) =>
    w.admin.readPodLog(w.ns, pod.metadata!.name!, { container: c.name }).catch(() => ''))));
  const texts = [JSON.stringify(migrations), JSON.stringify(plans), JSON.stringify(events), JSON.stringify([...w.jobsSeen.values()]), ...logs];
  t.ok(events.length > 0, `${events.length} Events read`);
  t.ok(logs.filter((l) => l.includes('PTAH_RUNNER_RESULT_V1')).length >= 5, `${logs.length} container logs read, the runners' frames among them`);
  for (const secretText of [registry.password, auth, o.wrongPassword]) {
    t.notOk(texts.some((text) => text.includes(secretText)), 'no status, plan, Event, Job or container log holds a registry credential');
  }
});
