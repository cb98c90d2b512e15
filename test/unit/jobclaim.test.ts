import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import { buildOperationJob, rebuildClaimJob, type ClaimedOperation } from '../../src/shared/job/index.js';
import { CLEANUP_TTL_SECONDS, isCleanupTtlUpdate, match, type ClaimOwner, type JobClaim, type MatchMode } from '../../src/shared/jobclaim.js';
import { resolveSnapshot } from '../../src/shared/podintent.js';
import {
  CASES,
  d,
  EPOCH,
  inputFor,
  JOB_UID,
  MANAGER,
  ownerObjectFor,
  planObjectFor,
  snapshotted,
  stored,
  type Case,
} from './job-fixtures.js';

interface Fixture {
  claim: ClaimedOperation;
  built: V1Job;
  live: V1Job;
  owner: ClaimOwner;
  modes: { rebuild: MatchMode; fixed: MatchMode };
}

function fixture(c: Case): Fixture {
  const input = snapshotted(inputFor(c));
  const built = buildOperationJob(input);
  const owner = { kind: input.owner.kind, name: input.owner.name, namespace: input.owner.namespace, uid: input.owner.uid };
  return {
    claim: input.claim,
    built,
    live: stored(built),
    owner,
    modes: { rebuild: { kind: 'rebuild', rebuilt: built }, fixed: { kind: 'claim-fixed', owner } },
  };
}

const template = (job: V1Job) => job.spec!.template;
const pod = (job: V1Job) => job.spec!.template.spec!;
const container = (job: V1Job) => pod(job).containers[0]!;
const bothMetadata = (job: V1Job) => [job.metadata!, template(job).metadata!];

t.test('the built Job matches its claim once the API server stored it', async (t) => {
  for (const c of CASES) {
    const f = fixture(c);
    const name = `${c.family} ${c.type}`;
    t.same(match(f.live, f.claim, f.modes.rebuild), { ok: true }, `${name}: rebuild mode`);
    t.same(match(f.live, f.claim, f.modes.fixed), { ok: true }, `${name}: claim-fixed mode`);
    t.same(match(f.live, { ...f.claim, jobUID: JOB_UID }, f.modes.rebuild, { epoch: EPOCH, controllerStateVersion: 1 }), { ok: true }, `${name}: recorded UID and binding in force`);
    t.same(match(f.live, { ...f.claim, jobUID: JOB_UID }, f.modes.fixed, { epoch: EPOCH, controllerStateVersion: 1 }), { ok: true }, `${name}: claim-fixed with binding`);
    const asJson = JSON.parse(JSON.stringify(f.live)) as V1Job;
    t.same(match(asJson, f.claim, f.modes.rebuild), { ok: true }, `${name}: the Job as an AdmissionReview carries it`);
    t.same(match(f.built, f.claim, { kind: 'rebuild', rebuilt: f.built, submitted: true }), { ok: true }, `${name}: submitted, not yet stored (no UID)`);
    t.same(match(f.live, f.claim, { kind: 'rebuild', rebuilt: f.built, submitted: true }), { ok: true }, `${name}: submitted as a validating webhook sees it`);
    const pending: JobClaim = { ...f.claim, inputFingerprint: undefined, attempt: undefined };
    t.same(match(f.live, pending, f.modes.fixed), { ok: true }, `${name}: a record that kept no input fingerprint reads the Job's own`);
  }
});

t.test('a stored Job may carry the cleanup TTL, a submitted one may not', async (t) => {
  const f = fixture(CASES[2]!);
  const withTtl = structuredClone(f.live);
  withTtl.spec!.ttlSecondsAfterFinished = CLEANUP_TTL_SECONDS;
  t.same(match(withTtl, f.claim, f.modes.rebuild), { ok: true }, 'rebuild');
  t.same(match(withTtl, f.claim, f.modes.fixed), { ok: true }, 'claim-fixed');
  const verdict = match(withTtl, f.claim, { kind: 'rebuild', rebuilt: f.built, submitted: true });
  t.match(verdict, { ok: false, reason: /ttlSecondsAfterFinished/ }, 'submitted');
});

