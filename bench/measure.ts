// What the stack benchmarks read about a process and its requests: figures from /proc, requests counted by method
// and resource from the crash proxy's record, and nearest-rank percentiles.
import { readFile } from 'node:fs/promises';

export interface ProcessFigures {
  rssMiB: number;
  /** VmHWM: the most the process ever held. */
  peakMiB: number;
  /** User and system CPU time since it started. */
  cpuSeconds: number;
}

export async function processFigures(pid: number): Promise<ProcessFigures> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  // utime and stime are fields 14 and 15 of /proc/<pid>/stat (counted after the parenthesised command name), in
  // clock ticks of 1/100 s.
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return { rssMiB: kib('VmRSS') / 1024, peakMiB: kib('VmHWM') / 1024, cpuSeconds: (Number(stat[11]) + Number(stat[12])) / 100 };
}

/** `GET /apis/g/v/namespaces/ns/plural/name/sub` → `GET plural/sub`. */
export function requestClass(method: string, path: string): string {
  const parts = path.split('/').filter(Boolean);
  const rest = parts.slice(parts[0] === 'api' ? 2 : 3);
  const scoped = rest[0] === 'namespaces' && rest.length > 2 ? rest.slice(2) : rest;
  return `${method} ${[scoped[0], scoped[2]].filter(Boolean).join('/')}`;
}

/** How often each key occurs, most frequent first. */
export function countBy(keys: readonly string[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]));
}

/** Nearest-rank percentile `p` (0–100) of `xs`; undefined when there are none. */
export function percentile(xs: readonly number[], p: number): number | undefined {
  if (xs.length === 0) return undefined;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
