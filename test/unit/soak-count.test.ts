// The soak's counting functions (bench/soak-count.ts) against fabricated database and API server histories: a clean
// history counts nothing, and each violation the soak must catch is counted.
import t from 'tap';
import { appliedTwice, executionsOf, leaseTransitions, overlaps, type DatabaseRecord, type MigrationRow, type PodLife } from '../../bench/soak-count.js';

const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, s));
const row = (seq: number, version: string, operationId: string, from: number, to: number): MigrationRow =>
  ({ seq, version, operationId, startedAt: at(from), finishedAt: at(to) });
const db = (history: MigrationRow[], schemaApplies: DatabaseRecord['schemaApplies'] = []): DatabaseRecord =>
  ({ database: 'soak-0', realm: 'db0', history, schemaApplies });

// Two operations, one after the other: op-a applies 0001 and 0002, op-b 0003.
const clean = db([row(1, '0001', 'op-a', 0, 1), row(2, '0002', 'op-a', 1, 3), row(3, '0003', 'op-b', 4, 5)]);

t.test('a clean history: two executions, nothing applied twice, no overlap', async (t) => {
  const { executions } = executionsOf(clean);
  t.same(executions.map((e) => [e.operationId, e.start.getTime(), e.end.getTime()]), [['op-a', at(0).getTime(), at(3).getTime()], ['op-b', at(4).getTime(), at(5).getTime()]]);
  t.same(appliedTwice([clean]), []);
  t.same(overlaps([clean]), []);
});

t.test('an operation whose rows resume after another operation\'s is applied twice', async (t) => {
  const twice = db([...clean.history, row(4, '0004', 'op-a', 6, 7)]);
  t.same(appliedTwice([twice]).map((a) => a.operationId), ['op-a']);
});

t.test('a version recorded twice is counted, and an operation recorded in two databases', async (t) => {
  const again = db([row(1, '0001', 'op-a', 0, 1), row(2, '0001', 'op-b', 2, 3)]);
  t.same(appliedTwice([again]).map((a) => a.operationId), ['op-b']);
  const elsewhere: DatabaseRecord = { ...db([row(1, '0001', 'op-b', 9, 10)]), database: 'soak-1' };
  t.same(appliedTwice([clean, elsewhere]).map((a) => a.why), ['recorded in soak-0 and in soak-1']);
});

t.test('a schema operation recorded twice in schema_applies is applied twice', async (t) => {
  const applies = [{ seq: 1, operationId: 'op-s', startedAt: at(0), appliedAt: at(2) }, { seq: 2, operationId: 'op-s', startedAt: at(5), appliedAt: at(6) }];
  t.same(appliedTwice([db([], applies)]).map((a) => a.operationId), ['op-s']);
});

t.test('executions of two operations whose spans intersect on one database overlap, across families too', async (t) => {
  const overlapping = db([row(1, '0001', 'op-a', 0, 1), row(2, '0002', 'op-a', 1, 4), row(3, '0003', 'op-b', 3, 5)]);
  const found = overlaps([overlapping]);
  t.same(found.map((o) => [o.first.operationId, o.second.operationId, o.realm]), [['op-a', 'op-b', 'db0']]);
  const schemaInside = db(clean.history, [{ seq: 1, operationId: 'op-s', startedAt: at(2), appliedAt: at(2) }]);
  t.same(overlaps([schemaInside]).map((o) => [o.first.operationId, o.second.operationId]), [['op-a', 'op-s']]);
  t.same(overlaps([clean, { ...overlapping, database: 'soak-1', history: [row(1, '0001', 'op-c', 0, 9)] }]), [], 'spans on different databases never overlap');
});

t.test('a Lease released or taken over while a Pod of its holder\'s claim runs is counted; one released after the Pod stopped is not', async (t) => {
  const pods: PodLife[] = [
    { name: 'apply-a', holder: 'claim-a', createdRevision: 11, stoppedRevision: 15 },
    { name: 'apply-b', holder: 'claim-b', createdRevision: 21, stoppedRevision: undefined },
  ];
  const write = (revision: number, holderAfter: string | undefined, deleted = false) => ({ lease: 'realm', at: revision, revision, holderAfter, deleted });
  const safe = leaseTransitions([write(10, 'claim-a'), write(12, 'claim-a'), write(16, undefined), write(20, 'claim-b')], pods);
  t.same(safe.releases.map((r) => [r.from, r.runningPods]), [['claim-a', []]], 'released after its Pod stopped');
  t.same(safe.takeovers, []);
  const early = leaseTransitions([write(10, 'claim-a'), write(14, undefined)], pods);
  t.same(early.releases.map((r) => r.runningPods), [['apply-a']], 'released while apply-a ran');
  const deleted = leaseTransitions([write(20, 'claim-b'), write(30, undefined, true)], pods);
  t.same(deleted.releases.map((r) => r.runningPods), [['apply-b']], 'a deleted Lease is released too');
  const taken = leaseTransitions([write(20, 'claim-b'), write(25, 'claim-c')], pods);
  t.same(taken.takeovers.map((r) => [r.from, r.to, r.runningPods]), [['claim-b', 'claim-c', ['apply-b']]], 'a takeover under a running Pod');
});
