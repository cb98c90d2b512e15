// A PtahRealm on the real stack (issue #14, its last part): resources of two namespaces reach one PostgreSQL database
// through two URL spellings (127.0.0.1 and localhost) under one realm. They hold one coordination digest, contend for
// ONE Lease in the coordination namespace, and apply one after the other (the database's own tables say when each
// Apply ran); both converge. Without a grant (a realm that does not exist, or does not list the namespace) or against
// the realm's sharing rule they are Blocked before reading anything, and the database is untouched. The webhook
// refuses an overlapping realm; RBAC lets no namespace role, approver or manager write one.
import { randomBytes } from 'node:crypto';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import t, { type Test } from 'tap';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PtahRealm, RealmSharing } from '../../src/shared/api/realm-kinds.js';
import { restClient, type KubeClient } from '../../src/shared/kube-client.js';
import { leaseNameFor, sharedRealmDigest } from '../../src/shared/realm.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { CLUSTER_OBJECT_SCOPE_LABEL } from '../../tools/stack/webhooks.js';
import { jobsOf, leaseHolding, migrationWorld, runningApply, WAIT_MS, type HistoryRow, type MigrationWorld } from './migration-world.js';
import { FIELD_MANAGER } from './operator-install.js';
import { schemaJobsOf, schemaWorld } from './schema-world.js';
import { sleepingSessions } from './slow-apply.js';

const localhost = (url: string) => url.replace('@127.0.0.1:', '@localhost:').replace('//127.0.0.1:', '//localhost:');
const realmRef = (name: string) => ({ apiVersion: API_VERSION, kind: KINDS.PtahRealm.kind, name });
const SLEEP_SECONDS = 30;
const LONG = { activeDeadlineSeconds: 180, lockTimeout: '2m' };

/** A PtahRealm for `namespaces`, judged by the webhooks of `world`'s namespace, deleted when the test ends. */
async function createRealm(t: Test, world: Pick<MigrationWorld, 'admin' | 'ns'>, namespaces: string[], sharing: RealmSharing, client: KubeClient = world.admin): Promise<PtahRealm> {
  const name = `share-${randomBytes(4).toString('hex')}`;
  const realm = await client.create<PtahRealm>({
    apiVersion: API_VERSION,
    kind: KINDS.PtahRealm.kind,
    metadata: { name, labels: { [CLUSTER_OBJECT_SCOPE_LABEL]: world.ns } },
    spec: { engine: 'PostgreSQL', namespaces, sharing },
  } as PtahRealm);
  t.teardown(() => world.admin.delete(realmRef(name)).catch(() => undefined));
  return realm;
}

/** [first start, last finish] of the history rows one operation wrote. */
function span(rows: HistoryRow[], operationId: string): [number, number] {
  const mine = rows.filter((r) => r.operationId === operationId);
  return [Math.min(...mine.map((r) => r.startedAt.getTime())), Math.max(...mine.map((r) => (r.finishedAt ?? r.startedAt).getTime()))];
}

type Conditioned = { status?: { conditions?: { type: string; reason: string; message: string }[] } };
const blockedBy = (reason: string) => <T extends Conditioned>(x: T) =>
  (x.status?.conditions?.some((c) => (c.type === 'Blocked' || c.type === 'Ready') && c.reason === reason) ? x : undefined);
const messageOf = (x: Conditioned, reason: string) =>
  x.status?.conditions?.find((c) => c.reason === reason)?.message ?? '';

