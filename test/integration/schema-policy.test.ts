// PtahSchema policy on the real control plane, runner and PostgreSQL: an approval of a plan that is no longer
// current goes Stale and a fresh approval applies the newest plan; a destructive change stays Blocked with the
// database untouched (and, once allowed, still needs an approval); a person's write to status is refused.
import t, { type Test } from 'tap';
import { ApiError, restClient } from '../../src/shared/kube-client.js';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { FIELD_MANAGER } from './operator-install.js';
import { approvalConditionOf, approvalNamed, schemaJobsOf, schemaWorld, switchDesired, type SchemaWorld } from './schema-world.js';

const PRODUCTS = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  title text NOT NULL
);
`;
const PRODUCTS_WITH_PRICE = PRODUCTS.replace('title text NOT NULL\n', 'title text NOT NULL,\n  price_cents bigint\n');
const PRODUCTS_WITH_PRICE_AND_DESCRIPTION = PRODUCTS.replace('title text NOT NULL\n', 'title text NOT NULL,\n  price_cents bigint,\n  description text\n');
const NOTES = `CREATE TABLE product_notes (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  body text NOT NULL
);
`;

const readyReason = (s: PtahSchema) => s.status?.conditions?.find((c) => c.type === 'Ready')?.reason;

async function columnsOf(w: SchemaWorld, db: Parameters<SchemaWorld['tables']>[0], table: string): Promise<string[]> {
  const rows = await w.sql<{ name: string }>(db, 'SELECT column_name AS name FROM information_schema.columns WHERE table_schema = \'public\' AND table_name = $1 ORDER BY ordinal_position', [table]);
  return rows.map((r) => r.name);
}

/** Converges `name` from its first plan under OnApproval; returns that plan. */
async function convergeFirst(t: Test, w: SchemaWorld, name: string) {
  await w.waitFor(name, 'a first plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  const plan = await w.plan(name);
  await w.approve(name);
  const synced = await w.waitFor(name, 'InSync after the first Apply and its proof',
    (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === plan.metadata.uid && !s.status.pendingLockRelease && !s.status.pendingObservation ? s : undefined));
  t.equal(synced.status?.applied?.planFingerprint, plan.spec.fingerprint, `${name} converged exactly its first plan ${plan.metadata.name}`);
  return plan;
}

t.test('an additive change yields a new plan; the unused approval of the old plan goes Stale; a fresh approval applies the newest', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_additive');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', PRODUCTS);
  await w.desired('catalog-r2', PRODUCTS_WITH_PRICE);
  await w.desired('catalog-r3', PRODUCTS_WITH_PRICE_AND_DESCRIPTION);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  const p1 = await convergeFirst(t, w, 'catalog');
  t.same(await columnsOf(w, db, 'products'), ['id', 'sku', 'title'], 'r1 is applied');

  await switchDesired(w, 'catalog', 'catalog-r2');
  await w.waitFor('catalog', 'the r2 plan awaiting approval',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.plan.uid !== p1.metadata.uid ? s : undefined));
  const p2 = await w.plan('catalog');
  t.equal(p2.spec.destructive, false, 'adding a column is not destructive');
  t.not(p2.spec.contentDigest, p1.spec.contentDigest, 'P2 is a different plan content');

  // Hold the approval unused: it is created while nothing can claim it, and the plan it names goes away first.
  await w.stopController();
  const a2 = await w.approve('catalog');
  await switchDesired(w, 'catalog', 'catalog-r3');
  const a2Before = await approvalNamed(w, a2.metadata.name!);
  t.notOk(approvalConditionOf(a2Before, 'Consumed'), 'fixture: the approval of P2 is unspent');
  t.notOk(approvalConditionOf(a2Before, 'Stale'), 'fixture: the approval of P2 is not yet stale');
  t.equal(a2Before.spec.planRef.uid, p2.metadata.uid, 'fixture: the approval names P2');
  await w.startController();

  const stale = await waitFor(async () => {
    const a = await approvalNamed(w, a2.metadata.name!);
    return approvalConditionOf(a, 'Stale')?.status === 'True' ? a : undefined;
  }, { what: 'the approval of P2 to go Stale', timeoutMs: 60_000 });
  t.equal(approvalConditionOf(stale, 'Stale')?.reason, 'DesiredStateChanged', 'it went Stale because the desired schema moved');
  t.notOk(approvalConditionOf(stale, 'Consumed'), 'the stale approval was never spent');

  await w.waitFor('catalog', 'the r3 plan awaiting approval',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.plan.uid !== p2.metadata.uid && s.status.plan.uid !== p1.metadata.uid ? s : undefined));
  const p3 = await w.plan('catalog');
  t.not(p3.spec.contentDigest, p2.spec.contentDigest, 'P3 is a different plan content');
  t.equal((await w.applies(db)).length, 1, 'the stale approval applied nothing: only P1 ran');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'no Apply Job was created for P2');

  const a3 = await w.approve('catalog');
  const synced = await w.waitFor('catalog', 'InSync after P3 and its proof',
    (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === p3.metadata.uid && !s.status.pendingLockRelease && !s.status.pendingObservation ? s : undefined));
  const applies = await w.applies(db);
  t.same(applies.map((a) => a.planContentDigest), [p1.spec.contentDigest, p3.spec.contentDigest], 'P1 then P3 were applied, each once; P2 never');
  t.equal(new Set(applies.map((a) => a.operationId)).size, applies.length, 'no operation ID was applied twice');
  t.equal(synced.status?.applied?.operationID, applies[1]?.operationId, 'status.applied names the operation the database recorded');
  t.same(await columnsOf(w, db, 'products'), ['id', 'sku', 'title', 'price_cents', 'description'], 'the new columns exist');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 2, 'two Apply Jobs were ever created');
  t.equal(approvalConditionOf(await approvalNamed(w, a3.metadata.name!), 'Consumed')?.status, 'True', 'the fresh approval was spent');
  const a2After = await approvalNamed(w, a2.metadata.name!);
  t.notOk(approvalConditionOf(a2After, 'Consumed'), 'the stale approval is still unspent');
  t.equal(approvalConditionOf(a2After, 'Stale')?.status, 'True', 'and still Stale');
});

t.test('a destructive change stays Blocked with the database untouched; allowed, it still needs an approval', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_destructive');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', PRODUCTS + NOTES);
  await w.desired('catalog-r2', PRODUCTS);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  await convergeFirst(t, w, 'catalog');
  t.same(await w.tables(db), ['product_notes', 'products'], 'fixture: both tables exist');
  await w.sql(db, 'INSERT INTO product_notes (body) VALUES (\'keep me\')');
  const appliesBefore = await w.applies(db);
  t.equal(appliesBefore.length, 1, 'fixture: one Apply recorded');

  await switchDesired(w, 'catalog', 'catalog-r2');
  const blocked = await w.waitFor('catalog', 'the destructive plan Blocked',
    (s) => (s.status?.phase === 'Blocked' && s.status.plan && s.status.plan.destructive ? s : undefined));
  t.equal(readyReason(blocked), 'DestructiveChangesDisabled', 'Ready names why');
  const plan = await w.plan('catalog');
  t.equal(plan.spec.destructive, true, 'the plan is marked destructive');
  t.equal(plan.metadata.uid, blocked.status?.plan?.uid);

  // An approval does not unblock a plan the policy refuses.
  const refusedApproval = await w.approve('catalog');
  await sleep(8_000);
  const still = await w.get('catalog');
  t.equal(still.status?.phase, 'Blocked', 'still Blocked after a while and an approval');
  t.equal(readyReason(still), 'DestructiveChangesDisabled');
  t.notOk(still.status?.activeOperation?.type === 'Apply', 'no Apply is claimed');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'no Apply Job was created for the destructive plan');
  t.same(await w.applies(db), appliesBefore, 'schema_applies is unchanged');
  t.same(await w.tables(db), ['product_notes', 'products'], 'the table is still there');
  t.same((await w.sql<{ body: string }>(db, 'SELECT body FROM product_notes')).map((r) => r.body), ['keep me'], 'with its rows');
  t.notOk(approvalConditionOf(await approvalNamed(w, refusedApproval.metadata.name!), 'Consumed'), 'the approval was not spent');

  // Companion: allowDestructive with policy Always still asks for an approval.
  await w.admin.patch(w.ref('PtahSchema', 'catalog'), { spec: { policy: { allowDestructive: true, apply: 'Always' } } }, 'merge');
  const awaiting = await w.waitFor('catalog', 'the destructive plan awaiting approval under Always',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan?.destructive && s.status.plan.uid !== plan.metadata.uid ? s : undefined));
  t.equal(readyReason(awaiting), 'DestructivePlan', 'a destructive plan needs an approval whatever spec.policy.apply says');
  const allowed = await w.plan('catalog');
  t.equal(allowed.spec.destructive, true);
  await sleep(8_000);
  const held = await w.get('catalog');
  t.equal(held.status?.phase, 'AwaitingApproval', 'still awaiting approval after a while');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'no Apply Job before the approval');
  t.same(await w.tables(db), ['product_notes', 'products'], 'the table is still there before the approval');
  t.same(await w.applies(db), appliesBefore, 'schema_applies is unchanged before the approval');

  await w.approve('catalog');
  await w.waitFor('catalog', 'InSync after the approved destructive plan',
    (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === allowed.metadata.uid && !s.status.pendingLockRelease && !s.status.pendingObservation ? s : undefined));
  t.same(await w.tables(db), ['products'], 'the table was dropped only after the approval');
  const applies = await w.applies(db);
  t.same(applies.map((a) => a.planContentDigest), [...appliesBefore.map((a) => a.planContentDigest), allowed.spec.contentDigest], 'exactly the approved destructive plan ran, once');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 2);
  t.notOk(approvalConditionOf(await approvalNamed(w, refusedApproval.metadata.name!), 'Consumed'), 'the approval of the refused plan was never spent');
});

t.test('a person\'s write to a PtahSchema status is refused and the stored status does not change', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_statuswrite');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', PRODUCTS);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  // Real records the manager wrote, to try to write back: a reading's claim and an Apply's proof.
  const reading = await w.waitFor('catalog', 'a reading claimed', (s) => s.status?.activeOperation);
  await w.waitFor('catalog', 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  await w.approve('catalog');
  const proof = await w.waitFor('catalog', 'the Apply\'s proof owed', (s) => s.status?.pendingObservation);
  await w.waitFor('catalog', 'InSync', (s) => (s.status?.phase === 'InSync' && !s.status.pendingObservation && !s.status.pendingLockRelease ? s : undefined));
  await w.stopController();
  const before = await w.get('catalog');
  t.notOk(before.status?.activeOperation, 'fixture: no claim stored');
  t.notOk(before.status?.pendingObservation, 'fixture: no proof owed');

  const refused = async (attempt: Promise<unknown>, code: number, message: RegExp, what: string) => {
    const outcome = await attempt.then(() => 'admitted', (e: unknown) => e);
    if (!(outcome instanceof ApiError)) {
      t.fail(`${what}: expected a refusal, got ${outcome instanceof Error ? outcome.message : String(outcome)}`);
      return;
    }
    t.equal(outcome.code, code, `${what}: HTTP ${code}`);
    t.match(outcome.status.message ?? '', message, `${what}: ${outcome.status.message}`);
  };
  const byPerson = /written only by the operator['’]s manager/;
  await refused(w.admin.update({ ...before, status: { ...before.status, pendingObservation: proof } }, { subresource: 'status' }), 403, byPerson,
    'the administrator writing status.pendingObservation');
  await refused(w.admin.update({ ...before, status: { ...before.status, activeOperation: reading } }, { subresource: 'status' }), 403, byPerson,
    'the administrator writing status.activeOperation');
  await refused(w.admin.patch(w.ref('PtahSchema', 'catalog'), { status: { applied: null } }, 'merge', { subresource: 'status' }), 403, byPerson,
    'the administrator clearing status.applied');
  await refused(w.approver.update({ ...before, status: { ...before.status, activeOperation: reading } }, { subresource: 'status' }), 403,
    /cannot update resource "ptahschemas\/status"/, 'the approver writing status.activeOperation');
  const after = await w.get('catalog');
  t.same(after.status, before.status, 'the stored status did not change');
  t.equal(after.metadata.resourceVersion, before.metadata.resourceVersion, 'nothing was written');

  // Companion: the same write by the manager is admitted, so the refusal is about who writes.
  const manager = await restClient(sharedCluster().kubeConfig('manager'), { fieldManager: FIELD_MANAGER });
  const written = await manager.update<PtahSchema>({ ...after, status: { ...after.status, nextReconciliationTime: new Date().toISOString() } }, { subresource: 'status' });
  t.not(written.metadata.resourceVersion, before.metadata.resourceVersion, 'the manager\'s status write is admitted');
});
