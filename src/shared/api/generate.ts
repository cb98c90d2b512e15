// `npm run generate`: writes manifests/ and charts/ptah/ from src/shared/api, and removes CRD files no kind produces
// any more.
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderChart } from './chart.js';
import { renderManifests } from './manifests.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const { version } = JSON.parse(await readFile(path.join(repo, 'package.json'), 'utf8')) as { version: string };

for (const [dir, files, crds] of [['manifests', renderManifests(), 'crds'], ['charts/ptah', renderChart(version), 'templates/crds']] as const) {
  const root = path.join(repo, dir);
  for (const [name, text] of files) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), text);
  }
  for (const name of await readdir(path.join(root, crds))) {
    if (!files.has(`${crds}/${name}`)) await rm(path.join(root, crds, name));
  }
  process.stdout.write(`wrote ${files.size} files under ${dir}\n`);
}
