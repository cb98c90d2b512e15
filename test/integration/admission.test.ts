// The manager's admission webhooks on the real API server: the service runs in this process on 127.0.0.1, is
// registered by URL and CA bundle for one test namespace, and the API server itself calls it over TLS for writes
// made with the manager's, an administrator's and an approver's credentials. Every refusal is asserted as the API
// server reports it, and every guard has the write it must admit beside the one it must refuse.
import t, { type Test } from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import { ANNOTATIONS, API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { rebuildClaimJob, type ClaimedOperation, type ClaimOwnerObject } from '../../src/shared/job/index.js';
import { ApiError, restClient, type KubeClient, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import { jobNameFor } from '../../src/shared/naming.js';
import { resolveSnapshot } from '../../src/shared/podintent.js';
import { coordinationDigest } from '../../src/shared/realm.js';
import { bindApprovers, sharedCluster, testNamespace, waitForCrdsEstablished } from '../../tools/stack/cluster.js';
import { applyManifestFile, crdManifestFiles } from '../../tools/stack/manifests.js';
import { startManagerService, TEST_MANAGER_IMAGES, type ManagerService } from './manager-service.js';

const cluster = sharedCluster();
const FIELD_MANAGER = 'ptah-admission-test';
const EPOCH = `v1-${'e'.repeat(32)}`;
const d = (seed: string): string => sha256Digest(seed);
const WEBHOOK = {
  controllerWrite: 'controller-write.operator.ptah.run',
  statusWrite: 'status-write.operator.ptah.run',
  decision: 'decision.operator.ptah.run',
} as const;
const denied = (webhook: string, message: string): RegExp => new RegExp(`^admission webhook "${webhook.replace(/\./g, '\\.')}" denied the request: ${message}`);
const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

let ns: string;
let service: ManagerService;
let admin: KubeClient;
let manager: KubeClient;
let approver: KubeClient;

/** The project's CRDs, installed as an installation gets them (idempotent: other test files may install them too). */
async function installCrds(): Promise<void> {
  const kc = cluster.kubeConfig('admin');
  const files = await crdManifestFiles();
  const names: string[] = [];
  for (const file of files) {
    for (const crd of await applyManifestFile(kc, `manifests/crds/${file}`)) names.push(crd.metadata?.name ?? '');
  }
  await waitForCrdsEstablished(names);
}

t.before(async () => {
  const as = (identity: 'admin' | 'manager' | 'approver') => restClient(cluster.kubeConfig(identity), { fieldManager: FIELD_MANAGER });
  [admin, manager, approver] = await Promise.all([as('admin'), as('manager'), as('approver')]);
  await installCrds();
  await applyManifestFile(cluster.kubeConfig('admin'), 'manifests/rbac.yaml');
  ns = await testNamespace(t);
  await bindApprovers(ns);
  service = await startManagerService({ namespace: ns });
  t.teardown(() => service.stop());
});

/** The refusal the API server answers `attempt` with; a failed assertion (not a throw) when it was admitted. */
async function expectRefused(t: Test, attempt: Promise<unknown>, want: { code: number; message: RegExp }, what: string): Promise<void> {
  const outcome = await attempt.then(() => 'admitted', (e: unknown) => e);
  if (!(outcome instanceof ApiError)) {
    t.fail(`${what}: expected the API server to refuse, got ${outcome instanceof Error ? outcome.message : String(outcome)}`);
    return;
  }
  t.equal(outcome.code, want.code, `${what}: refused with HTTP ${want.code}`);
  t.match(outcome.status.message ?? '', want.message, `${what}: the API server's message`);
}

const ptahRef = (kind: string, name: string): ResourceRef => ({ apiVersion: API_VERSION, kind, namespace: ns, name });
const migrationRef = (name: string) => ptahRef(KINDS.PtahMigration.kind, name);
const jobRef = (name: string): ResourceRef => ({ apiVersion: 'batch/v1', kind: 'Job', namespace: ns, name });

const TARGET = { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'orders-db', key: 'url' } };
const BINDING = {
  epoch: EPOCH,
  controllerStateVersion: 1,
  executorIdentity: `sha256:${'e'.repeat(64)}`,
  runnerImage: TEST_MANAGER_IMAGES.runnerImage,
  runnerProtocolVersion: 1,
  controllerImage: TEST_MANAGER_IMAGES.controllerImage,
  controllerRevision: TEST_MANAGER_IMAGES.controllerRevision,
};
const ARTIFACT = {
  configMapName: 'orders-v1',
  configMapUID: 'uid-of-orders-v1',
  digest: d('artifact'),
  verificationPolicyUID: 'uid-of-policy',
  verificationPolicyDigest: d('policy'),
  resolvedAt: '2030-01-01T00:00:00Z',
};

/** A PtahMigration as a person writes it (administrator); returns what the API server stored, defaults and all. */
function createMigration(name: string): Promise<PtahMigration> {
  return admin.create({
    apiVersion: API_VERSION,
    kind: KINDS.PtahMigration.kind,
    metadata: { name, namespace: ns },
    spec: { target: TARGET, artifact: { configMapRef: { name: 'orders-v1' }, verificationPolicyRef: { name: 'policy', key: 'policy.json' } } },
  } as KubeObject) as Promise<PtahMigration>;
}

/** The manager's status write, through the status subresource as the manager makes it. */
function managerStatus(name: string, status: Record<string, unknown>): Promise<PtahMigration> {
  return manager.patch<PtahMigration>(migrationRef(name), { status }, 'merge', { subresource: 'status' });
}

interface HistoryClaim {
  claim: ClaimedOperation & { admissionSnapshot: ReturnType<typeof resolveSnapshot> };
  /** The Job the claim builds, as the manager submits it. */
  job: V1Job;
}

/** A migration History claim on the stored `owner`, as the controller persists it, and the Job the shared builder makes for it. */
function historyClaim(owner: PtahMigration): HistoryClaim {
  const { name = '', uid = '' } = owner.metadata ?? {};
  const id = d(`history-${uid}`);
  const inputFingerprint = d(`input-${uid}`);
  const base = { type: 'History', id, inputFingerprint, startedAt: '2030-01-01T00:00:00Z', attempt: 1, executionBindingID: EPOCH };
  const jobName = jobNameFor({ family: 'migration', ownerName: name, ownerUid: uid, operationType: 'History', operationId: id, executionBindingId: EPOCH, inputFingerprint, attempt: 1 });
  const build = (claim: ClaimedOperation) =>
    rebuildClaimJob({
      owner: { ...owner, status: { artifact: ARTIFACT } } as ClaimOwnerObject,
      claim,
      // A History claim takes no Lease and records no realm: the Job carries the owner's.
      coordinationDigest: coordinationDigest({ engine: TARGET.engine, namespace: ns, coordinationKey: TARGET.coordinationKey }),
      manager: { ...TEST_MANAGER_IMAGES, executorIdentity: BINDING.executorIdentity, controllerStateVersion: BINDING.controllerStateVersion, runnerProtocolVersion: BINDING.runnerProtocolVersion },
    });
  const unsnapshotted = { ...base, jobName };
  const claim = { ...unsnapshotted, admissionSnapshot: resolveSnapshot(build(unsnapshotted).spec!.template) };
  return { claim, job: build(claim) };
}

t.test('controller-write: a manager Job that no persisted claim names is refused', async (t) => {
  const owner = await createMigration('unclaimed');
  const { claim, job } = historyClaim(owner);

  await expectRefused(t, manager.create(job), {
    code: 403,
    message: denied(WEBHOOK.controllerWrite, `Job ${ns}/${escape(job.metadata!.name!)} does not match a not-yet-created active operation: PtahMigration unclaimed has no claim in status\\.activeOperation$`),
  }, 'the claim\'s own Job before the claim is persisted');

  await managerStatus('unclaimed', { artifact: ARTIFACT, executionBinding: BINDING, activeOperation: claim });
  const renamed = structuredClone(job);
  renamed.metadata!.name = 'ptah-m-history-unclaimed-other';
  await expectRefused(t, manager.create(renamed), {
    code: 403,
    message: denied(WEBHOOK.controllerWrite, `Job ${ns}/ptah-m-history-unclaimed-other does not match a not-yet-created active operation: the claim of PtahMigration unclaimed reserves Job ${escape(claim.jobName)}$`),
  }, 'a Job under a name the persisted claim does not reserve');

  const bare: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'ownerless', namespace: ns },
    spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: TEST_MANAGER_IMAGES.runnerImage }] } } },
  };
  await expectRefused(t, manager.create(bare), {
    code: 403,
    message: denied(WEBHOOK.controllerWrite, `Job ${ns}/ownerless must have exactly one owner reference, a controller reference to a PtahSchema or PtahMigration$`),
  }, 'a Job owned by nothing');
  // The webhook judges only the manager's writes: the same Job from a person is no business of it.
  const personal = await admin.create(bare, { dryRun: true });
  t.equal(personal.metadata?.name, 'ownerless', 'the administrator\'s identical Job is admitted (dry run)');
});

