// The executor identity (src/shared/executor-identity.ts): what the execution binding binds instead of an image
// reference. Copies of this checkout's source tree, each changed in one place, show what moves the digest (the
// runner's and executor's code and the packages it loads) and what does not (the manager's code, the packages only
// the manager loads, the release's version and scripts).
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { computeExecutorIdentity, ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';

const here = computeExecutorIdentity(REPO_ROOT);

/** A copy of the checkout's source tree, changed by `change`; its identity. */
function identityAfter(t: Test, change: (root: string) => void): string {
  const root = mkdtempSync(join(tmpdir(), 'ptah-identity-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const entry of ['src', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
    cpSync(join(REPO_ROOT, entry), join(root, entry), { recursive: true });
  }
  change(root);
  return computeExecutorIdentity(root).identity;
}
const comment = (root: string, file: string) => appendFileSync(join(root, file), '\n// another release\n');
const editJson = (root: string, file: string, edit: (value: Record<string, any>) => void) => {
  const value = JSON.parse(readFileSync(join(root, file), 'utf8')) as Record<string, any>;
  edit(value);
  writeFileSync(join(root, file), JSON.stringify(value, null, 2));
};

t.test('the digest covers the runner and the executor and what they load, and nothing of the manager', async (t) => {
  t.match(here.identity, /^sha256:[0-9a-f]{64}$/);
  for (const file of ['src/runner/main.ts', 'src/executor/main.ts', 'src/executor/sql-split.ts', 'src/shared/runner-protocol.ts', 'src/shared/executor-identity.ts']) {
    t.ok(here.modules.includes(file), `${file} is covered`);
  }
  for (const file of here.modules) t.match(file, /^src\/(runner|executor|shared)\//, `${file} is the runner's, the executor's or shared`);
  t.notOk(here.modules.some((file) => /^src\/(controller|webhook|cli)\/|^src\/main\.ts$/.test(file)), 'no manager, webhook or CLI module is covered');
  t.ok(here.packages.some((p) => p.startsWith('pg@')), 'pg, which the executor loads, is covered');
  t.ok(here.packages.some((p) => p.startsWith('pg-protocol@')), 'and its own dependencies');
  t.notOk(here.packages.some((p) => /^(fastify|@kubernetes\/client-node|pino|tap|typescript)@/.test(p)), 'packages only the manager or the tests load are not');
  t.equal(ownExecutorIdentity(), here.identity, 'a process running from source computes the same digest');
});

t.test('a release that changes only the manager keeps the identity', async (t) => {
  t.equal(identityAfter(t, (root) => comment(root, 'src/controller/manager.ts')), here.identity, 'a manager module changed');
  t.equal(identityAfter(t, (root) => comment(root, 'src/webhook/server.ts')), here.identity, 'a webhook module changed');
  t.equal(identityAfter(t, (root) => editJson(root, 'package.json', (p) => { p.version = '9.9.9'; p.scripts.extra = 'true'; })), here.identity, 'the version and scripts changed');
  t.equal(identityAfter(t, (root) => editJson(root, 'package-lock.json', (l) => { l.packages['node_modules/fastify'].integrity = 'sha512-other'; })), here.identity,
    'a package only the manager loads changed');
});

t.test('a release that changes the executor changes the identity', async (t) => {
  const rows: [string, (root: string) => void][] = [
    ['the executor\'s entry point', (root) => comment(root, 'src/executor/main.ts')],
    ['a module the executor imports', (root) => comment(root, 'src/executor/sql-split.ts')],
    ['the runner', (root) => comment(root, 'src/runner/decide.ts')],
    ['a shared module the runner imports', (root) => comment(root, 'src/shared/runner-protocol.ts')],
    ['pg\'s pinned integrity', (root) => editJson(root, 'package-lock.json', (l) => { l.packages['node_modules/pg'].integrity = 'sha512-other'; })],
    ['a dependency of pg', (root) => editJson(root, 'package-lock.json', (l) => { l.packages['node_modules/pg-protocol'].version = '9.9.9'; })],
    ['the compiler', (root) => editJson(root, 'package-lock.json', (l) => { l.packages['node_modules/typescript'].version = '9.9.9'; })],
    ['the compiler options', (root) => editJson(root, 'tsconfig.json', (c) => { c.compilerOptions.target = 'ES2020'; })],
    ['the module type', (root) => editJson(root, 'package.json', (p) => { p.type = 'commonjs'; })],
  ];
  const seen = new Set([here.identity]);
  for (const [what, change] of rows) {
    const identity = identityAfter(t, change);
    t.not(identity, here.identity, what);
    seen.add(identity);
  }
  t.equal(seen.size, rows.length + 1, 'every change gives a digest of its own');
});

t.test('a tree the digest cannot be computed from is refused, naming what is missing', async (t) => {
  const missing = (root: string) => rmSync(join(root, 'src/executor/sql-split.ts'));
  t.throws(() => identityAfter(t, missing), { name: 'ExecutorIdentityError', message: /src\/executor\/sql-split\.ts is imported by the executor's code but does not exist/ });
  t.throws(() => identityAfter(t, (root) => editJson(root, 'package-lock.json', (l) => { delete l.packages['node_modules/pg']; })),
    { name: 'ExecutorIdentityError', message: /package pg, which the executor's code loads, is not in package-lock\.json/ });
});
