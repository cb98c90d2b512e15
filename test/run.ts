// The suite's runner (`npm test`, or `npx tsx test/run.ts [tap flags] [test files]`): brings dist/ up to date, starts
// one PostgreSQL server for the whole run, runs tap over the files that need only PostgreSQL while it builds (when not
// cached) and starts the control plane and the fake kubelet, then over the rest with the stack's environment while it
// builds the helm CLI and the OCI registry when they are not cached, stops everything, and prints as its
// last line `N passed, M failed`, counted from tap's raw TAP so a file that crashed still counts. Exits non-zero when
// anything failed, including the stack itself.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { buildDist } from '../tools/stack/build.js';
import { buildHelmAside } from '../tools/stack/helm.js';
import { buildRegistryAside } from '../tools/stack/registry.js';
import { defaultImages } from '../tools/stack/kubelet/images.js';
import { REPO_ROOT } from '../tools/stack/paths.js';
import { onInterrupt, trackGroup } from '../tools/stack/processes.js';
import { MANAGER_BUILD_ENV } from './harness/manager-process.js';
import { countTap, sumCounts, type TapCounts } from './harness/tap-count.js';
import { runTrackedBuild } from '../tools/stack/controlplane.js';
import { startPostgres, type PostgresServer } from '../tools/stack/postgres.js';
import { STACK_ENV, startStack, type Stack } from '../tools/stack/stack.js';

const say = (line: string) => process.stderr.write(`[test/run] ${line}\n`);

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'fixtures' ? [] : testFiles(path);
    return entry.name.endsWith('.test.ts') ? [relative(REPO_ROOT, path)] : [];
  }).sort();
}

