// The contract between the operation Job (built by src/shared/job) and the runner (src/runner): every
// environment variable, volume path and runner operation name, defined once so builder and runner cannot drift.

/** Runner operation names, as passed in `--operation`. */
export const RUNNER_OPERATIONS = ['observe', 'plan', 'apply', 'migration-history', 'migration-apply', 'resolve'] as const;
export type RunnerOperation = (typeof RUNNER_OPERATIONS)[number];

export function isRunnerOperation(value: unknown): value is RunnerOperation {
  return typeof value === 'string' && (RUNNER_OPERATIONS as readonly string[]).includes(value);
}

/**
 * Operations that open no database: `resolve` reads a registry and the verification policy, and is given no
 * database URL (docs/oci-artifacts.md). Everything else is given one.
 */
export const REGISTRY_ONLY_RUNNER_OPERATIONS: ReadonlySet<RunnerOperation> = new Set(['resolve']);

/** Operations that change the database: they get the full binding and deadline checks. */
export const MUTATING_RUNNER_OPERATIONS: ReadonlySet<RunnerOperation> = new Set(['apply', 'migration-apply']);

export const RUNNER_ENV = {
  /** Full operation ID; the frame must echo it. */
  operationId: 'PTAH_OPERATION_ID',
  /** Decimal protocol version the manager speaks; checked before anything else. */
  protocolVersion: 'PTAH_RUNNER_PROTOCOL_VERSION',
  /** The executor identity the claim's execution binding names; the runner starts no other executor. */
  executorIdentity: 'PTAH_EXECUTOR_IDENTITY',
  /** The database URL, from the target Secret through secretKeyRef. The only credential a Job holds. */
  dbUrl: 'PTAH_DB_URL',
  /** Optional scratch database for `plan` (secretKeyRef). */
  devUrl: 'PTAH_DEV_URL',
  /** Realm digest of the claim; echoed in the frame. Required for every database operation. */
  coordinationDigest: 'PTAH_COORDINATION_DIGEST',
  /** Mutating only: the realm and database the plan was computed for. */
  expectedCoordinationDigest: 'PTAH_EXPECTED_COORDINATION_DIGEST',
  expectedTargetIdentityDigest: 'PTAH_EXPECTED_TARGET_IDENTITY_DIGEST',
  /** Mutating only: RFC 3339 UTC instants. */
  dispatchNotAfter: 'PTAH_DISPATCH_NOT_AFTER',
  executionNotAfter: 'PTAH_EXECUTION_NOT_AFTER',
  /** Pod terminationGracePeriodSeconds (1..300); required for mutating operations, default 30 otherwise. */
  terminationGraceSeconds: 'PTAH_TERMINATION_GRACE_PERIOD_SECONDS',
  /** Where the runner writes its termination summary (default /dev/termination-log). */
  terminationMessagePath: 'PTAH_TERMINATION_MESSAGE_PATH',
  /** The mounted artifact ConfigMap and the digest the controller pinned (src/shared/artifact.ts). */
  artifactDir: 'PTAH_ARTIFACT_DIR',
  expectedArtifactDigest: 'PTAH_EXPECTED_ARTIFACT_DIGEST',
  /** Schema apply: the projected plan chunks and the digest of the whole plan's bytes. */
  planDir: 'PTAH_PLAN_DIR',
  expectedPlanContentDigest: 'PTAH_EXPECTED_PLAN_CONTENT_DIGEST',
  /** Migration apply: JSON array of {version, checksum} the approval covers, its digest, and the history it was planned on. */
  expectedMigrationSequence: 'PTAH_EXPECTED_MIGRATION_SEQUENCE',
  expectedMigrationSequenceDigest: 'PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST',
  expectedHistoryFingerprint: 'PTAH_EXPECTED_HISTORY_FINGERPRINT',
  /** Mutating only: whole milliseconds the executor waits for the realm's advisory lock (spec.policy.lockTimeout). */
  lockTimeoutMs: 'PTAH_LOCK_TIMEOUT_MS',
  /** Migrations: spec.artifact.format; absent means ptah (src/shared/migration-format.ts). */
  migrationFormat: 'PTAH_MIGRATION_FORMAT',
  /** Migrations: spec.adoption as JSON (src/shared/migration-adoption.ts); absent means no adoption. */
  migrationAdoption: 'PTAH_MIGRATION_ADOPTION',
  /**
   * An artifact from an OCI registry (src/runner/oci): the reference (as the spec writes it for `resolve`, pinned to
   * its digest for the fetch init container), the artifact kind (schema or migrations), the registry's CA (a PEM
   * file, optional) and the directory holding the registry Secret's config.json (optional; docker's own name).
   */
  ociReference: 'PTAH_OCI_REFERENCE',
  ociArtifactKind: 'PTAH_OCI_ARTIFACT_KIND',
  ociCaFile: 'PTAH_OCI_CA_FILE',
  registryConfigDir: 'DOCKER_CONFIG',
  /** resolve: the mounted verification policy and the digest of its text the manager read (src/controller/artifact.ts). */
  verificationPolicyFile: 'PTAH_VERIFICATION_POLICY_FILE',
  expectedVerificationPolicyDigest: 'PTAH_EXPECTED_VERIFICATION_POLICY_DIGEST',
} as const;

/** The longest realm-lock wait a Job may ask for: PtahMigration's 1h maximum, and the executor's own bound. */
export const MAX_LOCK_TIMEOUT_MS = 3_600_000;

export type RunnerEnvName = (typeof RUNNER_ENV)[keyof typeof RUNNER_ENV];

/** Mount paths inside the operation Pod. */
export const JOB_PATHS = {
  artifact: '/artifact',
  registryConfig: '/registry-auth',
  registryCa: '/registry-ca',
  verificationPolicy: '/verification-policy',
  plan: '/plan',
  work: '/work',
  terminationLog: '/dev/termination-log',
} as const;

/**
 * The environment the runner gives its child, the executor (src/executor). Runner-only variables are
 * never passed on; the executor reads only these.
 */
export const EXECUTOR_ENV = {
  dbUrl: 'PTAH_DB_URL',
  devUrl: 'PTAH_DEV_URL',
  operationId: 'PTAH_OPERATION_ID',
  /** The realm; the executor derives its PostgreSQL advisory-lock key from it (src/shared/realm-lock-key). */
  coordinationDigest: 'PTAH_COORDINATION_DIGEST',
  /** A directory holding the verified artifact files (schema.sql, or NNNN_name.up.sql files). */
  artifactDir: 'PTAH_ARTIFACT_DIR',
  /** Schema apply: path of the reconstructed, digest-checked plan document (JSON, SchemaPlanDocument). */
  planFile: 'PTAH_PLAN_FILE',
  /** Migration apply: path of a JSON file holding the approved sequence, [{version, checksum}]. */
  expectedSequenceFile: 'PTAH_EXPECTED_SEQUENCE_FILE',
  /** Migrations: the directory format the artifact is written in (spec.artifact.format; src/shared/migration-format.ts), default ptah. */
  migrationFormat: 'PTAH_MIGRATION_FORMAT',
  /** Migrations: the adoption to read while the history is empty (spec.adoption; src/shared/migration-adoption.ts), as JSON. */
  migrationAdoption: 'PTAH_MIGRATION_ADOPTION',
  expectedHistoryFingerprint: 'PTAH_EXPECTED_HISTORY_FINGERPRINT',
  /** Milliseconds to wait for the realm's advisory lock before refusing (default 30000). */
  lockTimeoutMs: 'PTAH_LOCK_TIMEOUT_MS',
} as const;
