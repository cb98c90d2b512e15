import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { fileDurations, longestFirst, readDurations, recordDurations } from '../harness/schedule.js';

t.test('longest first; untimed files before timed ones; ties keep the given order', async (t) => {
  const files = ['a.test.ts', 'b.test.ts', 'c.test.ts', 'd.test.ts', 'e.test.ts'];
  t.same(longestFirst(files, { 'a.test.ts': 5, 'b.test.ts': 300, 'c.test.ts': 40, 'e.test.ts': 40 }),
    ['d.test.ts', 'b.test.ts', 'c.test.ts', 'e.test.ts', 'a.test.ts']);
  t.same(longestFirst(files, {}), files, 'with nothing timed the order is unchanged');
});

t.test('the durations of the files, read from their closing test points only', async (t) => {
  const tap = [
    'TAP version 14',
    '# Subtest: test/unit/x.test.ts',
    '    ok 1 - inner.test.ts # time=99999ms',
    'ok 1 - test/unit/x.test.ts # time=1234.567ms',
    'not ok 2 - test/integration/y.test.ts # time=20000.4ms',
    'ok 3 - test/integration/z.test.ts # SKIP',
  ].join('\n');
  t.same(fileDurations(tap), { 'test/unit/x.test.ts': 1235, 'test/integration/y.test.ts': 20000 });
});

t.test('the cache merges runs and tolerates a missing or damaged file', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ptah-schedule-'));
  const file = join(dir, 'sub', 'durations.json');
  t.same(await readDurations(file), {}, 'no cache yet');
  await recordDurations({ 'a.test.ts': 10, 'b.test.ts': 20 }, file);
  await recordDurations({ 'b.test.ts': 30 }, file);
  t.same(await readDurations(file), { 'a.test.ts': 10, 'b.test.ts': 30 }, 'a later run replaces what it timed and keeps the rest');
  t.match(await readFile(file, 'utf8'), /^\{\n {2}"a\.test\.ts": 10,\n {2}"b\.test\.ts": 30\n\}\n$/);
  await writeFile(file, '{"a.test.ts": "slow", "b.test.ts": 7');
  t.same(await readDurations(file), {}, 'unparsable: as if none');
  await writeFile(file, '{"a.test.ts": "slow", "b.test.ts": 7}');
  t.same(await readDurations(file), { 'b.test.ts': 7 }, 'entries that are not numbers are ignored');
});
