import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import { canonicalJson, digest, sha256Hex } from '../../src/shared/canonical.js';
import { ptahMigrationKind } from '../../src/shared/api/migration-kinds.js';
import { ptahSchemaKind } from '../../src/shared/api/schema-kinds.js';
import type { OpenApiSchema } from '../../src/shared/api/schema.js';
import {
  buildOperationJob,
  DEFAULT_LOCK_TIMEOUT,
  EVIDENCE_FINALIZER,
  JobBuildError,
  rebuildClaimJob,
  type JobBuildRefusal,
  type OperationJobInput,
  type RebuildClaimJobInput,
} from '../../src/shared/job/index.js';
import {
  CASES,
  claimFor,
  d,
  inputFor,
  LOCK_TIMEOUT,
  MANAGER,
  MIGRATION_PLAN,
  ownerObjectFor,
  PLAN_REF,
  planObjectFor,
  SCHEMA_PLAN,
  snapshotted,
  type Case,
} from './job-fixtures.js';

const [schemaObserve, schemaPlan, schemaApply, migrationHistory, migrationApply] = CASES as [Case, Case, Case, Case, Case];
const envOf = (job: V1Job) => job.spec!.template.spec!.containers[0]!.env!;
const envNames = (job: V1Job) => envOf(job).map((e) => e.name);
const envValue = (job: V1Job, name: string) => envOf(job).find((e) => e.name === name);