t.test('two PtahMigrations in two namespaces under one Shared realm: one Lease, one Apply after the other, both converge', async (t) => {
  const a = await migrationWorld(t);
  const b = await migrationWorld(t, { realmLeaseNamespace: a.ns });
  const db = await a.database('realmshare');
  const realm = await createRealm(t, a, [a.ns, b.ns], 'Shared');
  const name = realm.metadata.name!;
  const first = { '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigint PRIMARY KEY);\n', '0002_create_orders.up.sql': `SELECT pg_sleep(${SLEEP_SECONDS});\nCREATE TABLE orders (id bigint PRIMARY KEY);\n` };
  await a.artifact('first-r1', first);
  await b.artifact('second-r1', { ...first, '0003_create_invoices.up.sql': 'CREATE TABLE invoices (id bigint PRIMARY KEY);\n' });
  const aSecret = await a.installSample(db);
  const bSecret = await b.installSample({ ...db, url: localhost(db.url) });
  t.not(localhost(db.url), db.url, 'fixture: the second spelling differs from the first');
  await a.startController();
  await b.startController();

  await a.createMigration({ name: 'orders', artifact: 'first-r1', secret: aSecret, apply: 'Always', realm: { name, shared: true }, ...LONG });
  const running = await runningApply(a, db, 'orders');
  const digest = sharedRealmDigest({ engine: 'PostgreSQL', realm: name });
  t.equal(running.claim.coordinationDigest, digest, 'the realm digest is sha256 over (engine, realm name)');
  t.strictSame(await leaseHolding(a, leaseNameFor(digest)), [running.lease.holder, running.claim.leaseEpoch], 'its Lease is in the coordination namespace, held by the Apply');

  await b.createMigration({ name: 'orders', artifact: 'second-r1', secret: bSecret, apply: 'Always', realm: { name, shared: true }, failureRetryInterval: '5s', ...LONG });
  const waiting = await b.waitFor('orders', 'its Apply claimed while the first Apply sleeps', (m) => (m.status?.activeOperation?.type === 'Apply' ? m : undefined));
  await sleep(3_000);
  t.ok((await sleepingSessions(a, db)) > 0, 'fixture: the first Apply is still in the database');
  const stillWaiting = await b.get('orders');
  t.equal(waiting.status?.activeOperation?.coordinationDigest, digest, 'the second namespace names the same realm digest');
  t.equal(stillWaiting.status?.activeOperation?.dispatchStarted, undefined, 'the second Apply waits on the one Lease: not dispatched');
  t.equal(jobsOf(b, 'apply').length, 0, 'and no Apply Job exists in the second namespace');
  t.strictSame(await leaseHolding(b, leaseNameFor(digest)), [undefined, undefined], 'no second Lease for the realm in the second namespace');
  t.strictSame((await leaseHolding(a, leaseNameFor(digest)))[0], running.lease.holder, 'the one Lease is still the first Apply\'s');

  const aDone = await a.waitFor('orders', 'in sync after its Apply', (m) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined), 240_000);
  const bDone = await b.waitFor('orders', 'in sync after its Apply', (m) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined), 240_000);
  const rows = await a.history(db);
  t.strictSame(rows.map((r) => r.version), ['0001', '0002', '0003'], 'each version applied once');
  t.strictSame(rows.map((r) => r.operationId), [aDone.status!.lastRun!.operationID, aDone.status!.lastRun!.operationID, bDone.status!.lastRun!.operationID], 'the first two by the first, the third by the second');
  const [, firstEnd] = span(rows, aDone.status!.lastRun!.operationID);
  const [secondStart] = span(rows, bDone.status!.lastRun!.operationID);
  t.ok(firstEnd <= secondStart, `the database shows one writer at a time (first ended ${new Date(firstEnd).toISOString()}, second started ${new Date(secondStart).toISOString()})`);
});

