// The dispatch driver's own order, decided without a cluster (the real-API-server proof of every boundary is
// test/integration/dispatch-order.test.ts): the pass that records the admission snapshot ends there; the Job the
// create submits is built before the consume and the mark, so nothing that can fail sits between the mark and the
// create; a template that disagrees with the recorded snapshot retires the claim with a Warning, never refreshes
// it; an approval that can no longer be spent ends the pass before the mark.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import { buildOperationJob } from '../../src/shared/job/build.js';
import type { KubeClient } from '../../src/shared/kube-client.js';
import { dispatch, type DispatchFamily, type DispatchClaim } from '../../src/shared/lifecycle/dispatch.js';
import { migrationOperation, schemaOperation, type OperationAnswers } from '../../src/shared/lifecycle/operations.js';
import { superviseEveryMs } from '../../src/shared/lifecycle/supervision.js';
import type { AdmissionSnapshot } from '../../src/shared/podintent.js';
import type { TargetLock } from '../../src/shared/targetlock.js';
import { CASES, inputFor, snapshotted, stored } from './job-fixtures.js';

const APPLY = CASES.find((c) => c.family === 'migration' && c.type === 'Apply')!;
const LEASE_EPOCH = `v1-${'e'.repeat(32)}`;

interface Options {
  snapshot?: 'none' | 'recorded' | 'other-template';
  /** The cluster's PriorityClasses. */
  priorityClasses?: { metadata: { name: string }; value: number; globalDefault?: boolean }[];
  buildFails?: boolean;
  approvalGone?: boolean;
  /** The claim's answers: a migration Apply's unless told (the driver asks them, never the claim's type). */
  operation?: OperationAnswers;
}

