// The one operation-Job builder, for both families (the seed's buildOperationJob). Everything a Job holds comes
// from its claim and the inputs the claim was decided from, and every default the API server would fill in is
// written explicitly, so the Job read back from the API server compares equal to a rebuild (jobclaim.match).
import type {
  V1Affinity,
  V1Container,
  V1EnvVar,
  V1Job,
  V1LocalObjectReference,
  V1OwnerReference,
  V1PodSpec,
  V1ResourceRequirements,
  V1Toleration,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { DurationError, parseDuration } from '../api/duration.js';
import { canonicalJson, digest, isDigest, recentAnswers } from '../canonical.js';
import { claimJobName, JobNameError, type Family } from '../naming.js';
import { snapshotProblem, type SnapshotLike } from '../podintent.js';
import { chunkFileName, chunkNamesFor, PLAN_CHUNK_KEY, PlanStoreError } from '../planstore.js';
import { DEFAULT_MIGRATION_FORMAT, type MigrationFormat } from '../migration-format.js';
import { adoptionEnvValue, type MigrationAdoption } from '../migration-adoption.js';
import { isRepairResolution } from '../migration-repair.js';
import { expectedSequenceDigest, sequenceEntry, sequenceShapeProblem, type ExpectedMigration } from '../runner-protocol.js';
import { JOB_PATHS, MAX_LOCK_TIMEOUT_MS, REGISTRY_ONLY_RUNNER_OPERATIONS, RUNNER_ENV, type RunnerOperation } from '../runner-env.js';
import type { ArtifactKind } from '../oci/artifact-layout.js';
import {
  declaredMetadataProblem,
  EVIDENCE_FINALIZER,
  isLabelValue,
  JOB_ANNOTATIONS,
  operatorLabels,
  OWNER_API_VERSION,
  OWNER_KIND,
} from './metadata.js';
import { isMutatingOperation, runnerOperationFor } from './operations.js';
import { jsonEqual, storedShape, toPlain } from './plain.js';

export const RUNNER_CONTAINER = 'runner';
export const RUNNER_COMMAND = '/usr/local/bin/ptah-runner';
/** The non-root user and group every operation Pod runs as. */
export const RUNTIME_ID = 65532;
/** The one change ever allowed on a stored Job: ttlSecondsAfterFinished from nil to this, once it is harvested. */
export const CLEANUP_TTL_SECONDS = 300;
/** A migration Apply's Job outlives its execution window by this, so the runner's own deadline always fires first. */
export const JOB_DEADLINE_GRACE_SECONDS = 60;
export const DEFAULT_ACTIVE_DEADLINE_SECONDS = 900;
export const DEFAULT_TERMINATION_GRACE_SECONDS = 30;
/** spec.policy.lockTimeout as the API server defaults it, per family (the CRDs' defaults). */
export const DEFAULT_LOCK_TIMEOUT: Readonly<Record<Family, string>> = { schema: '30s', migration: '5m' };
const MIN_ACTIVE_DEADLINE_SECONDS = 30;
const MAX_ACTIVE_DEADLINE_SECONDS = 86400;
const MAX_TERMINATION_GRACE_SECONDS = 300;
const MAX_MIGRATION_SEQUENCE = 256;
/** r--r----- : the runner reads the artifact and plan through its group (fsGroup). */
const READ_ONLY_FILE_MODE = 0o440;
const WORK_SIZE_LIMIT = '128Mi';
const DEFAULT_SERVICE_ACCOUNT = 'default';

export interface SecretKeyRef {
  name: string;
  key: string;
}

export interface ObjectRef {
  name: string;
  uid: string;
}

/** The resource that owns the Job, as its one controller owner reference names it. */
export interface JobOwner {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid: string;
}

/** The claim (status.activeOperation of either family): the fields the Job is built from. */
export interface ClaimedOperation {
  type: string;
  id: string;
  inputFingerprint: string;
  jobName: string;
  startedAt: string;
  attempt: number;
  executionBindingID: string;
  coordinationDigest?: string;
  targetIdentityDigest?: string;
  admissionSnapshot?: SnapshotLike;
  dispatchNotAfter?: string;
  executionNotAfter?: string;
  terminationGracePeriodSeconds?: number;
  planRef?: ObjectRef;
  artifact?: { configMapName?: string; oci?: { pinnedReference: string }; digest: string };
  /** A Resolve: the verification policy's digest the runner must find. */
  verificationPolicy?: { digest: string };
  /** A schema proof reading: the Apply operation it proves. */
  proofOf?: string;
}

/** spec.execution: the bounded controls a resource has over its operation Jobs. */
export interface ExecutionSpec {
  activeDeadlineSeconds?: number;
  resources?: V1ResourceRequirements;
  serviceAccountName?: string;
  imagePullSecrets?: V1LocalObjectReference[];
  nodeSelector?: Record<string, string>;
  tolerations?: V1Toleration[];
  affinity?: V1Affinity;
  runtimeClassName?: string;
  priorityClassName?: string;
  podMetadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
}

/** spec.policy, as far as the Job carries it: how long a mutating run waits for the realm's advisory lock. */
export interface PolicySpec {
  lockTimeout?: string;
}

/**
 * The manager building the Job. Images and revision are recorded on the Job; the executor identity and the two
 * versions bind the run (the runner refuses to start an executor whose identity is not the one named).
 */
export interface ManagerIdentity {
  controllerImage: string;
  controllerRevision: string;
  /** Runner and executor in one image: the Job's only container runs it. */
  runnerImage: string;
  /** The executor the binding names (src/shared/executor-identity.ts). */
  executorIdentity: string;
  controllerStateVersion: number;
  runnerProtocolVersion: number;
}

/** A step of the approved sequence: a file, or a dirty row's repair (runner-protocol.ts). */
export type MigrationStep = ExpectedMigration;

/** What the runner holds the run to, besides the claim. */
export interface JobBindings {
  /** The realm the claim holds; for a mutating operation also the realm its plan was computed for. */
  coordinationDigest: string;
  /** Mutating: the database the plan was computed for. */
  expectedTargetIdentityDigest?: string;
  /** Schema Apply: the plan's bytes and the projection ConfigMaps that hold them, in chunk order. */
  planContentDigest?: string;
  planChunkNames?: readonly string[];
  /** Migration Apply: the approved sequence and the history it was planned on. */
  migrationSequence?: readonly MigrationStep[];
  historyFingerprint?: string;
}

/** How the Pods that talk to a registry reach it: spec.*.oci's Secret and CA, mounted only into them. */
export interface RegistryAccess {
  kind: ArtifactKind;
  registryAuthFrom?: { name: string };
  caFrom?: { name: string; key: string };
}

/**
 * A database Job's artifact: the pinned ConfigMap, mounted; or the pinned OCI digest, written into a memory volume
 * by the fetch init container. Either way the runner checks the files against `digest`.
 */
export type JobArtifact =
  | { configMapName: string; digest: string }
  | { oci: RegistryAccess & { pinnedReference: string }; digest: string };

/** A Resolve Job's inputs: the reference as the spec writes it, and the policy the manager pinned. */
export interface ResolveInput extends RegistryAccess {
  reference: string;
  verificationPolicyRef: { name: string; key: string };
  verificationPolicyDigest: string;
}

export interface OperationJobInput {
  family: Family;
  owner: JobOwner;
  claim: ClaimedOperation;
  runnerOperation: string;
  /** Every database operation; never a Resolve. */
  target?: { urlFrom: SecretKeyRef };
  /** Schema Plan only: the scratch database. */
  dev?: { urlFrom: SecretKeyRef };
  /** Every database operation; never a Resolve. */
  artifact?: JobArtifact;
  /** A Resolve only. */
  resolve?: ResolveInput;
  /** PtahMigration: spec.artifact.format, how the executor reads the artifact. */
  migrationFormat?: MigrationFormat;
  /** PtahMigration: spec.adoption, the files another tool applied, read while the history is empty. */
  migrationAdoption?: MigrationAdoption;
  execution: ExecutionSpec;
  policy: PolicySpec;
  manager: ManagerIdentity;
  bindings: JobBindings;
}

export type JobBuildRefusal =
  | 'InvalidInput'
  | 'InvalidClaim'
  | 'JobNameMismatch'
  | 'UnknownOperation'
  | 'WindowClosed'
  | 'InvalidBinding';

/** The builder refused: `reason` is a condition reason, the message says what is wrong. */
export class JobBuildError extends Error {
  override name = 'JobBuildError';
  constructor(
    readonly reason: JobBuildRefusal,
    message: string,
  ) {
    super(message);
  }
}

const EPOCH = /^v1-[0-9a-f]{32}$/;
// RFC 3339 in UTC, as the claim stores its instants and the runner parses them.
const UTC_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

export function buildOperationJob(input: OperationJobInput): V1Job {
  const { family, owner, claim, manager, execution } = input;
  checkOwner(family, owner);
  const runnerOperation = checkOperation(family, claim.type, input.runnerOperation);
  const mutating = isMutatingOperation(family, claim.type);
  checkClaim(family, owner, claim);
  checkManager(manager);
  checkReferences(input, runnerOperation, mutating);
  const activeDeadlineSeconds = deadlineOf(claim, execution, runnerOperation, mutating);
  const terminationGracePeriodSeconds = claim.terminationGracePeriodSeconds ?? DEFAULT_TERMINATION_GRACE_SECONDS;
  if (!isIntegerIn(terminationGracePeriodSeconds, 1, MAX_TERMINATION_GRACE_SECONDS)) {
    throw new JobBuildError('InvalidClaim', `terminationGracePeriodSeconds must be 1..${MAX_TERMINATION_GRACE_SECONDS}, got ${terminationGracePeriodSeconds}`);
  }
  // Only the operations that change the database take the realm's advisory lock (src/executor).
  const lockTimeoutMs = mutating ? lockTimeoutOf(family, input.policy) : undefined;

  const declared = execution.podMetadata ?? {};
  for (const [what, entries] of [['label', declared.labels], ['annotation', declared.annotations]] as const) {
    const problem = entries && declaredMetadataProblem(what, entries);
    if (problem) throw new JobBuildError('InvalidInput', `spec.execution.podMetadata: ${problem}`);
  }
  // Declared metadata first: operator keys win (and the declared ones cannot name them anyway).
  const labels = { ...declared.labels, ...operatorLabels(family, owner.name, claim.type, claim.id) };
  const annotations = { ...declared.annotations, ...operatorAnnotations(input, runnerOperation, mutating) };

  const env = environment(input, runnerOperation, mutating, terminationGracePeriodSeconds, lockTimeoutMs);
  const { volumes, volumeMounts, fetch } = storage(input, runnerOperation);
  const runnerContainer = (name: string, args: string[], containerEnv: V1EnvVar[], mounts: V1VolumeMount[]): V1Container => ({
    name,
    image: manager.runnerImage,
    command: [RUNNER_COMMAND],
    args,
    env: containerEnv,
    imagePullPolicy: 'IfNotPresent',
    resources: (storedShape(toPlain(execution.resources)) ?? {}) as V1ResourceRequirements,
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
      runAsGroup: RUNTIME_ID,
      runAsNonRoot: true,
      runAsUser: RUNTIME_ID,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    terminationMessagePath: JOB_PATHS.terminationLog,
    terminationMessagePolicy: 'File',
    volumeMounts: mounts,
    workingDir: JOB_PATHS.work,
  });
  const container = runnerContainer(RUNNER_CONTAINER, ['--operation', runnerOperation], env, volumeMounts);
  const podSpec: V1PodSpec = {
    activeDeadlineSeconds,
    automountServiceAccountToken: false,
    containers: [container],
    ...(fetch ? { initContainers: [runnerContainer(FETCH_CONTAINER, ['--fetch-artifact'], fetch.env, fetch.volumeMounts)] } : {}),
    dnsPolicy: 'ClusterFirst',
    enableServiceLinks: false,
    restartPolicy: 'Never',
    schedulerName: 'default-scheduler',
    securityContext: {
      fsGroup: RUNTIME_ID,
      fsGroupChangePolicy: 'OnRootMismatch',
      runAsGroup: RUNTIME_ID,
      runAsNonRoot: true,
      runAsUser: RUNTIME_ID,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    serviceAccountName: execution.serviceAccountName || DEFAULT_SERVICE_ACCOUNT,
    terminationGracePeriodSeconds,
    volumes,
    ...scheduling(execution),
  };
  const ownerReference: V1OwnerReference = {
    apiVersion: OWNER_API_VERSION,
    kind: OWNER_KIND[family],
    name: owner.name,
    uid: owner.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: claim.jobName,
      namespace: owner.namespace,
      labels,
      annotations,
      ownerReferences: [ownerReference],
    },
    spec: {
      activeDeadlineSeconds,
      backoffLimit: 0,
      completionMode: 'NonIndexed',
      completions: 1,
      manualSelector: false,
      parallelism: 1,
      podReplacementPolicy: 'Failed',
      suspend: false,
      template: {
        metadata: {
          labels: { ...labels },
          annotations: { ...annotations },
          // A migration's account comes from its Apply Pod alone (a schema Apply is proven by a fresh reading).
          ...(runnerOperation === 'migration-apply' ? { finalizers: [EVIDENCE_FINALIZER] } : {}),
        },
        spec: podSpec,
      },
    },
  };
}

function checkOwner(family: Family, owner: JobOwner): void {
  if (family !== 'schema' && family !== 'migration') throw new JobBuildError('InvalidInput', `unknown family ${JSON.stringify(family)}`);
  if (owner.apiVersion !== OWNER_API_VERSION || owner.kind !== OWNER_KIND[family]) {
    throw new JobBuildError('InvalidInput', `a ${family} Job is owned by a ${OWNER_API_VERSION} ${OWNER_KIND[family]}, not ${owner.apiVersion} ${owner.kind}`);
  }
  if (!owner.name || !isLabelValue(owner.name)) throw new JobBuildError('InvalidInput', `owner name ${JSON.stringify(owner.name)} cannot be carried in a label`);
  if (!owner.namespace || !owner.uid) throw new JobBuildError('InvalidInput', `owner ${owner.name} has no namespace or UID`);
}

function checkOperation(family: Family, type: string, requested: string): RunnerOperation {
  const runnerOperation = runnerOperationFor(family, type);
  if (!runnerOperation) throw new JobBuildError('UnknownOperation', `operation type ${JSON.stringify(type)} is not a ${family} operation this manager runs`);
  if (requested !== runnerOperation) {
    throw new JobBuildError('UnknownOperation', `a ${family} ${type} runs the runner operation ${runnerOperation}, not ${JSON.stringify(requested)}`);
  }
  return runnerOperation;
}

function checkClaim(family: Family, owner: JobOwner, claim: ClaimedOperation): void {
  if (!isDigest(claim.id)) throw new JobBuildError('InvalidClaim', 'the claim\'s operation ID is not a sha256 digest');
  if (!isDigest(claim.inputFingerprint)) throw new JobBuildError('InvalidClaim', 'the claim\'s input fingerprint is not a sha256 digest');
  if (!EPOCH.test(claim.executionBindingID)) throw new JobBuildError('InvalidClaim', 'the claim names no execution-binding epoch (v1-<32 hex>)');
  instant(claim.startedAt, 'startedAt');
  let expected: string;
  try {
    expected = claimJobName(family, owner, claim);
  } catch (e) {
    if (e instanceof JobNameError) throw new JobBuildError('InvalidClaim', `the claim names no Job: ${e.message}`);
    throw e;
  }
  if (claim.jobName !== expected) {
    throw new JobBuildError('JobNameMismatch', `the claim reserves Job ${JSON.stringify(claim.jobName)}, but its own fields name ${expected}`);
  }
  if (claim.admissionSnapshot) {
    const problem = snapshotProblem(claim.admissionSnapshot);
    if (problem) throw new JobBuildError('InvalidClaim', problem);
  }
}

function checkManager(manager: ManagerIdentity): void {
  for (const field of ['controllerImage', 'runnerImage', 'controllerRevision'] as const) {
    const value = manager[field];
    if (typeof value !== 'string' || value === '' || /\s/.test(value) || value.length > 1024) {
      throw new JobBuildError('InvalidInput', `manager ${field} ${JSON.stringify(value)} is empty or ambiguous`);
    }
  }
  for (const field of ['controllerStateVersion', 'runnerProtocolVersion'] as const) {
    if (!isIntegerIn(manager[field], 1, 2 ** 31 - 1)) throw new JobBuildError('InvalidInput', `manager ${field} must be a positive integer, got ${manager[field]}`);
  }
  if (!isDigest(manager.executorIdentity)) {
    throw new JobBuildError('InvalidBinding', `the executor identity ${JSON.stringify(manager.executorIdentity)} is not a sha256 digest; a binding written before executors were identified builds no Job`);
  }
}

function checkReferences(input: OperationJobInput, runnerOperation: RunnerOperation, mutating: boolean): void {
  const { claim, bindings, artifact } = input;
  if (REGISTRY_ONLY_RUNNER_OPERATIONS.has(runnerOperation)) return checkResolve(input);
  if (input.resolve) throw new JobBuildError('InvalidInput', `a ${runnerOperation} Job is given a Resolve's inputs`);
  checkSecretRef(input.target?.urlFrom, 'spec.target.urlFrom');
  if (input.dev) {
    if (runnerOperation !== 'plan') throw new JobBuildError('InvalidInput', `a scratch database is given to a ${runnerOperation} Job; only plan uses one`);
    checkSecretRef(input.dev.urlFrom, 'spec.dev.urlFrom');
  }
  if (!artifact || !('oci' in artifact ? artifact.oci.pinnedReference : artifact.configMapName)) throw new JobBuildError('InvalidBinding', 'no artifact is pinned');
  if (!isDigest(artifact.digest)) throw new JobBuildError('InvalidBinding', 'the pinned artifact digest is not a sha256 digest');
  if ('oci' in artifact) checkRegistryAccess(artifact.oci);
  if (claim.artifact && (claim.artifact.digest !== artifact.digest || claim.artifact.configMapName !== ('oci' in artifact ? undefined : artifact.configMapName) ||
      claim.artifact.oci?.pinnedReference !== ('oci' in artifact ? artifact.oci.pinnedReference : undefined))) {
    throw new JobBuildError('InvalidBinding', 'the artifact is not the one the claim pinned');
  }
  if (!isDigest(bindings.coordinationDigest)) throw new JobBuildError('InvalidBinding', 'the coordination digest is not a sha256 digest');
  if (claim.coordinationDigest !== undefined && claim.coordinationDigest !== bindings.coordinationDigest) {
    throw new JobBuildError('InvalidBinding', 'the coordination digest is not the realm the claim holds');
  }

  expectBinding('expectedTargetIdentityDigest', bindings.expectedTargetIdentityDigest, mutating, runnerOperation);
  if (mutating) {
    if (!isDigest(bindings.expectedTargetIdentityDigest)) throw new JobBuildError('InvalidBinding', 'the expected target identity digest is not a sha256 digest');
    if (claim.targetIdentityDigest !== undefined && claim.targetIdentityDigest !== bindings.expectedTargetIdentityDigest) {
      throw new JobBuildError('InvalidBinding', 'the expected target identity is not the database the claim was made for');
    }
    if (!claim.planRef?.name || !claim.planRef.uid) throw new JobBuildError('InvalidClaim', 'an Apply claim names no plan');
  }

  const schemaApply = runnerOperation === 'apply';
  expectBinding('planContentDigest', bindings.planContentDigest, schemaApply, runnerOperation);
  expectBinding('planChunkNames', bindings.planChunkNames, schemaApply, runnerOperation);
  if (schemaApply) {
    if (!isDigest(bindings.planContentDigest)) throw new JobBuildError('InvalidBinding', 'the plan content digest is not a sha256 digest');
    const names = bindings.planChunkNames ?? [];
    let expected: string[];
    try {
      expected = chunkNamesFor(claim.planRef!.name, names.length);
    } catch (e) {
      if (e instanceof PlanStoreError) throw new JobBuildError('InvalidBinding', `the plan's chunks: ${e.message}`);
      throw e;
    }
    if (!jsonEqual(names, expected)) {
      throw new JobBuildError('InvalidBinding', `the plan's chunk names are not ${expected.join(', ')}`);
    }
  }

  const migrationApply = runnerOperation === 'migration-apply';
  expectBinding('migrationSequence', bindings.migrationSequence, migrationApply, runnerOperation);
  expectBinding('historyFingerprint', bindings.historyFingerprint, migrationApply, runnerOperation);
  if (migrationApply) {
    if (!isDigest(bindings.historyFingerprint)) throw new JobBuildError('InvalidBinding', 'the history fingerprint is not a sha256 digest');
    const sequence = bindings.migrationSequence ?? [];
    if (sequence.length < 1 || sequence.length > MAX_MIGRATION_SEQUENCE) {
      throw new JobBuildError('InvalidBinding', `a migration Apply runs 1 to ${MAX_MIGRATION_SEQUENCE} migrations, not ${sequence.length}`);
    }
    const versions = new Set<string>();
    for (const step of sequence) {
      if (!step.version || !step.checksum) throw new JobBuildError('InvalidBinding', 'a migration in the sequence has no version or checksum');
      if (versions.has(step.version)) throw new JobBuildError('InvalidBinding', `migration ${step.version} appears twice in the sequence`);
      if (step.repair !== undefined && !isRepairResolution(step.repair)) throw new JobBuildError('InvalidBinding', `migration ${step.version}'s repair is not a resolution`);
      versions.add(step.version);
    }
    const shape = sequenceShapeProblem(sequence);
    if (shape) throw new JobBuildError('InvalidBinding', `the migration sequence ${shape}`);
  }
}

/** A Resolve reads a registry and a policy, and is given no database, no artifact and no binding a database run checks. */
function checkResolve(input: OperationJobInput): void {
  const { resolve, claim, bindings } = input;
  if (input.target || input.dev || input.artifact || claim.artifact) throw new JobBuildError('InvalidInput', 'a Resolve Job is given a database or an artifact; it reads only the registry');
  if (!resolve?.reference) throw new JobBuildError('InvalidInput', 'a Resolve Job names no reference');
  checkRegistryAccess(resolve);
  if (!resolve.verificationPolicyRef?.name || !resolve.verificationPolicyRef.key) throw new JobBuildError('InvalidInput', 'a Resolve Job names no verification policy key');
  if (!isDigest(resolve.verificationPolicyDigest) || claim.verificationPolicy?.digest !== resolve.verificationPolicyDigest) {
    throw new JobBuildError('InvalidBinding', 'the verification policy digest is not the one the claim pinned');
  }
  for (const [name, value] of Object.entries(bindings)) {
    if (name !== 'coordinationDigest' && value !== undefined) throw new JobBuildError('InvalidBinding', `${name} is given to a resolve Job, which does not use it`);
  }
}

function checkRegistryAccess(access: RegistryAccess): void {
  if (access.kind !== 'schema' && access.kind !== 'migrations') throw new JobBuildError('InvalidInput', `the artifact kind ${JSON.stringify(access.kind)} is not schema or migrations`);
  if (access.registryAuthFrom && !access.registryAuthFrom.name) throw new JobBuildError('InvalidInput', 'registryAuthFrom names no Secret');
  if (access.caFrom && (!access.caFrom.name || !access.caFrom.key)) throw new JobBuildError('InvalidInput', 'caFrom names no ConfigMap key');
}

/** A binding is given exactly to the operation that uses it, so no Job carries a value nothing checks. */
function expectBinding(name: string, value: unknown, wanted: boolean, runnerOperation: RunnerOperation): void {
  if (wanted && value === undefined) throw new JobBuildError('InvalidBinding', `a ${runnerOperation} Job needs ${name}`);
  if (!wanted && value !== undefined) throw new JobBuildError('InvalidBinding', `${name} is given to a ${runnerOperation} Job, which does not use it`);
}

function checkSecretRef(ref: SecretKeyRef | undefined, where: string): void {
  if (!ref?.name || !ref.key) throw new JobBuildError('InvalidInput', `${where} names no Secret key`);
}

/**
 * Job and Pod activeDeadlineSeconds. A mutating Job lives as long as its claim's execution window (a migration
 * Apply JOB_DEADLINE_GRACE_SECONDS longer); a read-only Job lives spec.execution.activeDeadlineSeconds.
 * Computed from the claim alone, never the clock, so a rebuild after the window still equals the Job.
 */
function deadlineOf(claim: ClaimedOperation, execution: ExecutionSpec, runnerOperation: RunnerOperation, mutating: boolean): number {
  const window = execution.activeDeadlineSeconds ?? DEFAULT_ACTIVE_DEADLINE_SECONDS;
  if (!isIntegerIn(window, MIN_ACTIVE_DEADLINE_SECONDS, MAX_ACTIVE_DEADLINE_SECONDS)) {
    throw new JobBuildError('InvalidInput', `spec.execution.activeDeadlineSeconds must be ${MIN_ACTIVE_DEADLINE_SECONDS}..${MAX_ACTIVE_DEADLINE_SECONDS}, got ${window}`);
  }
  const startedAt = instant(claim.startedAt, 'startedAt');
  const dispatchNotAfter = claim.dispatchNotAfter === undefined ? undefined : instant(claim.dispatchNotAfter, 'dispatchNotAfter');
  const executionNotAfter = claim.executionNotAfter === undefined ? undefined : instant(claim.executionNotAfter, 'executionNotAfter');
  if (mutating && (dispatchNotAfter === undefined || executionNotAfter === undefined)) {
    throw new JobBuildError('InvalidClaim', 'a mutating claim records no dispatchNotAfter or executionNotAfter');
  }
  if (dispatchNotAfter !== undefined && executionNotAfter !== undefined && executionNotAfter < dispatchNotAfter) {
    throw new JobBuildError('InvalidClaim', 'the claim\'s executionNotAfter is before its dispatchNotAfter');
  }
  const windowSeconds = executionNotAfter === undefined ? undefined : Math.floor((executionNotAfter - startedAt) / 1000);
  if (windowSeconds !== undefined && windowSeconds < 1) throw new JobBuildError('WindowClosed', 'the claim\'s execution window closed before it started');
  if (dispatchNotAfter !== undefined && dispatchNotAfter <= startedAt) throw new JobBuildError('WindowClosed', 'the claim\'s dispatch window closed before it started');
  if (!mutating) return window;
  return windowSeconds! + (runnerOperation === 'migration-apply' ? JOB_DEADLINE_GRACE_SECONDS : 0);
}

function instant(value: string, field: string): number {
  const ms = typeof value === 'string' && UTC_INSTANT.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) throw new JobBuildError('InvalidClaim', `the claim's ${field} ${JSON.stringify(value)} is not an RFC 3339 UTC instant`);
  return ms;
}

