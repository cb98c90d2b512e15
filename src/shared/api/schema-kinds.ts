// The declarative family: PtahSchema, its immutable plans and plan chunks, and the approvals that authorize a
// plan's Apply.
import { acknowledgmentKind } from './acknowledgment-kind.js';
import { approvalKind } from './approval-kind.js';
import { duration } from './duration.js';
import { conditionReason, conditionStatus, defineKind, NAME_AT_MOST_63, type ResourceOf } from './kind.js';
import { array, boolean, integer, object, oneOf, optional, string, withDefault, type Input, type Static } from './schema.js';
import {
  activeOperation,
  admissionSnapshot,
  applyPolicy,
  artifactSource,
  bindingEpoch,
  conditions,
  conditionsStatus,
  count,
  databaseTarget,
  dnsLabel,
  dnsSubdomain,
  executionBinding,
  executionSpec,
  identity,
  interval,
  leaseDurationSeconds,
  leaseEpoch,
  managerRecord,
  objectRef,
  pendingLockRelease,
  pinnedArtifact,
  refusedReading,
  secretKeyRef,
  sha256,
  specTimeoutRules,
  timestamp,
  uid,
} from './shapes.js';

/** The artifact ConfigMap key holding the desired schema. */
export const SCHEMA_ARTIFACT_KEY = 'schema.sql';

/** Largest plan document, and its chunks (base64 of 512 KiB is 699052 characters). */
export const PLAN_LIMITS = { maxBytes: 8 * 1024 * 1024, maxChunks: 16, maxChunkBytes: 512 * 1024, maxChunkBase64: 699052 } as const;

export const SCHEMA_PHASES = [
  'Pending',
  'Resolving',
  'Observing',
  'Planning',
  'ReadyToApply',
  'AwaitingApproval',
  'Blocked',
  'Applying',
  'VerifyingConvergence',
  'InSync',
  'Suspended',
  'Failed',
] as const;
export type SchemaPhase = (typeof SCHEMA_PHASES)[number];

const schemaPolicy = object(
  {
    apply: applyPolicy(),
    allowDestructive: withDefault(boolean({ description: 'Permits destructive plans; each still needs an approval.' }), false),
    lockTimeout: withDefault(duration({ min: '1s', max: '10m', description: 'Wait for the database’s own locks.' }), '30s'),
  },
  { description: 'Safety decisions.' },
);

const devDatabase = object({ urlFrom: secretKeyRef }, { description: 'A scratch database the planner may use; never the target.' });

export const ptahSchemaSpec = object(
  {
    target: databaseTarget,
    desired: artifactSource,
    dev: optional(devDatabase),
    policy: withDefault(schemaPolicy, {}),
    interval: interval(),
    execution: withDefault(executionSpec, {}),
    suspend: withDefault(boolean({ description: 'No new Jobs; a running Apply is still followed to its end.' }), false),
  },
  { description: `The desired schema (key ${SCHEMA_ARTIFACT_KEY} of the artifact ConfigMap) and the database it is held to.`, rules: specTimeoutRules },
);
export type PtahSchemaSpec = Static<typeof ptahSchemaSpec>;
export type PtahSchemaSpecInput = Input<typeof ptahSchemaSpec>;

export const driftFinding = object({
  category: string({ maxLength: 64, pattern: '^[a-z][a-z0-9_]*$' }),
  count: integer({ minimum: 1, format: 'int32' }),
});
export type DriftFindingStatus = Static<typeof driftFinding>;

export const schemaTargetStatus = object(
  {
    coordinationDigest: sha256('The realm digest.'),
    identityDigest: optional(sha256('Which database the last observation reached (credential-free).')),
    physicalIdentityDigest: optional(sha256('Which physical database it opened, whatever URL reached it (the realm census).')),
    drift: optional(boolean({ description: 'The last reading found the database differs from the desired schema.' })),
    driftDigest: optional(sha256()),
    driftFindings: optional(array(driftFinding, { maxItems: 64 })),
    lastObservedAt: optional(timestamp()),
  },
  { description: 'What the last observation saw; categories and counts only, never names or SQL.' },
);
export type SchemaTargetStatus = Static<typeof schemaTargetStatus>;

export const currentPlan = object(
  {
    name: dnsSubdomain(),
    uid: uid(),
    fingerprint: sha256(),
    contentDigest: sha256(),
    destructive: boolean(),
    privilegeChanging: optional(boolean({ description: 'The plan grants, revokes or changes row-level security: it always needs an approval.' })),
    lockingStatementCount: optional(count('Statements that rewrite, scan or lock a table; listed in the plan for the approver.')),
    statementCount: count(),
    approvalRequiredBecause: optional(string({ maxLength: 64, pattern: '^[A-Z][A-Za-z]*$', description: 'Why this plan needs an approval whatever spec.policy.apply says.' })),
  },
  { description: 'The published plan waiting to run.' },
);
export type CurrentPlan = Static<typeof currentPlan>;

