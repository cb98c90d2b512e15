// The runner protocol: what an operation Job's runner reports and how the controller reads it back.
//
// Result frame, the runner's last write to stdout, in one write:
//
//   PTAH_RUNNER_RESULT_V1 <len> <sha256hex>\n
//   <payload: exactly <len> bytes of compact one-line JSON (canonical JSON of a RunnerResult)>\n
//   PTAH_RUNNER_RESULT_END_V1\n
//
// The kubelet merges stdout and stderr line by line, so whole stderr lines may sit between header, payload and
// footer: the payload is the complete line whose byte length and SHA-256 match the header. The last valid frame
// in a log wins; a frame is accepted only for the operation and operation ID the reader expects.
//
// Termination summary, written to the termination-message file before the frame (the kubelet keeps it when the
// log is gone): one line `PTAH_RUNNER_SUMMARY_V1 <canonical JSON>\n`, at most 2048 bytes, naming the frame by
// its payload digest. It may stand in for a migration Apply's frame only when the log holds none (see
// summaryStandsIn), and it never says more than the frame would.
import { ADOPTION_SOURCES } from './migration-adoption.js';
import { isRepairResolution, REPAIR_RESOLUTIONS, type MigrationRepair, type RepairResolution } from './migration-repair.js';
import { canonicalJson, digest, isDigest, sha256Digest, sha256Hex } from './canonical.js';
import {
  isRefusedBeforeWriting, PHYSICAL_IDENTITY_KINDS,
  type DriftFinding, type MigrationFile, type MigrationHistory, type MigrationRunOutcome, type PhysicalIdentityFields, type SchemaPlanDocument,
} from './executor-report.js';
import { isRunnerOperation, MUTATING_RUNNER_OPERATIONS, REGISTRY_ONLY_RUNNER_OPERATIONS, type RunnerOperation } from './runner-env.js';
import { parseReference, ReferenceError, SHA256_DIGEST } from './oci/reference.js';

/** The protocol this build speaks. The manager passes its own in PTAH_RUNNER_PROTOCOL_VERSION. */
export const RUNNER_PROTOCOL_VERSION = 1;

export const FRAME_MARKER = 'PTAH_RUNNER_RESULT_V1';
export const FRAME_END_MARKER = 'PTAH_RUNNER_RESULT_END_V1';
export const SUMMARY_MARKER = 'PTAH_RUNNER_SUMMARY_V1';

/** Largest payload a frame may carry: an 8 MiB plan with room for JSON escaping and the rest of the result. */
export const MAX_FRAME_PAYLOAD_BYTES = 16 * 1024 * 1024;
/** The kubelet keeps 4 KiB of a container's termination message; half leaves room for its own prefix. */
export const MAX_SUMMARY_BYTES = 2048;
export const MAX_ERROR_MESSAGE_LENGTH = 4096;
export const MAX_DRIFT_FINDINGS = 64;

/** How far interleaved lines may separate header from payload, and payload from footer. */
const INTERLEAVE_WINDOW_BYTES = 64 * 1024;
/** Total interleaved bytes the parser walks across all candidate frames before it gives up. */
const SEARCH_BUDGET_BYTES = 64 * INTERLEAVE_WINDOW_BYTES;
const MAX_HEADER_BYTES = 96;

/** Bytes of a container log's tail a reader must hold to be sure a whole frame is in it. */
export const MAX_RESULT_LOG_BYTES =
  MAX_HEADER_BYTES + INTERLEAVE_WINDOW_BYTES + MAX_FRAME_PAYLOAD_BYTES + 1 + INTERLEAVE_WINDOW_BYTES + FRAME_END_MARKER.length + 1;

/** Stable error codes the runner itself frames. An executor's own codes are carried through unchanged. */
export const RUNNER_ERROR = {
  // Refusals: the executor never started (childExitCode -1).
  protocolMismatch: 'runner_protocol_mismatch',
  executorIdentityMismatch: 'executor_identity_mismatch',
  missingInput: 'missing_input',
  invalidInput: 'invalid_input',
  invalidTarget: 'invalid_target',
  coordinationBindingMismatch: 'coordination_binding_mismatch',
  targetBindingMismatch: 'target_binding_mismatch',
  dispatchDeadlineExpired: 'dispatch_deadline_expired',
  executionDeadlineExpired: 'execution_deadline_expired',
  invalidPlan: 'invalid_plan',
  planDigestMismatch: 'plan_digest_mismatch',
  invalidArtifact: 'invalid_artifact',
  artifactDigestMismatch: 'artifact_digest_mismatch',
  invalidMigrationSequence: 'invalid_migration_sequence',
  migrationSequenceDigestMismatch: 'migration_sequence_digest_mismatch',
  preparationFailed: 'preparation_failed',
  executorStartFailed: 'executor_start_failed',
  // A resolve's refusals (it starts no executor): the registry's answer, or the verification policy's verdict.
  registryUnreachable: 'registry_unreachable',
  registryUnauthorized: 'registry_unauthorized',
  registryProtocolError: 'registry_protocol_error',
  artifactNotFound: 'artifact_not_found',
  artifactTooLarge: 'artifact_too_large',
  registryDigestMismatch: 'registry_digest_mismatch',
  artifactTypeMismatch: 'artifact_type_mismatch',
  artifactRefused: 'artifact_refused',
  verificationPolicyMismatch: 'verification_policy_mismatch',
  // Either side of the start: a stop request before the start is a refusal, after it a stopped run.
  runnerTerminated: 'runner_terminated',
  // After the executor started.
  executionDeadlineReached: 'execution_deadline_reached',
  executorKilled: 'executor_killed',
  executorFailed: 'executor_failed',
  reportTruncated: 'report_truncated',
  invalidReport: 'invalid_report',
  reportContainsSecret: 'report_contains_secret',
  planTooLarge: 'plan_too_large',
  resultTooLarge: 'result_too_large',
  internalError: 'internal_error',
} as const;

export interface RunnerError {
  /** `^[a-z][a-z0-9_]{0,63}$`. */
  code: string;
  /** Redacted, one line, at most 4096 characters. */
  message: string;
}

/** Bytes of the executor's output the runner did not keep (it keeps a bounded tail of each stream). */
export interface OutputTruncation {
  stdout: boolean;
  stdoutBytesDropped: number;
  stderr: boolean;
  stderrBytesDropped: number;
}

export interface RunnerResultBase<O extends RunnerOperation> extends PhysicalIdentityFields {
  protocolVersion: number;
  operation: O;
  operationId: string;
  /** The executor's exit status, 128 + signal number when a signal ended it, -1 when it never started. */
  childExitCode: number;
  /** The realm the claim named, echoed once checked. */
  coordinationDigest?: string;
  /** targetIdentityDigest of the URL the runner was given (src/shared/target-identity.ts). */
  targetIdentityDigest?: string;
  /** Mutating operations only: the database may have been changed. Absent means false. */
  mutationStarted?: boolean;
  /** Mutating operations only: what the run did is not known. Implies mutationStarted. */
  uncertain?: boolean;
  error?: RunnerError;
  truncation?: OutputTruncation;
}

export interface ObserveContent {
  dialect?: 'postgresql';
  drift?: boolean;
  driftDigest?: string;
  findings?: DriftFinding[];
  actualStateFingerprint?: string;
}

