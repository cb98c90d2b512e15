// What the executor (src/executor) reports as one JSON document on stdout, per command. The runner validates
// it and carries the relevant part into its result frame, which the controller reads. Nothing here ever holds
// a credential; drift findings hold categories and counts only, never object names or SQL.
import type { AdoptionSource } from './migration-adoption.js';
import type { MigrationRepair, RepairResolution } from './migration-repair.js';

export interface ExecutorError {
  /** Stable machine-readable code, e.g. `unsupported_object`, `connection_failed`, `lock_timeout`. */
  code: string;
  /** A sentence a person can act on. Redacted: never a URL, password or Secret value. */
  message: string;
}

/**
 * Executor error codes that are refusals made before the run's first write: a mutating run that ends with one
 * changed nothing, so its frame says mutationStarted false even after the executor started.
 */
export const REFUSED_BEFORE_WRITING = {
  /** Another realm holds the database writer lock (src/executor/writer-lock.ts). */
  databaseHeldByOtherRealm: 'database_held_by_other_realm',
  /** A schema Apply found the target no longer reads as its plan found it (drift since the plan), before any statement. */
  targetChanged: 'target_changed',
} as const;

export function isRefusedBeforeWriting(code: string | undefined): boolean {
  return code !== undefined && (Object.values(REFUSED_BEFORE_WRITING) as string[]).includes(code);
}

/**
 * How the executor knows which physical database it opened. `system-identifier`: the cluster's
 * pg_control_system().system_identifier and the database's OID, equal through every address of the server.
 * `server-address`: where pg_control_system() is not permitted (a managed service), the server address, port
 * and database name the session sees: weaker, since two addresses of one server give two digests.
 */
export const PHYSICAL_IDENTITY_KINDS = ['system-identifier', 'server-address'] as const;
export type PhysicalIdentityKind = (typeof PHYSICAL_IDENTITY_KINDS)[number];

/** Present on every report once the target was opened: a digest, never the raw values. */
export interface PhysicalIdentityFields {
  physicalIdentityDigest?: string;
  physicalIdentityKind?: PhysicalIdentityKind;
}

export interface DriftFinding {
  /** e.g. `missing_table`, `extra_column`, `changed_index`. */
  category: string;
  count: number;
}

export interface ObserveReport extends PhysicalIdentityFields {
  command: 'observe';
  error?: ExecutorError;
  dialect?: 'postgresql';
  drift?: boolean;
  /** Digest of the full (private) drift detail; equal drift gives an equal digest. */
  driftDigest?: string;
  findings?: DriftFinding[];
  /** Fingerprint of the target's actual schema state as the executor reads it. */
  actualStateFingerprint?: string;
}

/** The plan a schema Apply executes, exactly. Its content digest is digest(document) (src/shared/canonical.ts). */
export interface SchemaPlanDocument {
  formatVersion: 1;
  engine: 'postgresql';
  /** Ordered SQL statements. */
  statements: string[];
  statementCount: number;
  destructive: boolean;
  /** Which statements are destructive, by index, and why (e.g. `drop_table`). */
  destructiveStatements: { index: number; reason: string }[];
  /** The target's actual-state fingerprint when the plan was computed; apply refuses if it moved. */
  actualStateFingerprint: string;
  /** Digest of the desired schema source the plan converges to. */
  desiredSchemaDigest: string;
  /**
   * Fingerprint of the state the plan converges to (the desired schema as the executor reads it). Apply checks
   * the target reads exactly so before it commits; the executor refuses a plan without it.
   */
  desiredStateFingerprint: string;
  /**
   * Digest of the catalog's own facts about the desired schema as built, read independently of the executor's
   * model: Apply checks the target's facts match too before it commits.
   */
  desiredCatalogDigest: string;
  /** The plan grants, revokes or changes row-level security: it always needs an approval, whatever the policy says. */
  privilegeChanging: boolean;
  /** Which statements change privileges, by index, in order. */
  privilegeStatements: number[];
  /** Statements PostgreSQL can only run by rewriting, scanning or locking a table, by index, and why. */
  lockingStatements: { index: number; reason: string }[];
  /** False for a plan of concurrent index builds, run one statement at a time outside a transaction. */
  transactional: boolean;
}

