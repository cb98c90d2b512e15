// `npm run soak -- --minutes N --resources R --databases D [--seed S] [--drain-minutes M]`: the chaos soak of
// bench/soak-run.ts on a stack of its own (PostgreSQL, control plane, fake kubelet; tools/stack/stack.ts, as
// test/run.ts starts it). Writes bench/soak-report.json and bench/soak-report.md; exits 1 when a safety count is
// not 0 (or the run itself failed), keeping the stack's logs.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../tools/stack/paths.js';
import { runOnStack } from './on-stack.js';

const say = (line: string) => process.stderr.write(`[soak] ${line}\n`);
const { values } = parseArgs({
  options: {
    minutes: { type: 'string' }, resources: { type: 'string' }, databases: { type: 'string' }, seed: { type: 'string' }, 'drain-minutes': { type: 'string' },
  },
});
const number = (v: string | undefined, fallback: number) => {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`not a positive number: ${v}`);
  return n;
};

await runOnStack('soak', say, async () => {
  const { runSoak, safetyFailures, SOAK_DEFAULTS } = await import('./soak-run.js');
  const { soakMarkdown, writeSoakReport } = await import('./soak-report.js');
  const options = {
    ...SOAK_DEFAULTS,
    minutes: number(values.minutes, SOAK_DEFAULTS.minutes),
    resources: number(values.resources, SOAK_DEFAULTS.resources),
    databases: number(values.databases, SOAK_DEFAULTS.databases),
    drainMinutes: number(values['drain-minutes'], SOAK_DEFAULTS.drainMinutes),
    seed: number(values.seed, Date.now() % 2 ** 31),
    log: say,
  };
  return {
    timeoutMs: (options.minutes + options.drainMinutes + 10) * 60_000,
    async body(tt) {
      const report = await runSoak(tt, options);
      await writeSoakReport(report, join(REPO_ROOT, 'bench/soak-report'));
      say(`\n${soakMarkdown(report)}`);
      tt.equal(safetyFailures(report), 0, 'every safety count is 0');
      return safetyFailures(report) === 0;
    },
  };
});
