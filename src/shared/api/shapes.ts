// Shapes more than one kind uses: references, identities, the target and execution spec, conditions, and the
// status records of the mutation lifecycle (the claim, the lock release, the admission snapshot).
import type { V1Affinity, V1ResourceRequirements, V1Toleration } from '@kubernetes/client-node';
import { duration } from './duration.js';
import {
  array,
  boolean,
  integer,
  object,
  oneOf,
  optional,
  passThrough,
  string,
  stringMap,
  withDefault,
  type Static,
} from './schema.js';

// ---- scalar fields ----

const DNS_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';

export const dnsSubdomain = (description?: string) =>
  string({ description, maxLength: 253, pattern: `^${DNS_LABEL}(\\.${DNS_LABEL})*$` });
export const dnsLabel = (description?: string) => string({ description, maxLength: 63, pattern: `^${DNS_LABEL}$` });
export const uid = (description?: string) => string({ description, minLength: 1, maxLength: 128 });
export const sha256 = (description?: string) => string({ description, maxLength: 71, pattern: '^sha256:[0-9a-f]{64}$' });
export const timestamp = (description?: string) => string({ description, format: 'date-time', maxLength: 64 });
export const image = (description?: string) => string({ description, minLength: 1, maxLength: 1024 });
const epoch = (description?: string) => string({ description, maxLength: 35, pattern: '^v1-[0-9a-f]{32}$' });
/** Names an execution binding; changes whenever a bound component changes. */
export const bindingEpoch = epoch;
/** Names one holding of a realm Lease (src/shared/targetlock.ts). */
export const leaseEpoch = epoch;
export const count = (description?: string) => integer({ description, minimum: 0, format: 'int32' });
export const leaseDurationSeconds = () =>
  integer({ description: 'Lease duration, 5 seconds to 24 hours and a minute.', minimum: 5, maximum: 86460, format: 'int32' });

// ---- references ----

const dataKey = () => string({ maxLength: 253, pattern: '^[-._a-zA-Z0-9]+$' });

export const secretKeyRef = object(
  { name: dnsSubdomain('Secret name.'), key: dataKey() },
  { description: 'A key of a Secret in the same namespace. Only the operation Pod reads it.' },
);
export type SecretKeyRef = Static<typeof secretKeyRef>;

export const configMapKeyRef = object(
  { name: dnsSubdomain('ConfigMap name.'), key: dataKey() },
  { description: 'A key of a ConfigMap in the same namespace.' },
);
export type ConfigMapKeyRef = Static<typeof configMapKeyRef>;

export const objectRef = object(
  { name: dnsSubdomain(), uid: uid() },
  { description: 'An object named by name and UID, so a delete-and-recreate under the same name is a different object.' },
);
export type ObjectRef = Static<typeof objectRef>;

export const identity = object(
  {
    username: string({ minLength: 1, maxLength: 512 }),
    uid: optional(string({ maxLength: 128 })),
    groups: array(string({ maxLength: 512 }), { maxItems: 64, listType: 'set' }),
  },
  {
    description: 'An authenticated requester, as admission saw it. Stamped by the mutating webhook.',
    rules: [{ rule: 'self.groups.isSorted()', message: 'groups must be sorted' }],
  },
);
export type Identity = Static<typeof identity>;

// ---- spec shapes ----

export const ENGINE_PATTERN = '^[A-Za-z][A-Za-z0-9._-]{0,62}$';
export const COORDINATION_KEY_PATTERN = '^[a-z0-9](?:[a-z0-9._:/-]{0,251}[a-z0-9])?$';
/** The one engine this operator runs; any other value is reported Blocked/UnsupportedEngine. */
export const SUPPORTED_ENGINE = 'PostgreSQL';

