// Other releases of this checkout, for the tests that prove what an operator upgrade does to work in flight: a
// copy of the source tree with one line added to one file, run from source like any checkout. `manager` changes a
// file only the manager loads (a release that changes the manager alone: it keeps every execution binding);
// `executor` changes a file the executor loads (a release that changes the executor: it rotates them). Each is
// a real second build whose executor identity is computed from its own files, never declared.
import { appendFileSync, chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { computeExecutorIdentity } from '../../src/shared/executor-identity.js';
import { REPO_ROOT } from './paths.js';

export type VariantName = 'manager' | 'executor';

/** The one file each variant changes, and the line it adds: a comment, so behaviour is the checkout's. */
const CHANGED: Record<VariantName, string> = {
  manager: 'src/controller/manager.ts',
  executor: 'src/executor/main.ts',
};
const COPIED = ['src', 'certs', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

/** Where a variant lives: under .local/ (ignored by git), inside the checkout, so node finds its node_modules. */
export function variantDir(name: VariantName, repoRoot = REPO_ROOT): string {
  return join(repoRoot, '.local', 'variants', name);
}

/**
 * Writes the variant afresh from the checkout as it is now (a stack's start does, before any test reads it) and
 * returns its directory. It holds an empty node_modules: the mount point a sandboxed runner binds the checkout's
 * over, while a process on the host resolves packages from the checkout's own, two directories up.
 */
export function prepareVariant(name: VariantName, repoRoot = REPO_ROOT): string {
  const dir = variantDir(name, repoRoot);
  mkdirSync(join(dir, '..'), { recursive: true });
  const staging = mkdtempSync(`${dir}.tmp-`);
  // mkdtemp makes it 0700; the runner reads it as the image's non-root user.
  chmodSync(staging, 0o755);
  // Not certs/out/: the development certificate a manager generates there is its own.
  for (const entry of COPIED) cpSync(join(repoRoot, entry), join(staging, entry), { recursive: true, filter: (source) => !source.startsWith(join(repoRoot, 'certs', 'out')) });
  appendFileSync(join(staging, CHANGED[name]), `\n// The ${name} of another release (tools/stack/variants.ts).\n`);
  mkdirSync(join(staging, 'node_modules'));
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  renameSync(staging, dir);
  return dir;
}

/** The executor identity of a prepared variant, computed from its files as its own processes compute it. */
export function variantExecutorIdentity(name: VariantName, repoRoot = REPO_ROOT): string {
  const dir = variantDir(name, repoRoot);
  if (!existsSync(dir)) throw new Error(`the ${name} variant is not prepared at ${dir}; a stack's start prepares it (tools/stack/kubelet/images.ts)`);
  return computeExecutorIdentity(dir).identity;
}
