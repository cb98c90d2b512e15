// The runner's whole contract, in one place. The runner is PID 1 of every operation Job's container.
//
// Command line (src/runner/args.ts): `--operation <observe|plan|apply|migration-history|migration-apply|resolve>`,
// optionally `--max-report-bytes <n>` / `--max-plan-bytes <n>` (may only tighten the defaults) and
// `--executor <script>` (a Node script run in place of src/executor/main.ts; tests use it). `--fetch-artifact`
// alone is the fetch init container of a database Job whose artifact comes from a registry (src/runner/fetch.ts).
//
// `resolve` (src/runner/resolve.ts) opens no database and starts no executor: after checks 1 and 1b it reads
// PTAH_OCI_REFERENCE, PTAH_OCI_ARTIFACT_KIND, the optional DOCKER_CONFIG (the registry Secret's config.json) and
// PTAH_OCI_CA_FILE, and the verification policy at PTAH_VERIFICATION_POLICY_FILE, whose digest must be
// PTAH_EXPECTED_VERIFICATION_POLICY_DIGEST; it frames the artifact pinned to its digest, or the registry's or the
// policy's refusal (src/shared/oci/failures.ts), with childExitCode -1 and no realm or target. The database
// variables below are not read.
//
// Environment (names in src/shared/runner-env.ts, RUNNER_ENV):
//   PTAH_OPERATION_ID                      every op   the frame echoes it; without a valid one nothing is framable
//   PTAH_RUNNER_PROTOCOL_VERSION           every op   checked before anything else; must equal RUNNER_PROTOCOL_VERSION
//   PTAH_EXECUTOR_IDENTITY                 every op   the executor the binding names; must equal the one this image
//                                                     carries (src/shared/executor-identity.ts)
//   PTAH_DB_URL                            every op   from the target Secret; never leaves the Pod in any form but a digest
//   PTAH_DEV_URL                           plan       optional scratch database; passed to plan only
//   PTAH_COORDINATION_DIGEST               every op   the claim's realm, echoed in the frame
//   PTAH_EXPECTED_COORDINATION_DIGEST      mutating   must equal PTAH_COORDINATION_DIGEST (checked whenever set)
//   PTAH_EXPECTED_TARGET_IDENTITY_DIGEST   mutating   must equal targetIdentityDigest(PTAH_DB_URL) (checked whenever set)
//   PTAH_DISPATCH_NOT_AFTER                mutating   RFC 3339 UTC; the executor is not started at or after it
//   PTAH_EXECUTION_NOT_AFTER               mutating   RFC 3339 UTC, not before the dispatch deadline; the executor is
//                                                     stopped at it (both deadlines are enforced whenever set)
//   PTAH_TERMINATION_GRACE_PERIOD_SECONDS  mutating   the Pod's grace, 1..300 (default 30 for read-only operations)
//   PTAH_TERMINATION_MESSAGE_PATH          optional   default /dev/termination-log
//   PTAH_ARTIFACT_DIR                      all but apply   the mounted artifact ConfigMap (default /artifact)
//   PTAH_EXPECTED_ARTIFACT_DIGEST          all but apply   artifactDigest (src/shared/artifact.ts) of its files
//   PTAH_PLAN_DIR                          apply      the projected plan chunks (default /plan)
//   PTAH_EXPECTED_PLAN_CONTENT_DIGEST      apply      sha256 of the chunks' bytes in file-name order
//   PTAH_EXPECTED_MIGRATION_SEQUENCE       migration-apply  JSON [{version, checksum}] the approval covers
//   PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST migration-apply expectedSequenceDigest (src/shared/runner-protocol.ts)
//   PTAH_EXPECTED_HISTORY_FINGERPRINT      migration-apply  the history the plan was made on, passed to the executor
//   PTAH_LOCK_TIMEOUT_MS                   mutating   optional; whole milliseconds, 1..3600000, the executor waits for
//                                                     the realm's advisory lock (its own default 30000 when absent);
//                                                     read-only operations take no realm lock and ignore it
//   PTAH_MIGRATION_FORMAT                  migration-*  optional; spec.artifact.format, one of MIGRATION_FORMATS
//   PTAH_MIGRATION_ADOPTION                migration-*  optional; spec.adoption as JSON, checked and passed on canonical
//
// Checks, in order; each refusal is framed with its RUNNER_ERROR code and childExitCode -1:
//   1. protocol version; 1b. executor identity; 2. required inputs and their formats; 3. bindings: coordination digest, then the
//   target identity computed from the URL; 4. deadlines; 5. apply: plan bytes from the plan directory (sorted
//   files, dot-entries skipped, symlinks only inside the directory, size bound) against their digest, and a
//   well-formed canonical plan document; 6. artifact files against the artifact digest; 7. migration-apply: the
//   sequence re-digested against its digest; 8. a stop request, and the deadlines again, immediately before the
//   executor starts.
//
// The executor (`executor <operation>`) sees only EXECUTOR_ENV: verified copies of the artifact, plan and
// sequence in a private directory, never a runner-only variable. It runs until the execution deadline or a
// SIGTERM/SIGINT to the runner; then it gets SIGTERM, and SIGKILL two thirds of the grace period later. The last
// third is for framing, which no further signal interrupts.
//
// Output: the executor's stdout (its JSON report) and stderr are kept as bounded tails and redacted; the
// stderr tail and the runner's own diagnostics go to stderr. Then the termination summary goes to the
// termination-message file (opened, never created, and truncated), and the result frame is the last write to
// stdout, in one write (src/shared/runner-protocol.ts). Exit 0 whenever a frame was written, 2 otherwise.
import { isDigest } from '../shared/canonical.js';
import { MIGRATION_FORMATS, isMigrationFormat, type MigrationFormat } from '../shared/migration-format.js';
import { adoptionEnvValue, parseAdoption } from '../shared/migration-adoption.js';
import { JOB_PATHS, MAX_LOCK_TIMEOUT_MS, MUTATING_RUNNER_OPERATIONS, RUNNER_ENV, type RunnerOperation } from '../shared/runner-env.js';
import { isOperationId, RUNNER_ERROR, RUNNER_PROTOCOL_VERSION } from '../shared/runner-protocol.js';
import { RunnerRefusal } from './refusal.js';

