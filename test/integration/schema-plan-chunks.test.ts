// A PtahSchemaPlan whose chunks no longer hold its content when its approved Apply is staged: a chunk deleted after
// the plan was published cannot be brought back by a retry, so the stage step retires the plan (its approval goes
// Stale, never Consumed), nothing runs, and a fresh reading publishes a new plan for a new approval.
import t from 'tap';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PtahSchemaApproval } from '../../src/shared/api/schema-kinds.js';
import { approvalConditionOf, approvalNamed, firstPlanAwaitingApproval, schemaJobsOf, schemaWorld } from './schema-world.js';

const R1 = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE
);
`;

t.test('an approved plan whose chunk was deleted is retired at the stage step and re-planned, never applied', async (t) => {
  const w = await schemaWorld(t);
  const { db, plan } = await firstPlanAwaitingApproval(w, 'catalog', 'schema_chunks', R1);
  t.ok(plan.spec.chunks.length >= 1, 'the plan is stored in chunks');

  // Someone with the rights removes a chunk; the plan object itself is unchanged.
  await w.admin.delete({ apiVersion: API_VERSION, kind: KINDS.PtahSchemaPlanChunk.kind, namespace: w.ns, name: plan.spec.chunks[0]! });
  const approval: PtahSchemaApproval = await w.approve('catalog');

  const replanned = await w.waitFor('catalog', 'a new plan awaiting a new approval',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.plan.uid !== plan.metadata.uid ? s : undefined));
  t.not(replanned.status?.plan?.name, undefined, 'a fresh plan is published');
  const stale = await approvalNamed(w, approval.metadata.name!);
  t.equal(approvalConditionOf(stale, 'Stale')?.status, 'True', 'the approval of the retired plan is Stale');
  t.not(approvalConditionOf(stale, 'Consumed')?.status, 'True', 'and was never consumed');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 0, 'no Apply Job was created for the plan that cannot be staged');
  t.same(await w.tables(db), [], 'the database is untouched');
  t.same(await w.applies(db), [], 'no Apply is recorded');

  await w.approve('catalog');
  await w.waitFor('catalog', 'the new plan applied and proven', (s) => (s.status?.phase === 'InSync' && s.status.applied?.planRef.uid === replanned.status?.plan?.uid ? s : undefined));
  t.same(await w.tables(db), ['products'], 'the new plan applied');
  t.equal((await w.applies(db)).length, 1, 'exactly one Apply ran');
});