t.test('every operation Job is hardened the same way', async (t) => {
  for (const c of CASES) {
    const job = buildOperationJob(snapshotted(inputFor(c)));
    const spec = job.spec!;
    const pod = spec.template.spec!;
    const [container, ...others] = pod.containers;
    t.test(`${c.family} ${c.type}`, async (t) => {
      t.equal(others.length, 0, 'one container');
      t.equal(pod.initContainers, undefined, 'no init containers');
      t.equal(container!.name, 'runner');
      t.equal(container!.image, MANAGER.runnerImage);
      t.same(container!.command, ['/usr/local/bin/ptah-runner']);
      t.same(container!.args, ['--operation', c.runnerOperation]);
      t.equal(spec.backoffLimit, 0);
      t.equal(spec.parallelism, 1);
      t.equal(spec.completions, 1);
      t.equal(spec.completionMode, 'NonIndexed');
      t.equal(spec.suspend, false);
      t.equal(spec.manualSelector, false);
      t.equal(spec.podReplacementPolicy, 'Failed');
      t.equal(spec.ttlSecondsAfterFinished, undefined, 'no TTL at creation');
      t.equal(spec.selector, undefined, 'the API server generates the selector');
      t.equal(pod.activeDeadlineSeconds, spec.activeDeadlineSeconds, 'same deadline on Job and Pod');
      t.equal(pod.restartPolicy, 'Never');
      t.equal(pod.automountServiceAccountToken, false);
      t.equal(pod.enableServiceLinks, false);
      t.equal(pod.serviceAccountName, 'default');
      t.equal(pod.dnsPolicy, 'ClusterFirst');
      t.equal(pod.schedulerName, 'default-scheduler');
      t.equal(pod.terminationGracePeriodSeconds, 30);
      t.same(pod.securityContext, {
        fsGroup: 65532,
        fsGroupChangePolicy: 'OnRootMismatch',
        runAsGroup: 65532,
        runAsNonRoot: true,
        runAsUser: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      t.same(container!.securityContext, {
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        readOnlyRootFilesystem: true,
        runAsGroup: 65532,
        runAsNonRoot: true,
        runAsUser: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      t.equal(container!.terminationMessagePath, '/dev/termination-log');
      t.equal(container!.terminationMessagePolicy, 'File');
      t.equal(container!.imagePullPolicy, 'IfNotPresent');
      t.equal(container!.workingDir, '/work');
      t.same(job.metadata!.ownerReferences, [
        { apiVersion: 'operator.ptah.run/v1alpha1', kind: c.family === 'schema' ? 'PtahSchema' : 'PtahMigration', name: 'orders', uid: `${c.family}-uid-1`, controller: true, blockOwnerDeletion: true },
      ]);
      t.same(spec.template.metadata!.labels, job.metadata!.labels, 'template labels = Job labels');
      t.same(spec.template.metadata!.annotations, job.metadata!.annotations, 'template annotations = Job annotations');
      t.same(envValue(job, 'PTAH_DB_URL'), { name: 'PTAH_DB_URL', valueFrom: { secretKeyRef: { name: 'database', key: 'url' } } });
      t.notOk(envOf(job).some((e) => e.value?.includes('postgres')), 'no credential travels as a plain value');
      const artifact = pod.volumes!.find((v) => v.name === 'artifact');
      t.same(artifact, { name: 'artifact', configMap: { name: 'orders-schema-v3', defaultMode: 0o440 } });
      t.same(pod.volumes!.find((v) => v.name === 'work'), { name: 'work', emptyDir: { medium: 'Memory', sizeLimit: '128Mi' } });
      t.ok(container!.volumeMounts!.find((m) => m.name === 'artifact')?.readOnly, 'artifact mounted read-only');
    });
  }
});

t.test('the build is deterministic and its env is sorted', async (t) => {
  for (const c of CASES) {
    const input = snapshotted(inputFor(c));
    const a = buildOperationJob(input);
    const b = buildOperationJob(structuredClone(input));
    t.equal(canonicalJson(a), canonicalJson(b), `${c.family} ${c.type}: two builds are equal`);
    const names = envNames(a);
    t.same(names, [...names].sort(), `${c.family} ${c.type}: env sorted by name`);
    t.equal(new Set(names).size, names.length, `${c.family} ${c.type}: no env name twice`);
  }
});

t.test('each operation gets exactly the env it uses', async (t) => {
  const common = [
    'HOME',
    'PTAH_ARTIFACT_DIR',
    'PTAH_COORDINATION_DIGEST',
    'PTAH_DB_URL',
    'PTAH_EXECUTOR_IDENTITY',
    'PTAH_EXPECTED_ARTIFACT_DIGEST',
    'PTAH_OPERATION_ID',
    'PTAH_RUNNER_PROTOCOL_VERSION',
    'PTAH_TERMINATION_GRACE_PERIOD_SECONDS',
    'PTAH_TERMINATION_MESSAGE_PATH',
    'TMPDIR',
  ];
  const mutating = [
    'PTAH_DISPATCH_NOT_AFTER',
    'PTAH_EXECUTION_NOT_AFTER',
    'PTAH_EXPECTED_COORDINATION_DIGEST',
    'PTAH_EXPECTED_TARGET_IDENTITY_DIGEST',
    'PTAH_LOCK_TIMEOUT_MS',
  ];
  const rows: [Case, string[]][] = [
    [schemaObserve, common],
    [schemaPlan, [...common, 'PTAH_DEV_URL']],
    [schemaApply, [...common, ...mutating, 'PTAH_EXPECTED_PLAN_CONTENT_DIGEST', 'PTAH_PLAN_DIR']],
    [migrationHistory, common],
    [
      migrationApply,
      [...common, ...mutating, 'PTAH_EXPECTED_HISTORY_FINGERPRINT', 'PTAH_EXPECTED_MIGRATION_SEQUENCE', 'PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST'],
    ],
  ];
  for (const [c, want] of rows) t.same(envNames(buildOperationJob(inputFor(c))), [...want].sort(), `${c.family} ${c.type}`);

  const apply = buildOperationJob(inputFor(migrationApply));
  const sequence = envValue(apply, 'PTAH_EXPECTED_MIGRATION_SEQUENCE')!.value!;
  t.same(JSON.parse(sequence), [{ version: '0002', checksum: d('m2') }, { version: '0003', checksum: d('m3') }]);
  t.equal(envValue(apply, 'PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST')!.value, digest(JSON.parse(sequence)), 'the sequence digest is its canonical digest');
  t.equal(envValue(apply, 'PTAH_EXECUTION_NOT_AFTER')!.value, '2030-01-01T00:15:00Z');
  // A repair plan's sequence: its one entry carries the resolution, and the digest covers it.
  const repairInput = inputFor(migrationApply);
  repairInput.bindings.migrationSequence = [{ version: '0004', checksum: d('m4'), repair: 'undone' }];
  const repair = buildOperationJob(repairInput);
  const repairSequence = envValue(repair, 'PTAH_EXPECTED_MIGRATION_SEQUENCE')!.value!;
  t.equal(repairSequence, canonicalJson([{ version: '0004', checksum: d('m4'), repair: 'undone' }]), 'a repair sequence carries its resolution');
  t.equal(envValue(repair, 'PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST')!.value, digest(JSON.parse(repairSequence)), 'and its digest covers it');
  t.same(envValue(buildOperationJob(inputFor(schemaPlan)), 'PTAH_DEV_URL'), {
    name: 'PTAH_DEV_URL',
    valueFrom: { secretKeyRef: { name: 'scratch', key: 'url' } },
  });
});

t.test('the lock timeout: spec.policy.lockTimeout in whole milliseconds, for the runs that take the realm lock', async (t) => {
  const lockTimeout = (input: OperationJobInput) => envValue(buildOperationJob(input), 'PTAH_LOCK_TIMEOUT_MS')?.value;
  t.equal(LOCK_TIMEOUT.schema, '45s', 'the fixture is not the schema default');
  t.equal(lockTimeout(inputFor(schemaApply)), '45000', 'schema Apply: from its spec');
  t.equal(LOCK_TIMEOUT.migration, '2m30s', 'the fixture is not the migration default');
  t.equal(lockTimeout(inputFor(migrationApply)), '150000', 'migration Apply: from its spec');
  const rows: [spec: string, ms: string][] = [
    ['1s', '1000'],
    ['1m30s', '90000'],
    ['1.5s', '1500'],
    ['1s500us', '1001'],
    ['10m', '600000'],
    ['1h', '3600000'],
  ];
  for (const [spec, ms] of rows) {
    for (const c of [schemaApply, migrationApply]) t.equal(lockTimeout({ ...inputFor(c), policy: { lockTimeout: spec } }), ms, `${c.family} ${spec}: ${ms} (a part of a millisecond rounds up)`);
  }
  for (const c of [schemaApply, migrationApply]) {
    const defaulted = lockTimeout({ ...inputFor(c), policy: {} });
    t.equal(defaulted, c.family === 'schema' ? '30000' : '300000', `${c.family} Apply: the API default when spec.policy.lockTimeout is absent`);
  }
  for (const c of [schemaObserve, schemaPlan, migrationHistory]) {
    t.equal(lockTimeout({ ...inputFor(c), policy: { lockTimeout: 'not a duration' } }), undefined, `${c.family} ${c.type}: takes no realm lock, so neither carries nor checks it`);
  }
});

t.test('spec.artifact.format reaches a migration Job only when it is not the default, and the rebuild reads the owner\'s', async (t) => {
  const format = (job: V1Job) => envValue(job, 'PTAH_MIGRATION_FORMAT')?.value;
  for (const c of [migrationHistory, migrationApply]) {
    t.equal(format(buildOperationJob({ ...inputFor(c), migrationFormat: 'goose' })), 'goose', `${c.type}: a declared format`);
    t.equal(format(buildOperationJob({ ...inputFor(c), migrationFormat: 'ptah' })), undefined, `${c.type}: the default is left out, so Jobs built before formats rebuild alike`);
    t.equal(format(buildOperationJob(inputFor(c))), undefined, `${c.type}: none given`);
  }
  const migration = snapshotted(inputFor(migrationApply));
  const owner = ownerObjectFor(migration);
  const rebuilt = rebuildClaimJob({ owner: { ...owner, spec: { ...owner.spec, artifact: { format: 'dbmate' } } }, claim: migration.claim, manager: MANAGER, plan: MIGRATION_PLAN });
  t.equal(format(rebuilt), 'dbmate', 'the rebuild carries the owner\'s format');
  t.notSame(canonicalJson(rebuilt), canonicalJson(buildOperationJob(migration)), 'so a Job built for another format is not its rebuild');
});

t.test('spec.adoption reaches a migration Job as canonical JSON when declared, and the rebuild reads the owner\'s', async (t) => {
  const adoption = (job: V1Job) => envValue(job, 'PTAH_MIGRATION_ADOPTION')?.value;
  for (const c of [migrationHistory, migrationApply]) {
    t.equal(adoption(buildOperationJob({ ...inputFor(c), migrationAdoption: { table: 'ops.goose_db_version', from: 'goose' } })),
      '{"from":"goose","table":"ops.goose_db_version"}', `${c.type}: a declared adoption, fields in one order`);
    t.equal(adoption(buildOperationJob(inputFor(c))), undefined, `${c.type}: none declared, so Jobs built before adoption rebuild alike`);
  }
  const migration = snapshotted(inputFor(migrationApply));
  const owner = ownerObjectFor(migration);
  const rebuilt = rebuildClaimJob({ owner: { ...owner, spec: { ...owner.spec, adoption: { from: 'baseline', baselineVersion: '240' } } }, claim: migration.claim, manager: MANAGER, plan: MIGRATION_PLAN });
  t.equal(adoption(rebuilt), '{"from":"baseline","baselineVersion":"240"}', 'the rebuild carries the owner\'s adoption');
  t.notSame(canonicalJson(rebuilt), canonicalJson(buildOperationJob(migration)), 'so a Job built without it is not its rebuild');
});

t.test('the builder\'s lock-timeout defaults are the CRDs\' defaults', async (t) => {
  const defaultOf = (spec: OpenApiSchema) => spec.properties?.policy?.properties?.lockTimeout?.default;
  t.equal(DEFAULT_LOCK_TIMEOUT.schema, defaultOf(ptahSchemaKind.spec.openapi));
  t.equal(DEFAULT_LOCK_TIMEOUT.migration, defaultOf(ptahMigrationKind.spec.openapi));
});

t.test('deadlines: window for read-only Jobs, execution window for Applies, plus grace for a migration Apply', async (t) => {
  t.equal(buildOperationJob(inputFor(schemaObserve)).spec!.activeDeadlineSeconds, 600, 'read-only: spec.execution.activeDeadlineSeconds');
  t.equal(buildOperationJob(inputFor(schemaApply)).spec!.activeDeadlineSeconds, 900, 'schema Apply: executionNotAfter - startedAt');
  t.equal(buildOperationJob(inputFor(migrationApply)).spec!.activeDeadlineSeconds, 960, 'migration Apply: window + 60 s');
  const defaulted = inputFor(migrationHistory);
  defaulted.execution = {};
  t.equal(buildOperationJob(defaulted).spec!.activeDeadlineSeconds, 900, 'the API default when spec.execution is empty');
});

t.test('labels and annotations: operator keys, declared extras, the plan an Apply runs', async (t) => {
  const job = buildOperationJob(snapshotted(inputFor(schemaApply)));
  const claim = claimFor(schemaApply);
  t.same(job.metadata!.labels, {
    team: 'payments',
    'app.kubernetes.io/managed-by': 'ptah-operator',
    'app.kubernetes.io/component': 'schema-operation',
    'operator.ptah.run/schema': 'orders',
    'operator.ptah.run/operation': 'apply',
    'operator.ptah.run/operation-id': sha256Hex(claim.id).slice(0, 16),
  });
  const annotations = job.metadata!.annotations!;
  t.equal(annotations['example.com/owner'], 'payments');
  t.equal(annotations['operator.ptah.run/operation-id'], claim.id);
  t.equal(annotations['operator.ptah.run/execution-binding-id'], claim.executionBindingID);
  t.equal(annotations['operator.ptah.run/runner-image'], MANAGER.runnerImage);
  t.equal(annotations['operator.ptah.run/controller-state-version'], '1');
  t.equal(annotations['operator.ptah.run/plan-name'], PLAN_REF.name);
  t.equal(annotations['operator.ptah.run/plan-content-digest'], d('plan-bytes'));
  t.equal(annotations['cluster-autoscaler.kubernetes.io/safe-to-evict'], 'false');
  t.match(annotations['operator.ptah.run/admission-snapshot-digest'], /^sha256:/);
  const observe = buildOperationJob(inputFor(schemaObserve)).metadata!.annotations!;
  t.equal(observe['cluster-autoscaler.kubernetes.io/safe-to-evict'], undefined, 'read-only Jobs may be evicted');
  t.equal(observe['operator.ptah.run/admission-snapshot-digest'], undefined, 'no snapshot digest before the snapshot exists');
  t.equal(buildOperationJob(inputFor(migrationHistory)).metadata!.labels!['operator.ptah.run/migration'], 'orders');
});

t.test('only a migration Apply\'s Pod keeps its evidence past a delete: its template carries the run-evidence finalizer', async (t) => {
  for (const c of CASES) {
    const job = buildOperationJob(snapshotted(inputFor(c)));
    const want = c === migrationApply ? [EVIDENCE_FINALIZER] : undefined;
    t.same(job.spec!.template.metadata!.finalizers, want, `${c.family} ${c.type}: ${want ? 'the finalizer' : 'none'}`);
    t.equal(job.metadata!.finalizers, undefined, `${c.family} ${c.type}: never on the Job itself`);
  }
});

t.test('a schema Apply mounts its plan projection in chunk order', async (t) => {
  const pod = buildOperationJob(inputFor(schemaApply)).spec!.template.spec!;
  t.same(pod.volumes!.find((v) => v.name === 'plan'), {
    name: 'plan',
    projected: {
      defaultMode: 0o440,
      sources: [
        { configMap: { name: `${PLAN_REF.name}-000`, items: [{ key: 'chunk', path: '000.plan', mode: 0o440 }] } },
        { configMap: { name: `${PLAN_REF.name}-001`, items: [{ key: 'chunk', path: '001.plan', mode: 0o440 }] } },
      ],
    },
  });
  t.same(pod.containers[0]!.volumeMounts!.find((m) => m.name === 'plan'), { name: 'plan', mountPath: '/plan', readOnly: true });
  t.notOk(buildOperationJob(inputFor(schemaObserve)).spec!.template.spec!.volumes!.some((v) => v.name === 'plan'), 'only an Apply mounts a plan');
});

t.test('declared scheduling is copied in the shape the API server stores', async (t) => {
  const input = inputFor(schemaObserve);
  input.execution = {
    ...input.execution,
    tolerations: [],
    nodeSelector: {},
    imagePullSecrets: [{ name: 'pull' }],
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'Exists', values: [] }] }] } } },
    resources: { limits: {}, requests: { cpu: '1' } },
    serviceAccountName: 'ops',
    runtimeClassName: 'gvisor',
    priorityClassName: 'maintenance',
  };
  const pod = buildOperationJob(input).spec!.template.spec!;
  t.equal(pod.tolerations, undefined, 'an empty list is not stored');
  t.equal(pod.nodeSelector, undefined, 'an empty map is not stored');
  t.same(pod.imagePullSecrets, [{ name: 'pull' }]);
  t.same(pod.affinity, { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }] } } });
  t.same(pod.containers[0]!.resources, { requests: { cpu: '1' } });
  t.equal(pod.serviceAccountName, 'ops');
  t.equal(pod.runtimeClassName, 'gvisor');
  t.equal(pod.priorityClassName, 'maintenance');
  const bare = inputFor(schemaObserve);
  bare.execution = {};
  t.same(buildOperationJob(bare).spec!.template.spec!.containers[0]!.resources, {}, 'resources {} as the API server writes it');
});