/** Runs tap with the raw TAP reporter, copying its output through and keeping it to count. */
async function runTap(args: string[], env: Record<string, string>, options: { nice?: number } = {}): Promise<{ counts: TapCounts; exitCode: number }> {
  // Not --output-file: with the raw TAP reporter tap 21 then writes every line to stdout twice.
  // Its own process group, so an interrupted run can stop tap and every test file it started, however they
  // handle signals.
  const tapArgs = [join(REPO_ROOT, 'node_modules/.bin/tap'), '--reporter=tap', ...args];
  const [command, ...commandArgs] = options.nice === undefined ? tapArgs : ['nice', '-n', String(options.nice), ...tapArgs];
  const child = spawn(command!, commandArgs, {
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

// Files that need only PostgreSQL (the pure unit tests and the executor's, which run it against a database) go first,
// while the control plane is built (minutes of compiling on a fresh machine) and started: on two cores the build
// leaves one idle for much of its time. They run at a lower CPU priority so that the build, which everything else
// waits for, keeps its pace.
const needsOnlyPostgres = (file: string) => file.startsWith('test/unit/') || /^test\/integration\/executor-[^/]+\.test\.ts$/.test(file);
const early = selected.filter(needsOnlyPostgres);
const late = selected.filter((file) => !needsOnlyPostgres(file));

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

let stackFailure = 0;
let postgres: PostgresServer | undefined;
try {
  postgres = await startPostgres();
} catch (e) {
  stackFailure = 1;
  say(`PostgreSQL did not start; tests that need it will fail: ${(e as Error).message}`);
}
const unregisterPostgres = onInterrupt(async () => { await postgres?.stop(); });

// Built (or found cached) and started while the early files run; nothing of it when no file needs it.
const binaries = late.length === 0 ? undefined
  : process.env.PTAH_CONTROLPLANE_BIN ? Promise.resolve(process.env.PTAH_CONTROLPLANE_BIN)
  : runTrackedBuild('tools/controlplane/build.sh', { name: 'control-plane build' });
const stackStart = binaries?.then((binDir) => startStack({ log: say, images: defaultImages(REPO_ROOT, runner), postgres: postgres ?? false, binDir })
  .then((stack) => ({ stack, binDir })));
stackStart?.catch(() => undefined); // awaited below, after the early files

// The helm CLI for the chart's tests (minutes of compiling, the first time), built beside the tests rather than before
// them: at the lowest CPU priority it takes the cycles the tests leave idle, and a chart test that starts first
// waits for it on the build script's lock. Started after the control plane's build so that it reuses the packages
// that build compiled (tools/lib/shared-pins.sh).
let helmFailure = 0;
const helmBuilt = binaries?.catch(() => undefined).then(() => buildHelmAside()).then(() => undefined, (e: unknown) => {
  helmFailure = 1;
  say(`helm could not be built; the chart's tests fail: ${(e as Error).message}`);
});
// The OCI registry and crane (about a minute of compiling, the first time), the same way but from the start: they
// share no package with the control plane, and at the lowest priority they take what the early files leave idle.
let registryFailure = 0;
const registryBuilt = late.length === 0 ? undefined : buildRegistryAside().then(() => undefined, (e: unknown) => {
  registryFailure = 1;
  say(`the registry could not be built; the OCI artifact tests fail: ${(e as Error).message}`);
});

/** Sets PostgreSQL's priority; a refusal is said and changes nothing else (the run goes on at the priority it has). */
function postgresPriority(nice: number): boolean {
  try {
    postgres?.renice(nice);
    return postgres !== undefined;
  } catch (e) {
    say(`PostgreSQL's priority stays as it was: renice -n ${nice} failed: ${(e as Error).message}`);
    return false;
  }
}

const runs: { counts: TapCounts; exitCode: number }[] = [];
// dist/ is current: the managers the tests start run from it, as the runner image does.
const buildEnv: Record<string, string> = runner === 'compiled' ? { [MANAGER_BUILD_ENV]: 'compiled' } : {};
const postgresEnv: Record<string, string> = { ...buildEnv, ...(postgres ? { [STACK_ENV.postgres]: postgres.url } : {}) };
// Their wall time is not their own while the build holds the cores: twice tap's per-file timeout (.taprc). The
// server their queries run on yields to the build as they do (measured: at normal priority it stretched a cold
// control-plane build from 967 s to 1,372 s), and takes its normal priority back for the late files.
if (early.length > 0) {
  const reniced = binaries !== undefined && postgresPriority(10);
  runs.push(await runTap(['--timeout=1800', ...flags, ...early], postgresEnv, { nice: 10 }));
  if (reniced) postgresPriority(0);
}

let stack: Stack | undefined;
if (stackStart) {
  try {
    const started = await stackStart;
    stack = started.stack;
    Object.assign(stack.env, buildEnv, { PTAH_CONTROLPLANE_BIN: started.binDir });
    say(formatTimings(stack));
    say(`memory at start: ${await formatMemory(stack)}`);
  } catch (e) {
    stackFailure = 1;
    say(`the test stack did not start; tests that need it will fail: ${(e as Error).message}`);
  }
  runs.push(await runTap([...flags, ...late], stack?.env ?? postgresEnv));
}
await helmBuilt;
await registryBuilt;
const counts = sumCounts(runs.map((run) => run.counts));
const failures = [...counts.failures];
if (buildFailure) failures.push('npm run build failed (its output is above)');
if (helmFailure) failures.push('tools/helm/build.sh failed (its output is above)');
if (registryFailure) failures.push('tools/registry/build.sh failed (its output is above)');
if (stackFailure) failures.push('the test stack (PostgreSQL, control plane, fake kubelet) did not start');
// tap failed but said nothing countable (it could not start, or died before writing any TAP).
const silentTapFailure = runs.filter((run) => run.exitCode !== 0 && run.counts.failed === 0).length;
if (silentTapFailure) failures.push(`tap exited with a failure status without reporting a failed test (${silentTapFailure} of ${runs.length} runs)`);
const failed = counts.failed + buildFailure + helmFailure + registryFailure + stackFailure + silentTapFailure;

if (stack) {
  say(`memory at end: ${await formatMemory(stack)}`);
  await stack.stop({ keepDir: failed > 0 });
  if (failed > 0) say(`logs of the stack kept in ${stack.state.dir}/logs`);
}
await postgres?.stop();
unregisterPostgres();
if (failures.length > 0) say(`failed:\n${failures.map((f) => `  - ${f}`).join('\n')}`);
if (counts.skipped + counts.todo > 0) say(`${counts.skipped} skipped, ${counts.todo} todo`);
// Exit explicitly once the line is out: a handle some test library left open must not hang the run.
process.stdout.write(`${counts.passed} passed, ${failed} failed\n`, () => process.exit(failed > 0 ? 1 : 0));
