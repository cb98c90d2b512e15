// The OpenAPI part of each CRD schema (types, patterns, bounds, enums, required fields) judged by ajv on realistic
// objects and on broken ones. The CEL rules need the API server; the control-plane tests prove those.
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import t from 'tap';
import { digest } from '../../src/shared/canonical.js';
import { KIND_DEFINITIONS, openApiSchemaFor } from '../../src/shared/api/crd.js';
import type { PtahMigration, PtahMigrationPlan, PtahMigrationRunAcknowledgment } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, type KindName } from '../../src/shared/api/names.js';
import type { PtahSchema, PtahSchemaApproval, PtahSchemaPlan, PtahSchemaPlanChunk, PtahSchemaSpecInput } from '../../src/shared/api/schema-kinds.js';
import { coordinationDigest } from '../../src/shared/realm.js';
import { jobNameFor } from '../../src/shared/naming.js';

// ajv-formats is CommonJS: imported from ESM, the plugin is the module's `default` property.
const addFormats = addFormatsModule.default;
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv, ['date-time', 'byte']);
const validators = new Map<string, ValidateFunction>(KIND_DEFINITIONS.map((d) => [d.names.kind, ajv.compile(openApiSchemaFor(d))]));
const errorsOf = (kind: KindName, object: unknown): string[] => {
  const validate = validators.get(kind)!;
  return validate(object) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
};

const D = (s: string) => digest(s);
const epoch = `v1-${'0123456789abcdef'.repeat(2)}`;
const now = '2026-03-01T12:00:00Z';
const meta = (name: string) => ({ name, namespace: 'shop', uid: '6b0f7c1e-1111-4222-8333-444455556666' });
const ref = (name: string) => ({ name, uid: `${name}-uid` });
const realm = coordinationDigest({ engine: 'PostgreSQL', namespace: 'shop', coordinationKey: 'orders-db' });
const target = { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } };
const artifact = { configMapName: 'schema-v3', configMapUID: 'cm-uid', digest: D('a'), verificationPolicyUID: 'vp-uid', verificationPolicyDigest: D('p'), resolvedAt: now };
const snapshot = { version: 'v1' as const, digest: D('s'), templateDigest: D('t'), serviceAccount: 'default' };
const jobName = jobNameFor({
  family: 'schema',
  ownerName: 'orders-schema-with-a-rather-long-name-that-must-be-trimmed-to-fit',
  ownerUid: 'u',
  operationType: 'Apply',
  operationId: D('op'),
  executionBindingId: epoch,
  inputFingerprint: D('in'),
  attempt: 1,
});
const claim = {
  type: 'Apply',
  id: D('op'),
  inputFingerprint: D('in'),
  jobName,
  jobUID: 'job-uid',
  startedAt: now,
  attempt: 1,
  executionBindingID: epoch,
  coordinationDigest: realm,
  targetIdentityDigest: D('tid'),
  leaseDurationSeconds: 1080,
  leaseEpoch: 'v1-0123456789abcdef0123456789abcdef',
  admissionSnapshot: snapshot,
  dispatchStarted: true,
  dispatchNotAfter: now,
  executionNotAfter: now,
  terminationGracePeriodSeconds: 30,
  approvalRef: ref('approve-1'),
  planRef: ref('ptah-plan-1'),
  artifact,
};
const manager = { controllerImage: 'localhost/ptah-operator:dev', controllerRevision: 'dev', runnerImage: 'localhost/ptah-operator:dev' };
const binding = { epoch, controllerStateVersion: 1, executorIdentity: `sha256:${'e'.repeat(64)}`, runnerImage: 'r:1', runnerProtocolVersion: 1, controllerImage: 'c:1', controllerRevision: 'abc' };
const conditions = [{ type: 'Ready', status: 'False' as const, reason: 'AwaitingApproval', message: 'waiting', lastTransitionTime: now, observedGeneration: 2 }];
const plan = { name: 'ptah-plan-1', uid: 'plan-uid', fingerprint: D('f'), contentDigest: D('c'), destructive: false, statementCount: 3 };

const minimalSpec: PtahSchemaSpecInput = { target, desired: { configMapRef: { name: 'schema-v3' }, verificationPolicyRef: { name: 'policy', key: 'policy.yaml' } } };