t.test('a PtahSchema and a PtahMigration of two namespaces under one realm: the schema waits for the migration, both converge', async (t) => {
  const m = await migrationWorld(t);
  const s = await schemaWorld(t, { realmLeaseNamespace: m.ns });
  const db = await m.database('realmmix');
  const realm = await createRealm(t, m, [m.ns, s.ns], 'Shared');
  const name = realm.metadata.name!;
  await m.artifact('tables-r1', {
    '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigint PRIMARY KEY);\n',
    '0002_create_orders.up.sql': `SELECT pg_sleep(${SLEEP_SECONDS});\nCREATE TABLE orders (id bigint PRIMARY KEY);\n`,
  });
  await s.desired('catalog-r1', 'CREATE TABLE customers (id bigint PRIMARY KEY);\nCREATE TABLE orders (id bigint PRIMARY KEY);\nCREATE TABLE products (id bigint PRIMARY KEY);\n');
  const mSecret = await m.installSample(db);
  const sSecret = await s.installSample({ ...db, url: localhost(db.url) });
  await m.startController();
  await s.startController();

  await m.createMigration({ name: 'orders', artifact: 'tables-r1', secret: mSecret, apply: 'Always', realm: { name, shared: true }, ...LONG });
  const running = await runningApply(m, db, 'orders');
  await s.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret: sSecret, apply: 'Always', realm: { name, shared: true }, ...LONG });
  // A schema Plan holds the realm: it is claimed from the first reading and waits on the migration's Lease.
  const waiting = await s.waitFor('catalog', 'its Plan claimed while the migration applies', (x) => (x.status?.activeOperation?.type === 'Plan' ? x : undefined));
  await sleep(3_000);
  t.ok((await sleepingSessions(m, db)) > 0, 'fixture: the migration Apply is still in the database');
  t.equal(waiting.status?.activeOperation?.coordinationDigest, running.claim.coordinationDigest, 'one realm digest for both kinds and namespaces');
  t.equal((await s.get('catalog')).status?.activeOperation?.dispatchStarted, undefined, 'the schema Plan waits on the one Lease');
  t.equal(schemaJobsOf(s, 'plan').length + schemaJobsOf(s, 'apply').length, 0, 'no schema Plan or Apply Job while the migration writes');

  const applied = await s.waitFor('catalog', 'in sync after its Apply', (x) => (x.status?.phase === 'InSync' && x.status.applied ? x : undefined), 300_000);
  const migrated = await m.waitFor('orders', 'in sync after its Apply', (x) => (x.status?.phase === 'InSync' && x.status.lastRun?.outcome === 'Applied' ? x : undefined), 240_000);
  t.strictSame(await s.tables(db), ['customers', 'orders', 'products'], 'both converged on one database');
  const [, migrationEnd] = span(await m.history(db), migrated.status!.lastRun!.operationID);
  const schemaApplies = await s.applies(db);
  t.equal(schemaApplies.length, 1, 'one schema Apply');
  t.ok(migrationEnd <= schemaApplies[0]!.appliedAt.getTime(), 'the schema applied after the migration finished, by the database\'s own records');
  t.ok(applied.status?.applied, 'the schema proved its Apply');
});

