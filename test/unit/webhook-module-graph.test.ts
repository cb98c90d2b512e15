// src/webhook/server.ts composes the admission routes and nothing imports it back (issue #23: the server and its
// seven route modules imported each other for AdmissionContext). The routes' contract lives in
// src/webhook/judge.ts and the table of routes in src/webhook/routes.ts. Read from the sources, `import type`
// included: a cycle of types is still a cycle for a reader.
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { REPO_ROOT } from '../../tools/stack/paths.js';

const WEBHOOK = join(REPO_ROOT, 'src/webhook');
const SERVER = join(WEBHOOK, 'server.ts');

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name));
}

/** The repository files a module imports or re-exports from, by relative specifier (`./x.js` is `./x.ts`). */
async function importsOf(file: string): Promise<string[]> {
  const { importedFiles } = ts.preProcessFile(await readFile(file, 'utf8'), true, true);
  return importedFiles.map((i) => i.fileName).filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

t.test('no module of src/webhook imports server.ts', async (t) => {
  const importers: string[] = [];
  for (const file of await sources(WEBHOOK)) if (file !== SERVER && (await importsOf(file)).includes(SERVER)) importers.push(relative(REPO_ROOT, file));
  t.same(importers.sort(), [], 'no module imports the server');
});

/** The module of each route's judge. */
const JUDGES = ['controller-write/index.ts', 'decision.ts', 'realm.ts', 'stamp.ts', 'status-write.ts'].map((f) => join(WEBHOOK, f));

t.test('server.ts reaches the judges only through the table of routes', async (t) => {
  const table = await importsOf(join(WEBHOOK, 'routes.ts')).catch((): string[] => []);
  t.same(JUDGES.filter((f) => !table.includes(f)).map((f) => relative(REPO_ROOT, f)), [], 'src/webhook/routes.ts imports every judge');
  t.same((await importsOf(SERVER)).filter((f) => JUDGES.includes(f)).map((f) => relative(REPO_ROOT, f)), [], 'server.ts imports none of them itself');
});
