// Inputs for the operation-Job tests (job-build, jobclaim): one claim per operation, built the way a family
// builds it, and a simulation of what the API server does to a Job it stores.
import type { V1Job } from '@kubernetes/client-node';
import { sha256Digest } from '../../src/shared/canonical.js';
import {
  buildOperationJob,
  type ClaimedOperation,
  type ManagerIdentity,
  type MigrationApplyPlan,
  type OperationJobInput,
  type RebuildClaimJobInput,
  type SchemaApplyPlan,
} from '../../src/shared/job/index.js';
import { jobNameFor, type Family } from '../../src/shared/naming.js';
import { resolveSnapshot } from '../../src/shared/podintent.js';
import type { RunnerOperation } from '../../src/shared/runner-env.js';

export const d = (seed: string): string => sha256Digest(seed);
export const EPOCH = 'v1-0123456789abcdef0123456789abcdef';
export const JOB_UID = '9d3f2c1e-0000-4000-8000-000000000001';

export const MANAGER: ManagerIdentity = {
  controllerImage: 'registry.example/ptah-operator@sha256:' + 'a'.repeat(64),
  controllerRevision: 'rev-1',
  runnerImage: 'registry.example/ptah-runner@sha256:' + 'b'.repeat(64),
  executorIdentity: 'sha256:' + 'e'.repeat(64),
  controllerStateVersion: 1,
  runnerProtocolVersion: 1,
};

export interface Case {
  family: Family;
  type: string;
  runnerOperation: RunnerOperation;
}

export const CASES: Case[] = [
  { family: 'schema', type: 'Observe', runnerOperation: 'observe' },
  { family: 'schema', type: 'Plan', runnerOperation: 'plan' },
  { family: 'schema', type: 'Apply', runnerOperation: 'apply' },
  { family: 'migration', type: 'History', runnerOperation: 'migration-history' },
  { family: 'migration', type: 'Apply', runnerOperation: 'migration-apply' },
];

const STARTED_AT = '2030-01-01T00:00:00Z';
const NOT_AFTER = '2030-01-01T00:15:00Z';
export const PLAN_REF = { name: 'ptah-plan-0123456789abcdef01234567', uid: 'plan-uid-1' };

function ownerOf(family: Family): OperationJobInput['owner'] {
  return family === 'schema'
    ? { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', name: 'orders', namespace: 'team-a', uid: 'schema-uid-1' }
    : { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigration', name: 'orders', namespace: 'team-a', uid: 'migration-uid-1' };
}

/** A claim as its family writes it, with the Job name its own fields derive. */
export function claimFor(c: Case, overrides: Partial<ClaimedOperation> = {}): ClaimedOperation {
  const owner = ownerOf(c.family);
  const mutating = c.type === 'Apply';
  const base = {
    type: c.type,
    id: d(`op-${c.family}-${c.type}`),
    inputFingerprint: d(`input-${c.family}-${c.type}`),
    startedAt: STARTED_AT,
    attempt: 1,
    executionBindingID: EPOCH,
    coordinationDigest: d('realm'),
    ...(mutating
      ? { targetIdentityDigest: d('target'), dispatchNotAfter: NOT_AFTER, executionNotAfter: NOT_AFTER, terminationGracePeriodSeconds: 30, planRef: PLAN_REF }
      : {}),
    ...overrides,
  };
  const jobName = jobNameFor({
    family: c.family,
    ownerName: owner.name,
    ownerUid: owner.uid,
    operationType: base.type,
    operationId: base.id,
    executionBindingId: base.executionBindingID,
    inputFingerprint: base.inputFingerprint,
    attempt: base.attempt,
  });
  return { jobName, ...base };
}

/** The owners' spec.policy.lockTimeout in the fixtures. */
export const LOCK_TIMEOUT: Record<Family, string> = { schema: '45s', migration: '2m30s' };

export function inputFor(c: Case, claimOverrides: Partial<ClaimedOperation> = {}): OperationJobInput {
  return {
    family: c.family,
    owner: ownerOf(c.family),
    claim: claimFor(c, claimOverrides),
    runnerOperation: c.runnerOperation,
    target: { urlFrom: { name: 'database', key: 'url' } },
    ...(c.runnerOperation === 'plan' ? { dev: { urlFrom: { name: 'scratch', key: 'url' } } } : {}),
    artifact: { configMapName: 'orders-schema-v3', digest: d('artifact') },
    execution: {
      activeDeadlineSeconds: 600,
      resources: { requests: { cpu: '0.25', memory: '256Mi' }, limits: { memory: '0.5Gi' } },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'database', effect: 'NoSchedule' }],
      podMetadata: { labels: { team: 'payments' }, annotations: { 'example.com/owner': 'payments' } },
    },
    // Not the API defaults, so a test sees the value come from the spec.
    policy: { lockTimeout: LOCK_TIMEOUT[c.family] },
    manager: MANAGER,
    bindings: {
      coordinationDigest: d('realm'),
      ...(c.runnerOperation === 'apply' || c.runnerOperation === 'migration-apply' ? { expectedTargetIdentityDigest: d('target') } : {}),
      ...(c.runnerOperation === 'apply'
        ? { planContentDigest: d('plan-bytes'), planChunkNames: [`${PLAN_REF.name}-000`, `${PLAN_REF.name}-001`] }
        : {}),
      ...(c.runnerOperation === 'migration-apply'
        ? { migrationSequence: [{ version: '0002', checksum: d('m2') }, { version: '0003', checksum: d('m3') }], historyFingerprint: d('history') }
        : {}),
    },
  };
}

