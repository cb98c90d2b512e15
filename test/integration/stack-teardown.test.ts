// Stopping a harness, each way a run is stopped in practice, under load: none of the processes it started may
// outlive it, however slowly they stop or whether they listen at all. The harness is started as `npm test` starts
// the runner (tsx, which relays signals to the node process it runs) in a process group of its own, and is sent
// what a terminal, `timeout` or a supervisor sends to a process group; a last case kills it outright.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { waitFor } from '../../tools/stack/wait.js';

/** pid → parent pid and state, for every process now. */
function processTable(): Map<number, { ppid: number; state: string }> {
  const table = new Map<number, { ppid: number; state: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), { ppid: Number(ppid), state: state! });
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** `root` and every process below it. */
function descendants(root: number): number[] {
  const table = processTable();
  const found = [root];
  for (let i = 0; i < found.length; i++) for (const [pid, p] of table) if (p.ppid === found[i] && !found.includes(pid)) found.push(pid);
  return found;
}

/** The processes of `pids` still alive (a zombie has ended). */
const alive = (pids: readonly number[]) => {
  const table = processTable();
  return pids.filter((pid) => table.has(pid) && table.get(pid)!.state !== 'Z');
};

/** CPU burners, one per core and one more, for the length of a case. */
function load(): ChildProcess[] {
  return Array.from({ length: 3 }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

async function startHarness(dir: string): Promise<{ child: ChildProcess; pids: number[] }> {
  const child = spawn(join(REPO_ROOT, 'node_modules/.bin/tsx'), ['test/fixtures/teardown/harness.ts', dir],
    { cwd: REPO_ROOT, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => { out += chunk.toString(); });
  await waitFor(async () => (out.includes('ready') ? true : undefined), { what: 'the harness to start its processes', timeoutMs: 60_000 });
  // Everything below it: tsx, the node process it runs, the reaper, the groups and their children, PostgreSQL's
  // server and its workers.
  return { child, pids: descendants(child.pid!) };
}

const WAYS: { name: string; stop: (group: number) => Promise<void> }[] = [
  { name: 'SIGTERM to its process group (timeout, a supervisor)', stop: async (group) => { process.kill(-group, 'SIGTERM'); } },
  { name: 'SIGINT to its process group (Ctrl-C)', stop: async (group) => { process.kill(-group, 'SIGINT'); } },
  {
    name: 'SIGTERM twice, 100 ms apart',
    stop: async (group) => {
      process.kill(-group, 'SIGTERM');
      await new Promise((r) => setTimeout(r, 100));
      process.kill(-group, 'SIGTERM');
    },
  },
  {
    name: 'SIGHUP then SIGTERM (a terminal closing)',
    stop: async (group) => {
      process.kill(-group, 'SIGHUP');
      process.kill(-group, 'SIGTERM');
    },
  },
  { name: 'SIGKILL to its process group: no handler runs', stop: async (group) => { process.kill(-group, 'SIGKILL'); } },
];

for (const way of WAYS) {
  t.test(`stopped by ${way.name}, under load: nothing it started is left`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'ptah-teardown-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const burners = load();
    t.teardown(() => burners.forEach((b) => b.kill('SIGKILL')));
    const { child, pids } = await startHarness(dir);
    t.ok(pids.length >= 8, `fixture: the harness runs ${pids.length} processes (tsx, node, the reaper, sh and two sleeps, sleep, runuser, PostgreSQL)`);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await way.stop(child.pid!);
    await exited;
    const left = await waitFor(async () => (alive(pids).length === 0 ? [] : undefined), { what: 'every process the harness started to end', timeoutMs: 30_000 })
      .catch(() => alive(pids));
    t.same(left, [], 'no process the harness started outlives it');
    // A failed case must not leave its processes to the next one.
    for (const pid of alive(pids)) process.kill(pid, 'SIGKILL');
  });
}
