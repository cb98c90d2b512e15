// `npm run build`: tsc with tsconfig.build.json (extra arguments go to tsc, e.g. the image's --outDir), then the
// executor's identity recorded beside the compiled code (src/shared/executor-identity.ts), so the image carries it
// and a manager or runner started from the build knows it without the sources.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { computeExecutorIdentity, EXECUTOR_IDENTITY_FILE } from '../../src/shared/executor-identity.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const args = process.argv.slice(2);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', join(REPO_ROOT, 'tsconfig.build.json'), ...args], { stdio: 'inherit' });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

const at = args.indexOf('--outDir');
const outDir = at >= 0 && args[at + 1] ? resolve(args[at + 1]) : join(REPO_ROOT, 'dist');
const manifest = computeExecutorIdentity(REPO_ROOT);
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, EXECUTOR_IDENTITY_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
