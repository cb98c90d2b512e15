// The harness's own logic that needs no cluster: how the runner counts TAP, how the fake kubelet keeps a container's
// log (stream interleaving, containerd's 16 KiB line cut, the query parameters) and expands $(VAR) references.
import t from 'tap';
import { ContainerLog, MAX_LOG_LINE_BYTES } from '../../tools/stack/kubelet/container-log.js';
import { expandReferences } from '../../tools/stack/kubelet/pod-config.js';
import { countTap } from '../harness/tap-count.js';

t.test('countTap counts assertions, and a failed subtest without a failing assertion once', async (t) => {
  const file = (name: string, body: string, ok = true, n = 1) =>
    `# Subtest: ${name}\n${body.split('\n').map((l) => `    ${l}`).join('\n')}\n${ok ? 'ok' : 'not ok'} ${n} - ${name}\n`;
  const table = [
    { name: 'passing file', tap: `1..1\n${file('a.test.ts', 'ok 1 - x\nok 2 - y\n1..2')}`, passed: 2, failed: 0 },
    { name: 'failing assertion counts once, not again for its file', tap: `1..1\n${file('a.test.ts', 'ok 1 - x\nnot ok 2 - y\n1..2', false)}`, passed: 1, failed: 1 },
    { name: 'a file that crashed after passing assertions', tap: `1..1\n${file('a.test.ts', 'ok 1 - x\n1..1', false)}`, passed: 1, failed: 1 },
    { name: 'skip and todo are neither', tap: `1..1\n${file('a.test.ts', 'ok 1 - x # SKIP later\nnot ok 2 - y # TODO\nok 3 - z\n1..3')}`, passed: 1, failed: 0 },
    { name: 'bail out', tap: `1..1\n${file('a.test.ts', 'ok 1 - x\n1..1')}Bail out! db gone\n`, passed: 1, failed: 1 },
    { name: 'files planned but never reported', tap: `1..3\n${file('a.test.ts', 'ok 1 - x\n1..1')}`, passed: 1, failed: 2 },
  ];
  for (const row of table) {
    const counts = await countTap(`TAP version 14\n${row.tap}`);
    t.same({ passed: counts.passed, failed: counts.failed }, { passed: row.passed, failed: row.failed }, row.name);
  }
  const counts = await countTap(`TAP version 14\n1..1\n${file('a.test.ts', 'not ok 1 - x # TODO\nok 2 - y # SKIP\n1..2')}`);
  t.same([counts.skipped, counts.todo], [1, 1], 'skips and todos are reported separately');
});

t.test('ContainerLog keeps streams apart per line and interleaves them by arrival', async (t) => {
  const log = new ContainerLog();
  log.write('stdout', Buffer.from('out one\nout '));
  log.write('stderr', Buffer.from('err one\n'));
  log.write('stdout', Buffer.from('two\n'));
  t.equal(log.read().toString(), 'out one\nerr one\nout two\n', 'a half-written stdout line is not split by a stderr line');
  t.equal(log.read({ stream: 'stdout' }).toString(), 'out one\nout two\n', 'one stream');
  t.equal(log.read({ tailLines: 1 }).toString(), 'out two\n', 'tailLines');
  t.equal(log.read({ tailLines: 0 }).toString(), '', 'tailLines=0');
  t.equal(log.read({ limitBytes: 5 }).toString(), 'out o', 'limitBytes');
  t.match(log.read({ timestamps: true }).toString(), /^\d{4}-\d\d-\d\dT[\d:.]+Z out one\n/, 'timestamps');
  t.equal(log.read({ since: new Date(Date.now() + 60_000) }).toString(), '', 'since a later time');
  log.write('stdout', Buffer.from('no newline'));
  log.close();
  t.equal(log.read().toString(), 'out one\nerr one\nout two\nno newline', 'close keeps an unterminated last line as it is');
});

t.test('a line longer than the runtime buffer is cut, and another stream can land inside it', async (t) => {
  const log = new ContainerLog();
  const long = 'x'.repeat(MAX_LOG_LINE_BYTES + 10);
  log.write('stdout', Buffer.from(long));
  log.write('stderr', Buffer.from('interleaved\n'));
  log.write('stdout', Buffer.from('\n'));
  t.equal(log.read().toString(), `${'x'.repeat(MAX_LOG_LINE_BYTES)}interleaved\n${'x'.repeat(10)}\n`);
});

t.test('follow sends what is there, then each new entry, and ends when the container does', async (t) => {
  const log = new ContainerLog();
  log.write('stdout', Buffer.from('before\n'));
  const got: string[] = [];
  let ended = false;
  log.follow({}, { write: (c) => got.push(c.toString()), end: () => { ended = true; } });
  t.same(got, ['before\n']);
  log.write('stderr', Buffer.from('after\n'));
  t.same(got, ['before\n', 'after\n']);
  t.notOk(ended, 'still following while the container runs');
  log.close();
  t.ok(ended, 'ends with the container');

  const limited: string[] = [];
  let limitedEnded = false;
  const fresh = new ContainerLog();
  fresh.follow({ limitBytes: 4 }, { write: (c) => limited.push(c.toString()), end: () => { limitedEnded = true; } });
  fresh.write('stdout', Buffer.from('abcdef\n'));
  t.same(limited, ['abcd']);
  t.ok(limitedEnded, 'limitBytes ends a follow');
});

t.test('expandReferences follows Kubernetes $(VAR) rules', async (t) => {
  const env = new Map([['A', 'alpha'], ['B', 'beta']]);
  const table: [string, string][] = [
    ['$(A)-$(B)', 'alpha-beta'],
    ['$$(A)', '$(A)'],
    ['$$', '$'],
    ['$(MISSING)', '$(MISSING)'],
    ['$(A', '$(A'],
    ['$()', '$()'],
    ['a$b$', 'a$b$'],
    ['pid=$$$$', 'pid=$$'],
  ];
  for (const [input, want] of table) t.equal(expandReferences(input, env), want, input);
});