export const databaseTarget = object(
  {
    engine: string({
      description: `Database engine. Only "${SUPPORTED_ENGINE}" is supported; another value is reported, not refused.`,
      maxLength: 63,
      pattern: ENGINE_PATTERN,
    }),
    coordinationKey: optional(
      string({
        description:
          'Names the physical database within the namespace. Resources with one key serialize on one Lease, however their URLs are spelled.',
        maxLength: 253,
        pattern: COORDINATION_KEY_PATTERN,
      }),
    ),
    realmRef: optional(
      object(
        { name: dnsSubdomain('Name of the PtahRealm.') },
        { description: 'A cluster-scoped PtahRealm that lets the namespaces it lists reach one database, serialized on one Lease.' },
      ),
    ),
    sharedRealm: optional(
      boolean({ description: 'With realmRef: this resource shares the realm knowingly; a Shared realm with several claimants needs it on every one. Absent is false.' }),
    ),
    urlFrom: secretKeyRef,
  },
  {
    description: 'The database to act on.',
    rules: [
      { rule: 'has(self.coordinationKey) != has(self.realmRef)', message: 'exactly one of spec.target.coordinationKey and spec.target.realmRef must be set' },
      { rule: '!has(self.sharedRealm) || !self.sharedRealm || has(self.realmRef)', message: 'spec.target.sharedRealm applies only with spec.target.realmRef' },
      {
        // The two kinds of realm keep their Leases in different namespaces; a switch under a claim in flight would
        // look for its Lease in the other one while the first still stands.
        rule: 'has(self.realmRef) == has(oldSelf.realmRef)',
        message: 'spec.target cannot switch between coordinationKey and realmRef; create a new resource instead',
      },
    ],
  },
);
export type DatabaseTarget = Static<typeof databaseTarget>;

/** An artifact in an OCI registry (docs/oci-artifacts.md), resolved and verified by a Resolve Job. */
export const ociSource = object(
  {
    reference: string({
      description: 'registry/repository:tag, registry/repository@sha256:<hex>, or both. A tag is resolved to its digest at every interval; a moved tag is a new artifact.',
      minLength: 1,
      maxLength: 512,
      pattern: '^[a-z0-9.-]+(:[0-9]+)?/[^\\s]+$',
    }),
    registryAuthFrom: optional(object(
      { name: dnsSubdomain('Secret name.') },
      { description: 'A kubernetes.io/dockerconfigjson Secret holding the registry credentials. Only the Pods that talk to the registry mount it; the manager never reads it.' },
    )),
    caFrom: optional(configMapKeyRef),
  },
  { description: 'An artifact in an OCI registry. caFrom: the PEM certificates to trust for the registry instead of the system roots.' },
);
export type OciSource = Static<typeof ociSource>;

/** Where an artifact comes from; PtahMigration adds the directory format it is written in. */
export const artifactSourceFields = {
  configMapRef: optional(object({ name: dnsSubdomain() }, { description: 'An immutable ConfigMap holding the artifact.' })),
  oci: optional(ociSource),
  verificationPolicyRef: configMapKeyRef,
};
export const ARTIFACT_SOURCE_DESCRIPTION = 'The artifact (an immutable ConfigMap, or an OCI artifact) and the verification policy it must meet.';
export const ARTIFACT_SOURCE_RULES = [{ rule: 'has(self.configMapRef) != has(self.oci)', message: 'exactly one of configMapRef and oci must be set' }];
export const artifactSource = object(artifactSourceFields, { description: ARTIFACT_SOURCE_DESCRIPTION, rules: ARTIFACT_SOURCE_RULES });
export type ArtifactSource = Static<typeof artifactSource>;