const schema: PtahSchema = {
  apiVersion: API_VERSION,
  kind: 'PtahSchema',
  metadata: meta('orders'),
  spec: {
    ...minimalSpec,
    desired: minimalSpec.desired,
    dev: { urlFrom: { name: 'scratch', key: 'url' } },
    policy: { apply: 'OnApproval', allowDestructive: false, lockTimeout: '30s' },
    interval: '10m',
    execution: {
      activeDeadlineSeconds: 900,
      failureRetryInterval: '30s',
      connectTimeout: '10s',
      resources: { limits: { cpu: '500m' } },
      imagePullSecrets: [{ name: 'regcred' }],
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      tolerations: [{ key: 'db', operator: 'Exists' }],
      podMetadata: { labels: { team: 'orders' }, annotations: { 'sidecar.istio.io/inject': 'false' } },
    },
    suspend: false,
  },
  status: {
    observedGeneration: 2,
    phase: 'Applying',
    conditions,
    artifact,
    executionBinding: binding,
    target: { coordinationDigest: realm, identityDigest: D('tid'), driftDigest: D('d'), driftFindings: [{ category: 'missing_table', count: 2 }], lastObservedAt: now },
    plan,
    applied: {
      artifactDigest: D('a'),
      planRef: ref('ptah-plan-0'),
      planFingerprint: D('f0'),
      coordinationDigest: realm,
      targetIdentityDigest: D('tid'),
      executionBindingID: epoch,
      completedAt: now,
    },
    pendingObservation: {
      outcome: 'OutcomeUnknown',
      applyOperationID: D('op0'),
      applyJobName: jobName,
      applyGeneration: 1,
      applyPodUIDs: ['pod-1'],
      applyPodCount: 1,
      plan,
      artifact,
      target,
      connectTimeout: '10s',
      lockTimeout: '30s',
      coordinationDigest: realm,
      targetIdentityDigest: D('tid'),
      executionBindingID: epoch,
      leaseDurationSeconds: 1080,
      leaseEpoch: 'v1-0123456789abcdef0123456789abcdef',
      recordedAt: now,
    },
    pendingLockRelease: { coordinationDigest: realm, operationID: D('op0'), leaseDurationSeconds: 1080, leaseEpoch: epoch },
    pendingBindingRetirement: { retiredEpoch: epoch, plan: { name: 'ptah-plan-0', uid: 'u0', fingerprint: D('f0') }, job: { operation: 'Plan', name: jobName } },
    activeOperation: claim,
    nextReconciliationTime: now,
  },
};

const migration: PtahMigration = {
  apiVersion: API_VERSION,
  kind: 'PtahMigration',
  metadata: meta('orders-migrations'),
  spec: {
    target,
    artifact: { configMapRef: { name: 'migrations-v7' }, verificationPolicyRef: { name: 'policy', key: 'migrations.yaml' }, format: 'goose' },
    policy: { apply: 'Always', lockTimeout: '5m' },
    interval: '1h30m',
    execution: { activeDeadlineSeconds: 600, failureRetryInterval: '1m', connectTimeout: '5s' },
    suspend: true,
  },
  status: {
    phase: 'Blocked',
    conditions,
    history: {
      observedAt: now,
      currentVersion: '',
      appliedCount: 0,
      pendingCount: 2,
      fingerprint: D('h'),
      targetIdentityDigest: D('tid'),
      dirty: false,
      modifiedVersions: [],
      outOfOrderVersions: ['0002'],
    },
    plan: ref('ptah-mplan-1'),
    lastRun: { outcome: 'Unknown', operationID: D('op'), jobName, startedAt: now, appliedVersions: ['0001'], dispatchedBy: manager },
    unresolvedRun: { outcome: 'Unknown', operationID: D('op'), jobName, recordedAt: now, dispatchedBy: manager },
    resolvedRun: {
      operationID: D('op-1'),
      outcome: 'Partial',
      resolution: 'ResolvedByAcknowledgment',
      acknowledgmentRef: ref('ack-1'),
      acknowledgedBy: { username: 'alice', groups: ['dba', 'system:authenticated'] },
      resolvedAt: now,
    },
    activeOperation: { ...claim, type: 'History', dispatchStarted: undefined },
  },
};