t.test('controller-write: the Job a persisted History claim builds is admitted, and only the cleanup TTL may change on it', async (t) => {
  const owner = await createMigration('orders');
  const { claim, job } = historyClaim(owner);
  const stored = await managerStatus('orders', { artifact: ARTIFACT, executionBinding: BINDING, activeOperation: claim });
  t.same(stored.status?.activeOperation, claim, 'the claim is persisted through the status subresource by the manager');

  const created = await manager.create(job);
  const uid = created.metadata?.uid;
  t.ok(uid, 'the Job is admitted and stored with a UID');
  const readBack = await manager.get<V1Job>(jobRef(claim.jobName));
  t.equal(readBack.metadata?.uid, uid, 'its UID reads back');
  t.equal(readBack.spec?.ttlSecondsAfterFinished, undefined, 'it is stored without a cleanup TTL');

  const ttl = (value: number) => manager.patch(jobRef(claim.jobName), { spec: { ttlSecondsAfterFinished: value } }, 'merge');
  const onlyTtl = (name: string) => denied(WEBHOOK.controllerWrite, `Job ${ns}/${escape(name)}: the manager may only set ttlSecondsAfterFinished from unset to 300 and change nothing else; this update is not that$`);
  await expectRefused(t, ttl(300), {
    code: 403,
    message: denied(WEBHOOK.controllerWrite, `Job ${ns}/${escape(claim.jobName)} \\(uid ${uid}\\) is named by no claim or retained record of PtahMigration orders, so it is not the manager's to clean up$`),
  }, 'nil → 300 before the claim records the Job\'s UID');

  await managerStatus('orders', { activeOperation: { ...claim, jobUID: uid } });
  await expectRefused(t, ttl(301), { code: 403, message: onlyTtl(claim.jobName) }, 'nil → 301');
  await expectRefused(t, manager.patch(jobRef(claim.jobName), { metadata: { labels: { extra: 'x' } } }, 'merge'), { code: 403, message: onlyTtl(claim.jobName) }, 'a label change');
  await expectRefused(t, manager.patch(jobRef(claim.jobName), { metadata: { labels: { extra: 'x' } }, spec: { ttlSecondsAfterFinished: 300 } }, 'merge'), {
    code: 403, message: onlyTtl(claim.jobName),
  }, 'nil → 300 together with a label change');

  const cleaned = await ttl(300) as V1Job;
  t.equal(cleaned.spec?.ttlSecondsAfterFinished, 300, 'nil → 300 on the Job the claim names is admitted');
  await expectRefused(t, ttl(301), { code: 403, message: onlyTtl(claim.jobName) }, '300 → 301 once the TTL is set');
});

