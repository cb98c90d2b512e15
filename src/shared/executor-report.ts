// What the executor (src/executor) reports as one JSON document on stdout, per command. The runner validates
// it and carries the relevant part into its result frame, which the controller reads. Nothing here ever holds
// a credential; drift findings hold categories and counts only, never object names or SQL.

export interface ExecutorError {
  /** Stable machine-readable code, e.g. `unsupported_object`, `connection_failed`, `lock_timeout`. */
  code: string;
  /** A sentence a person can act on. Redacted: never a URL, password or Secret value. */
  message: string;
}

export interface DriftFinding {
  /** e.g. `missing_table`, `extra_column`, `changed_index`. */
  category: string;
  count: number;
}

export interface ObserveReport {
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
  /** The plan grants, revokes or changes row-level security: it always needs an approval, whatever the policy says. */
  privilegeChanging: boolean;
  /** Which statements change privileges, by index, in order. */
  privilegeStatements: number[];
  /** Statements PostgreSQL can only run by rewriting, scanning or locking a table, by index, and why. */
  lockingStatements: { index: number; reason: string }[];
  /** False for a plan of concurrent index builds, run one statement at a time outside a transaction. */
  transactional: boolean;
}

export interface PlanReport {
  command: 'plan';
  error?: ExecutorError;
  outcome?: 'Changes' | 'NoChanges';
  /** Present when outcome is Changes. */
  plan?: SchemaPlanDocument;
  planContentDigest?: string;
  actualStateFingerprint?: string;
}

export interface ApplyReport {
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
  /** Digest of the applied history (version, checksum per row, in order). */
  fingerprint: string;
}

export interface MigrationHistoryReport {
  command: 'migration-history';
  error?: ExecutorError;
  history?: MigrationHistory;
}

export type MigrationRunOutcome = 'applied' | 'up-to-date' | 'failed' | 'partial' | 'unknown';

export interface MigrationRunReport {
  command: 'migration-apply';
  error?: ExecutorError;
  outcome: MigrationRunOutcome;
  /** Files applied by this run, in application order. */
  applied: MigrationFile[];
  /** The approved sequence the run was held to. */
  planned: { version: string; checksum: string }[];
  /** The version whose file failed, when outcome is failed, partial or unknown because of a file. */
  failedVersion?: string;
}

export type ExecutorReport = ObserveReport | PlanReport | ApplyReport | MigrationHistoryReport | MigrationRunReport;