t.test('the builder refuses bad input with a reason', async (t) => {
  type Row = [name: string, reason: JobBuildRefusal, make: () => OperationJobInput, message: RegExp];
  const tampered = () => {
    const input = snapshotted(inputFor(schemaObserve));
    input.claim.admissionSnapshot = { ...input.claim.admissionSnapshot!, templateDigest: d('other') };
    return input;
  };
  const rows: Row[] = [
    ['job name not derived from the claim', 'JobNameMismatch', () => inputFor(schemaObserve, { jobName: 'ptah-observe-orders-0000000000000000' }), /reserves Job/],
    ['attempt changed without renaming', 'JobNameMismatch', () => ({ ...inputFor(schemaObserve), claim: { ...claimFor(schemaObserve), attempt: 2 } }), /own fields name/],
    ['unknown operation type', 'UnknownOperation', () => ({ ...inputFor(schemaObserve), claim: { ...claimFor(schemaObserve), type: 'Rollback' } }), /not a schema operation/],
    ['a schema type under the migration family', 'UnknownOperation', () => ({ ...inputFor(migrationHistory), claim: { ...claimFor(migrationHistory), type: 'Plan' } }), /not a migration operation/],
    ['runner operation not the type\'s', 'UnknownOperation', () => ({ ...inputFor(schemaObserve), runnerOperation: 'plan' }), /runs the runner operation observe/],
    ['execution window closed at start', 'WindowClosed', () => inputFor(schemaApply, { executionNotAfter: '2030-01-01T00:00:00Z', dispatchNotAfter: '2030-01-01T00:00:00Z' }), /closed/],
    ['execution window before start', 'WindowClosed', () => inputFor(migrationApply, { executionNotAfter: '2029-12-31T23:00:00Z', dispatchNotAfter: '2029-12-31T23:00:00Z' }), /closed/],
    ['dispatch window closed at start', 'WindowClosed', () => inputFor(schemaApply, { dispatchNotAfter: '2030-01-01T00:00:00Z' }), /dispatch window/],
    ['execution before dispatch deadline', 'InvalidClaim', () => inputFor(schemaApply, { executionNotAfter: '2030-01-01T00:10:00Z' }), /before its dispatchNotAfter/],
    ['mutating claim without deadlines', 'InvalidClaim', () => inputFor(schemaApply, { executionNotAfter: undefined }), /records no dispatchNotAfter/],
    ['instant not in UTC', 'InvalidClaim', () => inputFor(schemaApply, { executionNotAfter: '2030-01-01T01:15:00+01:00' }), /RFC 3339 UTC/],
    ['operation ID not a digest', 'InvalidClaim', () => inputFor(schemaObserve, { id: 'op-1' }), /operation ID/],
    ['input fingerprint not a digest', 'InvalidClaim', () => inputFor(schemaObserve, { inputFingerprint: 'sha256:ABC' }), /input fingerprint/],
    ['epoch malformed', 'InvalidClaim', () => inputFor(schemaObserve, { executionBindingID: 'v2-0123456789abcdef0123456789abcdef' }), /epoch/],
    ['snapshot that does not hash to its digest', 'InvalidClaim', tampered, /does not hash/],
    ['termination grace out of range', 'InvalidClaim', () => inputFor(schemaApply, { terminationGracePeriodSeconds: 301 }), /terminationGracePeriodSeconds/],
    ['Apply naming no plan', 'InvalidClaim', () => inputFor(migrationApply, { planRef: undefined }), /names no plan/],
    ['artifact digest malformed', 'InvalidBinding', () => ({ ...inputFor(schemaObserve), artifact: { configMapName: 'a', digest: 'sha256:xyz' } }), /artifact digest/],
    ['artifact not the claim\'s', 'InvalidBinding', () => inputFor(schemaObserve, { artifact: { configMapName: 'orders-schema-v2', digest: d('artifact') } }), /the claim pinned/],
    ['coordination digest malformed', 'InvalidBinding', () => ({ ...inputFor(migrationHistory, { coordinationDigest: undefined }), bindings: { coordinationDigest: 'realm' } }), /coordination digest/],
    ['realm not the claim\'s', 'InvalidBinding', () => inputFor(schemaPlan, { coordinationDigest: d('other-realm') }), /realm the claim holds/],
    ['target identity not the claim\'s', 'InvalidBinding', () => inputFor(schemaApply, { targetIdentityDigest: d('other-db') }), /database the claim/],
    ['mutating Job without a target identity', 'InvalidBinding', () => { const i = inputFor(migrationApply); delete i.bindings.expectedTargetIdentityDigest; return i; }, /needs expectedTargetIdentityDigest/],
    ['plan content digest malformed', 'InvalidBinding', () => { const i = inputFor(schemaApply); i.bindings.planContentDigest = 'nope'; return i; }, /plan content digest/],
    ['chunk names not the plan\'s', 'InvalidBinding', () => { const i = inputFor(schemaApply); i.bindings.planChunkNames = [`${PLAN_REF.name}-001`, `${PLAN_REF.name}-000`]; return i; }, /chunk names/],
    ['too many chunks', 'InvalidBinding', () => { const i = inputFor(schemaApply); i.bindings.planChunkNames = Array.from({ length: 17 }, (_, n) => `${PLAN_REF.name}-${String(n).padStart(3, '0')}`); return i; }, /1 to 16 chunks/],
    ['history fingerprint malformed', 'InvalidBinding', () => { const i = inputFor(migrationApply); i.bindings.historyFingerprint = ''; return i; }, /history fingerprint/],
    ['empty migration sequence', 'InvalidBinding', () => { const i = inputFor(migrationApply); i.bindings.migrationSequence = []; return i; }, /1 to 256 migrations/],
    ['migration twice in the sequence', 'InvalidBinding', () => { const i = inputFor(migrationApply); i.bindings.migrationSequence = [{ version: '1', checksum: 'x' }, { version: '1', checksum: 'y' }]; return i; }, /appears twice/],
    ['a repair beside another migration', 'InvalidBinding', () => { const i = inputFor(migrationApply); i.bindings.migrationSequence = [{ version: '1', checksum: 'x', repair: 'finished' }, { version: '2', checksum: 'y' }]; return i; }, /mixes a repair with other entries/],
    ['a repair that is no resolution', 'InvalidBinding', () => { const i = inputFor(migrationApply); i.bindings.migrationSequence = [{ version: '1', checksum: 'x', repair: 'forced' as 'finished' }]; return i; }, /repair is not a resolution/],
    ['plan binding given to a read-only Job', 'InvalidBinding', () => { const i = inputFor(schemaPlan); i.bindings.planContentDigest = d('plan-bytes'); return i; }, /does not use it/],
    ['sequence given to a schema Apply', 'InvalidBinding', () => { const i = inputFor(schemaApply); i.bindings.migrationSequence = [{ version: '1', checksum: 'x' }]; return i; }, /does not use it/],
    ['scratch database for an Observe', 'InvalidInput', () => ({ ...inputFor(schemaObserve), dev: { urlFrom: { name: 's', key: 'u' } } }), /only plan uses one/],
    ['target with no Secret key', 'InvalidInput', () => ({ ...inputFor(schemaObserve), target: { urlFrom: { name: 'database', key: '' } } }), /names no Secret key/],
    ['owner of the other family', 'InvalidInput', () => ({ ...inputFor(schemaObserve), owner: { ...inputFor(migrationHistory).owner } }), /owned by a operator.ptah.run\/v1alpha1 PtahSchema/],
    ['owner name too long for a label', 'InvalidInput', () => ({ ...inputFor(schemaObserve), owner: { ...inputFor(schemaObserve).owner, name: 'o'.repeat(64) } }), /label/],
    ['reserved declared label', 'InvalidInput', () => { const i = inputFor(schemaObserve); i.execution.podMetadata = { labels: { 'app.kubernetes.io/managed-by': 'me' } }; return i; }, /reserved/],
    ['declared job-name label', 'InvalidInput', () => { const i = inputFor(schemaObserve); i.execution.podMetadata = { labels: { 'job-name': 'x' } }; return i; }, /reserved/],
    ['declared ptah.run annotation', 'InvalidInput', () => { const i = inputFor(schemaObserve); i.execution.podMetadata = { annotations: { 'x.ptah.run/thing': 'x' } }; return i; }, /reserved/],
    ['seventeen declared labels', 'InvalidInput', () => { const i = inputFor(schemaObserve); i.execution.podMetadata = { labels: Object.fromEntries(Array.from({ length: 17 }, (_, n) => [`k${n}`, 'v'])) }; return i; }, /more than 16/],
    ['lock timeout not a duration', 'InvalidInput', () => ({ ...inputFor(migrationApply), policy: { lockTimeout: '5 minutes' } }), /spec\.policy\.lockTimeout: "5 minutes" is not a duration/],
    ['lock timeout zero', 'InvalidInput', () => ({ ...inputFor(schemaApply), policy: { lockTimeout: '0s' } }), /lockTimeout "0s" is not between 1ms and 3600000ms/],
    ['lock timeout over an hour', 'InvalidInput', () => ({ ...inputFor(migrationApply), policy: { lockTimeout: '1h1s' } }), /lockTimeout "1h1s" is not between/],
    ['deadline out of range', 'InvalidInput', () => { const i = inputFor(schemaObserve); i.execution.activeDeadlineSeconds = 29; return i; }, /30\.\.86400/],
    ['manager image with whitespace', 'InvalidInput', () => ({ ...inputFor(schemaObserve), manager: { ...MANAGER, runnerImage: 'runner latest' } }), /runnerImage/],
    ['manager protocol version zero', 'InvalidInput', () => ({ ...inputFor(schemaObserve), manager: { ...MANAGER, runnerProtocolVersion: 0 } }), /runnerProtocolVersion/],
  ];
  for (const [name, reason, make, message] of rows) {
    const input = make();
    t.throws(() => buildOperationJob(input), { name: 'JobBuildError', reason, message }, name);
  }
  t.ok(new JobBuildError('InvalidInput', 'x') instanceof Error);
});

