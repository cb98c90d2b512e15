// Where the webhook's time goes: reads the server's CPU profile from a `node --cpu-prof` run of bench/webhook.ts,
// splits it where the webhook phase starts (the first sample inside judgeJobCreate; the bare endpoint is driven
// first) and prints each phase's busy time, then the webhook phase's functions by inclusive time (with their self
// time) and its self time by where the code lives (a package, a node: module, a file of this repository), per
// request. See bench/README.md.
//   npx tsx bench/profile.ts <server .cpuprofile> <requests per target, warm-up included> [--top 40]
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { readCpuProfile, sourceOf, type ProfileNode } from './cpuprofile.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' } } });
const [file, count] = positionals;
const requests = Number(count);
if (!file || !Number.isInteger(requests) || requests < 1) throw new Error('usage: bench/profile.ts <server .cpuprofile> <requests per target>');

const profile = readCpuProfile(await readFile(file, 'utf8'));
const { byId, parent } = profile;
const name = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}`;
const stacks = new Map<number, string[]>();
const stackOf = (id: number): string[] => {
  let stack = stacks.get(id);
  if (!stack) {
    stack = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(name(byId.get(at)!));
    stacks.set(id, stack);
  }
  return stack;
};

const split = profile.samples.findIndex((id) => stackOf(id).some((f) => f.startsWith('judgeJobCreate ')));
if (split < 0) throw new Error('no sample inside judgeJobCreate: is this the server process of an allowed run?');
for (const [phase, from, to] of [['bare', 0, split], ['webhook', split, profile.samples.length]] as const) {
  let busy = 0;
  let idle = 0;
  const inclusive = new Map<string, number>();
  const self = new Map<string, number>();
  const bySource = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, micros: number) => map.set(key, (map.get(key) ?? 0) + micros);
  for (let i = from; i < to; i++) {
    const micros = profile.timeDeltas[i + 1] ?? 0; // a sample's time is the delta that follows it
    const stack = stackOf(profile.samples[i]!);
    if (stack[0]!.startsWith('(idle)')) {
      idle += micros;
      continue;
    }
    busy += micros;
    for (const f of new Set(stack)) add(inclusive, f, micros);
    add(self, stack[0]!, micros);
    add(bySource, sourceOf(byId.get(profile.samples[i]!)!), micros);
  }
  console.log(`${phase}: busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms, busy ${(busy / requests).toFixed(0)} us per request`);
  if (phase !== 'webhook') continue;
  const perRequest = (micros: number) => `${(micros / requests).toFixed(0).padStart(7)} us/req`;
  console.log('inclusive, self, function');
  for (const [f, micros] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`${perRequest(micros)} ${((100 * micros) / busy).toFixed(1).padStart(5)}% ${perRequest(self.get(f) ?? 0)}  ${f}`);
  }
  console.log('self, by where the code lives');
  for (const [source, micros] of [...bySource].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`${perRequest(micros)} ${((100 * micros) / busy).toFixed(1).padStart(5)}%  ${source}`);
  }
}