export const appliedStatus = object(
  {
    artifactDigest: sha256(),
    planRef: objectRef,
    planFingerprint: sha256(),
    coordinationDigest: sha256(),
    targetIdentityDigest: sha256(),
    executionBindingID: bindingEpoch(),
    operationID: optional(sha256('The Apply the proof attributes the change to; absent when an unknown outcome converged.')),
    dispatchedBy: optional(managerRecord),
    completedAt: timestamp(),
  },
  { description: 'The last plan proven applied by a fresh reading after its Apply.' },
);
export type AppliedStatus = Static<typeof appliedStatus>;

/** What the Apply's own report established: it converged its plan, it changed nothing, or nobody knows. */
export const PENDING_OBSERVATION_OUTCOMES = ['ApplySucceeded', 'ApplyRefused', 'OutcomeUnknown'] as const;
export type PendingObservationOutcome = (typeof PENDING_OBSERVATION_OUTCOMES)[number];

export const pendingObservation = object(
  {
    outcome: oneOf(PENDING_OBSERVATION_OUTCOMES),
    applyOperationID: sha256(),
    applyJobName: dnsLabel(),
    applyJobUID: optional(uid()),
    applyGeneration: integer({ minimum: 1, format: 'int64' }),
    applyPodUIDs: optional(array(uid(), { maxItems: 8, listType: 'set' })),
    applyPodCount: optional(count('More than one Pod forces an unknown outcome.')),
    admissionSnapshot: optional(admissionSnapshot),
    observeAfter: optional(timestamp('No proof before this instant, while the Apply’s Pod may still run.')),
    plan: currentPlan,
    approvalRef: optional(objectRef),
    artifact: pinnedArtifact,
    target: databaseTarget,
    dev: optional(devDatabase),
    connectTimeout: duration({ min: '1s', max: '10m' }),
    lockTimeout: duration({ min: '1s', max: '10m' }),
    coordinationDigest: sha256(),
    targetIdentityDigest: sha256(),
    physicalIdentityDigest: optional(sha256('The physical database the Apply ran against; a proof reading of another proves nothing.')),
    executionBindingID: bindingEpoch(),
    leaseDurationSeconds: leaseDurationSeconds(),
    leaseEpoch: leaseEpoch('The Apply’s Lease epoch; the proof runs under the same one.'),
    planRequired: optional(boolean({ description: 'The raw observation finished; the plan that settles the proof is owed.' })),
    dispatchedBy: optional(managerRecord),
    recordedAt: timestamp(),
  },
  { description: 'The proof an Apply owes: what it ran against, snapshotted at the mutation boundary.' },
);
export type PendingObservation = Static<typeof pendingObservation>;

export const pendingBindingRetirement = object(
  {
    retiredEpoch: bindingEpoch(),
    plan: optional(object({ name: dnsSubdomain(), uid: uid(), fingerprint: sha256() }, { description: 'Its approvals are still to be marked stale.' })),
    job: optional(
      object(
        { operation: string({ maxLength: 32, pattern: '^[A-Z][A-Za-z]*$' }), name: dnsLabel(), uid: optional(uid()) },
        { description: 'The retired claim’s Job, still to be adopted and given its cleanup TTL.' },
      ),
    ),
  },
  { description: 'What an execution-binding rotation still owes the retired epoch.' },
);
export type PendingBindingRetirement = Static<typeof pendingBindingRetirement>;

export const resolvedProof = object(
  {
    operationID: sha256('The Apply whose proof was owed.'),
    outcome: oneOf(PENDING_OBSERVATION_OUTCOMES),
    acknowledgmentRef: objectRef,
    acknowledgedBy: identity,
    resolvedAt: timestamp(),
  },
  { description: 'The last proof no reading finished, ended by a person’s PtahSchemaRunAcknowledgment.' },
);
export type ResolvedProof = Static<typeof resolvedProof>;

export const ptahSchemaStatus = object({
  observedGeneration: optional(integer({ minimum: 0, format: 'int64' })),
  phase: optional(oneOf(SCHEMA_PHASES, { description: 'A summary; decisions read conditions.' })),
  conditions: optional(conditions()),
  artifact: optional(pinnedArtifact),
  executionBinding: optional(executionBinding),
  target: optional(schemaTargetStatus),
  plan: optional(currentPlan),
  applied: optional(appliedStatus),
  pendingObservation: optional(pendingObservation),
  resolvedProof: optional(resolvedProof),
  refusedReading: optional(refusedReading),
  pendingLockRelease: optional(pendingLockRelease),
  pendingBindingRetirement: optional(pendingBindingRetirement),
  activeOperation: optional(activeOperation),
  nextReconciliationTime: optional(timestamp()),
});
export type PtahSchemaStatus = Static<typeof ptahSchemaStatus>;

