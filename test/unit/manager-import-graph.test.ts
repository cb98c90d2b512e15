// The manager's runtime import graph leaves out @kubernetes/client-node (issue #10: importing it alone costs
// about 40 MiB of RSS). A child process runs src/main.ts under tsx with a resolve hook that records every URL
// resolved and who asked for it; an unknown flag makes main() stop at its configuration, after the whole static
// graph has loaded and before anything starts. `import type` is erased and never resolves, so it stays allowed.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { REPO_ROOT } from '../../tools/stack/paths.js';

const HOOKS = `import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(out, JSON.stringify([result.url, context.parentURL ?? null]) + '\\n');
  return result;
}
`;

const REGISTER = (hooks: string, out: string) => `import { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(hooks).href)}, { data: { out: ${JSON.stringify(out)} } });
`;

t.test('src/main.ts loads no module of @kubernetes/client-node', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ptah-import-graph-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const hooks = join(dir, 'hooks.mjs');
  const register = join(dir, 'register.mjs');
  const out = join(dir, 'resolved.jsonl');
  await writeFile(hooks, HOOKS);
  await writeFile(register, REGISTER(hooks, out));
  await writeFile(out, '');

  // tsx first, so the recording hook (registered last, so called first) sees the URLs tsx resolves to.
  const { NODE_OPTIONS: _options, ...env } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', pathToFileURL(register).href, join(REPO_ROOT, 'src/main.ts'), '--not-a-flag'], {
    cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  t.equal(code, 2, `main() ran and stopped at its configuration (stderr: ${stderr.trim()})`);

  const resolved = (await readFile(out, 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as [string, string | null]);
  const urls = new Set(resolved.map(([url]) => url));
  // The hook saw the graph: the modules main.ts wires, the kube modules and a dependency of theirs among them.
  for (const module of ['src/shared/kube.ts', 'src/shared/kube-client.ts', 'src/controller/informer.ts', 'src/shared/targetlock.ts', 'src/webhook/server.ts']) {
    t.ok(urls.has(pathToFileURL(join(REPO_ROOT, module)).href), `${module} is in the graph`);
  }
  t.ok([...urls].some((url) => url.includes('/node_modules/fastify/')), 'so are the dependencies');

  const clientNode = resolved.filter(([url]) => url.includes('/node_modules/@kubernetes/client-node/'));
  const importers = [...new Set(clientNode.map(([, parent]) => parent ?? '(entry)'))].filter((p) => !p.includes('/node_modules/@kubernetes/client-node/'));
  t.same(importers, [], 'no module of the manager imports @kubernetes/client-node at runtime');
});