// Every rebuild of a resource's Job reads its one lockTimeout again; a refused spelling is refused each time.
const recentDuration = recentAnswers(parseDuration, 64, 64);

/** The lock wait in whole milliseconds, rounded up so the run never waits less than the spec asks. */
function lockTimeoutOf(family: Family, policy: PolicySpec): number {
  const text = policy.lockTimeout ?? DEFAULT_LOCK_TIMEOUT[family];
  let ms: number;
  try {
    ms = Math.ceil(recentDuration(text));
  } catch (e) {
    if (e instanceof DurationError) throw new JobBuildError('InvalidInput', `spec.policy.lockTimeout: ${e.message}`);
    throw e;
  }
  if (!isIntegerIn(ms, 1, MAX_LOCK_TIMEOUT_MS)) {
    throw new JobBuildError('InvalidInput', `spec.policy.lockTimeout ${JSON.stringify(text)} is not between 1ms and ${MAX_LOCK_TIMEOUT_MS}ms`);
  }
  return ms;
}

function isIntegerIn(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

function operatorAnnotations(input: OperationJobInput, runnerOperation: RunnerOperation, mutating: boolean): Record<string, string> {
  const { claim, manager, bindings } = input;
  const annotations: Record<string, string> = {
    [JOB_ANNOTATIONS.operationId]: claim.id,
    [JOB_ANNOTATIONS.inputFingerprint]: claim.inputFingerprint,
    [JOB_ANNOTATIONS.executionBindingId]: claim.executionBindingID,
    [JOB_ANNOTATIONS.controllerImage]: manager.controllerImage,
    [JOB_ANNOTATIONS.controllerRevision]: manager.controllerRevision,
    [JOB_ANNOTATIONS.runnerImage]: manager.runnerImage,
    [JOB_ANNOTATIONS.controllerStateVersion]: String(manager.controllerStateVersion),
  };
  if (claim.admissionSnapshot) annotations[JOB_ANNOTATIONS.admissionSnapshotDigest] = claim.admissionSnapshot.digest;
  if (mutating) {
    annotations[JOB_ANNOTATIONS.planName] = claim.planRef!.name;
    annotations[JOB_ANNOTATIONS.planUid] = claim.planRef!.uid;
    annotations[JOB_ANNOTATIONS.safeToEvict] = 'false';
  }
  if (runnerOperation === 'apply') annotations[JOB_ANNOTATIONS.planContentDigest] = bindings.planContentDigest!;
  return annotations;
}

const value = (name: string, v: string): V1EnvVar => ({ name, value: v });
// Sorted by name: a rebuild must produce the same list whatever order the code grows in.
const sortedEnv = (env: V1EnvVar[]): V1EnvVar[] => env.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

/** What the mounted registry Secret and CA are called inside a Pod that talks to a registry. */
const REGISTRY_CONFIG_FILE = 'config.json';
const REGISTRY_CA_FILE = 'ca.pem';
const VERIFICATION_POLICY_FILE = 'policy';
/** The files an OCI artifact may hold once fetched: the runner's own bound on an artifact (src/runner/prepare.ts) and room. */
const FETCHED_ARTIFACT_SIZE_LIMIT = '16Mi';
const FETCH_CONTAINER = 'fetch-artifact';

function registryEnv(access: RegistryAccess): V1EnvVar[] {
  return [
    value(RUNNER_ENV.ociArtifactKind, access.kind),
    ...(access.registryAuthFrom ? [value(RUNNER_ENV.registryConfigDir, JOB_PATHS.registryConfig)] : []),
    ...(access.caFrom ? [value(RUNNER_ENV.ociCaFile, `${JOB_PATHS.registryCa}/${REGISTRY_CA_FILE}`)] : []),
  ];
}

function environment(input: OperationJobInput, runnerOperation: RunnerOperation, mutating: boolean, grace: number, lockTimeoutMs?: number): V1EnvVar[] {
  const { claim, manager, bindings, artifact, resolve } = input;
  const secret = (name: string, ref: SecretKeyRef): V1EnvVar => ({ name, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } });
  const env: V1EnvVar[] = [
    value(RUNNER_ENV.operationId, claim.id),
    value(RUNNER_ENV.protocolVersion, String(manager.runnerProtocolVersion)),
    value(RUNNER_ENV.executorIdentity, manager.executorIdentity),
    value(RUNNER_ENV.terminationGraceSeconds, String(grace)),
    value(RUNNER_ENV.terminationMessagePath, JOB_PATHS.terminationLog),
    value('HOME', JOB_PATHS.work),
    value('TMPDIR', JOB_PATHS.work),
  ];
  if (resolve) {
    env.push(
      ...registryEnv(resolve),
      value(RUNNER_ENV.ociReference, resolve.reference),
      value(RUNNER_ENV.verificationPolicyFile, `${JOB_PATHS.verificationPolicy}/${VERIFICATION_POLICY_FILE}`),
      value(RUNNER_ENV.expectedVerificationPolicyDigest, resolve.verificationPolicyDigest),
    );
    return sortedEnv(env);
  }
  env.push(
    secret(RUNNER_ENV.dbUrl, input.target!.urlFrom),
    value(RUNNER_ENV.coordinationDigest, bindings.coordinationDigest),
    value(RUNNER_ENV.artifactDir, JOB_PATHS.artifact),
    value(RUNNER_ENV.expectedArtifactDigest, artifact!.digest),
  );
  if (input.dev) env.push(secret(RUNNER_ENV.devUrl, input.dev.urlFrom));
  // Only a format other than the default is carried, so a ptah-format Job rebuilds as the managers before formats built it.
  if (input.migrationFormat !== undefined && input.migrationFormat !== DEFAULT_MIGRATION_FORMAT) env.push(value(RUNNER_ENV.migrationFormat, input.migrationFormat));
  if (input.migrationAdoption !== undefined) env.push(value(RUNNER_ENV.migrationAdoption, adoptionEnvValue(input.migrationAdoption)));
  if (mutating) {
    env.push(
      value(RUNNER_ENV.expectedCoordinationDigest, bindings.coordinationDigest),
      value(RUNNER_ENV.expectedTargetIdentityDigest, bindings.expectedTargetIdentityDigest!),
      value(RUNNER_ENV.dispatchNotAfter, claim.dispatchNotAfter!),
      value(RUNNER_ENV.executionNotAfter, claim.executionNotAfter!),
      value(RUNNER_ENV.lockTimeoutMs, String(lockTimeoutMs!)),
    );
  }
  if (runnerOperation === 'apply') {
    env.push(value(RUNNER_ENV.planDir, JOB_PATHS.plan), value(RUNNER_ENV.expectedPlanContentDigest, bindings.planContentDigest!));
  }
  if (runnerOperation === 'migration-apply') {
    // Canonical JSON, so the runner can check the value against its digest byte for byte.
    const sequence = bindings.migrationSequence!.map(sequenceEntry);
    env.push(
      value(RUNNER_ENV.expectedMigrationSequence, canonicalJson(sequence)),
      value(RUNNER_ENV.expectedMigrationSequenceDigest, expectedSequenceDigest(sequence)),
      value(RUNNER_ENV.expectedHistoryFingerprint, bindings.historyFingerprint!),
    );
  }
  return sortedEnv(env);
}