export interface PlanContent {
  planOutcome?: 'Changes' | 'NoChanges';
  /** Present exactly when planOutcome is Changes. */
  plan?: SchemaPlanDocument;
  /** digest(plan); present exactly when plan is. */
  planContentDigest?: string;
  actualStateFingerprint?: string;
}

export interface ApplyContent {
  planContentDigest?: string;
  statementsExecuted?: number;
}

export interface MigrationHistoryContent {
  migrationHistory?: MigrationHistory;
}

/** The executor's run report without its command and error. */
export interface MigrationRun {
  outcome: MigrationRunOutcome;
  applied: MigrationFile[];
  planned: ExpectedMigration[];
  /** The version whose file failed, when a file is why the run failed, stopped partway or ended unknown. */
  failedVersion?: string;
  /** A repair sequence's repair, made: present exactly when an applied run's sequence is a repair. */
  repaired?: MigrationRepair;
}

export interface MigrationRunContent {
  migrationRun?: MigrationRun;
}

/**
 * What a resolve found (docs/oci-artifacts.md): the artifact the reference names now, pinned to its manifest digest,
 * with what every later step binds and what the verification policy was satisfied by.
 */
export interface ResolvedArtifact {
  /** `registry/repository@sha256:…`: the only reference a later step reads. */
  pinnedReference: string;
  digest: string;
  /** artifactDigest of the files (src/shared/artifact.ts), as a ConfigMap of the same files has. */
  contentDigest: string;
  artifactType: string;
  /** The digest of the policy text the artifact was held to. */
  verificationPolicyDigest: string;
  /** The policy keys whose signature over `digest` verified, sorted. */
  verifiedKeys: string[];
  files: number;
  bytes: number;
}

export interface ResolveContent {
  resolvedArtifact?: ResolvedArtifact;
}

export interface RunnerResultByOperation {
  observe: RunnerResultBase<'observe'> & ObserveContent;
  plan: RunnerResultBase<'plan'> & PlanContent;
  apply: RunnerResultBase<'apply'> & ApplyContent;
  'migration-history': RunnerResultBase<'migration-history'> & MigrationHistoryContent;
  'migration-apply': RunnerResultBase<'migration-apply'> & MigrationRunContent;
  resolve: RunnerResultBase<'resolve'> & ResolveContent;
}

export type RunnerResult<O extends RunnerOperation = RunnerOperation> = RunnerResultByOperation[O];

/**
 * One entry of the sequence a migration Apply is approved for: a file to run, or, as a sequence's only entry, the
 * repair of that version's dirty row (migration-repair.ts), whose checksum is the row's.
 */
export interface ExpectedMigration {
  version: string;
  checksum: string;
  repair?: RepairResolution;
}

/** The entry as the sequence carries it: a file's version and checksum, and a repair's resolution when it is one. */
export const sequenceEntry = ({ version, checksum, repair }: ExpectedMigration): ExpectedMigration =>
  (repair === undefined ? { version, checksum } : { version, checksum, repair });

/** The repair a sequence approves, when it is a repair sequence (its only entry names one). */
export function sequenceRepair(sequence: readonly ExpectedMigration[]): MigrationRepair | undefined {
  const [only] = sequence;
  return sequence.length === 1 && only!.repair !== undefined ? { version: only!.version, resolution: only!.repair } : undefined;
}

/** Why the entries cannot be one approved sequence, or undefined: a repair is always a sequence's only entry. */
export function sequenceShapeProblem(sequence: readonly ExpectedMigration[]): Problem {
  if (new Set(sequence.map((e) => e.version)).size !== sequence.length) return 'names a version twice';
  if (sequence.length > 1 && sequence.some((e) => e.repair !== undefined)) return 'mixes a repair with other entries; a repair is a sequence\'s only entry';
  return undefined;
}

/** The digest the Job carries in PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST for a sequence. */
export function expectedSequenceDigest(sequence: readonly ExpectedMigration[]): string {
  return digest(sequence.map(sequenceEntry));
}

/** What a migration run's outcome says about the database: the only source of a migration Apply's flags. */
export function migrationRunFlags(outcome: MigrationRunOutcome): { mutationStarted: boolean; uncertain: boolean } {
  switch (outcome) {
    case 'applied':
      return { mutationStarted: true, uncertain: false };
    case 'up-to-date':
    case 'failed':
      return { mutationStarted: false, uncertain: false };
    case 'partial':
    case 'unknown':
      return { mutationStarted: true, uncertain: true };
  }
}

const SUCCESSFUL_MIGRATION_OUTCOMES: ReadonlySet<string> = new Set(['applied', 'up-to-date']);
const MIGRATION_OUTCOMES: ReadonlySet<string> = new Set(['applied', 'up-to-date', 'failed', 'partial', 'unknown']);

// ---------------------------------------------------------------------------------------------------------
// Validation. Every check returns the first problem as a sentence naming a field, never a payload value.

type Problem = string | undefined;
type JsonObject = Record<string, unknown>;

const OPERATION_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;
const CODE = /^[a-z][a-z0-9_]{0,63}$/;
/** Migration versions are file-name stems; bounded so a summary always fits its 2 KiB. */
const VERSION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function isOperationId(value: unknown): value is string {
  return typeof value === 'string' && OPERATION_ID.test(value);
}