/** The input with the admission snapshot the dispatch's snapshot step would have recorded. */
export function snapshotted(input: OperationJobInput): OperationJobInput {
  const template = buildOperationJob(input).spec!.template;
  return { ...input, claim: { ...input.claim, admissionSnapshot: resolveSnapshot(template) } };
}

/**
 * What the API server does to a Job it stores: assigns identity and bookkeeping, generates the selector and the
 * template labels bound to the UID, fills the deprecated serviceAccount alias, spells quantities canonically
 * and adds an (empty) status.
 */
export function stored(job: V1Job, uid = JOB_UID): V1Job {
  const copy = structuredClone(job);
  const name = copy.metadata!.name!;
  copy.metadata = {
    ...copy.metadata,
    uid,
    resourceVersion: '4711',
    generation: 1,
    creationTimestamp: new Date('2030-01-01T00:00:01Z'),
    managedFields: [{ manager: 'ptah-operator', operation: 'Update', apiVersion: 'batch/v1' }],
  };
  const spec = copy.spec!;
  spec.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } };
  spec.template.metadata!.labels = {
    ...spec.template.metadata!.labels,
    'batch.kubernetes.io/controller-uid': uid,
    'batch.kubernetes.io/job-name': name,
    'controller-uid': uid,
    'job-name': name,
  };
  const podSpec = spec.template.spec!;
  podSpec.serviceAccount = podSpec.serviceAccountName;
  const canonical: Record<string, string> = { '0.25': '250m', '0.5Gi': '512Mi' };
  for (const container of podSpec.containers) {
    for (const list of [container.resources?.requests, container.resources?.limits]) {
      for (const [k, v] of Object.entries(list ?? {})) if (canonical[v]) list![k] = canonical[v]!;
    }
  }
  copy.status = { active: 1 };
  return copy;
}

/** The PtahSchema or PtahMigration an input was taken from. */
export function ownerObjectFor(input: OperationJobInput): RebuildClaimJobInput['owner'] {
  return {
    apiVersion: input.owner.apiVersion,
    kind: input.owner.kind,
    metadata: { name: input.owner.name, namespace: input.owner.namespace, uid: input.owner.uid },
    spec: { target: input.target!, ...(input.dev ? { dev: input.dev } : {}), execution: input.execution, policy: input.policy },
    status: { artifact: input.artifact },
  };
}

export const SCHEMA_PLAN: SchemaApplyPlan = {
  metadata: PLAN_REF,
  spec: {
    contentDigest: d('plan-bytes'),
    chunks: [`${PLAN_REF.name}-000`, `${PLAN_REF.name}-001`],
    coordinationDigest: d('realm'),
    targetIdentityDigest: d('target'),
    executionBindingID: EPOCH,
  },
};

export const MIGRATION_PLAN: MigrationApplyPlan = {
  metadata: PLAN_REF,
  spec: {
    migrations: [
      { version: '0002', checksum: d('m2') },
      { version: '0003', checksum: d('m3') },
    ],
    historyFingerprint: d('history'),
    coordinationDigest: d('realm'),
    targetIdentityDigest: d('target'),
  },
};

/** The plan an Apply case runs, none for the others. */
export function planObjectFor(c: Case): SchemaApplyPlan | MigrationApplyPlan | undefined {
  if (c.runnerOperation === 'apply') return SCHEMA_PLAN;
  if (c.runnerOperation === 'migration-apply') return MIGRATION_PLAN;
  return undefined;
}