t.test('status-write: a person may not write a Ptah status and is told how to settle instead; the manager may', async (t) => {
  await createMigration('statusful');
  const operationID = d('unresolved-run');
  await managerStatus('statusful', { unresolvedRun: { outcome: 'Unknown', operationID, recordedAt: '2030-01-01T00:00:00Z' } });
  const statusful = await admin.get<PtahMigration>(migrationRef('statusful'));
  t.equal(statusful.status?.unresolvedRun?.operationID, operationID, 'the manager wrote status.unresolvedRun');

  await expectRefused(t, admin.patch(migrationRef('statusful'), { status: { unresolvedRun: null } }, 'merge', { subresource: 'status' }), {
    code: 403,
    message: denied(WEBHOOK.statusWrite,
      `the status of PtahMigration ${ns}/statusful is written only by the operator's manager, not by ptah-test-admin; .*` +
      `Instead, to settle an unresolved migration run, create a PtahMigrationRunAcknowledgment .*; for ${ns}/statusful that is ` +
      `spec\\.migrationRef \\{name: statusful, uid: ${statusful.metadata?.uid}\\} and spec\\.operationID ${operationID}$`),
  }, 'the administrator clearing status.unresolvedRun');
  t.equal((await admin.get<PtahMigration>(migrationRef('statusful'))).status?.unresolvedRun?.operationID, operationID, 'the record is still there');

  const phase = await managerStatus('statusful', { phase: 'Blocked' });
  t.equal(phase.status?.phase, 'Blocked', 'the manager\'s status write is admitted');
});