export function isErrorCode(value: unknown): value is string {
  return typeof value === 'string' && CODE.test(value);
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function extraKey(value: JsonObject, allowed: readonly string[], what: string): Problem {
  const extra = Object.keys(value).find((k) => value[k] !== undefined && !allowed.includes(k));
  // Named, but bounded: the key comes from whoever wrote the document.
  return extra === undefined ? undefined : `${what} holds a field this protocol does not define (${JSON.stringify(extra.slice(0, 64))})`;
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isBoundedString(value: unknown, max: number): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= max && !/[\u0000-\u001f\u007f]/.test(value);
}

function first(...checks: (() => Problem)[]): Problem {
  for (const check of checks) {
    const problem = check();
    if (problem) return problem;
  }
  return undefined;
}

function eachProblem(items: unknown, what: string, check: (item: unknown, at: string) => Problem): Problem {
  if (!Array.isArray(items)) return `${what} is not a list`;
  for (let i = 0; i < items.length; i++) {
    const problem = check(items[i], `${what}[${i}]`);
    if (problem) return problem;
  }
  return undefined;
}

function digestProblem(value: unknown, what: string): Problem {
  return isDigest(value) ? undefined : `${what} is not a sha256: digest`;
}

/** Both identity fields or neither: a digest names a database only together with how it was learned. */
export function physicalIdentityProblem(value: PhysicalIdentityFields): Problem {
  const { physicalIdentityDigest: identity, physicalIdentityKind: kind } = value;
  if ((identity === undefined) !== (kind === undefined)) return 'physicalIdentityDigest and physicalIdentityKind come together';
  if (identity === undefined) return undefined;
  return first(
    () => digestProblem(identity, 'physicalIdentityDigest'),
    () => ((PHYSICAL_IDENTITY_KINDS as readonly unknown[]).includes(kind) ? undefined : 'physicalIdentityKind is not a known kind'),
  );
}

function errorProblem(value: unknown): Problem {
  if (!isObject(value)) return 'error is not an object';
  return first(
    () => extraKey(value, ['code', 'message'], 'error'),
    () => (isErrorCode(value.code) ? undefined : 'error.code is not a lowercase snake_case code'),
    () => (isBoundedString(value.message, MAX_ERROR_MESSAGE_LENGTH) ? undefined : 'error.message is empty, too long or spans lines'),
  );
}

function truncationProblem(value: unknown): Problem {
  if (!isObject(value)) return 'truncation is not an object';
  return first(
    () => extraKey(value, ['stdout', 'stdoutBytesDropped', 'stderr', 'stderrBytesDropped'], 'truncation'),
    () => (isCount(value.stdoutBytesDropped) && isCount(value.stderrBytesDropped) ? undefined : 'truncation byte counts are not counts'),
    () => (value.stdout === (value.stdoutBytesDropped as number) > 0 && value.stderr === (value.stderrBytesDropped as number) > 0
      ? undefined
      : 'truncation flags disagree with the dropped byte counts'),
    () => (value.stdout || value.stderr ? undefined : 'truncation is present but nothing was dropped'),
  );
}

function findingProblem(value: unknown, at: string): Problem {
  if (!isObject(value)) return `${at} is not an object`;
  return first(
    () => extraKey(value, ['category', 'count'], at),
    () => (isErrorCode(value.category) ? undefined : `${at}.category is not a lowercase snake_case category`),
    () => (isCount(value.count) && value.count > 0 ? undefined : `${at}.count is not a positive count`),
  );
}

/** Observe content; `complete` when the run succeeded and every field must be present. */
export function observeContentProblem(content: ObserveContent, complete: boolean): Problem {
  const { dialect, drift, driftDigest, findings, actualStateFingerprint } = content;
  if (complete && [dialect, drift, driftDigest, findings, actualStateFingerprint].some((v) => v === undefined)) {
    return 'a successful observe needs dialect, drift, driftDigest, findings and actualStateFingerprint';
  }
  return first(
    () => (dialect === undefined || dialect === 'postgresql' ? undefined : 'dialect is not postgresql'),
    () => (drift === undefined || typeof drift === 'boolean' ? undefined : 'drift is not a boolean'),
    () => (driftDigest === undefined ? undefined : digestProblem(driftDigest, 'driftDigest')),
    () => (actualStateFingerprint === undefined ? undefined : digestProblem(actualStateFingerprint, 'actualStateFingerprint')),
    () => (findings === undefined ? undefined : eachProblem(findings, 'findings', findingProblem)),
    () => (findings !== undefined && findings.length > MAX_DRIFT_FINDINGS ? `findings holds more than ${MAX_DRIFT_FINDINGS} categories` : undefined),
    () => (findings !== undefined && new Set(findings.map((f) => f.category)).size !== findings.length ? 'findings repeats a category' : undefined),
    () => (findings !== undefined && typeof drift === 'boolean' && drift !== findings.length > 0
      ? 'drift disagrees with findings (drift means at least one finding)'
      : undefined),
  );
}

const PLAN_DOCUMENT_KEYS = [
  'formatVersion', 'engine', 'statements', 'statementCount', 'destructive', 'destructiveStatements', 'actualStateFingerprint', 'desiredSchemaDigest',
  'desiredStateFingerprint', 'desiredCatalogDigest', 'privilegeChanging', 'privilegeStatements', 'lockingStatements', 'transactional',
] as const;

/** Statement indexes: counts naming a statement of the plan, strictly increasing. */
function statementIndexesProblem(indexes: unknown[], statementCount: number, at: string): Problem {
  if (!indexes.every((index) => isCount(index) && index < statementCount)) return `${at} names an index that is no statement`;
  return (indexes as number[]).every((index, i) => i === 0 || index > (indexes as number[])[i - 1]!) ? undefined : `${at} is not in statement order`;
}

/** A list of {index, reason} entries naming statements in order, each reason a snake_case word. */
function classifiedStatementsProblem(value: unknown, statementCount: number, at: string): Problem {
  return first(
    () => eachProblem(value, at, (entry, where) => {
      if (!isObject(entry)) return `${where} is not an object`;
      return first(
        () => extraKey(entry, ['index', 'reason'], where),
        () => (isErrorCode(entry.reason) ? undefined : `${where}.reason is not a lowercase snake_case reason`),
      );
    }),
    () => statementIndexesProblem((value as { index: unknown }[]).map((entry) => entry.index), statementCount, at),
  );
}

/** A SchemaPlanDocument, strictly: a plan is executed exactly as written, so no field may be unknown. */
export function schemaPlanProblem(value: unknown): Problem {
  if (!isObject(value)) return 'plan is not an object';
  const statements = value.statements;
  return first(
    () => extraKey(value, PLAN_DOCUMENT_KEYS, 'plan'),
    () => (value.formatVersion === 1 ? undefined : 'plan.formatVersion is not 1'),
    () => (value.engine === 'postgresql' ? undefined : 'plan.engine is not postgresql'),
    () => (Array.isArray(statements) && statements.length > 0 && statements.every((s) => typeof s === 'string' && s.trim() !== '')
      ? undefined
      : 'plan.statements is not a non-empty list of statements'),
    () => (value.statementCount === (statements as unknown[]).length ? undefined : 'plan.statementCount disagrees with plan.statements'),
    () => classifiedStatementsProblem(value.destructiveStatements, (statements as unknown[]).length, 'plan.destructiveStatements'),
    () => (value.destructive === (value.destructiveStatements as unknown[]).length > 0
      ? undefined
      : 'plan.destructive disagrees with plan.destructiveStatements'),
    () => digestProblem(value.actualStateFingerprint, 'plan.actualStateFingerprint'),
    () => digestProblem(value.desiredSchemaDigest, 'plan.desiredSchemaDigest'),
    () => digestProblem(value.desiredStateFingerprint, 'plan.desiredStateFingerprint'),
    () => digestProblem(value.desiredCatalogDigest, 'plan.desiredCatalogDigest'),
    () => (Array.isArray(value.privilegeStatements) ? statementIndexesProblem(value.privilegeStatements, (statements as unknown[]).length, 'plan.privilegeStatements') : 'plan.privilegeStatements is not a list'),
    () => (value.privilegeChanging === (value.privilegeStatements as unknown[]).length > 0 ? undefined : 'plan.privilegeChanging disagrees with plan.privilegeStatements'),
    () => classifiedStatementsProblem(value.lockingStatements, (statements as unknown[]).length, 'plan.lockingStatements'),
    () => (typeof value.transactional === 'boolean' ? undefined : 'plan.transactional is not a boolean'),
  );
}

export function planContentProblem(content: PlanContent, complete: boolean): Problem {
  const { planOutcome, plan, planContentDigest, actualStateFingerprint } = content;
  if (complete && planOutcome === undefined) return 'a successful plan needs planOutcome';
  return first(
    () => (planOutcome === undefined || planOutcome === 'Changes' || planOutcome === 'NoChanges' ? undefined : 'planOutcome is not Changes or NoChanges'),
    () => ((planOutcome === 'Changes') === (plan !== undefined) ? undefined : 'a plan document is present exactly when planOutcome is Changes'),
    () => ((plan === undefined) === (planContentDigest === undefined) ? undefined : 'planContentDigest is present exactly when the plan is'),
    () => (plan === undefined ? undefined : schemaPlanProblem(plan)),
    () => (planContentDigest === undefined || planContentDigest === digestOrUndefined(plan) ? undefined : 'planContentDigest is not the digest of the plan'),
    () => (actualStateFingerprint === undefined ? undefined : digestProblem(actualStateFingerprint, 'actualStateFingerprint')),
  );
}

/** A value with no canonical form (a lone UTF-16 surrogate) has no digest to match. */
function digestOrUndefined(value: unknown): string | undefined {
  try {
    return digest(value);
  } catch {
    return undefined;
  }
}

export function applyContentProblem(content: ApplyContent, complete: boolean): Problem {
  if (complete && (content.planContentDigest === undefined || content.statementsExecuted === undefined)) {
    return 'a successful apply needs planContentDigest and statementsExecuted';
  }
  return first(
    () => (content.planContentDigest === undefined ? undefined : digestProblem(content.planContentDigest, 'planContentDigest')),
    () => (content.statementsExecuted === undefined || isCount(content.statementsExecuted) ? undefined : 'statementsExecuted is not a count'),
  );
}

function versionListProblem(value: unknown, what: string): Problem {
  return eachProblem(value, what, (v, at) => (typeof v === 'string' && VERSION.test(v) ? undefined : `${at} is not a migration version`));
}

/** An entry of an approved sequence: a file's version and checksum, and a repair's resolution when it is one. */
function plannedEntryProblem(value: unknown, at: string): Problem {
  return first(
    () => migrationFileProblem(value, at, ['version', 'checksum', 'repair']),
    () => {
      const { repair } = value as Record<string, unknown>;
      return repair === undefined || isRepairResolution(repair) ? undefined : `${at}.repair is not one of ${REPAIR_RESOLUTIONS.join(', ')}`;
    },
  );
}

function migrationFileProblem(value: unknown, at: string, keys: readonly string[] = ['version', 'name', 'checksum']): Problem {
  if (!isObject(value)) return `${at} is not an object`;
  return first(
    () => extraKey(value, keys, at),
    () => (typeof value.version === 'string' && VERSION.test(value.version) ? undefined : `${at}.version is not a migration version`),
    () => (!keys.includes('name') || isBoundedString(value.name, 255) ? undefined : `${at}.name is not a file name`),
    () => (isBoundedString(value.checksum, 128) ? undefined : `${at}.checksum is not a checksum`),
  );
}

export function migrationHistoryProblem(value: unknown): Problem {
  if (!isObject(value)) return 'migrationHistory is not an object';
  return first(
    () => extraKey(value, ['applied', 'pending', 'dirty', 'modified', 'outOfOrder', 'missing', 'fingerprint', 'adoptable'], 'migrationHistory'),
    () => eachProblem(value.applied, 'migrationHistory.applied', (row, at) => first(
      () => migrationFileProblem(row, at, ['version', 'name', 'checksum', 'operationId', 'appliedAt']),
      () => (typeof (row as JsonObject).operationId === 'string' && ((row as JsonObject).operationId as string).length <= 256
        ? undefined
        : `${at}.operationId is not a string`),
      () => (isBoundedString((row as JsonObject).appliedAt, 64) ? undefined : `${at}.appliedAt is not a time`),
    )),
    () => eachProblem(value.pending, 'migrationHistory.pending', (row, at) => migrationFileProblem(row, at)),
    () => versionListProblem(value.dirty, 'migrationHistory.dirty'),
    () => versionListProblem(value.modified, 'migrationHistory.modified'),
    () => versionListProblem(value.outOfOrder, 'migrationHistory.outOfOrder'),
    () => versionListProblem(value.missing, 'migrationHistory.missing'),
    () => digestProblem(value.fingerprint, 'migrationHistory.fingerprint'),
    () => (value.adoptable === undefined ? undefined : adoptableProblem(value.adoptable)),
  );
}

function adoptableProblem(value: unknown): Problem {
  if (!isObject(value)) return 'migrationHistory.adoptable is not an object';
  return first(
    () => extraKey(value, ['from', 'files'], 'migrationHistory.adoptable'),
    () => ((ADOPTION_SOURCES as readonly unknown[]).includes(value.from) ? undefined : 'migrationHistory.adoptable.from is not an adoption source'),
    () => eachProblem(value.files, 'migrationHistory.adoptable.files', (row, at) => migrationFileProblem(row, at)),
    () => ((value.files as unknown[]).length > 0 ? undefined : 'migrationHistory.adoptable lists no file'),
  );
}

/** A migration run on its own terms: outcome, files applied (a prefix of the planned sequence), the plan. */
export function migrationRunProblem(value: unknown): Problem {
  if (!isObject(value)) return 'migrationRun is not an object';
  const applied = value.applied as MigrationFile[];
  const planned = value.planned as ExpectedMigration[];
  let repair: MigrationRepair | undefined;
  return first(
    () => extraKey(value, ['outcome', 'applied', 'planned', 'failedVersion', 'repaired'], 'migrationRun'),
    () => (MIGRATION_OUTCOMES.has(value.outcome as string) ? undefined : 'migrationRun.outcome is not a known outcome'),
    () => (value.failedVersion === undefined || (typeof value.failedVersion === 'string' && VERSION.test(value.failedVersion))
      ? undefined
      : 'migrationRun.failedVersion is not a migration version'),
    () => (value.failedVersion !== undefined && SUCCESSFUL_MIGRATION_OUTCOMES.has(value.outcome as string)
      ? 'a successful run names no failed version'
      : undefined),
    () => eachProblem(value.applied, 'migrationRun.applied', (row, at) => migrationFileProblem(row, at)),
    () => eachProblem(value.planned, 'migrationRun.planned', (row, at) => plannedEntryProblem(row, at)),
    () => sequenceShapeProblem(planned),
    () => {
      repair = sequenceRepair(planned);
      if (value.repaired === undefined) return repair && value.outcome === 'applied' ? 'an applied repair run names the repair it made (migrationRun.repaired)' : undefined;
      if (!repair || value.outcome !== 'applied') return 'migrationRun.repaired is reported only by an applied run of a repair sequence';
      return canonicalJson(value.repaired) === canonicalJson(repair) ? undefined : 'migrationRun.repaired is not the repair its sequence approved';
    },
    () => (applied.every((file, i) => planned[i]?.version === file.version && planned[i]?.checksum === file.checksum)
      ? undefined
      : 'migrationRun.applied is not a prefix of migrationRun.planned'),
    () => {
      switch (value.outcome) {
        case 'applied':
          if (repair) return applied.length === 0 ? undefined : 'a repair run applies no migration';
          return applied.length === planned.length && applied.length > 0 ? undefined : 'an applied run must have applied every planned migration';
        case 'up-to-date':
        case 'failed':
          return applied.length === 0 ? undefined : `a run that ${value.outcome === 'failed' ? 'failed' : 'was up to date'} cannot list applied migrations`;
        default:
          return undefined;
      }
    },
  );
}

const RESULT_KEYS = [
  'protocolVersion', 'operation', 'operationId', 'childExitCode', 'coordinationDigest', 'targetIdentityDigest',
  'physicalIdentityDigest', 'physicalIdentityKind', 'mutationStarted', 'uncertain', 'error', 'truncation',
] as const;

const CONTENT_KEYS: Record<RunnerOperation, readonly string[]> = {
  observe: ['dialect', 'drift', 'driftDigest', 'findings', 'actualStateFingerprint'],
  plan: ['planOutcome', 'plan', 'planContentDigest', 'actualStateFingerprint'],
  apply: ['planContentDigest', 'statementsExecuted'],
  'migration-history': ['migrationHistory'],
  'migration-apply': ['migrationRun'],
  resolve: ['resolvedArtifact'],
};

/** Content an errored frame may still carry, because it says what a mutating run did. */
const CONTENT_ON_ERROR: Record<RunnerOperation, readonly string[]> = {
  observe: [],
  plan: [],
  apply: ['planContentDigest', 'statementsExecuted'],
  'migration-history': [],
  'migration-apply': ['migrationRun'],
  resolve: [],
};

/**
 * The first way `value` breaks the result invariants, or undefined for a valid RunnerResult. The writer refuses
 * to emit, and the reader to accept, a result that breaks any of them.
 */
export function resultProblem(value: unknown): Problem {
  if (!isObject(value)) return 'the result is not a JSON object';
  if (value.protocolVersion !== RUNNER_PROTOCOL_VERSION) return `protocolVersion is not ${RUNNER_PROTOCOL_VERSION}`;
  if (!isRunnerOperation(value.operation)) return 'operation is not a runner operation';
  const operation = value.operation;
  const mutating = MUTATING_RUNNER_OPERATIONS.has(operation);
  const hasError = value.error !== undefined;
  const started = value.childExitCode !== -1;
  const content = value as AnyContent;
  return first(
    () => extraKey(value, [...RESULT_KEYS, ...CONTENT_KEYS[operation]], 'the result'),
    () => (isOperationId(value.operationId) ? undefined : 'operationId is not a valid operation ID'),
    () => (Number.isSafeInteger(value.childExitCode) && (value.childExitCode as number) >= -1 && (value.childExitCode as number) <= 255
      ? undefined
      : 'childExitCode is not -1 or an exit status'),
    () => (value.coordinationDigest === undefined ? undefined : digestProblem(value.coordinationDigest, 'coordinationDigest')),
    () => (value.targetIdentityDigest === undefined ? undefined : digestProblem(value.targetIdentityDigest, 'targetIdentityDigest')),
    () => physicalIdentityProblem(value),
    () => (!started && value.physicalIdentityDigest !== undefined ? 'a physical identity although the executor never started' : undefined),
    () => (hasError ? errorProblem(value.error) : undefined),
    () => (value.truncation === undefined ? undefined : truncationProblem(value.truncation)),
    () => (!hasError && (value.truncation as OutputTruncation | undefined)?.stdout ? 'a successful result cannot have lost its report' : undefined),
    () => (REGISTRY_ONLY_RUNNER_OPERATIONS.has(operation) && started ? `${operation} starts no executor, so its childExitCode is -1` : undefined),
    () => (hasError || value.childExitCode === 0 || (operation === 'migration-apply' && started) || REGISTRY_ONLY_RUNNER_OPERATIONS.has(operation)
      ? undefined
      : 'a successful result needs childExitCode 0'),
    () => databaseNamesProblem(value, operation, hasError, 'result'),
    () => (hasError ? extraKeyOnError(value, operation) : undefined),
    () => flagsProblem(value, operation, mutating, hasError, started),
    () => contentProblem(operation, content, !hasError),
  );
}

type AnyContent = ObserveContent & PlanContent & ApplyContent & MigrationHistoryContent & MigrationRunContent & ResolveContent;

/**
 * A successful database operation names the realm and the database it was given; an operation that opens no
 * database names neither, whatever its outcome.
 */
function databaseNamesProblem(value: JsonObject, operation: RunnerOperation, hasError: boolean, what: 'result' | 'summary'): Problem {
  const named = value.coordinationDigest !== undefined || value.targetIdentityDigest !== undefined;
  if (REGISTRY_ONLY_RUNNER_OPERATIONS.has(operation)) return named ? `${operation} opens no database, so its ${what} names none` : undefined;
  if (hasError || (value.coordinationDigest !== undefined && value.targetIdentityDigest !== undefined)) return undefined;
  return `a successful ${what} needs coordinationDigest and targetIdentityDigest`;
}

/** The first way a resolve's finding breaks its invariants. */
export function resolvedArtifactProblem(value: unknown): Problem {
  if (!isObject(value)) return 'resolvedArtifact is not an object';
  const { pinnedReference, digest, contentDigest, artifactType, verificationPolicyDigest, verifiedKeys, files, bytes } = value;
  return first(
    () => extraKey(value, ['pinnedReference', 'digest', 'contentDigest', 'artifactType', 'verificationPolicyDigest', 'verifiedKeys', 'files', 'bytes'], 'resolvedArtifact'),
    () => (typeof digest === 'string' && SHA256_DIGEST.test(digest) ? undefined : 'resolvedArtifact.digest is not a sha256 digest'),
    () => digestProblem(contentDigest, 'resolvedArtifact.contentDigest'),
    () => digestProblem(verificationPolicyDigest, 'resolvedArtifact.verificationPolicyDigest'),
    () => {
      try {
        const reference = parseReference(typeof pinnedReference === 'string' ? pinnedReference : '');
        return reference.tag === undefined && reference.digest === digest ? undefined : 'resolvedArtifact.pinnedReference is not pinned to its digest alone';
      } catch (e) {
        if (e instanceof ReferenceError) return `resolvedArtifact.pinnedReference: ${e.message}`;
        throw e;
      }
    },
    () => (typeof artifactType === 'string' && artifactType.length > 0 && artifactType.length <= 255 ? undefined : 'resolvedArtifact.artifactType is not a media type'),
    () => (Array.isArray(verifiedKeys) && verifiedKeys.length <= 16 && verifiedKeys.every((k, i) => typeof k === 'string' && k.length > 0 && k.length <= 63 && (i === 0 || k > verifiedKeys[i - 1]))
      ? undefined
      : 'resolvedArtifact.verifiedKeys is not a sorted list of key names'),
    () => (isCount(files) && isCount(bytes) ? undefined : 'resolvedArtifact.files or bytes is not a count'),
  );
}

function extraKeyOnError(value: JsonObject, operation: RunnerOperation): Problem {
  const forbidden = CONTENT_KEYS[operation].filter((k) => !CONTENT_ON_ERROR[operation].includes(k));
  return forbidden.some((k) => value[k] !== undefined) ? `an errored ${operation} result carries content only a successful one may` : undefined;
}

function flagsProblem(value: JsonObject, operation: RunnerOperation, mutating: boolean, hasError: boolean, started: boolean): Problem {
  const { mutationStarted, uncertain } = value;
  if (!mutating) return mutationStarted === undefined && uncertain === undefined ? undefined : `${operation} is read-only and carries no mutation flags`;
  if ((mutationStarted !== undefined && typeof mutationStarted !== 'boolean') || (uncertain !== undefined && typeof uncertain !== 'boolean')) {
    return 'mutationStarted and uncertain are not booleans';
  }
  const isStarted = mutationStarted === true;
  const isUncertain = uncertain === true;
  if (isUncertain && !isStarted) return 'uncertain without mutationStarted';
  if (!hasError && isUncertain) return 'a successful result cannot be uncertain';
  if (!started && isStarted) return 'mutationStarted although the executor never started';
  const run = (value as MigrationRunContent).migrationRun;
  const code = hasError ? (value.error as RunnerError).code : undefined;
  if (started && isRefusedBeforeWriting(code)) {
    if (isStarted) return `${code} is a refusal before any write, so nothing may have started`;
    if (operation === 'migration-apply' && run?.outcome !== 'failed') return `${code} needs a failed migration run`;
    if (operation === 'apply' && (value as ApplyContent).statementsExecuted !== undefined && (value as ApplyContent).statementsExecuted !== 0) {
      return `${code} is a refusal before any write, so no statement may have run`;
    }
    return undefined;
  }
  if (operation === 'migration-apply' && run !== undefined && MIGRATION_OUTCOMES.has(run.outcome)) {
    if (!started) return 'a migration run report although the executor never started';
    const flags = migrationRunFlags(run.outcome);
    if (flags.mutationStarted !== isStarted || flags.uncertain !== isUncertain) return 'the mutation flags disagree with the migration run outcome';
    if (hasError === SUCCESSFUL_MIGRATION_OUTCOMES.has(run.outcome)) return 'error disagrees with the migration run outcome';
    return undefined;
  }
  // Without a run report (or for a schema apply) only the start decides: a started run that erred is uncertain.
  if (started !== isStarted) return 'mutationStarted disagrees with whether the executor started';
  if (started && hasError !== isUncertain) return 'a started run is uncertain exactly when it erred';
  return undefined;
}

function contentProblem(operation: RunnerOperation, content: AnyContent, complete: boolean): Problem {
  switch (operation) {
    case 'observe':
      return observeContentProblem(content, complete);
    case 'plan':
      return planContentProblem(content, complete);
    case 'apply':
      return applyContentProblem(content, complete);
    case 'migration-history':
      if (complete && content.migrationHistory === undefined) return 'a successful migration-history needs migrationHistory';
      return content.migrationHistory === undefined ? undefined : migrationHistoryProblem(content.migrationHistory);
    case 'migration-apply':
      if (complete && content.migrationRun === undefined) return 'a successful migration-apply needs migrationRun';
      return content.migrationRun === undefined ? undefined : migrationRunProblem(content.migrationRun);
    case 'resolve':
      if (complete && content.resolvedArtifact === undefined) return 'a successful resolve needs resolvedArtifact';
      return content.resolvedArtifact === undefined ? undefined : resolvedArtifactProblem(content.resolvedArtifact);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The frame.

export type FrameErrorKind = 'not-found' | 'malformed' | 'incomplete' | 'too-large';

export class FrameError extends Error {
  override name = 'FrameError';
  constructor(
    readonly kind: FrameErrorKind,
    message: string,
    /** Set when the log's last frame is a runner's refusal to speak this protocol: the version it speaks. */
    readonly foreignProtocolVersion?: number,
  ) {
    super(message);
  }
}

/** Whether the frame may still appear in the log: nothing found yet, or the log ends inside a frame. */
export function mayStillArrive(error: unknown): boolean {
  return error instanceof FrameError && (error.kind === 'not-found' || error.kind === 'incomplete');
}

/** The frame for `result`. Throws FrameError (`malformed` or `too-large`) rather than emit a frame no reader accepts. */
export function encodeFrame(result: RunnerResult): string {
  const { payload, hex } = encodePayload(result);
  return `${FRAME_MARKER} ${Buffer.byteLength(payload)} ${hex}\n${payload}\n${FRAME_END_MARKER}\n`;
}

function encodePayload(result: RunnerResult): { payload: string; hex: string } {
  const problem = resultProblem(result);
  if (problem) throw new FrameError('malformed', `refusing to frame an invalid result: ${problem}`);
  let payload: string;
  try {
    payload = canonicalJson(result);
  } catch {
    throw new FrameError('malformed', 'refusing to frame a result holding text that is not valid Unicode');
  }
  if (Buffer.byteLength(payload) > MAX_FRAME_PAYLOAD_BYTES) {
    throw new FrameError('too-large', `the result is larger than the ${MAX_FRAME_PAYLOAD_BYTES}-byte frame limit`);
  }
  return { payload, hex: sha256Hex(payload) };
}

/**
 * The result the last valid frame in `log` holds for this operation and operation ID (runner.ParseResultFor).
 * Throws FrameError: `not-found` (no frame marker), `incomplete` (the log ends inside the last frame),
 * `too-large` (the last frame declares a payload over the limit) or `malformed` (anything else, including a
 * frame for another operation or ID and one whose payload digest matches no line).
 */
export function parseResultFor<O extends RunnerOperation>(log: string | Uint8Array, operation: O, operationId: string): RunnerResult<O> {
  const bytes = toBuffer(log);
  const starts = markerPositions(bytes, FRAME_MARKER_BYTES);
  if (starts.length === 0) throw new FrameError('not-found', 'the log holds no result frame');
  const budget = { remaining: SEARCH_BUDGET_BYTES };
  let lastError: FrameError | undefined;
  for (let i = starts.length - 1; i >= 0; i--) {
    const outcome = readFrameAt(bytes, starts[i], budget);
    const decided = outcome instanceof FrameError ? outcome : acceptPayload(outcome, operation, operationId);
    if (!(decided instanceof FrameError)) return decided;
    lastError ??= decided;
    if (budget.remaining <= 0) {
      throw new FrameError('malformed', 'the log holds too many unusable frame candidates to search');
    }
  }
  throw lastError as FrameError;
}

const FRAME_MARKER_BYTES = Buffer.from(FRAME_MARKER);
const FRAME_END_BYTES = Buffer.from(FRAME_END_MARKER);
const NEWLINE = 0x0a;
const HEADER = /^PTAH_RUNNER_RESULT_V1 ([1-9][0-9]{0,9}) ([0-9a-f]{64})$/;

function toBuffer(log: string | Uint8Array): Buffer {
  return typeof log === 'string' ? Buffer.from(log, 'utf8') : Buffer.from(log.buffer, log.byteOffset, log.byteLength);
}

function markerPositions(bytes: Buffer, marker: Buffer): number[] {
  const positions: number[] = [];
  for (let at = bytes.indexOf(marker); at >= 0; at = bytes.indexOf(marker, at + marker.length)) positions.push(at);
  return positions;
}

interface Header {
  length: number;
  hex: string;
  /** Offset just past the header's newline. */
  end: number;
}

/** The header at `start`, or why it is not one. */
function readHeader(bytes: Buffer, start: number): Header | FrameError {
  const newline = bytes.indexOf(NEWLINE, start);
  if (newline < 0 || newline - start > MAX_HEADER_BYTES) {
    return newline < 0 && bytes.length - start <= MAX_HEADER_BYTES
      ? new FrameError('incomplete', 'the log ends inside a frame header')
      : new FrameError('malformed', `a frame header is not terminated within ${MAX_HEADER_BYTES} bytes`);
  }
  const match = HEADER.exec(bytes.toString('latin1', start, newline));
  if (!match) return new FrameError('malformed', 'a frame header does not read "<marker> <length> <sha256 hex>"');
  const length = Number(match[1]);
  if (length > MAX_FRAME_PAYLOAD_BYTES) return new FrameError('too-large', `a frame declares a ${length}-byte payload, over the ${MAX_FRAME_PAYLOAD_BYTES}-byte limit`);
  return { length, hex: match[2], end: newline + 1 };
}

/** The payload bytes of the frame whose header starts at `start`, or why there are none. */
function readFrameAt(bytes: Buffer, start: number, budget: { remaining: number }): Buffer | FrameError {
  const header = readHeader(bytes, start);
  if (header instanceof FrameError) return header;
  let cursor = header.end;
  let skipped = 0;
  let sawSameLength = false;
  let payload: Buffer | undefined;
  // Walk whole lines: interleaved ones are skipped (within the window), the payload is the one that matches.
  for (;;) {
    const newline = bytes.indexOf(NEWLINE, cursor);
    if (newline < 0) {
      return payload !== undefined && isFooterAtEnd(bytes, cursor) ? payload : new FrameError('incomplete', 'the log ends inside a frame');
    }
    const line = bytes.subarray(cursor, newline);
    cursor = newline + 1;
    if (payload === undefined && line.length === header.length) {
      if (sha256Hex(line) === header.hex) {
        payload = line;
        skipped = 0;
        continue;
      }
      sawSameLength = true;
    }
    if (payload !== undefined && line.equals(FRAME_END_BYTES)) return payload;
    if (line.equals(FRAME_END_BYTES)) {
      return new FrameError('malformed', sawSameLength ? 'the frame payload does not match the digest in its header' : 'a frame footer arrived before any payload');
    }
    if (line.indexOf(FRAME_MARKER_BYTES) >= 0) return new FrameError('malformed', 'a frame is interrupted by another frame header');
    skipped += line.length + 1;
    budget.remaining -= line.length + 1;
    if (skipped > INTERLEAVE_WINDOW_BYTES || budget.remaining <= 0) {
      return new FrameError('malformed', payload === undefined
        ? (sawSameLength ? 'the frame payload does not match the digest in its header' : 'no frame payload within the search window')
        : `no frame footer within ${INTERLEAVE_WINDOW_BYTES} bytes of the payload`);
    }
  }
}

/** A reader may trim the log's final newline; the footer's own text is then all that is left. */
function isFooterAtEnd(bytes: Buffer, cursor: number): boolean {
  return bytes.subarray(cursor).equals(FRAME_END_BYTES);
}

function acceptPayload<O extends RunnerOperation>(payload: Buffer, operation: O, operationId: string): RunnerResult<O> | FrameError {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    return new FrameError('malformed', 'the frame payload is not JSON');
  }
  if (isObject(value) && value.protocolVersion !== RUNNER_PROTOCOL_VERSION) return foreignRefusal(value, operation, operationId);
  const problem = resultProblem(value);
  if (problem) return new FrameError('malformed', `the frame breaks the result invariants: ${problem}`);
  const result = value as unknown as RunnerResult;
  if (result.operation !== operation) return new FrameError('malformed', `the frame is for operation ${result.operation}, not ${operation}`);
  if (result.operationId !== operationId) return new FrameError('malformed', 'the frame is for another operation ID');
  return result as RunnerResult<O>;
}

/**
 * A runner speaking another protocol version refuses with one document whose shape never changes:
 * {protocolVersion, operation, operationId, childExitCode: -1, error: {code: runner_protocol_mismatch, message}}.
 * Anything else in another version is just malformed.
 */
function foreignRefusal(value: JsonObject, operation: RunnerOperation, operationId: string): FrameError {
  const error = value.error;
  const isRefusal =
    Object.keys(value).sort().join(',') === 'childExitCode,error,operation,operationId,protocolVersion' &&
    Number.isSafeInteger(value.protocolVersion) && (value.protocolVersion as number) > 0 &&
    value.childExitCode === -1 && value.operation === operation && value.operationId === operationId &&
    isObject(error) && Object.keys(error).sort().join(',') === 'code,message' && error.code === RUNNER_ERROR.protocolMismatch;
  return isRefusal
    ? new FrameError('malformed', `the runner speaks protocol ${value.protocolVersion as number}, not ${RUNNER_PROTOCOL_VERSION}`, value.protocolVersion as number)
    : new FrameError('malformed', `the frame speaks another protocol version than ${RUNNER_PROTOCOL_VERSION}`);
}

// ---------------------------------------------------------------------------------------------------------
// The termination summary.

export interface MigrationSummary {
  outcome: MigrationRunOutcome;
  appliedCount: number;
  /** Versions, in application order; both present when anything was applied. */
  firstApplied?: string;
  lastApplied?: string;
}

export interface RunnerSummary {
  protocolVersion: number;
  operation: RunnerOperation;
  operationId: string;
  /** `sha256:` of the frame's payload: the digest its header carries. */
  frameDigest: string;
  mutationStarted?: boolean;
  uncertain?: boolean;
  errorCode?: string;
  coordinationDigest?: string;
  targetIdentityDigest?: string;
  physicalIdentityDigest?: string;
  physicalIdentityKind?: PhysicalIdentityFields['physicalIdentityKind'];
  migration?: MigrationSummary;
}

export class SummaryError extends Error {
  override name = 'SummaryError';
  /** `not-found`: the message holds no summary. `refused`: it holds one this reader does not accept. */
  constructor(readonly kind: 'not-found' | 'refused', message: string) {
    super(message);
  }
}

/** The summary of the frame encodeFrame(result) writes. */
export function summaryFor(result: RunnerResult): RunnerSummary {
  const { payload } = encodePayload(result);
  const run = result.operation === 'migration-apply' ? result.migrationRun : undefined;
  const migration: MigrationSummary | undefined = run && {
    outcome: run.outcome,
    appliedCount: run.applied.length,
    ...(run.applied.length > 0 ? { firstApplied: run.applied[0].version, lastApplied: run.applied[run.applied.length - 1].version } : {}),
  };
  const optional = {
    mutationStarted: result.mutationStarted,
    uncertain: result.uncertain,
    errorCode: result.error?.code,
    coordinationDigest: result.coordinationDigest,
    targetIdentityDigest: result.targetIdentityDigest,
    physicalIdentityDigest: result.physicalIdentityDigest,
    physicalIdentityKind: result.physicalIdentityKind,
    migration,
  };
  return {
    protocolVersion: result.protocolVersion,
    operation: result.operation,
    operationId: result.operationId,
    frameDigest: sha256Digest(payload),
    ...Object.fromEntries(Object.entries(optional).filter(([, value]) => value !== undefined)),
  };
}

/** The termination-message line for `summary`. Throws SummaryError if it is invalid or over 2048 bytes. */
export function encodeSummary(summary: RunnerSummary): string {
  const problem = summaryProblem(summary);
  if (problem) throw new SummaryError('refused', `refusing to write an invalid summary: ${problem}`);
  const line = `${SUMMARY_MARKER} ${canonicalJson(summary)}\n`;
  if (Buffer.byteLength(line) > MAX_SUMMARY_BYTES) throw new SummaryError('refused', `the summary is over ${MAX_SUMMARY_BYTES} bytes`);
  return line;
}

/**
 * The summary in a container's termination message, bound to this operation and ID. The kubelet may put text
 * before it; exactly one marker, one line, at most 2048 bytes, canonical JSON with no unknown field.
 */
export function parseSummaryFor(message: string | Uint8Array, operation: RunnerOperation, operationId: string): RunnerSummary {
  const text = typeof message === 'string' ? message : Buffer.from(message).toString('utf8');
  const at = text.indexOf(SUMMARY_MARKER);
  if (at < 0) throw new SummaryError('not-found', 'the termination message holds no runner summary');
  if (text.indexOf(SUMMARY_MARKER, at + 1) >= 0) throw new SummaryError('refused', 'the termination message holds more than one runner summary');
  const rest = text.slice(at);
  if (Buffer.byteLength(rest) > MAX_SUMMARY_BYTES) throw new SummaryError('refused', `the runner summary is over ${MAX_SUMMARY_BYTES} bytes`);
  const newline = rest.indexOf('\n');
  if (newline >= 0 && newline !== rest.length - 1) throw new SummaryError('refused', 'the runner summary is followed by more text');
  const line = newline < 0 ? rest : rest.slice(0, newline);
  if (!line.startsWith(`${SUMMARY_MARKER} `)) throw new SummaryError('refused', 'the runner summary marker is not followed by a space');
  const json = line.slice(SUMMARY_MARKER.length + 1);
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new SummaryError('refused', 'the runner summary is not JSON');
  }
  // Canonical form rules out duplicate keys, stray whitespace and every other second spelling.
  let canonical: string | undefined;
  try {
    canonical = canonicalJson(value);
  } catch {
    canonical = undefined;
  }
  if (canonical !== json) throw new SummaryError('refused', 'the runner summary is not canonical JSON');
  const problem = summaryProblem(value);
  if (problem) throw new SummaryError('refused', `the runner summary breaks its invariants: ${problem}`);
  const summary = value as RunnerSummary;
  if (summary.operation !== operation) throw new SummaryError('refused', `the runner summary is for operation ${summary.operation}, not ${operation}`);
  if (summary.operationId !== operationId) throw new SummaryError('refused', 'the runner summary is for another operation ID');
  return summary;
}

const SUMMARY_KEYS = [
  'protocolVersion', 'operation', 'operationId', 'frameDigest', 'mutationStarted', 'uncertain', 'errorCode',
  'coordinationDigest', 'targetIdentityDigest', 'physicalIdentityDigest', 'physicalIdentityKind', 'migration',
] as const;

function summaryProblem(value: unknown): Problem {
  if (!isObject(value)) return 'the summary is not a JSON object';
  if (value.protocolVersion !== RUNNER_PROTOCOL_VERSION) return `protocolVersion is not ${RUNNER_PROTOCOL_VERSION}`;
  if (!isRunnerOperation(value.operation)) return 'operation is not a runner operation';
  const operation = value.operation;
  const hasError = value.errorCode !== undefined;
  const { mutationStarted, uncertain, migration } = value;
  return first(
    () => extraKey(value, SUMMARY_KEYS, 'the summary'),
    () => (isOperationId(value.operationId) ? undefined : 'operationId is not a valid operation ID'),
    () => digestProblem(value.frameDigest, 'frameDigest'),
    () => (hasError && !isErrorCode(value.errorCode) ? 'errorCode is not a lowercase snake_case code' : undefined),
    () => (value.coordinationDigest === undefined ? undefined : digestProblem(value.coordinationDigest, 'coordinationDigest')),
    () => (value.targetIdentityDigest === undefined ? undefined : digestProblem(value.targetIdentityDigest, 'targetIdentityDigest')),
    () => physicalIdentityProblem(value),
    () => databaseNamesProblem(value, operation, hasError, 'summary'),
    () => {
      if (!MUTATING_RUNNER_OPERATIONS.has(operation)) {
        return mutationStarted === undefined && uncertain === undefined ? undefined : `${operation} is read-only and carries no mutation flags`;
      }
      if ((mutationStarted !== undefined && typeof mutationStarted !== 'boolean') || (uncertain !== undefined && typeof uncertain !== 'boolean')) {
        return 'mutationStarted and uncertain are not booleans';
      }
      if (uncertain === true && mutationStarted !== true) return 'uncertain without mutationStarted';
      if (!hasError && uncertain === true) return 'a successful summary cannot be uncertain';
      if (isRefusedBeforeWriting(value.errorCode as string | undefined) && mutationStarted === true) {
        return `${value.errorCode as string} is a refusal before any write, so nothing may have started`;
      }
      if (!hasError && operation === 'apply' && mutationStarted !== true) return 'a successful apply must have started';
      return undefined;
    },
    () => (migration !== undefined && operation !== 'migration-apply' ? 'only a migration-apply summary carries migration' : undefined),
    () => (!hasError && operation === 'migration-apply' && migration === undefined ? 'a successful migration-apply summary needs migration' : undefined),
    () => (migration === undefined ? undefined : migrationSummaryProblem(migration, value, hasError)),
  );
}

function migrationSummaryProblem(migration: unknown, summary: JsonObject, hasError: boolean): Problem {
  if (!isObject(migration)) return 'migration is not an object';
  const { outcome, appliedCount, firstApplied, lastApplied } = migration;
  return first(
    () => extraKey(migration, ['outcome', 'appliedCount', 'firstApplied', 'lastApplied'], 'migration'),
    () => (MIGRATION_OUTCOMES.has(outcome as string) ? undefined : 'migration.outcome is not a known outcome'),
    () => (isCount(appliedCount) ? undefined : 'migration.appliedCount is not a count'),
    () => ([firstApplied, lastApplied].every((v) => v === undefined || (typeof v === 'string' && VERSION.test(v)))
      ? undefined
      : 'migration.firstApplied or lastApplied is not a migration version'),
    () => {
      const count = appliedCount as number;
      if (count === 0) return firstApplied === undefined && lastApplied === undefined ? undefined : 'migration names versions although none were applied';
      if (firstApplied === undefined || lastApplied === undefined) return 'migration.appliedCount needs firstApplied and lastApplied';
      return count > 1 || firstApplied === lastApplied ? undefined : 'one applied migration must be both first and last';
    },
    () => {
      const run = outcome as MigrationRunOutcome;
      const flags = migrationRunFlags(run);
      if (flags.mutationStarted !== (summary.mutationStarted === true) || flags.uncertain !== (summary.uncertain === true)) {
        return 'the mutation flags disagree with the migration outcome';
      }
      if (hasError === SUCCESSFUL_MIGRATION_OUTCOMES.has(run)) return 'errorCode disagrees with the migration outcome';
      if ((run === 'up-to-date' || run === 'failed') && appliedCount !== 0) return `a ${run} run cannot have applied migrations`;
      if (run === 'applied' && appliedCount === 0) return 'an applied run must have applied a migration';
      return undefined;
    },
  );
}

/**
 * Whether `summary` may stand in for the frame (terminationSummaryStandIn): only for a migration Apply, only when
 * `log` holds no readable frame for it and the frame may still have been on its way (or the log is gone:
 * `undefined`), and only when every complete frame header in the log declares the summary's frameDigest.
 */
export function summaryStandsIn(summary: RunnerSummary, log: string | Uint8Array | undefined): boolean {
  if (summary.operation !== 'migration-apply') return false;
  if (log === undefined) return true;
  try {
    parseResultFor(log, summary.operation, summary.operationId);
    return false;
  } catch (error) {
    if (!mayStillArrive(error)) return false;
  }
  const bytes = toBuffer(log);
  for (const start of markerPositions(bytes, FRAME_MARKER_BYTES)) {
    const header = readHeader(bytes, start);
    if (header instanceof FrameError) {
      if (header.kind === 'incomplete') continue;
      return false;
    }
    if (`sha256:${header.hex}` !== summary.frameDigest) return false;
  }
  return true;
}
