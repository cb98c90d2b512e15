// `npx tsx bench/controller-cost.ts [--resources K] [--idle-seconds S] [--settle-seconds S] [--manager-webhooks]
// [--compiled] [--cpu-prof DIR]`: (--compiled runs the manager and the runner image from dist/ under plain node)
// the controller's API requests and CPU per operation lifecycle (issue #10, DESIGN §8), measured by
// bench/controller-cost-run.ts on a stack of its own (bench/on-stack.ts). Prints the report and writes it beside
// itself as controller-cost-report.json.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildDist } from '../tools/stack/build.js';
import { REPO_ROOT } from '../tools/stack/paths.js';
import { runOnStack } from './on-stack.js';

const say = (line: string) => process.stderr.write(`[controller-cost] ${line}\n`);
const { values } = parseArgs({
  options: {
    resources: { type: 'string' }, 'idle-seconds': { type: 'string' }, 'settle-seconds': { type: 'string' }, 'manager-webhooks': { type: 'boolean' },
    compiled: { type: 'boolean' }, 'cpu-prof': { type: 'string' },
  },
});
const number = (v: string | undefined, fallback: number) => {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`not a positive whole number: ${v}`);
  return n;
};
const options = {
  resources: number(values.resources, 10),
  idleSeconds: number(values['idle-seconds'], 20),
  settleSeconds: number(values['settle-seconds'], 20),
  managerWebhooks: values['manager-webhooks'] ?? false,
  compiled: values.compiled ?? false,
  ...(values['cpu-prof'] ? { cpuProfileDir: values['cpu-prof'] } : {}),
  timeoutMs: 20 * 60_000,
  log: say,
};

await runOnStack('controller cost', say, async () => {
  // Imported once the stack's environment is set: the worlds read it when they load.
  const { costText, runControllerCost } = await import('./controller-cost-run.js');
  return {
    timeoutMs: options.timeoutMs + 10 * 60_000,
    async body(t) {
      if (options.compiled) {
        say(`npm run build: dist/ is current (${await buildDist()} ms)`);
      }
      const report = await runControllerCost(t, options);
      await writeFile(join(REPO_ROOT, 'bench/controller-cost-report.json'), `${JSON.stringify(report, null, 2)}\n`);
      say(`\n${costText(report)}`);
      return true;
    },
  };
}, { runner: options.compiled ? 'compiled' : 'source' });
