// Reading the executor's inputs: only the variables of EXECUTOR_ENV (src/shared/runner-env.ts), each checked
// with an error that names the variable, never its value.
import { EXECUTOR_ENV, MAX_LOCK_TIMEOUT_MS } from '../shared/runner-env.js';
import { isDigest } from '../shared/canonical.js';
import { DEFAULT_MIGRATION_FORMAT, MIGRATION_FORMATS, isMigrationFormat, type MigrationFormat } from '../shared/migration-format.js';
import { parseAdoption, type MigrationAdoption } from '../shared/migration-adoption.js';
import { ExecutorFailure } from './failure.js';

/** The process environment, or a test's stand-in for it. */
export type Env = Readonly<Record<string, string | undefined>>;
type EnvKey = keyof typeof EXECUTOR_ENV;

const DEFAULT_LOCK_TIMEOUT_MS = 30_000;

export function optionalEnv(env: Env, key: EnvKey): string | undefined {
  const value = env[EXECUTOR_ENV[key]];
  return value === undefined || value === '' ? undefined : value;
}

export function requireEnv(env: Env, key: EnvKey): string {
  const value = optionalEnv(env, key);
  if (value === undefined) throw new ExecutorFailure('invalid_input', `${EXECUTOR_ENV[key]} is not set`);
  return value;
}

export function requireDigestEnv(env: Env, key: EnvKey): string {
  const value = requireEnv(env, key);
  if (!isDigest(value)) throw new ExecutorFailure('invalid_input', `${EXECUTOR_ENV[key]} is not a sha256:<64 hex> digest`);
  return value;
}

export function requireOperationId(env: Env): string {
  const value = requireEnv(env, 'operationId');
  if (value.length > 256 || /[\u0000-\u001f]/.test(value)) {
    throw new ExecutorFailure('invalid_input', `${EXECUTOR_ENV.operationId} must be at most 256 printable characters`);
  }
  return value;
}

export function lockTimeoutMs(env: Env): number {
  const raw = optionalEnv(env, 'lockTimeoutMs');
  if (raw === undefined) return DEFAULT_LOCK_TIMEOUT_MS;
  const value = Number(raw);
  if (!/^[0-9]+$/.test(raw) || value < 1 || value > MAX_LOCK_TIMEOUT_MS) {
    throw new ExecutorFailure('invalid_input', `${EXECUTOR_ENV.lockTimeoutMs} must be an integer between 1 and ${MAX_LOCK_TIMEOUT_MS}`);
  }
  return value;
}

/** The directory format of a migration artifact; absent means the ptah format. */
export function migrationFormat(env: Env): MigrationFormat {
  const value = optionalEnv(env, 'migrationFormat') ?? DEFAULT_MIGRATION_FORMAT;
  if (!isMigrationFormat(value)) throw new ExecutorFailure('invalid_input', `${EXECUTOR_ENV.migrationFormat} must be one of ${MIGRATION_FORMATS.join(', ')}`);
  return value;
}

/** The adoption the resource declares, if any (src/shared/migration-adoption.ts). */
export function migrationAdoption(env: Env): MigrationAdoption | undefined {
  const value = optionalEnv(env, 'migrationAdoption');
  if (value === undefined) return undefined;
  try {
    return parseAdoption(value);
  } catch (err) {
    throw new ExecutorFailure('invalid_input', `${EXECUTOR_ENV.migrationAdoption} ${(err as Error).message}`);
  }
}
