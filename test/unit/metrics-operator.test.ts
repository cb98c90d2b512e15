// The ptah_operator_* series of src/controller/operator-metrics.ts: the gauges recount the sources they are given at
// every scrape (an unsynced or removed source counts nothing), overdue is measured past deadline + grace, and the
// counters count only what they are meant to, with bounded labels.
import { pino } from 'pino';
import t from 'tap';
import { Controller } from '../../src/controller/controller.js';
import { ApiError, type KubeObject } from '../../src/shared/kube-client.js';
import { registry } from '../../src/shared/metrics.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { readRunnerLog } from '../../src/controller/evidence.js';
import { countJobOutcome, countResultReadFailure, labelWord, OVERDUE_GRACE_SECONDS, reportResources } from '../../src/controller/operator-metrics.js';

type Labels = Record<string, string | number>;

/** The value of `name`'s series with exactly `labels` at a fresh scrape, or undefined when there is none. */
async function series(name: string, labels: Labels): Promise<number | undefined> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const want = JSON.stringify(Object.entries(labels).sort());
  return metric?.values.find((v) => JSON.stringify(Object.entries(v.labels).sort()) === want)?.value;
}

const ID = `sha256:${'a'.repeat(64)}`;
const ago = (s: number) => new Date(Date.now() - s * 1000).toISOString();

function claim(fields: Partial<ActiveOperation>): ActiveOperation {
  return { type: 'Apply', id: ID, inputFingerprint: ID, jobName: 'job', startedAt: ago(10), attempt: 1, executionBindingID: 'epoch', ...fields };
}

function resource(namespace: string, status: Record<string, unknown>, spec: Record<string, unknown> = {}): KubeObject {
  return { metadata: { name: `r-${Math.random()}`, namespace }, spec, status } as KubeObject;
}

const PHASES = ['Pending', 'InSync', 'Blocked'] as const;

t.test('the gauges count what the source holds at each scrape, per family and namespace', async (t) => {
  const objects: KubeObject[] = [
    resource('a', { phase: 'InSync' }),
    resource('a', { phase: 'InSync', pendingLockRelease: {} }),
    resource('a', { phase: 'Blocked', unresolvedRun: {}, activeOperation: claim({ type: 'History', startedAt: ago(30) }) }),
    resource('b', {}),
  ];
  let synced = false;
  const remove = reportResources('TestKind', PHASES, { list: () => objects, hasSynced: () => synced });
  t.teardown(remove);
  const a = { family: 'TestKind', namespace: 'a' };

  t.equal(await series('ptah_operator_resources', { ...a, phase: 'InSync' }), undefined, 'an unsynced cache reports nothing, not a false zero');

  synced = true;
  t.equal(await series('ptah_operator_resources', { ...a, phase: 'InSync' }), 2);
  t.equal(await series('ptah_operator_resources', { ...a, phase: 'Blocked' }), 1);
  t.equal(await series('ptah_operator_resources', { ...a, phase: 'Pending' }), 0, 'every phase of the family is reported, zeros too');
  t.equal(await series('ptah_operator_resources', { family: 'TestKind', namespace: 'b', phase: 'None' }), 1, 'no phase yet: None');
  t.equal(await series('ptah_operator_unresolved_runs', a), 1);
  t.equal(await series('ptah_operator_pending_lock_releases', a), 1);
  t.equal(await series('ptah_operator_pending_observations', a), 0);
  t.equal(await series('ptah_operator_claims_in_flight', { ...a, operation: 'History' }), 1);
  const age = await series('ptah_operator_oldest_claim_age_seconds', a);
  t.ok(age !== undefined && age >= 30 && age < 60, `oldest claim age counts from startedAt (${age})`);

  // The next scrape reads the source again: a change shows without anyone updating the gauges.
  objects.splice(0, 2);
  t.equal(await series('ptah_operator_resources', { ...a, phase: 'InSync' }), 0, 'resources gone from the cache are gone from the gauge');
  t.equal(await series('ptah_operator_pending_lock_releases', a), 0);
  objects.splice(0, 1);
  t.equal(await series('ptah_operator_unresolved_runs', a), undefined, 'a namespace with nothing left has no series');

  remove();
  t.equal(await series('ptah_operator_resources', { family: 'TestKind', namespace: 'b', phase: 'None' }), undefined, 'a removed source counts nothing');
});

t.test('a stopped controller takes its resource report with it (a replica that stops leading reports nothing)', async (t) => {
  const objects = [resource('term', { phase: 'InSync' })];
  const controller = new Controller({ name: 'metrics-term', reconcile: async () => undefined, logger: pino({ level: 'silent' }) });
  controller.onStop(reportResources('Term', PHASES, { list: () => objects, hasSynced: () => true }));
  controller.start();
  t.equal(await series('ptah_operator_resources', { family: 'Term', namespace: 'term', phase: 'InSync' }), 1, 'fixture: reported while it runs');
  await controller.stop();
  t.equal(await series('ptah_operator_resources', { family: 'Term', namespace: 'term', phase: 'InSync' }), undefined, 'gone once it stopped');
});

