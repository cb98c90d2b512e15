// The objects the controller-write webhook judges, built the way the controller builds them: an owner with a
// persisted claim and admission snapshot, the Job the shared builder makes for it, the plan an Apply runs, the
// plan's chunks and projections, and what the API server does to a Job it stores.
import type { V1ConfigMap, V1Job } from '@kubernetes/client-node';
import { sha256Digest } from '../../src/shared/canonical.js';
import { rebuildClaimJob, type ClaimOwnerObject } from '../../src/shared/job/index.js';
import { jobNameFor, type Family } from '../../src/shared/naming.js';
import { chunkNamesFor, planContentDigest, projectionConfigMaps, splitPlan } from '../../src/shared/planstore.js';
import { resolveSnapshot } from '../../src/shared/podintent.js';
import { coordinationDigest } from '../../src/shared/realm.js';
import type { UserInfo } from '../../src/webhook/admission.js';
import { admissionTime, identityOf } from '../../src/webhook/identity.js';
import { MANAGER_IMAGES, NOW, review, TEST_EXECUTOR_IDENTITY, type MemoryReader, type StoredObject } from './webhook.js';

export const NS = 'team-a';
export const GROUP = 'operator.ptah.run';
export const API = `${GROUP}/v1alpha1`;
export const EPOCH = `v1-${'a'.repeat(32)}`;
export const OLD_EPOCH = `v1-${'b'.repeat(32)}`;
export const d = (seed: string): string => sha256Digest(seed);

export const BINDING = {
  epoch: EPOCH,
  controllerStateVersion: 1,
  executorIdentity: TEST_EXECUTOR_IDENTITY,
  runnerImage: MANAGER_IMAGES.runnerImage,
  runnerProtocolVersion: 1,
  controllerImage: MANAGER_IMAGES.controllerImage,
  controllerRevision: MANAGER_IMAGES.controllerRevision,
};

const TARGET = { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } };
export const REALM = coordinationDigest({ engine: TARGET.engine, namespace: NS, coordinationKey: TARGET.coordinationKey });

export const PLAN_NAME = 'ptah-plan-0123456789abcdef01234567';
export const MPLAN_NAME = 'ptah-mplan-0123456789abcdef01234567';
/** Plan bytes that need two chunks. */
export const PLAN_BYTES = Buffer.from(Array.from({ length: 600 * 1024 }, (_, i) => (i * 7 + 3) % 251));

export interface World {
  family: Family;
  type: string;
  owner: StoredObject & { status: Record<string, unknown> };
  claim: Record<string, unknown> & { jobName: string; id: string };
  /** The Job the claim builds, as the manager submits it. */
  job: V1Job;
  plan?: StoredObject & { spec: Record<string, unknown> };
}

function ownerFor(family: Family): StoredObject & { status: Record<string, unknown> } {
  const kind = family === 'schema' ? 'PtahSchema' : 'PtahMigration';
  return {
    apiVersion: API,
    kind,
    metadata: { name: 'orders', namespace: NS, uid: `uid-${family}-orders`, generation: 3 },
    spec: {
      target: TARGET,
      ...(family === 'schema' ? { desired: { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'p' } } } : {}),
      ...(family === 'migration' ? { artifact: { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'p' } } } : {}),
      ...(family === 'schema' ? { dev: { urlFrom: { name: 'scratch', key: 'url' } } } : {}),
      execution: { activeDeadlineSeconds: 600, podMetadata: { labels: { team: 'payments' } } },
    },
    status: {
      artifact: { configMapName: 'orders-v1', configMapUID: 'uid-cm', digest: d('artifact'), verificationPolicyUID: 'uid-policy', verificationPolicyDigest: d('policy'), resolvedAt: '2030-01-01T00:00:00Z' },
      executionBinding: BINDING,
    },
  };
}

