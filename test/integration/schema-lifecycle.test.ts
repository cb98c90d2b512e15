// PtahSchema end to end on the real control plane, runner and PostgreSQL: the first apply from an empty database,
// an additive change with a fresh approval (the old one goes Stale), a destructive change held Blocked.
import t from 'tap';
import { leaseNameFor } from '../../src/shared/realm.js';
import { leaseHolding } from './migration-world.js';
import { schemaJobsOf, schemaWorld } from './schema-world.js';

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
