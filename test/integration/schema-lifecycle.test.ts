// PtahSchema end to end on the real control plane, runner and PostgreSQL: the first apply from an empty database,
// an additive change with a fresh approval (the old one goes Stale), a destructive change held Blocked.
import t from 'tap';
import { leaseNameFor } from '../../src/shared/realm.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { leaseHolding } from './migration-world.js';
import { schemaJobsOf, schemaWorld, watchSchemas } from './schema-world.js';

const R1 = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  title text NOT NULL
);
`;

t.test('a first apply from an empty database converges, proven by a fresh reading', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_first');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', R1);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });

  const waiting = await w.waitFor('catalog', 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  t.equal(waiting.status?.target?.drift, true, 'the first reading found the database differs');
  t.same(await w.tables(db), [], 'nothing ran before the approval');
  t.same(await w.applies(db), [], 'no Apply is recorded before the approval');
  const plan = await w.plan('catalog');
  t.ok(plan.spec.statementCount > 0, 'the plan holds statements');
  t.equal(plan.spec.destructive, false);

  await w.approve('catalog');
  const synced = await w.waitFor('catalog', 'InSync after the proof, its release performed',
    (s) => (s.status?.phase === 'InSync' && s.status.applied && !s.status.pendingLockRelease ? s : undefined));
  t.same(await w.tables(db), ['products'], 'the table exists');
  const applies = await w.applies(db);
  t.equal(applies.length, 1, 'exactly one Apply ran');
  t.equal(applies[0]?.planContentDigest, plan.spec.contentDigest, 'it applied the approved plan content');
  t.equal(synced.status?.applied?.operationID, applies[0]?.operationId, 'status.applied names the operation the database recorded');
  t.equal(synced.status?.applied?.planRef.uid, plan.metadata.uid);
  t.notOk(synced.status?.pendingObservation, 'the proof is settled');
  const [holder] = await leaseHolding(w, leaseNameFor(synced.status!.target!.coordinationDigest));
  t.equal(holder, undefined, 'the realm is handed back');
  t.equal(synced.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'ScopedConverged');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'one Apply Job was ever created');
});

t.test('a suspended schema reads and runs nothing, and its status says which generation it reports on', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_suspended');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', R1);
  await w.startController();
  const seen = await watchSchemas(t, w, 'catalog');
  const created = await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'Always', suspend: true });
  const suspended = await w.waitFor('catalog', 'Suspended', (s) => (s.status?.phase === 'Suspended' ? s : undefined));
  t.equal(suspended.status?.observedGeneration, created.metadata.generation, 'status.observedGeneration is the generation the Suspended report is of');
  const edited = await w.admin.patch<typeof created>(w.ref('PtahSchema', 'catalog'), { spec: { interval: '5m' } }, 'merge');
  const again = await w.waitFor('catalog', 'Suspended at the edited generation', (s) => (s.status?.phase === 'Suspended' && s.status.observedGeneration === edited.metadata.generation ? s : undefined));
  t.equal(again.status?.conditions?.find((c) => c.type === 'Ready')?.observedGeneration, edited.metadata.generation, 'and so does its Ready condition');
  t.same(schemaJobsOf(w, 'observe', 'catalog'), [], 'no Observe Job ran');
  t.same(await w.tables(db), [], 'the database was not touched');
  // One status write at creation and one after the edit: the binding, the generation and the report go together.
  await waitFor(async () => (seen.some((s) => s.metadata.resourceVersion === again.metadata.resourceVersion) ? true : undefined), { what: 'the watch to see the last write', timeoutMs: 30_000 });
  const written = seen.filter((s, i) => Object.keys(s.status ?? {}).length > 0 && JSON.stringify(s.status) !== JSON.stringify(seen[i - 1]?.status));
  t.same(written.map((s) => [s.status?.phase, s.status?.observedGeneration, s.status?.executionBinding?.epoch !== undefined]),
    [['Suspended', created.metadata.generation, true], ['Suspended', edited.metadata.generation, true]], 'every status written was the Suspended report of the generation it names');
});

t.test('a plan that changes privileges needs an approval even under Always; a locking one shows its locking statements to the approver', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_privileges');
  const role = `ptah_reader_${db.name.slice(-8)}`;
  await w.sql(db, `CREATE ROLE ${role} NOLOGIN`);
  t.teardown(() => w.sql(db, `DROP OWNED BY ${role}; DROP ROLE ${role}`).then(() => undefined, () => undefined));
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', R1);
  await w.desired('catalog-r2', `${R1}GRANT SELECT ON products TO ${role};\n`);
  await w.desired('catalog-r3', `${R1.replace('title text NOT NULL', 'title text NOT NULL,\n  note text')}GRANT SELECT ON products TO ${role};\nCREATE INDEX products_title_idx ON products (title);\n`);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'Always' });
  await w.waitFor('catalog', 'r1 applied without an approval under Always', (s) => (s.status?.phase === 'InSync' && s.status.applied ? s : undefined));
  t.same(await w.tables(db), ['products'], 'fixture: r1 converged');

  await w.admin.patch(w.ref('PtahSchema', 'catalog'), { spec: { desired: { configMapRef: { name: 'catalog-r2' } } } }, 'merge');
  const awaiting = await w.waitFor('catalog', 'the privilege-changing plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  t.equal(awaiting.status?.plan?.privilegeChanging, true, 'the plan is marked privilege-changing');
  t.equal(awaiting.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'PrivilegeChanges', 'it says why it waits under Always');
  const plan = await w.plan('catalog');
  t.equal(plan.spec.privilegeChanging, true, 'the PtahSchemaPlan records it');
  await sleep(3_000);
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'no Apply ran for it without an approval');
  const before = await w.sql<{ granted: boolean }>(db, `SELECT has_table_privilege('${role}', 'products', 'SELECT') AS granted`);
  t.equal(before[0]?.granted, false, 'the grant is not there yet');
  await w.approve('catalog');
  await w.waitFor('catalog', 'the grant applied and proven', (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === plan.metadata.uid ? s : undefined));
  const after = await w.sql<{ granted: boolean }>(db, `SELECT has_table_privilege('${role}', 'products', 'SELECT') AS granted`);
  t.equal(after[0]?.granted, true, 'the grant exists once approved');

  await w.admin.patch(w.ref('PtahSchema', 'catalog'), { spec: { policy: { apply: 'OnApproval' }, desired: { configMapRef: { name: 'catalog-r3' } } } }, 'merge');
  const locking = await w.waitFor('catalog', 'the locking plan awaiting approval', (s) =>
    (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.plan.uid !== plan.metadata.uid ? s : undefined));
  t.ok((locking.status?.plan?.lockingStatementCount ?? 0) > 0, 'the status counts its locking statements');
  t.match(locking.status?.conditions?.find((c) => c.type === 'Ready')?.message, /rewrite, scan or lock a table/, 'and says so to the approver');
  t.equal(locking.status?.plan?.privilegeChanging, false, 'a plan that keeps the grant changes no privileges');
  const lockingPlan = await w.plan('catalog');
  t.equal(lockingPlan.spec.lockingStatementCount, locking.status?.plan?.lockingStatementCount, 'the PtahSchemaPlan records the same count');
  const applies = await w.applies(db);
  t.equal(new Set(applies.map((a) => a.planContentDigest)).size, applies.length, 'no plan content was applied twice');
});
