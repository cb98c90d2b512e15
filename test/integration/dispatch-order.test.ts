// Each dispatch step, faulted, leaves a state the next pass recovers from with at most one Job ever created; and
// each boundary matters: the same row run with its two steps exchanged fails with the problem the boundary
// prevents (the seed's dispatch-order test, for PtahMigration).
import t from 'tap';
import { ORDER, swapped } from '../../src/shared/lifecycle/dispatch.js';
import { RECOVERY_ROWS, ROWS, runRow, STOP_AFTER_MARK } from './dispatch-order-world.js';

t.test('each dispatch step leaves a state the next pass recovers from', async (t) => {
  for (const row of [...ROWS, ...RECOVERY_ROWS]) {
    await t.test(`${row.step}: ${row.arm}`, async (t) => {
      const result = await runRow(t, row, ORDER);
      t.same(result.problems, [], `no problems (passes: ${result.passes.join(' | ')})`);
    });
  }
});

t.test('a manager stopped between the mark and the create: the outcome is Unknown, the Job is never created', async (t) => {
  const result = await runRow(t, STOP_AFTER_MARK, ORDER);
  t.same(result.problems, [], `no problems (passes: ${result.passes.join(' | ')})`);
  t.equal(result.creates, 0, 'no Job was ever created');
  t.equal(result.uncertain, true, 'the run is recorded unresolved');
});

t.test('each boundary fails with its two steps exchanged', async (t) => {
  for (const row of ROWS) {
    await t.test(`${row.step}: ${row.arm}, ${row.swap[0]}↔${row.swap[1]}`, async (t) => {
      const result = await runRow(t, row, swapped(...row.swap));
      t.ok(result.problems.some((p) => p.includes(row.problem)), `reports “${row.problem}” (got: ${result.problems.join('; ') || 'nothing'}; passes: ${result.passes.join(' | ')})`);
    });
  }
});