t.test('without a grant, or against the sharing rule, nothing is read or applied; only administrators write realms', async (t) => {
  const a = await migrationWorld(t);
  const b = await migrationWorld(t, { realmLeaseNamespace: a.ns });
  const db = await a.database('realmrefuse');
  await a.sampleArtifact();
  await b.sampleArtifact();
  const aSecret = await a.installSample(db);
  const bSecret = await b.installSample({ ...db, url: localhost(db.url) });
  const onlyA = await createRealm(t, a, [a.ns], 'Shared');

  // The webhook refuses an overlapping realm, naming the field and the other realm.
  const overlap = await createRealm(t, a, [b.ns, a.ns], 'Exclusive').then(() => undefined, (e: Error) => e.message);
  t.match(overlap, `spec.namespaces overlaps PtahRealm "${onlyA.metadata.name}"`, 'an overlapping realm is refused by the webhook');

  // RBAC: neither the approver, nor the manager, nor a namespace admin writes a PtahRealm.
  const cluster = sharedCluster();
  await cluster.kubeConfig('admin').makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: b.ns,
    body: { metadata: { name: 'alice-admin' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }] },
  });
  const manager = await restClient(cluster.kubeConfig('manager'), { fieldManager: FIELD_MANAGER });
  for (const [who, client] of [['the approver, also admin of a namespace', b.approver], ['the manager', manager]] as const) {
    const code = await createRealm(t, b, [b.ns], 'Shared', client).then(() => 201, (e: { code?: number }) => e.code);
    t.equal(code, 403, `${who} cannot create a PtahRealm`);
  }
  // (The negative: a cluster administrator created every realm above through the same API.)

  // The CRD: exactly one of coordinationKey and realmRef; no switch between them.
  const keyed = await b.createMigration({ name: 'keyed', artifact: 'orders-migrations-r1', secret: bSecret, apply: 'Never' });
  const twoOf = await b.admin.patch(b.ref('PtahMigration', 'keyed'), { spec: { target: { realmRef: { name: onlyA.metadata.name } } } }, 'merge').then(() => 'admitted', (e: Error) => e.message);
  t.match(twoOf, 'exactly one of spec.target.coordinationKey and spec.target.realmRef must be set');
  const switched = await b.admin.patch(b.ref('PtahMigration', 'keyed'), { spec: { target: { coordinationKey: null, realmRef: { name: onlyA.metadata.name } } } }, 'merge').then(() => 'admitted', (e: Error) => e.message);
  t.match(switched, 'spec.target cannot switch between coordinationKey and realmRef');
  await b.admin.delete(b.ref('PtahMigration', keyed.metadata.name!));

  // RealmNotAuthorized: from a namespace the realm does not list, and for a realm that does not exist; one message.
  await b.createMigration({ name: 'unlisted', artifact: 'orders-migrations-r1', secret: bSecret, apply: 'Always', realm: { name: onlyA.metadata.name!, shared: true } });
  await b.createMigration({ name: 'ghost', artifact: 'orders-migrations-r1', secret: bSecret, apply: 'Always', realm: { name: `ghost-${randomBytes(3).toString('hex')}`, shared: true } });
  await b.startController();
  const unlisted = await b.waitFor('unlisted', 'Blocked RealmNotAuthorized', blockedBy('RealmNotAuthorized'));
  const ghost = await b.waitFor('ghost', 'Blocked RealmNotAuthorized', blockedBy('RealmNotAuthorized'));
  t.equal(messageOf(unlisted, 'RealmNotAuthorized').replace(onlyA.metadata.name!, 'X'), messageOf(ghost, 'RealmNotAuthorized').replace(/ghost-[0-9a-f]+/, 'X'), 'one message for both');
  t.notMatch(messageOf(unlisted, 'RealmNotAuthorized'), /postgres(ql)?:\/\//, 'never a URL');

  // Exclusive: once the realm lists both namespaces, a second claimant blocks both.
  await a.admin.delete(realmRef(onlyA.metadata.name!));
  const exclusive = await createRealm(t, a, [a.ns, b.ns], 'Exclusive');
  await b.admin.delete(b.ref('PtahMigration', 'ghost'));
  // The first claimant exists before the second is pointed at the realm, so neither is ever alone in it.
  await a.createMigration({ name: 'first', artifact: 'orders-migrations-r1', secret: aSecret, apply: 'Always', realm: { name: exclusive.metadata.name!, shared: true } });
  await b.admin.patch(b.ref('PtahMigration', 'unlisted'), { spec: { target: { realmRef: { name: exclusive.metadata.name } } } }, 'merge');
  await a.startController();
  const firstBlocked = await a.waitFor('first', 'Blocked RealmConflict', blockedBy('RealmConflict'));
  const secondBlocked = await b.waitFor('unlisted', 'Blocked RealmConflict', blockedBy('RealmConflict'));
  t.match(messageOf(firstBlocked, 'RealmConflict'), `PtahMigration ${b.ns}/unlisted`, 'the first names the second');
  t.match(messageOf(secondBlocked, 'RealmConflict'), `PtahMigration ${a.ns}/first`, 'and the second the first');
  await sleep(5_000);
  t.equal(jobsOf(a, 'history').length + jobsOf(a, 'apply').length + jobsOf(b, 'history').length + jobsOf(b, 'apply').length, 0, 'nothing was read or applied');
  t.same(await a.history(db), [], 'the database history is untouched');

  // Negative: the same two claimants under a Shared realm (both set sharedRealm) are no longer held.
  await a.admin.patch(realmRef(exclusive.metadata.name!), { spec: { sharing: 'Shared' } }, 'merge');
  await a.admin.patch(a.ref('PtahMigration', 'first'), { metadata: { annotations: { 'ptah.test/wake': '1' } } }, 'merge');
  await b.admin.patch(b.ref('PtahMigration', 'unlisted'), { metadata: { annotations: { 'ptah.test/wake': '1' } } }, 'merge');
  await waitFor(async () => ((await a.history(db)).length === 3 ? true : undefined), { what: 'the history applied once the realm is Shared', timeoutMs: WAIT_MS * 2 });
  t.strictSame((await a.history(db)).map((r) => r.version), ['0001', '0002', '0003'], 'each version applied once');
});