export interface PlanReport extends PhysicalIdentityFields {
  command: 'plan';
  error?: ExecutorError;
  outcome?: 'Changes' | 'NoChanges';
  /** Present when outcome is Changes. */
  plan?: SchemaPlanDocument;
  planContentDigest?: string;
  actualStateFingerprint?: string;
}

export interface ApplyReport extends PhysicalIdentityFields {
  command: 'apply';
  error?: ExecutorError;
  /** applied: every statement committed. failed: nothing changed. unknown: may have changed something. */
  outcome: 'applied' | 'failed' | 'unknown';
  planContentDigest?: string;
  statementsExecuted: number;
}

export interface MigrationFile {
  version: string;
  name: string;
  checksum: string;
}

export interface AppliedMigration extends MigrationFile {
  operationId: string;
  appliedAt: string;
}

export interface MigrationHistory {
  applied: AppliedMigration[];
  pending: MigrationFile[];
  /** Versions whose history row says a run started and did not finish. */
  dirty: string[];
  /** Applied versions whose file checksum no longer matches the recorded one. */
  modified: string[];
  /** Pending versions that sort before the highest applied version. */
  outOfOrder: string[];
  /** Applied versions that the artifact no longer holds. */
  missing: string[];
  /** Digest of the applied history (version, checksum per row, in order, and the adoptable files). */
  fingerprint: string;
  /** While nothing is recorded: the files spec.adoption counts as applied, recorded by the first Apply. */
  adoptable?: { from: AdoptionSource; files: MigrationFile[] };
}

export interface MigrationHistoryReport extends PhysicalIdentityFields {
  command: 'migration-history';
  error?: ExecutorError;
  history?: MigrationHistory;
}

export type MigrationRunOutcome = 'applied' | 'up-to-date' | 'failed' | 'partial' | 'unknown';

export interface MigrationRunReport extends PhysicalIdentityFields {
  command: 'migration-apply';
  error?: ExecutorError;
  outcome: MigrationRunOutcome;
  /** Files applied by this run, in application order. */
  applied: MigrationFile[];
  /** The approved sequence the run was held to (a file's version and checksum, or a dirty row's repair). */
  planned: { version: string; checksum: string; repair?: RepairResolution }[];
  /** The version whose file failed, when outcome is failed, partial or unknown because of a file. */
  failedVersion?: string;
  /** The repair an applied repair sequence made. */
  repaired?: MigrationRepair;
}

export type ExecutorReport = ObserveReport | PlanReport | ApplyReport | MigrationHistoryReport | MigrationRunReport;

/**
 * The executor's refusals of a migration artifact's own files as the spec reads them (misnamed files, a version used
 * twice, another tool's markers, statements a file's transaction rules cannot run): the same artifact, spec and
 * executor always get them again.
 */
export const MIGRATION_ARTIFACT_REFUSALS = {
  invalidFile: 'migration_invalid',
  misnamed: 'invalid_migration_name',
  duplicateVersion: 'duplicate_migration_version',
} as const;

/**
 * The executor's refusals of what a schema reading is given that no quick retry mends: a desired schema that does not
 * build, objects outside the supported set (in the desired schema or the target), a difference only the catalog sees.
 * Each needs a person: a new desired schema, or a role, an extension or an object changed on the server.
 */
export const SCHEMA_READING_REFUSALS = {
  desiredInvalid: 'desired_schema_invalid',
  unsupported: 'unsupported_object',
  unmodelled: 'unmodelled_difference',
} as const;

const oneOf = (codes: Record<string, string>) => (code: string): boolean => Object.values(codes).includes(code);
export const isMigrationArtifactRefusal = oneOf(MIGRATION_ARTIFACT_REFUSALS);

/**
 * The executor's refusal of a declared adoption (spec.adoption): the other tool's history table is missing, dirty,
 * or names files the artifact lacks. A person mends it in the database, so it is read again at spec.interval.
 */
export const ADOPTION_REFUSED = 'adoption_refused';
export const isSchemaReadingRefusal = oneOf(SCHEMA_READING_REFUSALS);