t.test('stamp and decision: an approval records who really approved, and only the plan that is current', async (t) => {
  const owner = await createMigration('approved');
  const migrationUid = owner.metadata?.uid ?? '';
  const plan = (name: string, seed: string) => admin.create({
    apiVersion: API_VERSION,
    kind: KINDS.PtahMigrationPlan.kind,
    metadata: { name, namespace: ns },
    spec: {
      migrationRef: { name: 'approved', uid: migrationUid },
      fingerprint: d(`fingerprint-${seed}`),
      migrations: [{ version: '2', name: 'add_index', checksum: d(`m2-${seed}`) }],
      historyFingerprint: d('history'),
      currentVersion: '1',
      artifactDigest: ARTIFACT.digest,
      coordinationDigest: coordinationDigest({ engine: TARGET.engine, namespace: ns, coordinationKey: TARGET.coordinationKey }),
      targetIdentityDigest: d('target'),
      policyFingerprint: d('policy-fingerprint'),
      verificationPolicyUID: ARTIFACT.verificationPolicyUID,
      verificationPolicyDigest: ARTIFACT.verificationPolicyDigest,
      executionBindingID: EPOCH,
      createdAt: '2030-01-01T00:00:00Z',
    },
  } as KubeObject) as Promise<KubeObject & { spec: { fingerprint: string } }>;
  const current = await plan('ptah-mplan-current', 'current');
  const superseded = await plan('ptah-mplan-superseded', 'superseded');
  await managerStatus('approved', { executionBinding: BINDING, plan: { name: 'ptah-mplan-current', uid: current.metadata?.uid } });

  const approval = (name: string, p: typeof current, extra: Record<string, unknown> = {}) => ({
    apiVersion: API_VERSION,
    kind: KINDS.PtahMigrationApproval.kind,
    metadata: { name, namespace: ns },
    spec: {
      migrationRef: { name: 'approved', uid: migrationUid },
      planRef: { name: p.metadata?.name, uid: p.metadata?.uid },
      planFingerprint: p.spec.fingerprint,
      ...extra,
    },
  } as KubeObject);
  const forged = { approver: { username: 'mallory', groups: ['system:masters'] }, approvedAt: '2000-01-01T00:00:00Z', mutationRequestUID: 'forged-request' };
  const before = Date.now();
  const created = await approver.create(approval('approve-current', current, forged)) as KubeObject & { spec: Record<string, unknown> };
  const stored = await admin.get<KubeObject & { spec: Record<string, unknown> }>(ptahRef(KINDS.PtahMigrationApproval.kind, 'approve-current'));
  t.same(stored.spec, created.spec, 'the stored approval is what the create answered');
  t.same(stored.spec.approver, { username: 'alice', groups: ['ptah-approvers', 'system:authenticated'] }, 'the approver is the authenticated requester, not the forged one');
  t.not(stored.spec.mutationRequestUID, 'forged-request', 'the admission request\'s UID replaces the forged one');
  t.match(stored.spec.mutationRequestUID, /^[0-9a-f-]{36}$/, 'it is an admission request UID');
  const approvedAt = Date.parse(String(stored.spec.approvedAt));
  t.ok(approvedAt >= Math.floor(before / 1000) * 1000, `approvedAt (${String(stored.spec.approvedAt)}) is the admission time, not the forged one`);

  await expectRefused(t, approver.create(approval('approve-superseded', superseded)), {
    code: 403,
    message: denied(WEBHOOK.decision,
      `PtahMigration ${ns}/approved's current plan is ptah-mplan-current \\(uid ${current.metadata?.uid}\\), not ptah-mplan-superseded \\(uid ${superseded.metadata?.uid}\\); approve the plan it names now$`),
  }, 'an approval of a plan that is not the migration\'s current plan');
  await t.rejects(approver.get(ptahRef(KINDS.PtahMigrationApproval.kind, 'approve-superseded')), { code: 404 }, 'the refused approval was not stored');
});