export const ptahSchemaKind = defineKind('PtahSchema', {
  description: 'A desired PostgreSQL schema, held to one database through observed, approved and proven plans.',
  spec: ptahSchemaSpec,
  status: ptahSchemaStatus,
  rootRules: [NAME_AT_MOST_63],
  printerColumns: [
    { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
    { name: 'Ready', type: 'string', jsonPath: conditionStatus('Ready') },
    { name: 'Reason', type: 'string', jsonPath: conditionReason('Ready') },
    { name: 'Plan', type: 'string', jsonPath: '.status.plan.name', priority: 1 },
    { name: 'Digest', type: 'string', jsonPath: '.status.artifact.digest', priority: 1 },
  ],
});
export type PtahSchema = ResourceOf<typeof ptahSchemaKind>;

export const ptahSchemaPlanSpec = object({
  schemaRef: objectRef,
  fingerprint: sha256('The approval identity: digest of every binding below.'),
  contentDigest: sha256('Digest of the plan document the chunks reconstruct.'),
  size: integer({ minimum: 1, maximum: PLAN_LIMITS.maxBytes, format: 'int32' }),
  chunks: array(dnsSubdomain(), { minItems: 1, maxItems: PLAN_LIMITS.maxChunks, description: 'PtahSchemaPlanChunk names, in order.' }),
  statementCount: count(),
  destructive: boolean(),
  privilegeChanging: boolean({ description: 'The plan grants, revokes or changes row-level security: it always needs an approval.' }),
  lockingStatementCount: count('Statements PostgreSQL runs by rewriting, scanning or locking a table (see the plan document).'),
  transactional: boolean({ description: 'False for a plan of concurrent index builds, run outside a transaction.' }),
  artifactDigest: sha256(),
  coordinationDigest: sha256(),
  targetIdentityDigest: sha256(),
  actualStateFingerprint: sha256(),
  policyFingerprint: sha256(),
  verificationPolicyUID: uid(),
  verificationPolicyDigest: sha256(),
  executionBindingID: bindingEpoch(),
  producedBy: object({ operationID: sha256(), jobName: dnsLabel() }, { description: 'The Plan operation that computed it.' }),
  createdAt: timestamp(),
});
export type PtahSchemaPlanSpec = Static<typeof ptahSchemaPlanSpec>;

export const ptahSchemaPlanKind = defineKind('PtahSchemaPlan', {
  description: 'An immutable plan: the exact statements one Apply may run, bound to everything they were computed from.',
  spec: ptahSchemaPlanSpec,
  status: conditionsStatus,
  immutableSpec: 'a plan is immutable; publish a new plan instead',
  printerColumns: [
    { name: 'Schema', type: 'string', jsonPath: '.spec.schemaRef.name' },
    { name: 'Statements', type: 'integer', jsonPath: '.spec.statementCount' },
    { name: 'Destructive', type: 'boolean', jsonPath: '.spec.destructive' },
    { name: 'Privileges', type: 'boolean', jsonPath: '.spec.privilegeChanging' },
    { name: 'Locking', type: 'integer', jsonPath: '.spec.lockingStatementCount' },
    { name: 'Fingerprint', type: 'string', jsonPath: '.spec.fingerprint', priority: 1 },
  ],
});
export type PtahSchemaPlan = ResourceOf<typeof ptahSchemaPlanKind>;

export const ptahSchemaPlanChunkSpec = object({
  data: string({ format: 'byte', minLength: 1, maxLength: PLAN_LIMITS.maxChunkBase64, description: 'Base64 of at most 512 KiB.' }),
});

export const ptahSchemaPlanChunkKind = defineKind('PtahSchemaPlanChunk', {
  description: 'One piece of a plan document, owned by its PtahSchemaPlan.',
  spec: ptahSchemaPlanChunkSpec,
  status: undefined,
  immutableSpec: 'a plan chunk is immutable',
  printerColumns: [{ name: 'Plan', type: 'string', jsonPath: '.metadata.ownerReferences[0].name' }],
});
export type PtahSchemaPlanChunk = ResourceOf<typeof ptahSchemaPlanChunkKind>;

export const ptahSchemaApprovalKind = approvalKind('PtahSchemaApproval', {
  plan: 'PtahSchemaPlan',
  refField: 'schemaRef',
  refColumn: 'Schema',
  conditionColumns: ['Consumed', 'Stale'],
});
export const ptahSchemaApprovalSpec = ptahSchemaApprovalKind.spec;
export type PtahSchemaApprovalSpec = Static<typeof ptahSchemaApprovalSpec>;
export type PtahSchemaApproval = ResourceOf<typeof ptahSchemaApprovalKind>;

export const ptahSchemaRunAcknowledgmentKind = acknowledgmentKind('PtahSchemaRunAcknowledgment', {
  description: 'A person’s statement that an Apply whose proof no reading can finish has been accounted for, which ends the proof and lets the schema read and plan again.',
  refField: 'schemaRef',
  refColumn: 'Schema',
  operation: 'Must name the schema’s status.pendingObservation.applyOperationID.',
});
export const ptahSchemaRunAcknowledgmentSpec = ptahSchemaRunAcknowledgmentKind.spec;
export type PtahSchemaRunAcknowledgmentSpec = Static<typeof ptahSchemaRunAcknowledgmentSpec>;
export type PtahSchemaRunAcknowledgment = ResourceOf<typeof ptahSchemaRunAcknowledgmentKind>;
