// Where the webhook's time goes: reads the server's CPU profile from a `node --cpu-prof` run of bench/webhook.ts,
// splits it where the webhook phase starts (the first sample inside judgeJobCreate; the bare endpoint is driven
// first) and prints each phase's busy time, then the webhook phase's functions by inclusive time, per request.
// See bench/README.md.
//   npx tsx bench/profile.ts <server .cpuprofile> <requests per target, warm-up included> [--top 40]
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' } } });
const [file, count] = positionals;
const requests = Number(count);
if (!file || !Number.isInteger(requests) || requests < 1) throw new Error('usage: bench/profile.ts <server .cpuprofile> <requests per target>');

const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
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
  for (let i = from; i < to; i++) {
    const micros = profile.timeDeltas[i + 1] ?? 0; // a sample's time is the delta that follows it
    const stack = stackOf(profile.samples[i]!);
    if (stack[0]!.startsWith('(idle)')) {
      idle += micros;
      continue;
    }
    busy += micros;
    for (const f of new Set(stack)) inclusive.set(f, (inclusive.get(f) ?? 0) + micros);
  }
  console.log(`${phase}: busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms, busy ${(busy / requests).toFixed(0)} us per request`);
  if (phase !== 'webhook') continue;
  for (const [f, micros] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`${(micros / requests).toFixed(0).padStart(7)} us/req ${((100 * micros) / busy).toFixed(1).padStart(5)}%  ${f}`);
  }
}
