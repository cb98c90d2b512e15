// Rebuilds a claim's Job from the objects it was decided from, for both families: the one rebuild the controller
// (read-back, adoption, supervision) and the controller-write webhook (Job create) hold a Job to through
// jobclaim.match, so neither can recognise a Job the other would not.
import type { V1Job } from '@kubernetes/client-node';
import {
  buildOperationJob,
  JobBuildError,
  type ClaimedOperation,
  type ExecutionSpec,
  type JobArtifact,
  type JobBindings,
  type RegistryAccess,
  type ResolveInput,
  type ManagerIdentity,
  type PolicySpec,
  type SecretKeyRef,
} from './build.js';
import type { MigrationFormat } from '../migration-format.js';
import type { MigrationAdoption } from '../migration-adoption.js';
import type { RepairResolution } from '../migration-repair.js';
import { familyOfKind, JOB_ANNOTATIONS, OWNER_API_VERSION } from './metadata.js';
import { runnerOperationFor } from './operations.js';

/** A PtahSchema or PtahMigration, as far as its Jobs are built from it. */
export interface ClaimOwnerObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string };
  spec: {
    target: { urlFrom: SecretKeyRef };
    /** PtahSchema only: the scratch database a Plan uses. */
    dev?: { urlFrom: SecretKeyRef };
    execution?: ExecutionSpec;
    /** Defaulted by the API server; the builder fills in the same defaults when it is read without them. */
    policy?: PolicySpec;
    /** PtahMigration: where its artifact comes from, and the directory format (defaulted by the API server to ptah). */
    artifact?: ArtifactSourceSpec & { format?: MigrationFormat };
    /** PtahSchema: where its desired schema comes from. */
    desired?: ArtifactSourceSpec;
    /** PtahMigration only: spec.adoption. */
    adoption?: MigrationAdoption;
  };
  status?: {
    artifact?: { configMapName?: string; oci?: { pinnedReference: string }; digest: string };
    /** PtahSchema only: the proof an Apply owes, with the connection the Apply ran against. */
    pendingObservation?: { applyOperationID: string; target: { urlFrom: SecretKeyRef }; dev?: { urlFrom: SecretKeyRef } };
  };
}

/** spec.artifact / spec.desired, as far as a Job is built from it. */
export interface ArtifactSourceSpec {
  oci?: { reference: string; registryAuthFrom?: { name: string }; caFrom?: { name: string; key: string } };
  verificationPolicyRef?: { name: string; key: string };
}

interface PlanIdentity {
  metadata?: { name?: string; uid?: string };
}

/** The PtahSchemaPlan a schema Apply runs. */
export interface SchemaApplyPlan extends PlanIdentity {
  spec: {
    contentDigest: string;
    chunks: readonly string[];
    coordinationDigest: string;
    targetIdentityDigest: string;
    executionBindingID?: string;
  };
}

/** The PtahMigrationPlan a migration Apply runs. */
export interface MigrationApplyPlan extends PlanIdentity {
  spec: {
    migrations: readonly { version: string; checksum: string }[];
    /** A repair plan's repair of a dirty row; its sequence is that one entry. */
    repair?: { version: string; checksum: string; resolution: RepairResolution };
    historyFingerprint: string;
    coordinationDigest: string;
    targetIdentityDigest: string;
    executionBindingID?: string;
  };
}

export interface RebuildClaimJobInput {
  owner: ClaimOwnerObject;
  claim: ClaimedOperation;
  /** An Apply claim's plan, read (uncached) under claim.planRef. */
  plan?: SchemaApplyPlan | MigrationApplyPlan;
  /** The owner's realm, for a claim that records none (one that takes no Lease). */
  coordinationDigest?: string;
  /**
   * The manager rebuilding the Job, with the bound components (executor identity, versions) of the binding in
   * force; its images and revision give way to those the live Job recorded.
   */
  manager: ManagerIdentity;
  /** The Job that stands under the claim's name, when there is one. */
  liveJob?: V1Job;
}

/**
 * The Job `claim` builds. The manager identity the live Job recorded on its Pod template (controller image and
 * revision, runner image) is taken first: it binds nothing (the epoch binds the executor identity and the
 * versions, the admission snapshot pins the template), so a manager upgrade that keeps the execution binding
 * rebuilds its predecessor's Job exactly and adopts it, whatever image reference the new release ships under.
 */
