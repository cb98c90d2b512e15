// Counts test points in a tap run's raw TAP (the --output-file of `tap`): every assertion counts once; a subtest
// (a test file, a t.test) that failed with no failing assertion inside it (it crashed, timed out, missed its plan)
// counts as one failure, so a broken file never vanishes from the total.
import { Parser, type FinalResults, type Result } from 'tap-parser';

export interface TapCounts {
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
  /** Full names of what failed, for the summary. */
  failures: string[];
}

/** The counts of several tap runs as one. */
export function sumCounts(all: readonly TapCounts[]): TapCounts {
  return all.reduce((sum, c) => ({
    passed: sum.passed + c.passed, failed: sum.failed + c.failed, skipped: sum.skipped + c.skipped, todo: sum.todo + c.todo,
    failures: [...sum.failures, ...c.failures],
  }), { passed: 0, failed: 0, skipped: 0, todo: 0, failures: [] });
}

export async function countTap(tap: string): Promise<TapCounts> {
  const counts: TapCounts = { passed: 0, failed: 0, skipped: 0, todo: 0, failures: [] };
  const parser = new Parser();
  const complete = new Promise<FinalResults>((resolve) => parser.on('complete', resolve));
  attach(parser, counts);
  // A bail out reaches every level; count it once, at the top.
  parser.on('bailout', (reason: string) => fail(counts, `bail out: ${reason}`));
  parser.end(tap);
  const results = await complete;
  // Files the run planned but never reported on (tap itself died part-way).
  const missing = results.plan.end === null ? 0 : results.plan.end - results.count;
  for (let i = 1; i <= missing; i++) fail(counts, `planned test ${results.count + i} of ${results.plan.end} reported no result`);
  return counts;
}

function attach(parser: Parser, counts: TapCounts): void {
  let failedBeforeChild = 0;
  parser.on('child', (child: Parser) => {
    failedBeforeChild = counts.failed;
    attach(child, counts);
  });
  parser.on('assert', (res: Result) => {
    if (res.closingTestPoint) {
      if (!res.ok && !res.todo && !res.skip && counts.failed === failedBeforeChild) fail(counts, res.fullname || res.name);
      return;
    }
    if (res.todo) counts.todo++;
    else if (res.skip) counts.skipped++;
    else if (res.ok) counts.passed++;
    else fail(counts, res.fullname || res.name);
  });
}

function fail(counts: TapCounts, name: string): void {
  counts.failed++;
  counts.failures.push(name);
}
