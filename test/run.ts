// The suite's runner (`npm test`, or `npx tsx test/run.ts [tap flags] [test files]`): brings dist/ up to date, starts
// one PostgreSQL server, one control plane and the fake kubelet for the whole run, runs tap over the test files with
// the stack's environment while it builds the helm CLI when it is not cached, stops everything, and prints as its
// last line `N passed, M failed`, counted from tap's raw TAP so a file that crashed still counts. Exits non-zero when
// anything failed, including the stack itself.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { buildDist } from '../tools/stack/build.js';
import { buildHelmAside } from '../tools/stack/helm.js';
import { defaultImages } from '../tools/stack/kubelet/images.js';
import { REPO_ROOT } from '../tools/stack/paths.js';
import { onInterrupt, trackGroup } from '../tools/stack/processes.js';
import { countTap, type TapCounts } from './harness/tap-count.js';
import { startStack, type Stack } from '../tools/stack/stack.js';

const say = (line: string) => process.stderr.write(`[test/run] ${line}\n`);

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'fixtures' ? [] : testFiles(path);
    return entry.name.endsWith('.test.ts') ? [relative(REPO_ROOT, path)] : [];
  }).sort();
}

/** Runs tap with the raw TAP reporter, copying its output through and keeping it to count. */
async function runTap(args: string[], env: Record<string, string>): Promise<{ counts: TapCounts; exitCode: number }> {
  // Not --output-file: with the raw TAP reporter tap 21 then writes every line to stdout twice.
  // Its own process group, so an interrupted run can stop tap and every test file it started, however they
  // handle signals.
  const child = spawn(join(REPO_ROOT, 'node_modules/.bin/tap'), ['--reporter=tap', ...args], {
    cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env }, detached: true,
  });
  const tap = trackGroup('tap', child);
  const unregister = onInterrupt(async () => { await tap.stop(3_000); });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    process.stdout.write(chunk);
  });
  const exitCode = await new Promise<number>((resolve) => {
    child.once('error', (e) => { say(`could not start tap: ${e.message}`); resolve(1); });
    child.once('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
  unregister();
  return { counts: await countTap(Buffer.concat(chunks).toString('utf8')), exitCode };
}

function formatTimings(stack: Stack): string {
  const t = stack.timings;
  const s = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);
  return `stack ready: etcd ${s(t.etcdReadyMs)}, kube-apiserver ${s(t.apiserverReadyMs)}, kube-controller-manager ${s(t.controllerManagerReadyMs)}, ` +
    `fake kubelet ${s(t.kubeletReadyMs)}, PostgreSQL ${s(t.postgresReadyMs)} (from start)`;
}

async function formatMemory(stack: Stack): Promise<string> {
  const mem = await stack.memory();
  return Object.entries(mem).map(([name, kib]) => `${name} ${(kib / 1024).toFixed(0)} MiB`).join(', ');
}

// Test files run side by side: most of their time is spent waiting on Jobs, Leases and deadlines, not on the CPU,
// and each works in its own namespaces and databases on the shared stack. PTAH_TEST_JOBS (or tap's --jobs) overrides.
const JOBS = process.env.PTAH_TEST_JOBS ?? '3';

const args = process.argv.slice(2);
const flags = args.filter((a) => a.startsWith('-'));
if (!flags.some((f) => f === '-j' || f.startsWith('--jobs') || /^-j\d/.test(f))) flags.push(`--jobs=${JOBS}`);
const files = args.filter((a) => !a.startsWith('-'));
const selected = files.length > 0 ? files : testFiles(join(REPO_ROOT, 'test'));

// The runner image runs dist/ under plain node, as production's does. From source under tsx, with its cache off in a
// read-only container, each runner Pod compiled the runner again (about 3 s of CPU on the two cores the suite shares).
// A failed build is counted, and the suite then runs the runner from source so that its verdicts still mean something.
let buildFailure = 0;
let runner: 'compiled' | 'source' = 'compiled';
try {
  say(`npm run build: dist/ is current (${await buildDist()} ms); the runner image runs it`);
} catch (e) {
  buildFailure = 1;
  runner = 'source';
  say(`${(e as Error).message}\nthe runner image runs from source instead`);
}

let stack: Stack | undefined;
let stackFailure = 0;
try {
  stack = await startStack({ log: say, images: defaultImages(REPO_ROOT, runner) });
  say(formatTimings(stack));
  say(`memory at start: ${await formatMemory(stack)}`);
} catch (e) {
  stackFailure = 1;
  say(`the test stack did not start; tests that need it will fail: ${(e as Error).message}`);
}

// The helm CLI for the chart's tests (minutes of compiling, the first time), built beside the tests rather than before
// them: at the lowest CPU priority it takes the cycles the tests leave idle, and a chart test that starts first
// waits for it on the build script's lock. Started after the control plane so that it reuses the packages the control
// plane's build compiled (tools/lib/shared-pins.sh).
let helmFailure = 0;
const helmBuilt = buildHelmAside().then(() => undefined, (e: unknown) => {
  helmFailure = 1;
  say(`helm could not be built; the chart's tests fail: ${(e as Error).message}`);
});

const { counts, exitCode } = await runTap([...flags, ...selected], stack?.env ?? {});
await helmBuilt;
const failures = [...counts.failures];
if (buildFailure) failures.push('npm run build failed (its output is above)');
if (helmFailure) failures.push('tools/helm/build.sh failed (its output is above)');
if (stackFailure) failures.push('the test stack (PostgreSQL, control plane, fake kubelet) did not start');
// tap failed but said nothing countable (it could not start, or died before writing any TAP).
const silentTapFailure = exitCode !== 0 && counts.failed === 0 ? 1 : 0;
if (silentTapFailure) failures.push(`tap exited with ${exitCode} without reporting a failed test`);
const failed = counts.failed + buildFailure + helmFailure + stackFailure + silentTapFailure;

if (stack) {
  say(`memory at end: ${await formatMemory(stack)}`);
  await stack.stop({ keepDir: failed > 0 });
  if (failed > 0) say(`logs of the stack kept in ${stack.state.dir}/logs`);
}
if (failures.length > 0) say(`failed:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
if (counts.skipped + counts.todo > 0) say(`${counts.skipped} skipped, ${counts.todo} todo`);
// Exit explicitly once the line is out: a handle some test library left open must not hang the run.
process.stdout.write(`${counts.passed} passed, ${failed} failed\n`, () => process.exit(failed > 0 ? 1 : 0));