export type Env = Readonly<Record<string, string | undefined>>;

export interface RunnerInputs {
  operation: RunnerOperation;
  operationId: string;
  dbUrl: string;
  devUrl?: string;
  coordinationDigest: string;
  expectedCoordinationDigest?: string;
  expectedTargetIdentityDigest?: string;
  /** Milliseconds since the epoch. */
  dispatchNotAfter?: number;
  executionNotAfter?: number;
  terminationGraceSeconds: number;
  artifact?: { dir: string; expectedDigest: string };
  plan?: { dir: string; expectedDigest: string };
  migrationSequence?: { json: string; expectedDigest: string; expectedHistoryFingerprint: string };
  /** Mutating: how long the executor waits for the realm's advisory lock. */
  lockTimeoutMs?: number;
  /** Migration operations: the artifact's directory format, when the Job names one other than the default. */
  migrationFormat?: MigrationFormat;
  /** Migration operations: spec.adoption, checked and in canonical form, when the Job names one. */
  migrationAdoption?: string;
}

const DEFAULT_TERMINATION_GRACE_SECONDS = 30;
const MAX_TERMINATION_GRACE_SECONDS = 300;

/** Operations that read the artifact; apply runs the plan alone. */
const ARTIFACT_OPERATIONS: ReadonlySet<RunnerOperation> = new Set(['observe', 'plan', 'migration-history', 'migration-apply']);

export function terminationMessagePath(env: Env): string {
  return present(env, RUNNER_ENV.terminationMessagePath) ?? JOB_PATHS.terminationLog;
}

/** The operation ID, or undefined when none is usable: then no frame can name the run. */
export function readOperationId(env: Env): string | undefined {
  const value = env[RUNNER_ENV.operationId];
  return isOperationId(value) ? value : undefined;
}

