// What one hostile-but-small admission body costs the event loop in canonical JSON (issue #23): a 1 MiB spec made
// of one wide array (of scalars, and of small objects), against JSON.parse of the same body in the same run, the
// reference no request can avoid; and with the decision route's value budget. Run: npx tsx bench/wide-body.ts [--rounds 7]
import { parseArgs } from 'node:util';
import { canonicalJson } from '../src/shared/canonical.js';
import { MAX_DECISION_SPEC_VALUES } from '../src/webhook/decision.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '7' } } });
const rounds = Number(values.rounds);

/** The best of `rounds` timings of `work`, in ms. */
function best(work: () => unknown): number {
  let fastest = Infinity;
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    work();
    fastest = Math.min(fastest, performance.now() - start);
  }
  return fastest;
}

const bodies: [string, string][] = [
  ['one array of 500,000 zeros', `{"spec":{"a":[${Array(500_000).fill('0').join(',')}]}}`],
  ['one array of 100,000 small objects', `{"spec":{"a":[${Array(100_000).fill('{"k":1}').join(',')}]}}`],
];
console.log(`| body (${rounds} rounds, best) | bytes | JSON.parse ms | canonicalJson ms | ratio | with the decision budget ms | ratio |`);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const [name, body] of bodies) {
  const parsed = JSON.parse(body) as { spec: unknown };
  const parse = best(() => JSON.parse(body));
  const canonical = best(() => canonicalJson(parsed.spec, 'object.spec'));
  // What /validate/decision does with such a spec: refused once MAX_DECISION_SPEC_VALUES values are read.
  const budgeted = best(() => {
    try {
      canonicalJson(parsed.spec, 'object.spec', { maxValues: MAX_DECISION_SPEC_VALUES });
    } catch {
      // the refusal is the point
    }
  });
  const ratio = (ms: number) => `${(ms / parse).toFixed(3)}×`;
  console.log(`| ${name} | ${body.length} | ${parse.toFixed(1)} | ${canonical.toFixed(1)} | ${ratio(canonical)} | ${budgeted.toFixed(3)} | ${ratio(budgeted)} |`);
}