t.test('status-write: the unresolved-run annotation is the manager\'s to change', async (t) => {
  await createMigration('annotated');
  const annotate = (client: KubeClient, value: string | null, other?: string) =>
    client.patch<PtahMigration>(migrationRef('annotated'), { metadata: { annotations: { [ANNOTATIONS.unresolvedRun]: value, ...(other ? { 'example.com/note': other } : {}) } } }, 'merge');
  const copy = JSON.stringify({ outcome: 'Unknown', operationID: d('run'), recordedAt: '2030-01-01T00:00:00Z' });
  const refusal = (change: string) => ({
    code: 403,
    message: denied(WEBHOOK.statusWrite, `the operator\\.ptah\\.run/unresolved-run annotation is the manager's copy of status\\.unresolvedRun; only the operator's manager may ${change} it, not ptah-test-admin\\. Instead, to settle an unresolved migration run, create a PtahMigrationRunAcknowledgment `),
  });

  await expectRefused(t, annotate(admin, copy), refusal('set'), 'the administrator setting it');
  const set = await annotate(manager, copy);
  t.equal(set.metadata?.annotations?.[ANNOTATIONS.unresolvedRun], copy, 'the manager setting it is admitted');
  await expectRefused(t, annotate(admin, copy.replace('Unknown', 'Partial')), refusal('change'), 'the administrator changing it');
  await expectRefused(t, annotate(admin, null), refusal('remove'), 'the administrator removing it');
  const noted = await admin.patch<PtahMigration>(migrationRef('annotated'), { metadata: { annotations: { 'example.com/note': 'checked' } } }, 'merge');
  t.equal(noted.metadata?.annotations?.['example.com/note'], 'checked', 'the administrator\'s edit of another annotation is admitted');
  t.equal(noted.metadata?.annotations?.[ANNOTATIONS.unresolvedRun], copy, 'and leaves the copy as the manager wrote it');
  const removed = await annotate(manager, null);
  t.equal(removed.metadata?.annotations?.[ANNOTATIONS.unresolvedRun], undefined, 'the manager removing it is admitted');
});