type Mutation = [name: string, mutate: (job: V1Job) => void, rebuild: RegExp, fixed: RegExp];

const mutations: Mutation[] = [
  ['another owner UID', (j) => void (j.metadata!.ownerReferences![0]!.uid = 'someone-else'), /controller owner is not/, /controller owner is not/],
  ['a second owner reference', (j) => void j.metadata!.ownerReferences!.push({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'y' }), /exactly one owner/, /exactly one owner/],
  ['an owner that is not the controller', (j) => void (j.metadata!.ownerReferences![0]!.controller = false), /controller owner is not/, /controller owner is not/],
  ['an owner that does not block deletion', (j) => void delete j.metadata!.ownerReferences![0]!.blockOwnerDeletion, /controller owner is not/, /controller owner is not/],
  ['no owner', (j) => void delete j.metadata!.ownerReferences, /exactly one owner/, /exactly one owner/],
  ['a changed env value', (j) => void (container(j).env!.find((e) => e.name === 'PTAH_EXPECTED_ARTIFACT_DIGEST')!.value = d('other')), /spec\.template\.spec\.containers\[0\]\.env/, /admission snapshot/],
  ['an added env var', (j) => void container(j).env!.push({ name: 'ZZ_EXTRA', value: '1' }), /containers\[0\]\.env/, /admission snapshot/],
  ['the DB URL from another Secret', (j) => void (container(j).env!.find((e) => e.name === 'PTAH_DB_URL')!.valueFrom!.secretKeyRef!.name = 'other'), /containers\[0\]\.env/, /admission snapshot/],
  ['a changed image', (j) => void (container(j).image = 'registry.example/evil:latest'), /containers\[0\]\.image/, /admission snapshot/],
  ['a second container', (j) => void pod(j).containers.push({ name: 'sidecar', image: 'x' }), /containers/, /admission snapshot/],
  ['privilege escalation allowed', (j) => void (container(j).securityContext!.allowPrivilegeEscalation = true), /securityContext/, /admission snapshot/],
  ['a service account token mounted', (j) => void (pod(j).automountServiceAccountToken = true), /automountServiceAccountToken/, /admission snapshot/],
  ['a changed operator label', (j) => bothMetadata(j).forEach((m) => (m.labels!['operator.ptah.run/operation'] = 'other')), /labels/, /labels are not its claim's/],
  ['an extra label on the Job only', (j) => void (j.metadata!.labels!['extra'] = 'x'), /labels/, /template labels differ/],
  ['an extra label on Job and template', (j) => bothMetadata(j).forEach((m) => (m.labels!['extra'] = 'x')), /labels/, /admission snapshot/],
  ['an extra reserved label', (j) => bothMetadata(j).forEach((m) => (m.labels!['example.kubernetes.io/x'] = 'x')), /labels/, /reserved/],
  ['a changed input fingerprint', (j) => bothMetadata(j).forEach((m) => (m.annotations!['operator.ptah.run/input-fingerprint'] = d('x'))), /annotations/, /input-fingerprint is not the claim's/],
  ['a changed operation ID annotation', (j) => bothMetadata(j).forEach((m) => (m.annotations!['operator.ptah.run/operation-id'] = d('x'))), /annotations/, /operation-id is not the claim's/],
  ['a changed snapshot digest annotation', (j) => bothMetadata(j).forEach((m) => (m.annotations!['operator.ptah.run/admission-snapshot-digest'] = d('x'))), /annotations/, /admission-snapshot-digest/],
  ['a non-canonical state version', (j) => bothMetadata(j).forEach((m) => (m.annotations!['operator.ptah.run/controller-state-version'] = '01')), /annotations/, /canonical positive/],
  ['a missing controller image record', (j) => bothMetadata(j).forEach((m) => delete m.annotations!['operator.ptah.run/controller-image']), /annotations/, /controller-image annotation is missing/],
  ['an annotation on the template only', (j) => void (template(j).metadata!.annotations!['example.com/other'] = 'x'), /spec\.template\.metadata\.annotations/, /template annotations differ/],
  ['another epoch', (j) => bothMetadata(j).forEach((m) => (m.annotations!['operator.ptah.run/execution-binding-id'] = 'v1-ffffffffffffffffffffffffffffffff')), /another execution epoch/, /another execution epoch/],
  ['TTL 301', (j) => void (j.spec!.ttlSecondsAfterFinished = 301), /ttlSecondsAfterFinished/, /ttlSecondsAfterFinished/],
  ['backoffLimit 1', (j) => void (j.spec!.backoffLimit = 1), /spec\.backoffLimit/, /spec\.backoffLimit/],
  ['parallelism 2', (j) => void (j.spec!.parallelism = 2), /spec\.parallelism/, /spec\.parallelism/],
  ['a longer Job deadline', (j) => void (j.spec!.activeDeadlineSeconds = 86400), /spec\.activeDeadlineSeconds/, /activeDeadlineSeconds is not its Pod's/],
  ['another name', (j) => void (j.metadata!.name = 'ptah-observe-orders-0000000000000000'), /the one the claim reserved/, /the one the claim reserved/],
  ['another namespace', (j) => void (j.metadata!.namespace = 'team-b'), /the one the claim reserved/, /the one the claim reserved/],
  ['no UID', (j) => void delete j.metadata!.uid, /has no UID/, /has no UID/],
  ['a selector bound to another UID', (j) => void (j.spec!.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': 'other' } }), /selector is not bound/, /selector is not bound/],
  ['a selector with expressions', (j) => void (j.spec!.selector!.matchExpressions = [{ key: 'a', operator: 'Exists' }]), /selector is not the one/, /selector is not the one/],
  ['a selector on a label the claim chose', (j) => void (j.spec!.selector = { matchLabels: { team: 'payments' } }), /selector is not bound/, /selector is not bound/],
  ['a template identity label of another Job', (j) => void (template(j).metadata!.labels!['job-name'] = 'other'), /generated identity label job-name/, /generated identity label job-name/],
];

t.test('any single change to a stored Job is refused, in both modes', async (t) => {
  for (const c of CASES) {
    const f = fixture(c);
    for (const [name, mutate, rebuildReason, fixedReason] of mutations) {
      const job = structuredClone(f.live);
      mutate(job);
      t.match(match(job, f.claim, f.modes.rebuild), { ok: false, reason: rebuildReason }, `${c.family} ${c.type}: ${name} (rebuild)`);
      t.match(match(job, f.claim, f.modes.fixed), { ok: false, reason: fixedReason }, `${c.family} ${c.type}: ${name} (claim-fixed)`);
    }
  }
});

t.test('Apply-only marks are fixed by the claim', async (t) => {
  for (const c of CASES.filter((k) => k.type === 'Apply')) {
    const f = fixture(c);
    const rows: [string, (job: V1Job) => void, RegExp][] = [
      ['safe-to-evict dropped', (j) => bothMetadata(j).forEach((m) => delete m.annotations!['cluster-autoscaler.kubernetes.io/safe-to-evict']), /safe-to-evict is missing/],
      ['another plan UID', (j) => bothMetadata(j).forEach((m) => (m.annotations!['operator.ptah.run/plan-uid'] = 'other')), /plan-uid is not the claim's/],
    ];
    for (const [name, mutate, fixedReason] of rows) {
      const job = structuredClone(f.live);
      mutate(job);
      t.match(match(job, f.claim, f.modes.rebuild), { ok: false, reason: /annotations/ }, `${c.family}: ${name} (rebuild)`);
      t.match(match(job, f.claim, f.modes.fixed), { ok: false, reason: fixedReason }, `${c.family}: ${name} (claim-fixed)`);
    }
  }
  const schemaApply = fixture(CASES[2]!);
  const job = structuredClone(schemaApply.live);
  bothMetadata(job).forEach((m) => (m.annotations!['operator.ptah.run/plan-content-digest'] = 'not-a-digest'));
  t.match(match(job, schemaApply.claim, schemaApply.modes.fixed), { ok: false, reason: /plan content digest/ });
});

t.test('the claim and the binding in force are judged first', async (t) => {
  const f = fixture(CASES[0]!);
  const rows: [string, JobClaim, MatchMode, RegExp][] = [
    ['no admission snapshot', { ...f.claim, admissionSnapshot: undefined }, f.modes.fixed, /no admission snapshot/],
    ['a snapshot that does not hash', { ...f.claim, admissionSnapshot: { ...f.claim.admissionSnapshot!, serviceAccount: 'other' } as JobClaim['admissionSnapshot'] }, f.modes.rebuild, /does not hash/],
    ['an unknown operation type', { ...f.claim, type: 'Rollback' }, f.modes.fixed, /not a schema operation/],
    ['a job name its fields do not derive', { ...f.claim, attempt: 2 }, f.modes.rebuild, /own fields name/],
    ['a malformed epoch', { ...f.claim, executionBindingID: 'v1-x' }, f.modes.fixed, /execution-binding epoch/],
    ['an owner of no known kind', f.claim, { kind: 'claim-fixed', owner: { ...f.owner, kind: 'Deployment' } }, /not a kind that dispatches Jobs/],
    ['a rebuild with no owner', f.claim, { kind: 'rebuild', rebuilt: { ...f.built, metadata: { ...f.built.metadata, ownerReferences: [] } } }, /no single controller owner/],
    ['a recorded UID of another Job', { ...f.claim, jobUID: 'another-uid' }, f.modes.rebuild, /UID is not the one the claim recorded/],
  ];
  for (const [name, claim, mode, reason] of rows) t.match(match(f.live, claim, mode, undefined), { ok: false, reason }, name);
  t.match(match(f.live, f.claim, f.modes.rebuild, { epoch: 'v1-ffffffffffffffffffffffffffffffff' }), { ok: false, reason: /no longer in force/ }, 'epoch not the binding in force (rebuild)');
  t.match(match(f.live, f.claim, f.modes.fixed, { epoch: 'v1-ffffffffffffffffffffffffffffffff' }), { ok: false, reason: /no longer in force/ }, 'epoch not the binding in force (claim-fixed)');
  t.match(match(f.live, f.claim, f.modes.fixed, { epoch: EPOCH, controllerStateVersion: 2 }), { ok: false, reason: /state version of the execution binding/ }, 'state version not the binding\'s');
  t.match(match(f.built, { ...f.claim, jobUID: JOB_UID }, { kind: 'rebuild', rebuilt: f.built, submitted: true }), { ok: false, reason: /UID is not the one/ }, 'a new Job cannot be the one a claim already recorded');
  const pending: JobClaim = { ...f.claim, inputFingerprint: undefined, attempt: undefined };
  const badFingerprint = structuredClone(f.live);
  bothMetadata(badFingerprint).forEach((m) => (m.annotations!['operator.ptah.run/input-fingerprint'] = 'nope'));
  t.match(match(badFingerprint, pending, f.modes.fixed), { ok: false, reason: /input fingerprint is not a sha256 digest/ }, 'a record without a fingerprint still needs a well-formed one on the Job');
});

t.test('the Pod template is held to the admission snapshot even when the rebuild agrees', async (t) => {
  const c = CASES[1]!;
  const f = fixture(c);
  const moved = inputFor(c);
  moved.execution = { ...moved.execution, nodeSelector: { zone: 'b' } };
  const otherSnapshot = resolveSnapshot(template(buildOperationJob(moved)));
  // A claim whose snapshot recorded another template; its Job was built (and is rebuilt) with that snapshot's digest.
  const claim = { ...f.claim, admissionSnapshot: otherSnapshot };
  const built = buildOperationJob({ ...inputFor(c), claim });
  t.match(match(stored(built), claim, { kind: 'rebuild', rebuilt: built }), { ok: false, reason: /not the one the admission snapshot recorded/ }, 'rebuild');
  t.match(match(stored(built), claim, { kind: 'claim-fixed', owner: f.owner }), { ok: false, reason: /not the one the admission snapshot recorded/ }, 'claim-fixed');
});

t.test('a manager upgrade that keeps the binding adopts its predecessor\'s Job', async (t) => {
  for (const c of CASES) {
    const input = snapshotted(inputFor(c));
    const live = stored(buildOperationJob(input));
    // What a manager-only upgrade can change: everything the Job records, the runner image reference included
    // (another executor is a new execution binding: docs/execution-binding.md).
    const upgraded = {
      ...MANAGER, controllerImage: 'registry.example/ptah-operator@sha256:' + 'c'.repeat(64), controllerRevision: 'rev-2',
      runnerImage: 'registry.example/ptah-runner@sha256:' + 'd'.repeat(64),
    };
    const plan = planObjectFor(c);
    const common = { owner: ownerObjectFor(input), claim: input.claim, manager: upgraded, ...(plan ? { plan } : {}) };
    const rebuilt = rebuildClaimJob({ ...common, liveJob: live });
    t.same(match(live, input.claim, { kind: 'rebuild', rebuilt }), { ok: true }, `${c.family} ${c.type}: rebuilt with the identity the live Job recorded`);
    const naive = rebuildClaimJob(common);
    t.match(match(live, input.claim, { kind: 'rebuild', rebuilt: naive }), { ok: false, reason: /annotations/ }, `${c.family} ${c.type}: rebuilt with the new identity it would not match`);
    const newExecutor = rebuildClaimJob({ ...common, manager: { ...upgraded, executorIdentity: 'sha256:' + 'f'.repeat(64) }, liveJob: live });
    t.match(match(live, input.claim, { kind: 'rebuild', rebuilt: newExecutor }), { ok: false, reason: /PTAH_EXECUTOR_IDENTITY|spec/ }, `${c.family} ${c.type}: a Job naming another executor is not adopted`);
    const versionBump = rebuildClaimJob({ ...common, manager: { ...upgraded, controllerStateVersion: 2 }, liveJob: live });
    t.match(match(live, input.claim, { kind: 'rebuild', rebuilt: versionBump }), { ok: false }, `${c.family} ${c.type}: a state-version change is not a manager-only upgrade`);
  }
});

t.test('isCleanupTtlUpdate admits only nil -> 300', async (t) => {
  const { live } = fixture(CASES[4]!);
  const next = (change: (job: V1Job) => void): V1Job => {
    const job = structuredClone(live);
    job.spec!.ttlSecondsAfterFinished = CLEANUP_TTL_SECONDS;
    job.metadata!.resourceVersion = '4712';
    job.metadata!.generation = 2;
    job.metadata!.managedFields = [{ manager: 'ptah-operator', operation: 'Update', apiVersion: 'batch/v1', time: new Date() }];
    job.status = { succeeded: 1 };
    change(job);
    return job;
  };
  t.equal(isCleanupTtlUpdate(live, next(() => {})), true, 'nil -> 300, with server-managed fields moving');
  t.equal(isCleanupTtlUpdate(JSON.parse(JSON.stringify(live)), JSON.parse(JSON.stringify(next(() => {})))), true, 'as an AdmissionReview carries the two objects');
  const negatives: [string, V1Job, V1Job][] = [
    ['TTL 301', live, next((j) => void (j.spec!.ttlSecondsAfterFinished = 301))],
    ['TTL 0', live, next((j) => void (j.spec!.ttlSecondsAfterFinished = 0))],
    ['TTL removed again', next(() => {}), live],
    ['TTL already set', next(() => {}), next(() => {})],
    ['no TTL at all', live, next((j) => void delete j.spec!.ttlSecondsAfterFinished)],
    ['TTL and a label', live, next((j) => void (j.metadata!.labels!['x'] = 'y'))],
    ['TTL and an annotation', live, next((j) => void (j.metadata!.annotations!['x'] = 'y'))],
    ['TTL and another deadline', live, next((j) => void (j.spec!.activeDeadlineSeconds = 1))],
    ['TTL and a suspend', live, next((j) => void (j.spec!.suspend = true))],
    ['TTL and an owner change', live, next((j) => void (j.metadata!.ownerReferences = []))],
    ['TTL and a finalizer', live, next((j) => void (j.metadata!.finalizers = ['x']))],
  ];
  for (const [name, before, after] of negatives) t.equal(isCleanupTtlUpdate(before, after), false, name);
});
