// "Spent by this claim" is a durable field, never a condition's text: the spending write records
// status.consumedBy with the Consumed condition; a claim that spent its approval and stopped before the mark
// dispatches under it again; an approval spent by another operation (or by a writer that recorded no consumedBy)
// authorizes nothing, whatever its condition message says.
import t from 'tap';
import { pino } from 'pino';
import { approvalStillAuthorizes, ApprovalGoneError, consumeMigrationApproval } from '../../src/controller/migration/approval.js';
import { MigrationPass, type MigrationDeps } from '../../src/controller/migration/context.js';
import type { PtahMigration, PtahMigrationApproval, PtahMigrationPlan } from '../../src/shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import type { KubeClient, KubeObject } from '../../src/shared/kube-client.js';
import type { TargetLock } from '../../src/shared/targetlock.js';

const d = (seed: string) => sha256Digest(seed);
const NOW = new Date('2030-01-01T00:00:00.000Z');
const CLAIM_ID = d('this-claim');

const plan = { metadata: { name: 'ptah-mplan-1', uid: 'plan-uid' }, spec: { fingerprint: d('plan') } } as unknown as PtahMigrationPlan;
const claim = {
  type: 'Apply', id: CLAIM_ID, inputFingerprint: d('in'), jobName: 'ptah-m-apply-orders-0123456789abcdef', startedAt: NOW.toISOString(), attempt: 1,
  executionBindingID: `v1-${'a'.repeat(32)}`, approvalRef: { name: 'ok', uid: 'approval-uid' }, planRef: { name: 'ptah-mplan-1', uid: 'plan-uid' },
} as ActiveOperation;

function approval(status: PtahMigrationApproval['status']): PtahMigrationApproval {
  return {
    apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigrationApproval',
    metadata: { name: 'ok', namespace: 'shop', uid: 'approval-uid', generation: 1, creationTimestamp: NOW },
    spec: {
      migrationRef: { name: 'orders', uid: 'uid-1' }, planRef: { name: plan.metadata.name!, uid: plan.metadata.uid! }, planFingerprint: plan.spec.fingerprint,
      approver: { username: 'alice', groups: [] }, approvedAt: NOW.toISOString(), mutationRequestUID: 'req-1',
    },
    status,
  } as PtahMigrationApproval;
}

const consumed = (message: string, consumedBy?: string): PtahMigrationApproval['status'] => ({
  conditions: [{ type: 'Consumed', status: 'True', reason: 'DispatchCommitted', message, lastTransitionTime: NOW.toISOString(), observedGeneration: 1 }],
  ...(consumedBy ? { consumedBy: { operationID: consumedBy, consumedAt: NOW.toISOString() } } : {}),
});

function world(stored: PtahMigrationApproval) {
  const updates: PtahMigrationApproval[] = [];
  const client = {
    tryGet: async () => structuredClone(stored),
    update: async <T extends KubeObject>(o: T) => (updates.push(structuredClone(o) as unknown as PtahMigrationApproval), o),
  } as unknown as KubeClient;
  const deps: MigrationDeps = {
    client,
    events: { record: () => undefined },
    manager: { controllerImage: 'c', controllerRevision: 'r', runnerImage: 'i', executorIdentity: `sha256:${'e'.repeat(64)}`, controllerStateVersion: 1, runnerProtocolVersion: 1 },
    clock: { now: () => NOW, monotonicMs: () => 0 },
    lockFor: () => ({}) as TargetLock,
    coordinationNamespace: 'ptah-system',
    log: pino({ level: 'silent' }),
    readFailures: new Map(),
  };
  const m = { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigration', metadata: { name: 'orders', namespace: 'shop', uid: 'uid-1', generation: 1 }, spec: {}, status: {} } as unknown as PtahMigration;
  return { updates, pass: new MigrationPass(deps, m) };
}

t.test('spending records which operation spent the approval, beside the condition', async (t) => {
  const { pass, updates } = world(approval({}));
  await consumeMigrationApproval(pass, claim);
  t.equal(updates.length, 1);
  t.same(updates[0]?.status?.consumedBy, { operationID: CLAIM_ID, consumedAt: NOW.toISOString() });
  t.match(updates[0]?.status?.conditions?.find((c) => c.type === 'Consumed'), { status: 'True', reason: 'DispatchCommitted' });
});

t.test('an approval this claim spent (by consumedBy) still authorizes it and is not spent twice', async (t) => {
  const { pass, updates } = world(approval(consumed('reworded by someone', CLAIM_ID)));
  t.equal(await approvalStillAuthorizes(pass, claim, plan), undefined);
  await consumeMigrationApproval(pass, claim);
  t.same(updates, [], 'idempotent for this claim');
});

t.test('a condition message naming the claim is not evidence: without consumedBy the approval was spent by someone else', async (t) => {
  const { pass, updates } = world(approval(consumed(`spent by operation ${CLAIM_ID}`)));
  t.match(await approvalStillAuthorizes(pass, claim, plan), /spent by another operation/);
  await t.rejects(consumeMigrationApproval(pass, claim), ApprovalGoneError);
  t.same(updates, []);
});

t.test('an approval another operation spent authorizes nothing', async (t) => {
  const { pass } = world(approval(consumed(`spent by operation ${CLAIM_ID}`, d('other'))));
  t.match(await approvalStillAuthorizes(pass, claim, plan), /spent by another operation/);
  await t.rejects(consumeMigrationApproval(pass, claim), ApprovalGoneError);
});