const LABEL_VALUE = '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$';
const QUALIFIED_NAME = `^(${DNS_LABEL}(\\.${DNS_LABEL})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`;
// The keys the operator and Kubernetes set on a Job's Pod; a declared value there could hide the Pod from them.
const RESERVED_KEY = '^([^/]*\\.)?(ptah\\.run|kubernetes\\.io|k8s\\.io)/';
const podMetadataKeyRules = (what: string) => [
  { rule: `self.all(k, k.size() <= 316 && k.matches(r'${QUALIFIED_NAME}'))`, message: `${what} keys must be qualified names` },
  {
    rule: `self.all(k, !k.matches(r'${RESERVED_KEY}') && k != 'controller-uid' && k != 'job-name')`,
    message: `${what} keys under ptah.run, kubernetes.io and k8s.io, and controller-uid and job-name, are reserved`,
  },
];

export const podMetadata = object(
  {
    labels: optional(
      stringMap(string({ maxLength: 63, pattern: LABEL_VALUE }), { maxProperties: 16, rules: podMetadataKeyRules('label') }),
    ),
    annotations: optional(stringMap(string({ maxLength: 1024 }), { maxProperties: 16, rules: podMetadataKeyRules('annotation') })),
  },
  { description: 'Extra Pod metadata for operation Pods (e.g. for a mesh or a policy engine).' },
);
export type PodMetadata = Static<typeof podMetadata>;

export const EXECUTION_DEFAULTS = {
  activeDeadlineSeconds: 900,
  failureRetryInterval: '30s',
  connectTimeout: '10s',
} as const;

export const executionSpec = object(
  {
    activeDeadlineSeconds: withDefault(
      integer({ description: 'Job deadline in seconds; it also bounds the Lease.', minimum: 30, maximum: 86400, format: 'int32' }),
      EXECUTION_DEFAULTS.activeDeadlineSeconds,
    ),
    failureRetryInterval: withDefault(
      duration({ min: '5s', max: '1h', description: 'Wait before retrying a failed operation.' }),
      EXECUTION_DEFAULTS.failureRetryInterval,
    ),
    connectTimeout: withDefault(
      duration({ min: '1s', max: '10m', description: 'Bound on connecting to the database.' }),
      EXECUTION_DEFAULTS.connectTimeout,
    ),
    resources: optional(passThrough<V1ResourceRequirements>('Resources of the operation container (core ResourceRequirements).')),
    serviceAccountName: optional(dnsSubdomain('ServiceAccount of operation Pods; it needs no Kubernetes permission.')),
    imagePullSecrets: optional(array(object({ name: dnsSubdomain() }), { maxItems: 16 })),
    nodeSelector: optional(stringMap(string({ maxLength: 63, pattern: LABEL_VALUE }), { maxProperties: 32 })),
    tolerations: optional(array(passThrough<V1Toleration>('A core Toleration.'), { maxItems: 32 })),
    affinity: optional(passThrough<V1Affinity>('Core Affinity of operation Pods.')),
    runtimeClassName: optional(dnsSubdomain()),
    priorityClassName: optional(dnsSubdomain()),
    podMetadata: optional(podMetadata),
  },
  { description: 'Bounded controls over the operation Jobs.' },
);
export type ExecutionSpec = Static<typeof executionSpec>;

export const APPLY_POLICIES = ['Never', 'OnApproval', 'Always'] as const;
export type ApplyPolicy = (typeof APPLY_POLICIES)[number];
export const applyPolicy = () =>
  withDefault(oneOf(APPLY_POLICIES, { description: 'Whether a published plan runs: never, after an approval, or at once.' }), 'OnApproval');

export const interval = () =>
  withDefault(duration({ min: '10s', max: '24h', description: 'How often to re-read the database.' }), '10m');

/** Spec rules shared by both families: a wait may not outlast the Job it runs in. */
export const specTimeoutRules = [
  {
    rule: '!has(self.execution) || duration(self.execution.connectTimeout).getSeconds() <= self.execution.activeDeadlineSeconds',
    message: 'execution.connectTimeout must not exceed execution.activeDeadlineSeconds',
  },
  {
    rule: '!has(self.execution) || !has(self.policy) || duration(self.policy.lockTimeout).getSeconds() <= self.execution.activeDeadlineSeconds',
    message: 'policy.lockTimeout must not exceed execution.activeDeadlineSeconds',
  },
];