t.test('rebuildClaimJob rebuilds from the owner, its claim and the plan it names', async (t) => {
  const schemaOwner = ownerObjectFor;
  const schemaPlanObject = SCHEMA_PLAN;
  const migrationPlanObject = MIGRATION_PLAN;
  const planFor = planObjectFor;
  for (const c of CASES) {
    const input = snapshotted(inputFor(c));
    const rebuilt = rebuildClaimJob({ owner: schemaOwner(input), claim: input.claim, manager: MANAGER, ...(planFor(c) ? { plan: planFor(c)! } : {}) });
    t.equal(canonicalJson(rebuilt), canonicalJson(buildOperationJob(input)), `${c.family} ${c.type}: the rebuild is the build`);
  }

  const input = snapshotted(inputFor(schemaApply));
  const live = buildOperationJob(input);
  // A manager-only upgrade changes the controller image and revision and the runner image reference; the executor
  // identity the binding names is bound.
  const upgraded = { ...MANAGER, controllerImage: 'registry.example/ptah-operator:v2', controllerRevision: 'rev-2', runnerImage: 'registry.example/ptah-runner:v2' };
  const rebuilt = rebuildClaimJob({ owner: schemaOwner(input), claim: input.claim, manager: upgraded, plan: schemaPlanObject, liveJob: live });
  t.equal(canonicalJson(rebuilt), canonicalJson(live), 'the controller image and revision and the runner image the live Job recorded are taken first');
  const fresh = rebuildClaimJob({ owner: schemaOwner(input), claim: input.claim, manager: upgraded, plan: schemaPlanObject });
  t.equal(fresh.metadata!.annotations!['operator.ptah.run/controller-image'], upgraded.controllerImage, 'without a live Job the current manager builds');
  t.equal(fresh.spec!.template.spec!.containers[0]!.image, upgraded.runnerImage, 'and runs its own runner image');
  const newExecutor = { ...MANAGER, executorIdentity: `sha256:${'f'.repeat(64)}` };
  const rebound = rebuildClaimJob({ owner: schemaOwner(input), claim: input.claim, manager: newExecutor, plan: schemaPlanObject, liveJob: live });
  const named = (job: V1Job) => job.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === 'PTAH_EXECUTOR_IDENTITY')?.value;
  t.equal(named(rebound), newExecutor.executorIdentity, 'the executor identity is never taken from the live Job: it is bound');
  t.not(named(rebound), named(live));
  t.throws(() => rebuildClaimJob({ owner: schemaOwner(input), claim: input.claim, manager: { ...MANAGER, executorIdentity: 'ptah-runner:v1' }, plan: schemaPlanObject }),
    { name: 'JobBuildError', message: /executor identity "ptah-runner:v1" is not a sha256 digest/ }, 'a binding that names no executor digest builds no Job');

  const refusals: [string, Partial<RebuildClaimJobInput>, RegExp][] = [
    ['no plan for an Apply', { plan: undefined }, /plan is not given/],
    ['another plan than the claim names', { plan: { ...schemaPlanObject, metadata: { ...PLAN_REF, uid: 'other' } } }, /not the one the claim names/],
    ['a plan of another realm', { plan: { ...schemaPlanObject, spec: { ...schemaPlanObject.spec, coordinationDigest: d('x') } } }, /another realm/],
    ['a plan of another epoch', { plan: { ...schemaPlanObject, spec: { ...schemaPlanObject.spec, executionBindingID: 'v1-ffffffffffffffffffffffffffffffff' } } }, /another execution epoch/],
    ['a migration plan for a schema Apply', { plan: migrationPlanObject }, /runs a PtahSchemaPlan/],
    ['an owner of no known kind', { owner: { ...schemaOwner(input), kind: 'Deployment' } }, /not a kind that dispatches Jobs/],
    ['no artifact pinned anywhere', { owner: { ...schemaOwner(input), status: {} } }, /pins an artifact/],
  ];
  for (const [name, change, message] of refusals) {
    t.throws(() => rebuildClaimJob({ owner: schemaOwner(input), claim: input.claim, manager: MANAGER, plan: schemaPlanObject, ...change }), { name: 'JobBuildError', message }, name);
  }
  const lockTimeoutOf = (job: V1Job) => envValue(job, 'PTAH_LOCK_TIMEOUT_MS')?.value;
  const migration = snapshotted(inputFor(migrationApply));
  const owner = ownerObjectFor(migration);
  const rebuild = (o: RebuildClaimJobInput['owner']) => rebuildClaimJob({ owner: o, claim: migration.claim, manager: MANAGER, plan: migrationPlanObject });
  t.equal(lockTimeoutOf(rebuild({ ...owner, spec: { ...owner.spec, policy: { lockTimeout: '7m' } } })), '420000', 'the lock timeout is the owner\'s');
  t.equal(lockTimeoutOf(rebuild({ ...owner, spec: { ...owner.spec, policy: undefined } })), '300000', 'an owner read without spec.policy gets the API default');
  t.notSame(canonicalJson(rebuild({ ...owner, spec: { ...owner.spec, policy: { lockTimeout: '7m' } } })), canonicalJson(buildOperationJob(migration)), 'so a Job built under another lock timeout is not its rebuild');

  const observe = snapshotted(inputFor(schemaObserve));
  t.throws(() => rebuildClaimJob({ owner: schemaOwner(observe), claim: observe.claim, manager: MANAGER, plan: schemaPlanObject }), { message: /runs none/ }, 'a plan for a read-only claim');
  const history = inputFor(migrationHistory, { coordinationDigest: undefined });
  t.throws(() => rebuildClaimJob({ owner: schemaOwner(history), claim: history.claim, manager: MANAGER }), { message: /names the realm/ }, 'a claim with no realm and none given');
  t.ok(rebuildClaimJob({ owner: schemaOwner(history), claim: history.claim, manager: MANAGER, coordinationDigest: d('realm') }), 'the caller supplies the realm of a claim that records none');
});