function schemaPlanFor(owner: StoredObject, producedBy: { operationID: string; jobName: string }): StoredObject & { spec: Record<string, unknown> } {
  return {
    apiVersion: API,
    kind: 'PtahSchemaPlan',
    metadata: {
      name: PLAN_NAME,
      namespace: NS,
      uid: 'uid-plan',
      labels: { 'operator.ptah.run/schema': 'orders' },
      ownerReferences: [{ apiVersion: API, kind: 'PtahSchema', name: 'orders', uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      schemaRef: { name: 'orders', uid: owner.metadata.uid },
      fingerprint: d('plan-fingerprint'),
      contentDigest: planContentDigest(PLAN_BYTES),
      size: PLAN_BYTES.length,
      chunks: chunkNamesFor(PLAN_NAME, splitPlan(PLAN_BYTES).length),
      statementCount: 3,
      destructive: false,
      artifactDigest: d('artifact'),
      coordinationDigest: REALM,
      targetIdentityDigest: d('target'),
      actualStateFingerprint: d('actual'),
      policyFingerprint: d('policy-fp'),
      verificationPolicyUID: 'uid-policy',
      verificationPolicyDigest: d('policy'),
      executionBindingID: EPOCH,
      producedBy,
      createdAt: '2030-01-01T00:00:00Z',
    },
  };
}

function migrationPlanFor(owner: StoredObject): StoredObject & { spec: Record<string, unknown> } {
  return {
    apiVersion: API,
    kind: 'PtahMigrationPlan',
    metadata: { name: MPLAN_NAME, namespace: NS, uid: 'uid-mplan' },
    spec: {
      migrationRef: { name: 'orders', uid: owner.metadata.uid },
      fingerprint: d('mplan-fingerprint'),
      migrations: [
        { version: '2', name: 'add_index', checksum: d('m2') },
        { version: '3', name: 'add_column', checksum: d('m3') },
      ],
      historyFingerprint: d('history'),
      currentVersion: '1',
      artifactDigest: d('artifact'),
      coordinationDigest: REALM,
      targetIdentityDigest: d('target'),
      policyFingerprint: d('policy-fp'),
      verificationPolicyUID: 'uid-policy',
      verificationPolicyDigest: d('policy'),
      executionBindingID: EPOCH,
      createdAt: '2030-01-01T00:00:00Z',
    },
  };
}

const rebuild = (owner: StoredObject, claim: Record<string, unknown>, plan: StoredObject | undefined): V1Job =>
  rebuildClaimJob({
    owner: owner as unknown as ClaimOwnerObject,
    claim: claim as never,
    plan: plan as never,
    coordinationDigest: REALM,
    manager: { ...MANAGER_IMAGES, executorIdentity: BINDING.executorIdentity, controllerStateVersion: BINDING.controllerStateVersion, runnerProtocolVersion: BINDING.runnerProtocolVersion },
  });

/**
 * A claim of `type` as its family persists it (admission snapshot included), and the Job it builds. Schema
 * Observe and migration History record no realm: the Job carries the owner's.
 */
export function world(family: Family, type: string, epoch = EPOCH): World {
  const owner = ownerFor(family);
  const mutating = type === 'Apply';
  const recordsRealm = !(family === 'migration' && type === 'History') && type !== 'Observe';
  const base: Record<string, unknown> = {
    type,
    id: d(`op-${family}-${type}`),
    inputFingerprint: d(`input-${family}-${type}`),
    startedAt: '2030-01-01T00:00:00Z',
    attempt: 1,
    executionBindingID: epoch,
    ...(recordsRealm ? { coordinationDigest: REALM } : {}),
    ...(mutating
      ? {
          targetIdentityDigest: d('target'),
          dispatchNotAfter: '2030-01-01T00:05:00Z',
          executionNotAfter: '2030-01-01T00:15:00Z',
          terminationGracePeriodSeconds: 30,
          planRef: family === 'schema' ? { name: PLAN_NAME, uid: 'uid-plan' } : { name: MPLAN_NAME, uid: 'uid-mplan' },
        }
      : {}),
  };
  const jobName = jobNameFor({
    family,
    ownerName: 'orders',
    ownerUid: owner.metadata.uid as string,
    operationType: type,
    operationId: base.id as string,
    executionBindingId: epoch,
    inputFingerprint: base.inputFingerprint as string,
    attempt: 1,
  });
  const claim = { ...base, jobName } as World['claim'];
  const plan = mutating ? (family === 'schema' ? schemaPlanFor(owner, { operationID: d('op-plan'), jobName: 'ptah-plan-job' }) : migrationPlanFor(owner)) : undefined;
  claim.admissionSnapshot = resolveSnapshot(rebuild(owner, claim, plan).spec!.template);
  const job = rebuild(owner, claim, plan);
  owner.status.activeOperation = claim;
  if (family === 'schema' && plan) {
    owner.status.plan = { name: PLAN_NAME, uid: 'uid-plan', fingerprint: plan.spec.fingerprint, contentDigest: plan.spec.contentDigest, destructive: false, statementCount: 3 };
  }
  if (family === 'migration' && plan) owner.status.plan = { name: MPLAN_NAME, uid: 'uid-mplan' };
  return { family, type, owner, claim, job, plan };
}

export const JOB_UID = 'uid-job-1';

/** What the API server makes of a Job it stores: identity, generated selector and labels, an empty status. */
export function stored(job: V1Job, uid = JOB_UID): V1Job {
  const copy = structuredClone(job);
  const name = copy.metadata!.name!;
  copy.metadata = { ...copy.metadata, uid, resourceVersion: '17', generation: 1, creationTimestamp: '2030-01-01T00:00:01Z' as never };
  copy.spec!.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } };
  copy.spec!.template.metadata!.labels = {
    ...copy.spec!.template.metadata!.labels,
    'batch.kubernetes.io/controller-uid': uid,
    'batch.kubernetes.io/job-name': name,
    'controller-uid': uid,
    'job-name': name,
  };
  copy.status = {};
  return copy;
}