/** A migration Apply claim driven through the driver, every call it makes written to one log in order. */
function world(options: Options = {}) {
  const log: string[] = [];
  const recorded = snapshotted(inputFor(APPLY)).claim.admissionSnapshot as AdmissionSnapshot;
  const other = snapshotted(inputFor(APPLY, { terminationGracePeriodSeconds: 45 })).claim.admissionSnapshot as AdmissionSnapshot;
  const snapshot = { none: undefined, recorded, 'other-template': other }[options.snapshot ?? 'recorded'];
  let claim: DispatchClaim = { ...(inputFor(APPLY).claim as DispatchClaim), leaseEpoch: LEASE_EPOCH, leaseDurationSeconds: 1020, ...(snapshot ? { admissionSnapshot: snapshot } : {}) };
  const jobOf = (s: AdmissionSnapshot | undefined): V1Job => buildOperationJob({ ...inputFor(APPLY), claim: { ...claim, admissionSnapshot: s } });
  const family: DispatchFamily = {
    family: 'migration',
    owner: { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigration', namespace: 'team-a', name: 'orders', uid: 'migration-uid-1' },
    get claim() {
      return claim;
    },
    operation: options.operation ?? migrationOperation('Apply'),
    authorize: async () => (log.push('authorize'), { ok: true }),
    retireUnauthorized: async ({ reason }) => void log.push(`retire ${reason}`),
    stage: async () => (log.push('stage'), true),
    buildJob: async (s) => {
      log.push(s ? 'build under the snapshot' : 'build for the template');
      if (s && options.buildFails) throw new Error('the plan could not be read');
      return jobOf(s);
    },
    consumeApproval: async () => (log.push('consume'), !options.approvalGone),
    writeClaim: async (fields) => {
      log.push(`write ${Object.keys(fields).join(',')}`);
      claim = { ...claim, ...fields };
    },
    finishUncertain: async (reason) => void log.push(`uncertain ${reason}`),
    retryReadOnly: async () => void log.push('retry'),
    announceStarted: () => void log.push('announce'),
    warn: (reason) => void log.push(`warn ${reason}`),
  };
  let created: V1Job | undefined;
  const client = {
    list: async () => (log.push('list PriorityClasses'), options.priorityClasses ?? []),
    create: async (job: V1Job) => (log.push('create'), (created = stored(job))),
    get: async () => (log.push('read back'), created),
  } as unknown as KubeClient;
  const lock = { acquire: async () => (log.push('lease'), { kind: 'acquired', epoch: LEASE_EPOCH, continuous: true }) } as unknown as TargetLock;
  return { log, claim: () => claim, run: () => dispatch(family, { client, lock }) };
}

t.test('the pass that records the admission snapshot ends there: nothing is spent, marked or created', async (t) => {
  const w = world({ snapshot: 'none' });
  const end = await w.run();
  t.equal(end.why, 'admission snapshot recorded');
  t.same(w.log, ['authorize', 'lease', 'stage', 'build for the template', 'list PriorityClasses', 'write admissionSnapshot']);
  t.notOk(w.claim().admissionSnapshot?.priorityClass, 'no PriorityClass: none is recorded');
});

t.test('the snapshot records the PriorityClass admission will give a Pod whose template names none', async (t) => {
  const w = world({
    snapshot: 'none',
    priorityClasses: [
      { metadata: { name: 'busy' }, value: 100 },
      { metadata: { name: 'default-high' }, value: 50, globalDefault: true },
      { metadata: { name: 'default-low' }, value: 10, globalDefault: true },
    ],
  });
  await w.run();
  t.equal(w.claim().admissionSnapshot?.priorityClass, 'default-low', 'of several global defaults, the smallest value');
});

t.test('the Job is built before the consume and the mark; nothing runs between the mark and the create', async (t) => {
  const w = world();
  const end = await w.run();
  t.equal(end.why, 'dispatched');
  // The Job's or its Pod's stop wakes the resource; the first look at a Job still running is supervision's own.
  t.equal(end.requeueAfterMs, 5_000, 'the first look after the create comes at the supervision interval (5 s)');
  t.same(w.log, ['authorize', 'lease', 'stage', 'build for the template', 'build under the snapshot', 'consume', 'write dispatchStarted', 'create', 'read back', 'write jobUID', 'announce']);
  const mark = w.log.indexOf('write dispatchStarted');
  t.equal(w.log[mark + 1], 'create', 'the create follows the mark directly');
});

t.test('a reading that holds no Lease is first looked at after 30 s: its stop wakes the resource, and it has nothing to renew', async (t) => {
  const w = world({ operation: migrationOperation('History') });
  const end = await w.run();
  t.equal(end.why, 'dispatched');
  t.equal(end.requeueAfterMs, 30_000);
  t.notOk(w.log.includes('lease'), 'no Lease taken');
});

t.test('supervision looks at a Job every 5 s while its claim holds the realm, every 30 s otherwise', async (t) => {
  const rows: Array<[string, OperationAnswers, number]> = [
    ['migration Apply', migrationOperation('Apply'), 5_000],
    ['migration History', migrationOperation('History'), 30_000],
    ['schema Apply', schemaOperation('Apply'), 5_000],
    ['schema Plan (holds the realm while it reads)', schemaOperation('Plan'), 5_000],
    ['schema Observe outside a proof', schemaOperation('Observe'), 30_000],
    ['schema Observe of a proof (under the Apply\'s Lease)', schemaOperation('Observe', { provingApply: true }), 5_000],
  ];
  for (const [what, operation, ms] of rows) t.equal(superviseEveryMs(operation), ms, what);
});

t.test('a build that fails leaves no mark and spends nothing', async (t) => {
  const w = world({ buildFails: true });
  await t.rejects(w.run(), /the plan could not be read/);
  t.notOk(w.log.includes('write dispatchStarted'), 'no mark');
  t.notOk(w.log.includes('consume'), 'no approval spent');
  t.notOk(w.log.includes('create'), 'no create');
});

t.test('a template that disagrees with the recorded snapshot retires the claim with a Warning, never re-resolves it', async (t) => {
  const w = world({ snapshot: 'other-template' });
  const end = await w.run();
  t.equal(end.why, 'template disagrees with the admission snapshot');
  t.same(w.log, ['authorize', 'lease', 'stage', 'build for the template', 'warn AdmissionSnapshotRefused', 'retire TemplateMoved']);
});

t.test('an approval that can no longer be spent ends the pass before the mark', async (t) => {
  const w = world({ approvalGone: true });
  const end = await w.run();
  t.equal(end.why, 'the approval could not be spent; the claim was retired');
  t.notOk(w.log.includes('write dispatchStarted'));
  t.notOk(w.log.includes('create'));
});