/** Check 1: the manager and this runner speak the same protocol. */
export function checkProtocolVersion(env: Env): void {
  const raw = env[RUNNER_ENV.protocolVersion];
  if (raw === undefined || raw === '') {
    throw new RunnerRefusal(RUNNER_ERROR.protocolMismatch, `${RUNNER_ENV.protocolVersion} is not set; this runner speaks protocol ${RUNNER_PROTOCOL_VERSION}`);
  }
  if (!/^[1-9][0-9]{0,8}$/.test(raw) || Number(raw) !== RUNNER_PROTOCOL_VERSION) {
    throw new RunnerRefusal(
      RUNNER_ERROR.protocolMismatch,
      `${RUNNER_ENV.protocolVersion} does not name protocol ${RUNNER_PROTOCOL_VERSION}, the one this runner speaks; run a runner built for the manager's protocol`,
    );
  }
}

/**
 * Check 1b: the Job names the executor this image carries. The execution binding binds the executor by the digest
 * of its code, not by an image reference, so this is where the binding meets the code that will open the database:
 * an image that carries another executor than the one the plan was approved under runs nothing.
 */
export function checkExecutorIdentity(env: Env, own: () => string): void {
  const named = env[RUNNER_ENV.executorIdentity];
  if (named === undefined || named === '') {
    throw new RunnerRefusal(RUNNER_ERROR.executorIdentityMismatch, `${RUNNER_ENV.executorIdentity} is not set; the Job does not say which executor its binding names, so nothing was run`);
  }
  let carried: string;
  try {
    carried = own();
  } catch (error) {
    throw new RunnerRefusal(RUNNER_ERROR.executorIdentityMismatch, `this image's executor identity cannot be read (${(error as Error).message}); nothing was run`);
  }
  if (named !== carried) {
    throw new RunnerRefusal(
      RUNNER_ERROR.executorIdentityMismatch,
      `the Job's binding names executor ${named}, but this image carries ${carried}; nothing was run. Point the manager's --runner-image at an image of its own release`,
    );
  }
}

/** Check 2: every input the operation needs is present and well-formed. */
export function readInputs(operation: RunnerOperation, operationId: string, env: Env): RunnerInputs {
  const mutating = MUTATING_RUNNER_OPERATIONS.has(operation);
  const inputs: RunnerInputs = {
    operation,
    operationId,
    dbUrl: required(env, RUNNER_ENV.dbUrl),
    devUrl: operation === 'plan' ? present(env, RUNNER_ENV.devUrl) : undefined,
    coordinationDigest: digestInput(env, RUNNER_ENV.coordinationDigest, true) as string,
    expectedCoordinationDigest: digestInput(env, RUNNER_ENV.expectedCoordinationDigest, mutating),
    expectedTargetIdentityDigest: digestInput(env, RUNNER_ENV.expectedTargetIdentityDigest, mutating),
    dispatchNotAfter: instantInput(env, RUNNER_ENV.dispatchNotAfter, mutating),
    executionNotAfter: instantInput(env, RUNNER_ENV.executionNotAfter, mutating),
    terminationGraceSeconds: graceInput(env, mutating),
    lockTimeoutMs: mutating ? lockTimeoutInput(env) : undefined,
  };
  if (inputs.dispatchNotAfter !== undefined && inputs.executionNotAfter !== undefined && inputs.executionNotAfter < inputs.dispatchNotAfter) {
    throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${RUNNER_ENV.executionNotAfter} is earlier than ${RUNNER_ENV.dispatchNotAfter}`);
  }
  if (ARTIFACT_OPERATIONS.has(operation)) {
    inputs.artifact = {
      dir: present(env, RUNNER_ENV.artifactDir) ?? JOB_PATHS.artifact,
      expectedDigest: digestInput(env, RUNNER_ENV.expectedArtifactDigest, true) as string,
    };
  }
  if (operation === 'apply') {
    inputs.plan = {
      dir: present(env, RUNNER_ENV.planDir) ?? JOB_PATHS.plan,
      expectedDigest: digestInput(env, RUNNER_ENV.expectedPlanContentDigest, true) as string,
    };
  }
  if (operation === 'migration-history' || operation === 'migration-apply') {
    inputs.migrationFormat = migrationFormatInput(env);
    inputs.migrationAdoption = migrationAdoptionInput(env);
  }
  if (operation === 'migration-apply') {
    inputs.migrationSequence = {
      json: required(env, RUNNER_ENV.expectedMigrationSequence),
      expectedDigest: digestInput(env, RUNNER_ENV.expectedMigrationSequenceDigest, true) as string,
      expectedHistoryFingerprint: digestInput(env, RUNNER_ENV.expectedHistoryFingerprint, true) as string,
    };
  }
  return inputs;
}

function present(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function required(env: Env, name: string): string {
  const value = present(env, name);
  if (value === undefined) throw new RunnerRefusal(RUNNER_ERROR.missingInput, `${name} is not set`);
  return value;
}

function digestInput(env: Env, name: string, isRequired: boolean): string | undefined {
  const value = isRequired ? required(env, name) : present(env, name);
  if (value !== undefined && !isDigest(value)) throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${name} is not a sha256:<64 lowercase hex> digest`);
  return value;
}