t.test('a schema proof reading connects to the database its Apply ran against, not to the live spec', async (t) => {
  const input = inputFor(schemaPlan);
  const proofClaim = { ...input.claim, proofOf: d('apply') };
  const ran = { target: { urlFrom: { name: 'db-at-apply', key: 'url' } }, dev: { urlFrom: { name: 'dev-at-apply', key: 'url' } } };
  const owner = ownerObjectFor(input);
  const edited = { ...owner, status: { ...owner.status, pendingObservation: { applyOperationID: d('apply'), ...ran } } };
  const secretOf = (job: V1Job, name: string) => job.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === name)?.valueFrom?.secretKeyRef?.name;
  const proof = rebuildClaimJob({ owner: edited, claim: proofClaim, manager: MANAGER });
  t.equal(secretOf(proof, 'PTAH_DB_URL'), 'db-at-apply', 'the target the pending observation recorded');
  t.equal(secretOf(proof, 'PTAH_DEV_URL'), 'dev-at-apply', 'and its scratch database');
  const ordinary = rebuildClaimJob({ owner: edited, claim: input.claim, manager: MANAGER });
  t.equal(secretOf(ordinary, 'PTAH_DB_URL'), input.target!.urlFrom.name, 'an ordinary reading connects to the live spec\'s target');
  t.throws(() => rebuildClaimJob({ owner, claim: proofClaim, manager: MANAGER }),
    { name: 'JobBuildError', message: /proves Apply sha256:[0-9a-f]{64}, which the owner no longer owes a proof for/ }, 'a proof claim without its proof builds nothing');
});

