// Which test file starts first. tap runs its jobs in the order given, so with several files side by side the suite
// ends soonest when the longest start first (longest-processing-time order). Each run records how long every file
// took in the user's cache; the next run orders by it. A file never timed (new, or a fresh machine) starts first,
// since it may be long; files of equal standing keep their alphabetical order. Only the order depends on the cache,
// never which files run or how they are counted.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export type Durations = Record<string, number>;

export const DURATIONS_FILE = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'ptah-test', 'durations.json');

/** `files` longest first by `known` (milliseconds); untimed files before all timed ones. */
export function longestFirst(files: readonly string[], known: Durations): string[] {
  const weight = (file: string) => known[file] ?? Number.POSITIVE_INFINITY;
  return files.map((file, i) => ({ file, i })).sort((a, b) => weight(b.file) - weight(a.file) || a.i - b.i).map((e) => e.file);
}

/** The wall time of each test file in tap's raw TAP: its closing test point `ok N - <file> # time=<ms>ms`. */
export function fileDurations(tap: string): Durations {
  const found: Durations = {};
  for (const match of tap.matchAll(/^(?:not )?ok \d+ - (\S+\.test\.ts) # time=([\d.]+)ms$/gm)) found[match[1]!] = Math.round(Number(match[2]));
  return found;
}

export async function readDurations(file = DURATIONS_FILE): Promise<Durations> {
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === 'number' && Number.isFinite(e[1])));
  } catch {
    return {}; // No cache yet, or an unreadable one: alphabetical order.
  }
}

/** Merges this run's durations into the cache (atomically: a run stopped half-way leaves the old file). */
export async function recordDurations(measured: Durations, file = DURATIONS_FILE): Promise<void> {
  if (Object.keys(measured).length === 0) return;
  const merged = { ...(await readDurations(file)), ...measured };
  await mkdir(dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(merged, Object.keys(merged).sort(), 2)}\n`);
  await rename(temporary, file);
}
