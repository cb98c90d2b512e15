// Manager start time and resident memory, compiled (`node dist/src/main.js`, as `npm start` and production run it)
// against source under tsx (`node --import tsx src/main.ts`, as the tests run it), with tsx's cache warm and
// disabled (as in a container whose root filesystem is read-only). See bench/README.md.
//   npx tsx bench/startup.ts [--runs 5]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateCertificates } from '../certs/generate.js';
import { buildDist } from '../tools/stack/build.js';
import { REPO_ROOT } from '../tools/stack/paths.js';

/** The manager's last start-up line (src/main.ts): the HTTPS service listens. */
const STARTED = 'manager started';
const START_TIMEOUT_MS = 60_000;

interface Mode {
  name: string;
  args: string[];
  env?: Record<string, string>;
}

const MODES: Mode[] = [
  { name: 'node dist/src/main.js', args: [join(REPO_ROOT, 'dist/src/main.js')] },
  { name: 'tsx, cache warm', args: ['--import', 'tsx', join(REPO_ROOT, 'src/main.ts')] },
  { name: 'tsx, cache disabled', args: ['--import', 'tsx', join(REPO_ROOT, 'src/main.ts')], env: { TSX_DISABLE_CACHE: '1' } },
];

interface Sample {
  ms: number;
  rssMiB: number;
  hwmMiB: number;
}

/** VmRSS and VmHWM of a live process, MiB. */
async function memoryOf(pid: number): Promise<{ rssMiB: number; hwmMiB: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMiB: kib('VmRSS') / 1024, hwmMiB: kib('VmHWM') / 1024 };
}

/** Starts the manager once (admission only: no leader election, so no API server is needed) and stops it. */
function startOnce(mode: Mode, flags: string[]): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const { NODE_OPTIONS: _options, ...env } = process.env;
    const child = spawn(process.execPath, [...mode.args, ...flags], { cwd: REPO_ROOT, env: { ...env, ...mode.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (!out.includes(`"msg":"${STARTED}"`)) return;
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      child.stdout.removeAllListeners('data');
      memoryOf(child.pid!).then((memory) => {
        child.once('exit', () => resolve({ ms, ...memory }));
        child.kill('SIGTERM');
      }, reject);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!out.includes(STARTED)) reject(new Error(`${mode.name} exited (${signal ?? code}) before "${STARTED}":\n${out}${err}`));
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const range = (xs: number[], digits: number) => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' } } });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a whole number of at least 1, not "${values.runs}"`);

  await buildDist();
  const dir = await mkdtemp(join(tmpdir(), 'ptah-startup-'));
  try {
    const certs = await generateCertificates({ outDir: join(dir, 'certs') });
    // Only parsed at start: nothing connects to it without leader election.
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, [
      'apiVersion: v1', 'kind: Config', 'current-context: c',
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]',
      'users: [{name: u, user: {token: x}}]',
      'contexts: [{name: c, context: {cluster: c, user: u}}]', '',
    ].join('\n'));
    const flags = ['--kubeconfig', kubeconfig, '--cert-dir', certs.dir, '--listen-host', '127.0.0.1', '--port', '0', '--no-leader-election'];

    console.log(`manager start-up, admission only; node ${process.version}, ${cpus().length} CPUs, loadavg ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log(`${runs} runs per mode, interleaved; median (min–max)\n`);
    const samples = new Map<string, Sample[]>(MODES.map((m) => [m.name, []]));
    for (let i = 0; i < runs; i++) for (const mode of MODES) samples.get(mode.name)!.push(await startOnce(mode, flags));
    console.log('mode                     to "manager started" ms   RSS then MiB    peak RSS MiB');
    for (const mode of MODES) {
      const s = samples.get(mode.name)!;
      console.log(`${mode.name.padEnd(24)} ${range(s.map((x) => x.ms), 0).padStart(24)} ${range(s.map((x) => x.rssMiB), 1).padStart(18)} ${range(s.map((x) => x.hwmMiB), 1).padStart(18)}`);
    }
    console.log(`\nloadavg after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: Error) => {
  console.error(`bench/startup: ${e.message}`);
  process.exitCode = 1;
});