t.test('a claim is overdue only past its deadline plus the grace', async (t) => {
  const within = OVERDUE_GRACE_SECONDS - 30;
  const past = OVERDUE_GRACE_SECONDS + 30;
  const objects: KubeObject[] = [
    resource('apply', { activeOperation: claim({ startedAt: ago(1000), executionNotAfter: ago(within) }) }),
    resource('apply', { activeOperation: claim({ startedAt: ago(1000), executionNotAfter: ago(past) }) }),
    // A reading's deadline is its Job's: spec.execution.activeDeadlineSeconds from its (re)start.
    resource('read', { activeOperation: claim({ type: 'Plan', startedAt: ago(60 + past) }) }, { execution: { activeDeadlineSeconds: 60 } }),
    resource('read', { activeOperation: claim({ type: 'Plan', startedAt: ago(60 + within) }) }, { execution: { activeDeadlineSeconds: 60 } }),
    resource('retry', { activeOperation: claim({ type: 'Plan', startedAt: ago(60 + past), retryNotBefore: ago(within) }) }, { execution: { activeDeadlineSeconds: 60 } }),
  ];
  t.teardown(reportResources('Overdue', PHASES, { list: () => objects, hasSynced: () => true }));
  t.equal(await series('ptah_operator_overdue_claims', { family: 'Overdue', namespace: 'apply' }), 1, 'the Apply past executionNotAfter + grace');
  t.equal(await series('ptah_operator_overdue_claims', { family: 'Overdue', namespace: 'read' }), 1, 'the reading past its Job deadline + grace');
  t.equal(await series('ptah_operator_overdue_claims', { family: 'Overdue', namespace: 'retry' }), 0, 'a retried reading counts from its retry');
});

t.test('Job outcomes count dispatched claims only, with label words from code', async (t) => {
  const labels = { family: 'PtahMigration', operation: 'Apply', outcome: 'Applied' };
  const before = (await series('ptah_operator_job_outcomes_total', labels)) ?? 0;
  countJobOutcome('PtahMigration', claim({}), 'Applied');
  t.equal((await series('ptah_operator_job_outcomes_total', labels)) ?? 0, before, 'a claim that never dispatched is no Job outcome');
  countJobOutcome('PtahMigration', claim({ dispatchStarted: true }), 'Applied');
  countJobOutcome('PtahMigration', claim({ type: 'History', jobUID: 'uid' }), 'HistoryRead');
  t.equal(await series('ptah_operator_job_outcomes_total', labels), before + 1, 'a marked claim counts');
  t.ok((await series('ptah_operator_job_outcomes_total', { family: 'PtahMigration', operation: 'History', outcome: 'HistoryRead' }) ?? 0) >= 1, 'a claim with a Job UID counts');
  countJobOutcome('PtahMigration', claim({ dispatchStarted: true }), 'the plan orders-1 was deleted');
  t.ok((await series('ptah_operator_job_outcomes_total', { family: 'PtahMigration', operation: 'Apply', outcome: 'Other' }) ?? 0) >= 1, 'free text never becomes a label');
  t.equal(labelWord('ApplyOutcomeUnknown'), 'ApplyOutcomeUnknown');
  t.equal(labelWord('orders-db'), 'Other');
  t.equal(labelWord('x'.repeat(10)), 'Other', 'a word must start upper case');
});

t.test('a failed result read is counted by family and HTTP status where it is handled', async (t) => {
  const read = async (err: Error) => {
    const pass = {
      kind: 'PtahSchema',
      namespace: 'ns',
      deps: { client: { readPodLog: async () => Promise.reject(err) }, clock: { monotonicMs: () => 0 }, readFailures: new Map<string, number>() },
      event: () => undefined,
    };
    return readRunnerLog(pass as unknown as Parameters<typeof readRunnerLog>[0], claim({}), { metadata: { name: 'pod' } });
  };
  const at = (reason: string) => series('ptah_operator_result_read_failures_total', { family: 'PtahSchema', reason });
  const before503 = (await at('503')) ?? 0;
  t.match(await read(new ApiError({ code: 503, reason: 'ServiceUnavailable' }, 'GET log')), { kind: 'retry' });
  t.equal(await at('503'), before503 + 1);
  const beforeNone = (await at('NoResponse')) ?? 0;
  await read(new Error('socket hang up'));
  t.equal(await at('NoResponse'), beforeNone + 1, 'no HTTP answer: NoResponse');
  const before404 = (await at('404')) ?? 0;
  t.match(await read(new ApiError({ code: 404 }, 'GET log')), { kind: 'gone' }, 'a Pod that is gone is not a read failure');
  t.equal((await at('404')) ?? 0, before404, 'and is not counted');
  countResultReadFailure('PtahSchema', new ApiError({ code: 500 }, 'GET log'));
  t.equal(await at('500'), 1);
});
