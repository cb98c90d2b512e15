// `npm run generate`: writes manifests/ from src/shared/api, and removes CRD files no kind produces any more.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderManifests } from './manifests.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../manifests');
const files = renderManifests();

for (const [name, text] of files) {
  await mkdir(path.dirname(path.join(root, name)), { recursive: true });
  await writeFile(path.join(root, name), text);
}
for (const name of await readdir(path.join(root, 'crds'))) {
  if (!files.has(`crds/${name}`)) await rm(path.join(root, 'crds', name));
}
process.stdout.write(`wrote ${files.size} files under ${path.relative(process.cwd(), root) || '.'}\n`);