export function rebuildClaimJob(input: RebuildClaimJobInput): V1Job {
  const { owner, claim } = input;
  const family = familyOfKind(owner.kind);
  if (!family) throw new JobBuildError('InvalidInput', `${JSON.stringify(owner.kind)} is not a kind that dispatches Jobs`);
  if (owner.apiVersion !== undefined && owner.apiVersion !== OWNER_API_VERSION) {
    throw new JobBuildError('InvalidInput', `the owner is ${owner.apiVersion}, not ${OWNER_API_VERSION}`);
  }
  const { name = '', namespace = '', uid = '' } = owner.metadata ?? {};
  const runnerOperation = runnerOperationFor(family, claim.type);
  if (!runnerOperation) throw new JobBuildError('UnknownOperation', `operation type ${JSON.stringify(claim.type)} is not a ${family} operation this manager runs`);
  const coordinationDigest = claim.coordinationDigest ?? input.coordinationDigest;
  if (!coordinationDigest) throw new JobBuildError('InvalidBinding', 'neither the claim nor the caller names the realm');

  let bindings: JobBindings = { coordinationDigest };
  if (runnerOperation === 'apply' || runnerOperation === 'migration-apply') {
    const plan = input.plan;
    if (!plan) throw new JobBuildError('InvalidBinding', `the ${family} Apply's plan is not given`);
    checkPlanIdentity(plan, claim, coordinationDigest);
    if (runnerOperation === 'apply') {
      if (!('chunks' in plan.spec)) throw new JobBuildError('InvalidBinding', 'a schema Apply runs a PtahSchemaPlan');
      bindings = {
        ...bindings,
        expectedTargetIdentityDigest: plan.spec.targetIdentityDigest,
        planContentDigest: plan.spec.contentDigest,
        planChunkNames: plan.spec.chunks,
      };
    } else {
      if (!('migrations' in plan.spec)) throw new JobBuildError('InvalidBinding', 'a migration Apply runs a PtahMigrationPlan');
      bindings = {
        ...bindings,
        expectedTargetIdentityDigest: plan.spec.targetIdentityDigest,
        migrationSequence: plan.spec.repair
          ? [{ version: plan.spec.repair.version, checksum: plan.spec.repair.checksum, repair: plan.spec.repair.resolution }]
          : plan.spec.migrations.map(({ version, checksum }) => ({ version, checksum })),
        historyFingerprint: plan.spec.historyFingerprint,
      };
    }
  } else if (input.plan) {
    throw new JobBuildError('InvalidBinding', `a plan is given for a ${family} ${claim.type}, which runs none`);
  }

  const source = (family === 'schema' ? owner.spec.desired : owner.spec.artifact) ?? {};
  const access = (oci: NonNullable<ArtifactSourceSpec['oci']>): RegistryAccess => ({
    kind: family === 'schema' ? 'schema' : 'migrations',
    ...(oci.registryAuthFrom ? { registryAuthFrom: oci.registryAuthFrom } : {}),
    ...(oci.caFrom ? { caFrom: oci.caFrom } : {}),
  });
  const reads = claim.type === 'Resolve'
    ? { resolve: resolveInput(source, claim, access) }
    : { ...connectionOf(owner, claim), artifact: jobArtifact(claim.artifact ?? owner.status?.artifact, source, access) };
  if (runnerOperation !== 'plan' && 'dev' in reads) delete reads.dev;
  return buildOperationJob({
    family,
    owner: { apiVersion: OWNER_API_VERSION, kind: owner.kind!, name, namespace, uid },
    claim,
    runnerOperation,
    ...reads,
    ...(owner.spec.artifact?.format ? { migrationFormat: owner.spec.artifact.format } : {}),
    ...(owner.spec.adoption ? { migrationAdoption: owner.spec.adoption } : {}),
    execution: owner.spec.execution ?? {},
    policy: owner.spec.policy ?? {},
    manager: { ...input.manager, ...recordedManager(input.liveJob) },
    bindings,
  });
}