export function finished(job: V1Job, type: 'Complete' | 'Failed' = 'Complete'): V1Job {
  return { ...job, status: { conditions: [{ type, status: 'True', lastTransitionTime: '2030-01-01T00:03:00Z' as never }] } };
}

export function withTtl(job: V1Job, ttl = 300): V1Job {
  const copy = structuredClone(job);
  copy.spec!.ttlSecondsAfterFinished = ttl;
  return copy;
}

/** The plan's chunks as PtahSchemaPlanChunk objects, owned by the plan. */
export function chunkObjects(plan: StoredObject & { spec: Record<string, unknown> }, bytes: Uint8Array = PLAN_BYTES): (StoredObject & { spec: { data: string } })[] {
  const names = plan.spec.chunks as string[];
  return splitPlan(bytes).map((chunk, i) => ({
    apiVersion: API,
    kind: 'PtahSchemaPlanChunk',
    metadata: {
      name: names[i]!,
      namespace: NS,
      labels: { 'operator.ptah.run/plan': plan.metadata.name, 'operator.ptah.run/schema': 'orders' },
      ownerReferences: [{ apiVersion: API, kind: 'PtahSchemaPlan', name: plan.metadata.name, uid: plan.metadata.uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: { data: Buffer.from(chunk).toString('base64') },
  }));
}

export function projections(plan: StoredObject & { spec: Record<string, unknown> }): V1ConfigMap[] {
  return projectionConfigMaps(plan as never, splitPlan(PLAN_BYTES));
}

/** Puts the owner, and the plan when there is one, in the reader. */
export function install(reader: MemoryReader, w: World): void {
  reader.put(w.owner);
  if (w.plan) reader.put(w.plan);
}

// ---- the decision kinds: a schema and a migration that approvals and run acknowledgments name ----

export const digestOf = (c: string): string => `sha256:${c.repeat(64)}`;
export const FP = digestOf('1');
export const MFP = digestOf('2');
export const OP = digestOf('3');
export const ALICE: UserInfo = { username: 'alice', uid: 'u-alice', groups: ['system:authenticated', 'dba'] };

/** A schema waiting for the approval of its current plan, and a migration with a plan and an unresolved run. */
export function installDecisionWorld(reader: MemoryReader, namespace = NS): void {
  reader.put({
    apiVersion: API,
    kind: 'PtahSchema',
    metadata: { name: 'orders', namespace, uid: 'uid-orders' },
    spec: {},
    status: { plan: { name: 'ptah-plan-a', uid: 'uid-plan-a', fingerprint: FP, contentDigest: digestOf('9'), destructive: false, statementCount: 2 } },
  });
  reader.put({ apiVersion: API, kind: 'PtahSchemaPlan', metadata: { name: 'ptah-plan-a', namespace, uid: 'uid-plan-a' }, spec: { schemaRef: { name: 'orders', uid: 'uid-orders' }, fingerprint: FP } });
  reader.put({
    apiVersion: API,
    kind: 'PtahMigration',
    metadata: { name: 'billing', namespace, uid: 'uid-billing' },
    spec: {},
    status: { plan: { name: 'ptah-mplan-a', uid: 'uid-mplan-a' }, unresolvedRun: { outcome: 'Unknown', operationID: OP, recordedAt: '2030-01-01T00:00:00Z' } },
  });
  reader.put({ apiVersion: API, kind: 'PtahMigrationPlan', metadata: { name: 'ptah-mplan-a', namespace, uid: 'uid-mplan-a' }, spec: { migrationRef: { name: 'billing', uid: 'uid-billing' }, fingerprint: MFP } });
}

export type DecisionKindName = 'PtahSchemaApproval' | 'PtahMigrationApproval' | 'PtahMigrationRunAcknowledgment';
export const DECISION_RESOURCE: Record<DecisionKindName, string> = {
  PtahSchemaApproval: 'ptahschemaapprovals',
  PtahMigrationApproval: 'ptahmigrationapprovals',
  PtahMigrationRunAcknowledgment: 'ptahmigrationrunacknowledgments',
};
/** What each kind names in installDecisionWorld, before the stamp. */
export const DECISION_SPEC: Record<DecisionKindName, Record<string, unknown>> = {
  PtahSchemaApproval: { schemaRef: { name: 'orders', uid: 'uid-orders' }, planRef: { name: 'ptah-plan-a', uid: 'uid-plan-a' }, planFingerprint: FP },
  PtahMigrationApproval: { migrationRef: { name: 'billing', uid: 'uid-billing' }, planRef: { name: 'ptah-mplan-a', uid: 'uid-mplan-a' }, planFingerprint: MFP },
  PtahMigrationRunAcknowledgment: { migrationRef: { name: 'billing', uid: 'uid-billing' }, operationID: OP },
};

/** What the mutating pass would have stamped for `user` in request `uid`. */
export function stampedFor(kind: DecisionKindName, user: UserInfo, uid: string): Record<string, unknown> {
  const identity = identityOf(user);
  return kind === 'PtahMigrationRunAcknowledgment'
    ? { acknowledgedBy: identity, acknowledgedAt: admissionTime(NOW), mutationRequestUID: uid }
    : { approver: identity, approvedAt: admissionTime(NOW), mutationRequestUID: uid };
}

/** The CREATE of a decision `d1` in `namespace` by `user`. */
export function decisionCreate(kind: DecisionKindName, spec: Record<string, unknown>, user: UserInfo = ALICE, uid = 'req-1', namespace = NS) {
  return review({
    uid,
    operation: 'CREATE',
    kind: { group: GROUP, version: 'v1alpha1', kind },
    resource: { group: GROUP, version: 'v1alpha1', resource: DECISION_RESOURCE[kind] },
    namespace,
    name: 'd1',
    object: { apiVersion: API, kind, metadata: { name: 'd1', namespace }, spec },
    userInfo: user,
  });
}
