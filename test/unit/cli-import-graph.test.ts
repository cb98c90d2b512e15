// `kubectl ptah` loads only what a command needs (issue #23: 0.9 s a call, `--help` included, because the entry
// loaded @kubernetes/client-node before reading its arguments). A child process runs the CLI under tsx with a load
// hook that records every module URL it loads; `--help` and a usage error must load none of the heavy packages,
// while a command that reaches the cluster does (the control: the hook sees modules the CLI imports dynamically).
// No wall-clock time is asserted; bench/cli-startup.ts measures it.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from '../../tools/stack/paths.js';

/** Packages a call that never talks to the cluster has no use for. */
const HEAVY = ['@kubernetes/client-node', 'prom-client', 'yaml'];

/** A load hook that writes each module's URL to stderr (fd 2: the hooks run on their own thread). */
const LOAD_HOOK = 'import { writeSync } from "node:fs"; export async function load(url, context, next) { writeSync(2, `ptah-loaded ${url}\\n`); return next(url, context); }';
const dataUrl = (source: string) => `data:text/javascript,${encodeURIComponent(source)}`;
const REGISTER = dataUrl(`import { register } from "node:module"; register(${JSON.stringify(dataUrl(LOAD_HOOK))});`);

interface Loaded {
  code: number | null;
  stdout: string;
  urls: string[];
}

/** Runs `kubectl-ptah.ts args` under tsx and returns every module URL it loaded. */
async function loadedBy(args: string[]): Promise<Loaded> {
  const { NODE_OPTIONS: _options, ...env } = process.env;
  // tsx first, so the recording hook (registered last, so called first) sees every module, compiled or not.
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', REGISTER, join(REPO_ROOT, 'src/cli/kubectl-ptah.ts'), ...args], {
    cwd: REPO_ROOT, env: { ...env, KUBECONFIG: '' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const urls = stderr.split('\n').filter((line) => line.startsWith('ptah-loaded ')).map((line) => line.slice('ptah-loaded '.length));
  return { code, stdout, urls };
}

const heavyIn = (urls: readonly string[]): string[] => HEAVY.filter((name) => urls.some((url) => url.includes(`/node_modules/${name}/`)));

t.test('--help loads none of the packages a cluster command needs', async (t) => {
  const { code, stdout, urls } = await loadedBy(['--help']);
  t.equal(code, 0);
  t.match(stdout, /^Usage: kubectl ptah/);
  t.ok(urls.some((url) => url.endsWith('/src/cli/kubectl-ptah.ts')), 'the hook saw the entry module');
  t.same(heavyIn(urls), [], 'no heavy package is loaded');
  t.same(urls.filter((url) => url.includes('/src/shared/')), [], 'nor any shared module');
});

t.test('a usage error loads none of them either', async (t) => {
  const { code, urls } = await loadedBy(['plan']);
  t.equal(code, 2);
  t.same(heavyIn(urls), []);
});

t.test('a command that reads the kubeconfig loads client-node (the hook sees dynamic imports)', async (t) => {
  const { code, urls } = await loadedBy(['status', '--kubeconfig', '/nonexistent/kubeconfig']);
  t.equal(code, 1);
  t.ok(heavyIn(urls).includes('@kubernetes/client-node'));
});