/** The registry Secret and CA, as volumes only the registry-facing container mounts. */
function registryStorage(access: RegistryAccess): { volumes: V1Volume[]; volumeMounts: V1VolumeMount[] } {
  const volumes: V1Volume[] = [];
  const volumeMounts: V1VolumeMount[] = [];
  if (access.registryAuthFrom) {
    volumes.push({ name: 'registry-auth', secret: { secretName: access.registryAuthFrom.name, items: [{ key: '.dockerconfigjson', path: REGISTRY_CONFIG_FILE }], defaultMode: READ_ONLY_FILE_MODE } });
    volumeMounts.push({ name: 'registry-auth', mountPath: JOB_PATHS.registryConfig, readOnly: true });
  }
  if (access.caFrom) {
    volumes.push({ name: 'registry-ca', configMap: { name: access.caFrom.name, items: [{ key: access.caFrom.key, path: REGISTRY_CA_FILE }], defaultMode: READ_ONLY_FILE_MODE } });
    volumeMounts.push({ name: 'registry-ca', mountPath: JOB_PATHS.registryCa, readOnly: true });
  }
  return { volumes, volumeMounts };
}

const WORK_MOUNT: V1VolumeMount = { name: 'work', mountPath: JOB_PATHS.work };

function storage(input: OperationJobInput, runnerOperation: RunnerOperation): { volumes: V1Volume[]; volumeMounts: V1VolumeMount[]; fetch?: { env: V1EnvVar[]; volumeMounts: V1VolumeMount[] } } {
  const volumes: V1Volume[] = [];
  const volumeMounts: V1VolumeMount[] = [];
  let fetch: { env: V1EnvVar[]; volumeMounts: V1VolumeMount[] } | undefined;
  const { artifact, resolve } = input;
  if (resolve) {
    const registry = registryStorage(resolve);
    volumes.push(...registry.volumes, {
      name: 'verification-policy',
      configMap: { name: resolve.verificationPolicyRef.name, items: [{ key: resolve.verificationPolicyRef.key, path: VERIFICATION_POLICY_FILE }], defaultMode: READ_ONLY_FILE_MODE },
    });
    volumeMounts.push(...registry.volumeMounts, { name: 'verification-policy', mountPath: JOB_PATHS.verificationPolicy, readOnly: true });
  } else if (artifact && 'oci' in artifact) {
    // The fetch init container holds the registry Secret and writes the files; the runner reads them and never sees the Secret.
    const registry = registryStorage(artifact.oci);
    volumes.push({ name: 'artifact', emptyDir: { medium: 'Memory', sizeLimit: FETCHED_ARTIFACT_SIZE_LIMIT } }, ...registry.volumes);
    fetch = {
      env: sortedEnv([
        ...registryEnv(artifact.oci),
        value(RUNNER_ENV.ociReference, artifact.oci.pinnedReference),
        value(RUNNER_ENV.artifactDir, JOB_PATHS.artifact),
        value(RUNNER_ENV.expectedArtifactDigest, artifact.digest),
        value(RUNNER_ENV.terminationMessagePath, JOB_PATHS.terminationLog),
        value('HOME', JOB_PATHS.work),
        value('TMPDIR', JOB_PATHS.work),
      ]),
      volumeMounts: [{ name: 'artifact', mountPath: JOB_PATHS.artifact }, ...registry.volumeMounts, WORK_MOUNT],
    };
    volumeMounts.push({ name: 'artifact', mountPath: JOB_PATHS.artifact, readOnly: true });
  } else if (artifact) {
    volumes.push({ name: 'artifact', configMap: { name: artifact.configMapName, defaultMode: READ_ONLY_FILE_MODE } });
    volumeMounts.push({ name: 'artifact', mountPath: JOB_PATHS.artifact, readOnly: true });
  }
  if (runnerOperation === 'apply') {
    volumes.push({
      name: 'plan',
      projected: {
        defaultMode: READ_ONLY_FILE_MODE,
        sources: input.bindings.planChunkNames!.map((name, i) => ({
          configMap: { name, items: [{ key: PLAN_CHUNK_KEY, path: chunkFileName(i), mode: READ_ONLY_FILE_MODE }] },
        })),
      },
    });
    volumeMounts.push({ name: 'plan', mountPath: JOB_PATHS.plan, readOnly: true });
  }
  volumes.push({ name: 'work', emptyDir: { medium: 'Memory', sizeLimit: WORK_SIZE_LIMIT } });
  volumeMounts.push(WORK_MOUNT);
  return { volumes, volumeMounts, ...(fetch ? { fetch } : {}) };
}

/** The scheduling fields spec.execution declares, in the shape the API server stores them (absent when empty). */
function scheduling(execution: ExecutionSpec): Partial<V1PodSpec> {
  const fields: Partial<V1PodSpec> = {};
  const affinity = storedShape(toPlain(execution.affinity));
  if (affinity !== undefined) fields.affinity = affinity as V1Affinity;
  const imagePullSecrets = storedShape(toPlain(execution.imagePullSecrets));
  if (imagePullSecrets !== undefined) fields.imagePullSecrets = imagePullSecrets as V1LocalObjectReference[];
  const nodeSelector = storedShape(toPlain(execution.nodeSelector), true);
  if (nodeSelector !== undefined) fields.nodeSelector = nodeSelector as Record<string, string>;
  const tolerations = storedShape(toPlain(execution.tolerations));
  if (tolerations !== undefined) fields.tolerations = tolerations as V1Toleration[];
  if (execution.runtimeClassName) fields.runtimeClassName = execution.runtimeClassName;
  if (execution.priorityClassName) fields.priorityClassName = execution.priorityClassName;
  return fields;
}
