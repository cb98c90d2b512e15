// The /metrics exposition under a burst of scrapes: one render at a time, and never an answer rendered before the
// scrape that receives it arrived (a period cache once served a value a second old to a test that had just acted).
import t, { type Test } from 'tap';
import { Counter, Gauge } from 'prom-client';
import { coalescedScrape, registry } from '../../src/shared/metrics.js';

function counting(t: Test): { renders: () => number; slow: (ms: number) => void } {
  let renders = 0;
  let delayMs = 0;
  new Gauge({
    name: 'ptah_test_scrape_renders',
    help: 'Counts renders.',
    registers: [registry],
    collect: async () => {
      renders++;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    },
  });
  t.teardown(() => registry.removeSingleMetric('ptah_test_scrape_renders'));
  return { renders: () => renders, slow: (ms) => (delayMs = ms) };
}

t.test('a burst of scrapes costs at most two renders', async (t) => {
  const render = counting(t);
  render.slow(50);
  const scrape = coalescedScrape();
  const answers = await Promise.all(Array.from({ length: 500 }, () => scrape()));
  t.equal(answers.length, 500, 'every scrape is answered');
  t.ok(answers.every((a) => a.toString().includes('ptah_test_scrape_renders')), 'every answer is an exposition');
  t.ok(render.renders() <= 2, `500 concurrent scrapes: ${render.renders()} render(s)`);
});

t.test('a scrape that arrives during a render is answered by a render that started after it', async (t) => {
  const render = counting(t);
  const counter = new Counter({ name: 'ptah_test_scrape_fresh', help: 'Changed between scrapes.', registers: [registry] });
  t.teardown(() => registry.removeSingleMetric('ptah_test_scrape_fresh'));
  render.slow(50);
  const scrape = coalescedScrape();
  const first = scrape();
  await new Promise((resolve) => setTimeout(resolve, 10));
  counter.inc(7);
  const second = await scrape();
  t.match((await first).toString(), /ptah_test_scrape_fresh 0\b/, 'the render in flight shows the value it was started with');
  t.match(second.toString(), /ptah_test_scrape_fresh 7\b/, 'the later scrape shows the value set before it arrived');
});

t.test('sequential scrapes each see the latest value', async (t) => {
  const counter = new Counter({ name: 'ptah_test_scrape_sequential', help: 'Changed between scrapes.', registers: [registry] });
  t.teardown(() => registry.removeSingleMetric('ptah_test_scrape_sequential'));
  const scrape = coalescedScrape();
  for (let i = 1; i <= 5; i++) {
    counter.inc();
    t.match((await scrape()).toString(), new RegExp(`ptah_test_scrape_sequential ${i}\\b`), `scrape ${i} sees ${i}`);
  }
});

t.test('a failed render is not shared by later scrapes', async (t) => {
  let fail = true;
  new Gauge({
    name: 'ptah_test_scrape_failing',
    help: 'Fails once.',
    registers: [registry],
    collect: () => {
      if (fail) throw new Error('collect failed');
    },
  });
  t.teardown(() => registry.removeSingleMetric('ptah_test_scrape_failing'));
  const scrape = coalescedScrape();
  await t.rejects(scrape(), /collect failed/, 'the failing render rejects');
  fail = false;
  t.match((await scrape()).toString(), /ptah_test_scrape_failing/, 'the next scrape renders again');
});