const RFC3339_UTC = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?Z$/;

/** An RFC 3339 UTC instant in milliseconds; sub-millisecond digits are dropped, which only moves it earlier. */
export function parseUtcInstant(value: string): number | undefined {
  const match = RFC3339_UTC.exec(value);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  const ms = Number((match[7] ?? '').padEnd(3, '0').slice(0, 3));
  const at = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  const back = new Date(at);
  const exact = back.getUTCFullYear() === year && back.getUTCMonth() === month - 1 && back.getUTCDate() === day &&
    back.getUTCHours() === hour && back.getUTCMinutes() === minute && back.getUTCSeconds() === second;
  return exact ? at : undefined;
}

function instantInput(env: Env, name: string, isRequired: boolean): number | undefined {
  const value = isRequired ? required(env, name) : present(env, name);
  if (value === undefined) return undefined;
  const at = parseUtcInstant(value);
  if (at === undefined) throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${name} is not an RFC 3339 UTC instant (YYYY-MM-DDTHH:MM:SS[.fraction]Z)`);
  return at;
}

function graceInput(env: Env, isRequired: boolean): number {
  const name = RUNNER_ENV.terminationGraceSeconds;
  const raw = isRequired ? required(env, name) : present(env, name);
  if (raw === undefined) return DEFAULT_TERMINATION_GRACE_SECONDS;
  const value = /^[1-9][0-9]{0,2}$/.test(raw) ? Number(raw) : NaN;
  if (!(value <= MAX_TERMINATION_GRACE_SECONDS)) {
    throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${name} must be a whole number of seconds from 1 to ${MAX_TERMINATION_GRACE_SECONDS}`);
  }
  return value;
}

function lockTimeoutInput(env: Env): number | undefined {
  const name = RUNNER_ENV.lockTimeoutMs;
  const raw = present(env, name);
  if (raw === undefined) return undefined;
  const value = /^[1-9][0-9]{0,6}$/.test(raw) ? Number(raw) : NaN;
  if (!(value <= MAX_LOCK_TIMEOUT_MS)) {
    throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${name} must be a whole number of milliseconds from 1 to ${MAX_LOCK_TIMEOUT_MS}`);
  }
  return value;
}

function migrationFormatInput(env: Env): MigrationFormat | undefined {
  const name = RUNNER_ENV.migrationFormat;
  const value = present(env, name);
  if (value !== undefined && !isMigrationFormat(value)) {
    throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${name} must be one of ${MIGRATION_FORMATS.join(', ')}`);
  }
  return value;
}

function migrationAdoptionInput(env: Env): string | undefined {
  const name = RUNNER_ENV.migrationAdoption;
  const value = present(env, name);
  if (value === undefined) return undefined;
  try {
    return adoptionEnvValue(parseAdoption(value));
  } catch (err) {
    throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${name} ${(err as Error).message}`);
  }
}