// ---- status shapes ----

export const CONDITION_STATUSES = ['True', 'False', 'Unknown'] as const;

export const condition = object(
  {
    type: string({
      maxLength: 316,
      pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    }),
    status: oneOf(CONDITION_STATUSES),
    reason: string({ minLength: 1, maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' }),
    message: string({ maxLength: 32768 }),
    lastTransitionTime: timestamp(),
    observedGeneration: optional(integer({ minimum: 0, format: 'int64' })),
  },
  { description: 'A standard condition (metav1.Condition).' },
);
export type Condition = Static<typeof condition>;

export const conditions = () => array(condition, { maxItems: 16, listType: 'map', listMapKeys: ['type'] });

/** Status of the kinds whose only state is their conditions (plans, approvals, acknowledgments). */
/** The fields of a status that holds only conditions, for kinds that add their own beside them. */
export const conditionsStatusFields = {
  observedGeneration: optional(integer({ minimum: 0, format: 'int64' })),
  conditions: optional(conditions()),
};
export const conditionsStatus = object(conditionsStatusFields);
export type ConditionsStatus = Static<typeof conditionsStatus>;

export const pinnedOciArtifact = object(
  {
    reference: string({ maxLength: 512, description: 'The reference as the spec wrote it.' }),
    pinnedReference: string({ maxLength: 600, description: 'registry/repository@sha256:<hex>: the only reference a later step reads.' }),
    manifestDigest: sha256('The manifest digest the reference resolved to.'),
    artifactType: string({ maxLength: 255 }),
    verifiedKeys: array(string({ maxLength: 63 }), { maxItems: 16, description: 'The verification policy keys whose signature over the digest verified.' }),
  },
  { description: 'An OCI artifact as a Resolve Job found it.' },
);
export type PinnedOciArtifact = Static<typeof pinnedOciArtifact>;

export const pinnedArtifact = object(
  {
    configMapName: optional(dnsSubdomain()),
    configMapUID: optional(uid()),
    oci: optional(pinnedOciArtifact),
    digest: sha256('Digest of the artifact\'s files, as a ConfigMap of the same files has it (src/shared/artifact.ts).'),
    verificationPolicyUID: uid(),
    verificationPolicyDigest: sha256(),
    resolvedAt: timestamp(),
  },
  {
    description: 'The artifact as resolved and verified: the exact ConfigMap or OCI digest, and the policy, every later step uses.',
    rules: [{ rule: 'has(self.configMapName) != has(self.oci)', message: 'a pin names a ConfigMap or an OCI artifact' }],
  },
);
export type PinnedArtifact = Static<typeof pinnedArtifact>;

export const refusedReading = object(
  {
    artifactDigest: sha256('The artifact the reading was given.'),
    generation: integer({ minimum: 0, format: 'int64', description: 'The spec it was read under.' }),
    executionBindingID: bindingEpoch(),
    code: string({ minLength: 1, maxLength: 64, description: 'The executor’s refusal code.' }),
    message: string({ maxLength: 1024, description: 'What is wrong and what to change; never SQL or row data.' }),
    refusedAt: timestamp(),
  },
  {
    description: 'A reading refused what it was given in a way no quick retry mends. A migration artifact’s own files: read again only when '
      + 'the artifact, the spec or the execution binding changes. A desired schema that does not build, or objects outside the supported set: '
      + 'read again at spec.interval, or at once on such a change.',
  },
);
export type RefusedReading = Static<typeof refusedReading>;

export const executionBinding = object(
  {
    epoch: bindingEpoch('Changes whenever controllerStateVersion, executorIdentity or runnerProtocolVersion changes.'),
    controllerStateVersion: integer({ minimum: 1, format: 'int32' }),
    executorIdentity: optional(sha256(
      'Digest of the runner and executor code and the production packages it loads (src/shared/executor-identity.ts). ' +
        'Absent only in a binding written before executors were identified, which the next pass rotates.',
    )),
    runnerImage: image('Recorded only: the image reference that carries the executor, which the binding does not name.'),
    runnerProtocolVersion: integer({ minimum: 0, format: 'int32' }),
    controllerImage: image('Recorded only.'),
    controllerRevision: string({ maxLength: 256, description: 'Recorded only.' }),
  },
  { description: 'The execution binding in force; plans and approvals are bound to its epoch.' },
);
export type ExecutionBinding = Static<typeof executionBinding>;

export const admissionSnapshot = object(
  {
    version: oneOf(['v1']),
    digest: sha256('Digest of this snapshot without the digest field (src/shared/podintent.ts).'),
    templateDigest: sha256(),
    serviceAccount: dnsSubdomain(),
    runtimeClass: optional(dnsSubdomain()),
    priorityClass: optional(dnsSubdomain()),
  },
  { description: 'The Pod admission envelope, durable before any Job carries its digest.' },
);
export type AdmissionSnapshot = Static<typeof admissionSnapshot>;

export const pendingLockRelease = object(
  {
    coordinationDigest: sha256(),
    operationID: sha256(),
    leaseDurationSeconds: leaseDurationSeconds(),
    leaseEpoch: leaseEpoch(),
  },
  { description: 'A realm release owed by a retired claim; performed at the top of every pass until it succeeds.' },
);
export type PendingLockRelease = Static<typeof pendingLockRelease>;

export const managerRecord = object(
  { controllerImage: image(), controllerRevision: string({ maxLength: 256 }), runnerImage: image() },
  { description: 'Which manager release dispatched a run.' },
);
export type ManagerRecord = Static<typeof managerRecord>;

export const activeOperation = object(
  {
    type: string({
      description: 'Resolve, Observe, Plan or Apply for a PtahSchema; Resolve, History or Apply for a PtahMigration. A newer operator may write others.',
      maxLength: 32,
      pattern: '^[A-Z][A-Za-z]*$',
    }),
    id: sha256('This attempt’s operation ID.'),
    inputFingerprint: sha256('Digest of everything the claim was decided from.'),
    jobName: dnsLabel('The Job’s deterministic name, fixed before the create.'),
    jobUID: optional(uid()),
    startedAt: timestamp(),
    attempt: integer({ minimum: 1, format: 'int32' }),
    executionBindingID: bindingEpoch(),
    coordinationDigest: optional(sha256()),
    targetIdentityDigest: optional(sha256()),
    physicalIdentityDigest: optional(sha256('The physical database the reading behind an Apply opened; its run must report the same.')),
    leaseDurationSeconds: optional(leaseDurationSeconds()),
    leaseEpoch: optional(leaseEpoch()),
    leaseContinuityLost: optional(boolean()),
    admissionSnapshot: optional(admissionSnapshot),
    dispatchStarted: optional(boolean({ description: 'Written before the one create; a missing Job after it is an unknown outcome.' })),
    dispatchNotAfter: optional(timestamp()),
    executionNotAfter: optional(timestamp()),
    terminationGracePeriodSeconds: optional(integer({ minimum: 1, maximum: 300, format: 'int32' })),
    approvalRef: optional(objectRef),
    planRef: optional(objectRef),
    artifact: optional(pinnedArtifact),
    verificationPolicy: optional(object(
      { uid: uid(), digest: sha256() },
      { description: 'A Resolve only: the verification policy the artifact is held to, as the manager read it when it claimed.' },
    )),
    retryNotBefore: optional(timestamp()),
    proofOf: optional(sha256('PtahSchema only: the Apply operation whose proof this reading carries out, under its Lease.')),
  },
  { description: 'The claim for the operation in flight.' },
);
export type ActiveOperation = Static<typeof activeOperation>;