/** A database Job's artifact: the pin, read where the spec says it lives (a ConfigMap, or the registry with its Secret and CA). */
function jobArtifact(pin: NonNullable<ClaimedOperation['artifact']> | undefined, source: ArtifactSourceSpec, access: (oci: NonNullable<ArtifactSourceSpec['oci']>) => RegistryAccess): JobArtifact {
  if (!pin) throw new JobBuildError('InvalidBinding', 'neither the claim nor the owner pins an artifact');
  if (pin.oci) {
    if (!source.oci) throw new JobBuildError('InvalidBinding', 'the pinned artifact is from a registry, but the spec names none');
    return { oci: { ...access(source.oci), pinnedReference: pin.oci.pinnedReference }, digest: pin.digest };
  }
  return { configMapName: pin.configMapName ?? '', digest: pin.digest };
}

/** A Resolve's inputs: the spec's reference and registry access, and the policy digest its claim pinned. */
function resolveInput(source: ArtifactSourceSpec, claim: ClaimedOperation, access: (oci: NonNullable<ArtifactSourceSpec['oci']>) => RegistryAccess): ResolveInput {
  if (!source.oci) throw new JobBuildError('InvalidInput', 'a Resolve needs spec.*.oci; the spec names no registry');
  if (!source.verificationPolicyRef) throw new JobBuildError('InvalidInput', 'the spec names no verification policy');
  if (!claim.verificationPolicy) throw new JobBuildError('InvalidClaim', 'a Resolve claim pins no verification policy');
  return { ...access(source.oci), reference: source.oci.reference, verificationPolicyRef: source.verificationPolicyRef, verificationPolicyDigest: claim.verificationPolicy.digest };
}

/**
 * The database a claim's Job connects to. A schema proof reading's is the one its Apply ran against, as the pending
 * observation recorded it, not the live spec: a target edited while the proof is owed must not turn every proof
 * reading into a reading of another database (the proof would never settle, holding the realm).
 */
function connectionOf(owner: ClaimOwnerObject, claim: ClaimedOperation): { target: { urlFrom: SecretKeyRef }; dev?: { urlFrom: SecretKeyRef } } {
  if (claim.proofOf === undefined) return { target: owner.spec.target, ...(owner.spec.dev ? { dev: owner.spec.dev } : {}) };
  const pending = owner.status?.pendingObservation;
  if (pending?.applyOperationID !== claim.proofOf) {
    throw new JobBuildError('InvalidBinding', `the claim proves Apply ${claim.proofOf}, which the owner no longer owes a proof for`);
  }
  return { target: pending.target, ...(pending.dev ? { dev: pending.dev } : {}) };
}

function checkPlanIdentity(plan: SchemaApplyPlan | MigrationApplyPlan, claim: ClaimedOperation, coordinationDigest: string): void {
  const ref = claim.planRef;
  if (!ref || plan.metadata?.name !== ref.name || plan.metadata?.uid !== ref.uid) {
    throw new JobBuildError('InvalidBinding', 'the plan given is not the one the claim names');
  }
  if (plan.spec.coordinationDigest !== coordinationDigest) throw new JobBuildError('InvalidBinding', 'the plan was computed for another realm than the claim holds');
  if (plan.spec.executionBindingID !== undefined && plan.spec.executionBindingID !== claim.executionBindingID) {
    throw new JobBuildError('InvalidBinding', 'the plan was computed under another execution epoch than the claim');
  }
}

/**
 * The manager images and revision a Job's Pod template records, when it records all three: what a rebuild takes
 * from the live Job first. The runner image is among them: what it carries is bound by the executor identity the
 * Job names (and the runner checks), not by its reference (docs/execution-binding.md).
 */
export function recordedManager(job: V1Job | undefined): Pick<ManagerIdentity, 'controllerImage' | 'controllerRevision' | 'runnerImage'> | undefined {
  const annotations = job?.spec?.template?.metadata?.annotations ?? {};
  const controllerImage = annotations[JOB_ANNOTATIONS.controllerImage];
  const controllerRevision = annotations[JOB_ANNOTATIONS.controllerRevision];
  const runnerImage = annotations[JOB_ANNOTATIONS.runnerImage];
  if (!controllerImage || !controllerRevision || !runnerImage) return undefined;
  return { controllerImage, controllerRevision, runnerImage };
}
