// Where a manager's CPU goes: reads a `node --cpu-prof` profile of the manager (bench/controller-cost.ts
// --cpu-prof DIR writes one per family) and charges each busy sample to the innermost frame of this repository's
// code on its stack, the file that asked for the work, with the library and node code it called. A sample with no
// such frame (socket reads and writes, timers, the event loop) is charged to where it stood, and the garbage
// collector is its own line. See bench/README.md.
//   npx tsx bench/manager-profile.ts <manager .cpuprofile> [--from S] [--top 30]
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { readCpuProfile, sourceOf, type ProfileNode } from './cpuprofile.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { from: { type: 'string', default: '0' }, top: { type: 'string', default: '30' } } });
const [file] = positionals;
const fromSeconds = Number(values.from);
if (!file || !Number.isFinite(fromSeconds) || fromSeconds < 0) throw new Error('usage: bench/manager-profile.ts <manager .cpuprofile> [--from seconds after the start] [--top N]');

const profile = readCpuProfile(await readFile(file, 'utf8'));
/** The innermost frame of this repository's code (dist/src or src), or undefined. */
const oursCache = new Map<number, string | undefined>();
function ours(id: number): string | undefined {
  if (oursCache.has(id)) return oursCache.get(id);
  let found: string | undefined;
  for (let at: number | undefined = id; at !== undefined && !found; at = profile.parent.get(at)) {
    const url = profile.byId.get(at)!.callFrame.url;
    const m = /\/(src\/[^?]+)$/.exec(url);
    if (m && !url.includes('node_modules')) found = m[1]!.replace(/\.js$/, '.ts');
  }
  oursCache.set(id, found);
  return found;
}

let at = 0;
let busy = 0;
let idle = 0;
const charged = new Map<string, number>();
const add = (key: string, micros: number) => charged.set(key, (charged.get(key) ?? 0) + micros);
for (let i = 0; i < profile.samples.length; i++) {
  at += profile.timeDeltas[i] ?? 0;
  if (at / 1e6 < fromSeconds) continue;
  const micros = profile.timeDeltas[i + 1] ?? 0; // a sample's time is the delta that follows it
  const node: ProfileNode = profile.byId.get(profile.samples[i]!)!;
  if (node.callFrame.functionName === '(idle)') {
    idle += micros;
    continue;
  }
  busy += micros;
  add(node.callFrame.functionName === '(garbage collector)' ? '(garbage collector)' : (ours(node.id) ?? `${sourceOf(node)} (no frame of ours)`), micros);
}
console.log(`from ${fromSeconds} s: busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`);
console.log('ms, share of busy, charged to');
for (const [key, micros] of [...charged].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
  console.log(`${(micros / 1000).toFixed(0).padStart(7)} ${((100 * micros) / busy).toFixed(1).padStart(5)}%  ${key}`);
}
