// How long one `kubectl ptah` call takes from exec to exit (issue #23: 0.9 s, `--help` included), against `node -e 0`
// in the same run. The CLI is compiled from the working tree into a temporary directory (what bin/kubectl-ptah runs
// after `npm run build`, without touching dist/), and also run from source under tsx (the launcher's fallback and
// the integration test's way), next to tsx loading an empty module. See bench/README.md.
//   npx tsx bench/cli-startup.ts [--runs 15]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../tools/stack/paths.js';

interface Case {
  name: string;
  args: string[];
  /** The exit code the call must end with, so a broken build is not timed as a fast one. */
  code: number;
}

/** Runs one call to its exit; resolves with the milliseconds from spawn to exit. */
function timeOnce(c: Case): Promise<number> {
  return new Promise((resolve, reject) => {
    const { NODE_OPTIONS: _options, ...env } = process.env;
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, c.args, { cwd: REPO_ROOT, env: { ...env, KUBECONFIG: '' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      if (code === c.code) resolve(ms);
      else reject(new Error(`${c.name} exited ${code}, not ${c.code}:\n${err}`));
    });
  });
}

/** Compiles the CLI and what it imports (tsconfig.build.json's options) into `dir`; returns the entry's path. */
async function compileCli(dir: string): Promise<string> {
  const out = join(dir, 'out');
  const config = join(dir, 'tsconfig.json');
  await writeFile(config, JSON.stringify({
    extends: join(REPO_ROOT, 'tsconfig.build.json'),
    // typeRoots: the default is relative to this temporary config, not to the repository.
    compilerOptions: { outDir: out, incremental: false, sourceMap: false, typeRoots: [join(REPO_ROOT, 'node_modules/@types')] },
    files: [join(REPO_ROOT, 'src/cli/kubectl-ptah.ts')],
    include: [],
  }));
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const compiled = spawnSync(process.execPath, [tsc, '-p', config], { encoding: 'utf8' });
  if (compiled.status !== 0) throw new Error(`tsc failed:\n${compiled.stdout}${compiled.stderr}`);
  // The compiled modules resolve their packages from the repository's node_modules, as dist/ does.
  await symlink(join(REPO_ROOT, 'node_modules'), join(out, 'node_modules'));
  return join(out, 'src/cli/kubectl-ptah.js');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '15' } } });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a whole number of at least 1, not "${values.runs}"`);

  const dir = await mkdtemp(join(tmpdir(), 'ptah-cli-startup-'));
  try {
    const entry = await compileCli(dir);
    const empty = join(dir, 'empty.ts');
    // Nothing listens on port 1: the status call loads everything a cluster command needs, then fails to connect.
    const kubeconfig = join(dir, 'kubeconfig');
    await Promise.all([
      writeFile(empty, 'export {};\n'),
      writeFile(kubeconfig, [
        'apiVersion: v1', 'kind: Config', 'current-context: c',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]',
        'users: [{name: u, user: {token: x}}]',
        'contexts: [{name: c, context: {cluster: c, user: u}}]', '',
      ].join('\n')),
    ]);
    const source = join(REPO_ROOT, 'src/cli/kubectl-ptah.ts');
    const cases: Case[] = [
      { name: 'node -e 0', args: ['-e', '0'], code: 0 },
      { name: 'compiled --help', args: [entry, '--help'], code: 0 },
      { name: 'compiled usage error', args: [entry, 'plan'], code: 2 },
      { name: 'compiled status (refused)', args: [entry, 'status', '--kubeconfig', kubeconfig], code: 1 },
      { name: 'tsx, an empty module', args: ['--import', 'tsx', empty], code: 0 },
      { name: 'tsx --help', args: ['--import', 'tsx', source, '--help'], code: 0 },
    ];

    console.log(`kubectl ptah, exec to exit; node ${process.version}, ${cpus().length} CPUs, loadavg ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log(`${runs} runs per case, interleaved, after one warm-up round; ms, median (min–max)\n`);
    for (const c of cases) await timeOnce(c);
    const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
    for (let i = 0; i < runs; i++) for (const c of cases) samples.get(c.name)!.push(await timeOnce(c));
    const reference = median(samples.get('node -e 0')!);
    console.log('case                            median ms     (min–max)   over node -e 0');
    for (const c of cases) {
      const s = samples.get(c.name)!;
      const m = median(s);
      const over = Math.round(m - reference);
      console.log(`${c.name.padEnd(28)} ${m.toFixed(0).padStart(10)} ${`(${Math.min(...s).toFixed(0)}–${Math.max(...s).toFixed(0)})`.padStart(13)} ${`${over < 0 ? '' : '+'}${over}`.padStart(16)}`);
    }
    console.log(`\nloadavg after: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: Error) => {
  console.error(`bench/cli-startup: ${e.message}`);
  process.exitCode = 1;
});