const schemaPlan: PtahSchemaPlan = {
  apiVersion: API_VERSION,
  kind: 'PtahSchemaPlan',
  metadata: meta('ptah-plan-1'),
  spec: {
    schemaRef: ref('orders'),
    fingerprint: D('f'),
    contentDigest: D('c'),
    size: 1234,
    chunks: ['ptah-plan-1-000', 'ptah-plan-1-001'],
    statementCount: 3,
    destructive: true,
    privilegeChanging: false,
    lockingStatementCount: 1,
    transactional: true,
    artifactDigest: D('a'),
    coordinationDigest: realm,
    targetIdentityDigest: D('tid'),
    actualStateFingerprint: D('asf'),
    policyFingerprint: D('pf'),
    verificationPolicyUID: 'vp-uid',
    verificationPolicyDigest: D('p'),
    executionBindingID: epoch,
    producedBy: { operationID: D('plan-op'), jobName },
    createdAt: now,
  },
  status: { conditions: [{ type: 'Ready', status: 'True', reason: 'Published', message: '', lastTransitionTime: now }] },
};

const chunk: PtahSchemaPlanChunk = { apiVersion: API_VERSION, kind: 'PtahSchemaPlanChunk', metadata: meta('ptah-plan-1-000'), spec: { data: Buffer.from('{"a":1}').toString('base64') } };

const approval: PtahSchemaApproval = {
  apiVersion: API_VERSION,
  kind: 'PtahSchemaApproval',
  metadata: meta('approve-1'),
  spec: { schemaRef: ref('orders'), planRef: ref('ptah-plan-1'), planFingerprint: D('f'), approver: { username: 'alice', uid: 'a-1', groups: [] }, approvedAt: now, mutationRequestUID: 'req-1' },
};

const migrationPlan: PtahMigrationPlan = {
  apiVersion: API_VERSION,
  kind: 'PtahMigrationPlan',
  metadata: meta('ptah-mplan-1'),
  spec: {
    migrationRef: ref('orders-migrations'),
    fingerprint: D('mf'),
    migrations: [
      { version: '0001', name: 'create_orders', checksum: D('m1') },
      { version: '0002', name: 'add_index', checksum: D('m2') },
    ],
    historyFingerprint: D('h'),
    currentVersion: '',
    artifactDigest: D('a'),
    coordinationDigest: realm,
    targetIdentityDigest: D('tid'),
    policyFingerprint: D('pf'),
    verificationPolicyUID: 'vp-uid',
    verificationPolicyDigest: D('p'),
    executionBindingID: epoch,
    createdAt: now,
  },
};

const acknowledgment: PtahMigrationRunAcknowledgment = {
  apiVersion: API_VERSION,
  kind: 'PtahMigrationRunAcknowledgment',
  metadata: meta('ack-1'),
  spec: { migrationRef: ref('orders-migrations'), operationID: D('op') },
};

const valid: [KindName, unknown][] = [
  ['PtahSchema', schema],
  ['PtahSchema', { apiVersion: API_VERSION, kind: 'PtahSchema', metadata: meta('bare'), spec: minimalSpec }],
  ['PtahMigration', migration],
  ['PtahSchemaPlan', schemaPlan],
  ['PtahSchemaPlanChunk', chunk],
  ['PtahSchemaApproval', approval],
  ['PtahMigrationApproval', { ...approval, kind: 'PtahMigrationApproval', spec: { migrationRef: ref('m'), planRef: ref('p'), planFingerprint: D('f') } }],
  ['PtahMigrationPlan', migrationPlan],
  ['PtahMigrationPlan', { ...migrationPlan, spec: { ...migrationPlan.spec, migrations: [], repair: { version: '2', checksum: D('2'), resolution: 'finished' } } }],
  ['PtahMigrationRunAcknowledgment', acknowledgment],
  ['PtahSchemaRunAcknowledgment', { ...acknowledgment, kind: 'PtahSchemaRunAcknowledgment', spec: { schemaRef: ref('catalog'), operationID: D('op') } }],
  ['PtahRealm', { apiVersion: API_VERSION, kind: 'PtahRealm', metadata: { name: 'orders.shop' }, spec: { engine: 'PostgreSQL', namespaces: ['shop', 'billing'], sharing: 'Shared' } }],
  ['PtahMigration', { ...migration, spec: { ...migration.spec, target: { engine: 'PostgreSQL', realmRef: { name: 'orders.shop' }, sharedRealm: true, urlFrom: target.urlFrom } } }],
];
const realmObject = valid.find(([k]) => k === 'PtahRealm')![1] as { spec: { engine: string; namespaces: string[]; sharing: string } };