t.test('a repair plan rebuilds as its one-entry repair sequence, never as the files of another plan', async (t) => {
  const sequenceOf = (job: V1Job) => envValue(job, 'PTAH_EXPECTED_MIGRATION_SEQUENCE')?.value;
  const migration = snapshotted(inputFor(migrationApply));
  const owner = ownerObjectFor(migration);
  const repairPlan = { ...MIGRATION_PLAN, spec: { ...MIGRATION_PLAN.spec, migrations: [], repair: { version: '0004', checksum: d('m4'), resolution: 'finished' as const } } };
  const rebuilt = rebuildClaimJob({ owner, claim: migration.claim, manager: MANAGER, plan: repairPlan });
  t.equal(sequenceOf(rebuilt), canonicalJson([{ version: '0004', checksum: d('m4'), repair: 'finished' }]), 'the repair plan\'s sequence is its repair');
  const filesRebuilt = rebuildClaimJob({ owner, claim: migration.claim, manager: MANAGER, plan: MIGRATION_PLAN });
  t.not(sequenceOf(filesRebuilt), sequenceOf(rebuilt), 'so a Job built for a plan of files is not a repair plan\'s rebuild');
  const undone = rebuildClaimJob({ owner, claim: migration.claim, manager: MANAGER, plan: { ...repairPlan, spec: { ...repairPlan.spec, repair: { ...repairPlan.spec.repair, resolution: 'undone' } } } });
  t.not(sequenceOf(undone), sequenceOf(rebuilt), 'nor is one built for the other resolution');
});
