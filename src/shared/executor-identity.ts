// The executor's identity: a digest of what decides how SQL runs — the runner's and the executor's own code (every
// module the two entry points import, transitively), the production packages that code loads with their own
// dependencies as package-lock.json pins them, and the compiler settings that turn it into the build. The
// execution binding binds this digest, not an image reference (docs/execution-binding.md): a release that changes
// only the manager, or repackages the same executor under another image name, keeps every epoch; a release that
// changes the executor rotates them.
//
// Computed from the source tree at build time into dist/executor-identity.json (`npm run build`), so the image
// carries it; a process running from source computes the same digest from the same files.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the build writes the digest, relative to its output directory (dist/). */
export const EXECUTOR_IDENTITY_FILE = 'executor-identity.json';
/** The two entry points: the runner (PID 1 of every operation Job) and the executor it starts as its child. */
export const EXECUTOR_ENTRY_POINTS = ['src/runner/main.ts', 'src/executor/main.ts'] as const;
/**
 * What outside the import graph changes what the build emits or how node loads it: package.json's module fields
 * (not its version or scripts, which every release changes) and the compiler options.
 */
const BUILD_INPUTS = { 'package.json': ['type', 'imports', 'exports'], 'tsconfig.json': ['compilerOptions'], 'tsconfig.build.json': ['compilerOptions'] } as const;
/** Bumped when what the digest covers changes, so two definitions never produce comparable digests. */
const IDENTITY_FORMAT = 'ptah-executor-identity/v1';

export const EXECUTOR_IDENTITY_PATTERN = /^sha256:[0-9a-f]{64}$/;

export class ExecutorIdentityError extends Error {
  override name = 'ExecutorIdentityError';
}

/** What the digest was computed over, for a person comparing two builds. */
export interface ExecutorIdentityManifest {
  identity: string;
  /** Source files of the closure, relative to the root, sorted. */
  modules: string[];
  /** Production packages the closure loads, as `name@version`, sorted. */
  packages: string[];
}

/** Computes the identity of the source tree at `root` (a checkout, or an image's application directory with src/). */
export function computeExecutorIdentity(root: string): ExecutorIdentityManifest {
  const { modules, bare } = importClosure(root);
  const packages = packageClosure(root, bare);
  const hash = createHash('sha256').update(`${IDENTITY_FORMAT}\n`);
  for (const file of modules) hash.update(`module ${file} ${sha256(readFileSync(join(root, file)))}\n`);
  for (const entry of packages) hash.update(`package ${entry.name}@${entry.version} ${entry.integrity}\n`);
  for (const [file, fields] of Object.entries(BUILD_INPUTS)) hash.update(`build ${file} ${sha256(fieldsOf(root, file, fields))}\n`);
  // The compiler that emits the build decides its code as much as the sources do.
  const compiler = lockEntry(readLock(root), 'node_modules/typescript');
  hash.update(`compiler typescript@${compiler?.version ?? 'absent'}\n`);
  return {
    identity: `sha256:${hash.digest('hex')}`,
    modules,
    packages: packages.map((p) => `${p.name}@${p.version}`).sort(),
  };
}

let cached: string | undefined;

/**
 * This process's executor identity: the one its build recorded when it runs from dist/, computed from the
 * sources when it runs from them. Throws, naming the file, when a build carries none.
 */
export function ownExecutorIdentity(): string {
  return (cached ??= readOwnIdentity());
}

function readOwnIdentity(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // This module is <root>/src/shared/executor-identity.ts in a checkout, <outDir>/src/shared/executor-identity.js
  // in a build.
  const root = resolve(here, '..', '..');
  if (import.meta.url.endsWith('.ts')) return computeExecutorIdentity(root).identity;
  const file = join(root, EXECUTOR_IDENTITY_FILE);
  let recorded: unknown;
  try {
    recorded = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ExecutorIdentityError(`${file} could not be read (${(error as Error).message}); a build records it: run npm run build`);
  }
  const identity = (recorded as { identity?: unknown } | null)?.identity;
  if (typeof identity !== 'string' || !EXECUTOR_IDENTITY_PATTERN.test(identity)) {
    throw new ExecutorIdentityError(`${file} holds no identity of the form sha256:<64 hex digits>; run npm run build`);
  }
  return identity;
}

/** The named top-level fields of a JSON file, canonically ordered as the file has them; absent when it is. */
function fieldsOf(root: string, file: string, fields: readonly string[]): string {
  const path = join(root, file);
  if (!existsSync(path)) return 'absent';
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new ExecutorIdentityError(`${file} under ${root} is not JSON (${(error as Error).message})`);
  }
  return JSON.stringify(fields.map((field) => [field, parsed[field] ?? null]));
}

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

// Static imports, re-exports, side-effect imports and dynamic imports with a literal specifier; `import type` and
// `export type` are erased by the compiler, so what they name is not loaded.
const SPECIFIER = /(?:^|[\s;])(?:import|export)\s(?!type\s)[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;

function importClosure(root: string): { modules: string[]; bare: Set<string> } {
  const seen = new Set<string>();
  const bare = new Set<string>();
  const pending: string[] = EXECUTOR_ENTRY_POINTS.map((entry) => resolve(root, entry));
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (seen.has(file)) continue;
    if (!existsSync(file)) throw new ExecutorIdentityError(`${relative(root, file)} is imported by the executor's code but does not exist under ${root}`);
    seen.add(file);
    for (const match of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      const specifier = match[1] ?? match[2] ?? match[3]!;
      if (specifier.startsWith('node:')) continue;
      if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else bare.add(packageNameOf(specifier));
    }
  }
  const modules = [...seen].map((file) => relative(root, file).split(sep).join('/')).sort();
  return { modules, bare };
}

const packageNameOf = (specifier: string) => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');

interface LockEntry {
  version?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  dev?: boolean;
}
type Lock = Record<string, LockEntry>;

function readLock(root: string): Lock {
  try {
    return (JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages?: Lock }).packages ?? {};
  } catch (error) {
    throw new ExecutorIdentityError(`package-lock.json under ${root} could not be read (${(error as Error).message}); the executor's packages are pinned there`);
  }
}

const lockEntry = (lock: Lock, path: string): LockEntry | undefined => (Object.hasOwn(lock, path) ? lock[path] : undefined);

/** The packages `names` load, with their dependencies, resolved as npm lays them out (nearest node_modules first). */
function packageClosure(root: string, names: Set<string>): { name: string; version: string; integrity: string }[] {
  const lock = readLock(root);
  const found = new Map<string, { name: string; version: string; integrity: string }>();
  const visit = (name: string, from: string, optional: boolean): void => {
    const path = resolveInLock(lock, name, from);
    if (!path) {
      if (optional) return;
      throw new ExecutorIdentityError(`package ${name}, which the executor's code loads, is not in package-lock.json`);
    }
    if (found.has(path)) return;
    const entry = lock[path]!;
    found.set(path, { name, version: entry.version ?? '?', integrity: entry.integrity ?? 'none' });
    for (const dep of Object.keys(entry.dependencies ?? {})) visit(dep, path, false);
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) visit(dep, path, true);
  };
  for (const name of [...names].sort()) visit(name, '', false);
  return [...found.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, entry]) => entry);
}

function resolveInLock(lock: Lock, name: string, from: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (lockEntry(lock, candidate)) return candidate;
    if (!base) return undefined;
    const cut = base.lastIndexOf('/node_modules/');
    base = cut < 0 ? '' : base.slice(0, cut);
  }
}