t.test('realistic objects of every kind pass', async (t) => {
  t.equal(new Set(valid.map(([k]) => k)).size, KIND_DEFINITIONS.length, 'every kind has an example');
  for (const [kind, object] of valid) t.strictSame(errorsOf(kind, JSON.parse(JSON.stringify(object))), [], kind);
});

// Each broken object differs from a valid one in one place.
const edit = <T>(object: T, change: (copy: T) => void): T => {
  const copy = structuredClone(object);
  change(copy);
  return copy;
};
const invalid: [string, KindName, unknown, RegExp][] = [
  ['no spec', 'PtahSchema', { ...schema, spec: undefined }, /must have required property 'spec'/],
  ['realm listing no namespace', 'PtahRealm', edit(realmObject, (r) => (r.spec.namespaces = [])), /namespaces must NOT have fewer than 1 items/],
  ['realm listing 257 namespaces', 'PtahRealm', edit(realmObject, (r) => (r.spec.namespaces = [...Array(257).keys()].map((i) => `ns-${i}`))), /namespaces must NOT have more than 256 items/],
  ['realm listing a namespace in upper case', 'PtahRealm', edit(realmObject, (r) => (r.spec.namespaces = ['Shop'])), /namespaces\/0 must match/],
  ['realm sharing outside the enum', 'PtahRealm', edit(realmObject, (r) => (r.spec.sharing = 'Sometimes')), /sharing must be equal to one of/],
  ['realm without sharing', 'PtahRealm', edit(realmObject, (r) => delete (r.spec as Partial<typeof r.spec>).sharing), /required property 'sharing'/],
  ['realm ref with a bad name', 'PtahMigration', edit(migration, (m) => (m.spec.target.realmRef = { name: 'Orders_DB' })), /realmRef\/name must match/],
  ['no target', 'PtahSchema', edit(schema, (s) => delete (s.spec as Partial<PtahSchema['spec']>).target), /required property 'target'/],
  ['engine of 64', 'PtahSchema', edit(schema, (s) => (s.spec.target.engine = `P${'g'.repeat(63)}`)), /engine/],
  ['coordination key with upper case', 'PtahSchema', edit(schema, (s) => (s.spec.target.coordinationKey = 'Orders')), /coordinationKey must match/],
  ['secret name empty', 'PtahSchema', edit(schema, (s) => (s.spec.target.urlFrom.name = '')), /urlFrom\/name must match/],
  ['secret key missing', 'PtahSchema', edit(schema, (s) => delete (s.spec.target.urlFrom as Partial<typeof target.urlFrom>).key), /required property 'key'/],
  ['policy key with a slash', 'PtahSchema', edit(schema, (s) => (s.spec.desired.verificationPolicyRef.key = 'a/b')), /verificationPolicyRef\/key must match/],
  ['apply policy outside the enum', 'PtahSchema', edit(schema, (s) => ((s.spec.policy as { apply: string }).apply = 'Sometimes')), /apply must be equal to one of/],
  ['interval without a unit', 'PtahSchema', edit(schema, (s) => (s.spec.interval = '600')), /interval must match/],
  ['negative duration', 'PtahSchema', edit(schema, (s) => (s.spec.policy.lockTimeout = '-1s')), /lockTimeout must match/],
  ['deadline below 30', 'PtahSchema', edit(schema, (s) => (s.spec.execution.activeDeadlineSeconds = 29)), /activeDeadlineSeconds must be >= 30/],
  ['deadline over a day', 'PtahSchema', edit(schema, (s) => (s.spec.execution.activeDeadlineSeconds = 86401)), /activeDeadlineSeconds must be <= 86400/],
  ['label value with a space', 'PtahSchema', edit(schema, (s) => (s.spec.execution.podMetadata!.labels = { team: 'a b' })), /labels\/team must match/],
  ['17 annotations', 'PtahSchema', edit(schema, (s) => (s.spec.execution.podMetadata!.annotations = Object.fromEntries([...Array(17).keys()].map((i) => [`a${i}`, 'x'])))), /must NOT have more than 16 properties/],
  ['phase of the other family', 'PtahSchema', edit(schema, (s) => ((s.status!.phase as string) = 'Reading')), /phase must be equal to one of/],
  ['claim with a Job name over 63', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.jobName = `j${'a'.repeat(63)}`)), /jobName must NOT have more than 63/],
  ['claim with a Job name in upper case', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.jobName = 'Ptah-apply')), /jobName must match/],
  ['claim with attempt 0', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.attempt = 0)), /attempt must be >= 1/],
  ['claim id that is no digest', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.id = 'op-1')), /id must match/],
  ['claim type in lower case', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.type = 'apply')), /type must match/],
  ['epoch of the wrong shape', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.executionBindingID = 'v2-abc')), /executionBindingID must match/],
  ['lease of 4 seconds', 'PtahSchema', edit(schema, (s) => (s.status!.pendingLockRelease!.leaseDurationSeconds = 4)), /leaseDurationSeconds must be >= 5/],
  ['lease over a day and a minute', 'PtahSchema', edit(schema, (s) => (s.status!.pendingLockRelease!.leaseDurationSeconds = 86461)), /leaseDurationSeconds must be <= 86460/],
  ['lease epoch of another shape', 'PtahSchema', edit(schema, (s) => (s.status!.pendingLockRelease!.leaseEpoch = 'epoch-1')), /leaseEpoch must match/],
  ['release missing its epoch', 'PtahSchema', edit(schema, (s) => delete (s.status!.pendingLockRelease as Partial<{ leaseEpoch: string }>).leaseEpoch), /required property 'leaseEpoch'/],
  ['grace period over 300', 'PtahSchema', edit(schema, (s) => (s.status!.activeOperation!.terminationGracePeriodSeconds = 301)), /terminationGracePeriodSeconds must be <= 300/],
  ['snapshot of version v2', 'PtahSchema', edit(schema, (s) => ((s.status!.activeOperation!.admissionSnapshot!.version as string) = 'v2')), /version must be equal to one of/],
  ['condition status Maybe', 'PtahSchema', edit(schema, (s) => ((s.status!.conditions![0]!.status as string) = 'Maybe')), /status must be equal to one of/],
  ['condition reason with a space', 'PtahSchema', edit(schema, (s) => (s.status!.conditions![0]!.reason = 'Not ready')), /reason must match/],
  ['condition time that is no time', 'PtahSchema', edit(schema, (s) => (s.status!.conditions![0]!.lastTransitionTime = 'yesterday')), /must match format "date-time"/],
  ['17 conditions', 'PtahSchema', edit(schema, (s) => (s.status!.conditions = [...Array(17).keys()].map((i) => ({ ...conditions[0]!, type: `T${i}` })))), /must NOT have more than 16 items/],
  ['65 drift findings', 'PtahSchema', edit(schema, (s) => (s.status!.target!.driftFindings = Array(65).fill({ category: 'x', count: 1 }))), /must NOT have more than 64 items/],
  ['9 apply Pods', 'PtahSchema', edit(schema, (s) => (s.status!.pendingObservation!.applyPodUIDs = [...Array(9).keys()].map(String))), /must NOT have more than 8 items/],
  ['pending observation outcome', 'PtahSchema', edit(schema, (s) => ((s.status!.pendingObservation!.outcome as string) = 'Applied')), /outcome must be equal to one of/],
  ['unresolved run that Failed', 'PtahMigration', edit(migration, (m) => ((m.status!.unresolvedRun!.outcome as string) = 'Failed')), /outcome must be equal to one of/],
  ['resolution of another kind', 'PtahMigration', edit(migration, (m) => ((m.status!.resolvedRun!.resolution as string) = 'ResolvedByEdit')), /resolution must be equal to one of/],
  ['identity with no username', 'PtahMigration', edit(migration, (m) => (m.status!.resolvedRun!.acknowledgedBy!.username = '')), /username must NOT have fewer than 1/],
  ['current version that is not a number', 'PtahMigration', edit(migration, (m) => (m.status!.history!.currentVersion = 'v3')), /currentVersion must match/],
  ['migration lock timeout in days', 'PtahMigration', edit(migration, (m) => (m.spec.policy.lockTimeout = '1d')), /lockTimeout must match/],
  ['migration directory in a format no reader reads', 'PtahMigration', edit(migration, (m) => ((m.spec.artifact.format as string) = 'liquibase')), /format must be equal to one of/],
  ['plan with no chunks', 'PtahSchemaPlan', edit(schemaPlan, (p) => (p.spec.chunks = [])), /must NOT have fewer than 1 items/],
  ['plan with 17 chunks', 'PtahSchemaPlan', edit(schemaPlan, (p) => (p.spec.chunks = [...Array(17).keys()].map((i) => `c-${i}`))), /must NOT have more than 16 items/],
  ['plan over 8 MiB', 'PtahSchemaPlan', edit(schemaPlan, (p) => (p.spec.size = 8 * 1024 * 1024 + 1)), /size must be <= 8388608/],
  ['plan without producedBy', 'PtahSchemaPlan', edit(schemaPlan, (p) => delete (p.spec as Partial<PtahSchemaPlan['spec']>).producedBy), /required property 'producedBy'/],
  ['chunk that is not base64', 'PtahSchemaPlanChunk', edit(chunk, (c) => (c.spec.data = 'not base64!')), /must match format "byte"/],
  ['empty chunk', 'PtahSchemaPlanChunk', edit(chunk, (c) => (c.spec.data = '')), /must NOT have fewer than 1/],
  ['approval without a plan fingerprint', 'PtahSchemaApproval', edit(approval, (a) => delete (a.spec as Partial<PtahSchemaApproval['spec']>).planFingerprint), /required property 'planFingerprint'/],
  ['approval ref without a uid', 'PtahSchemaApproval', edit(approval, (a) => delete (a.spec.planRef as Partial<{ uid: string }>).uid), /required property 'uid'/],
  // A plan of no migration is refused by CEL unless it is a repair plan (crds.test.ts); the bounds stay structural.
  ['migration plan over 256 migrations', 'PtahMigrationPlan', edit(migrationPlan, (p) => (p.spec.migrations = Array.from({ length: 257 }, (_, i) => ({ ...migrationPlan.spec.migrations[0]!, version: String(i + 1) })))), /must NOT have more than 256 items/],
  ['repair plan with an unknown resolution', 'PtahMigrationPlan', edit(migrationPlan, (p) => (p.spec = { ...p.spec, migrations: [], repair: { version: '2', checksum: D('2'), resolution: 'forced' as 'finished' } })), /repair\/resolution must be equal to one of the allowed values/],
  ['repair plan without the row\'s checksum', 'PtahMigrationPlan', edit(migrationPlan, (p) => (p.spec = { ...p.spec, migrations: [], repair: { version: '2', resolution: 'undone' } as never })), /required property 'checksum'/],
  ['migration version with letters', 'PtahMigrationPlan', edit(migrationPlan, (p) => (p.spec.migrations[0]!.version = 'V1')), /version must match/],
  ['acknowledgment of no operation', 'PtahMigrationRunAcknowledgment', edit(acknowledgment, (a) => (a.spec.operationID = 'latest')), /operationID must match/],
  ['schema acknowledgment naming a migration', 'PtahSchemaRunAcknowledgment', { ...acknowledgment, kind: 'PtahSchemaRunAcknowledgment' }, /schemaRef/],
];

t.test('broken objects fail, naming what is wrong', async (t) => {
  for (const [name, kind, object, message] of invalid) {
    const errors = errorsOf(kind, JSON.parse(JSON.stringify(object)));
    t.match(errors.join('\n'), message, name);
  }
});

t.test('values the project computes fit the fields that carry them', async (t) => {
  t.equal(errorsOf('PtahSchema', schema).length, 0, 'a Job name from jobNameFor, trimmed to 63, is a valid claim jobName');
  for (const family of ['schema', 'migration'] as const) {
    for (const operationType of ['Observe', 'Plan', 'Apply', 'History']) {
      const name = jobNameFor({ family, ownerName: 'x'.repeat(63), ownerUid: 'u', operationType, operationId: D('o'), executionBindingId: epoch, inputFingerprint: D('i'), attempt: 7 });
      const object = edit(schema, (s) => (s.status!.activeOperation!.jobName = name));
      t.strictSame(errorsOf('PtahSchema', object), [], `${family} ${operationType}: ${name}`);
    }
  }
});
