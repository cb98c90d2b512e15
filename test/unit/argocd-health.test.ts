// The Argo CD health check (manifests/argocd/health.lua) run by the real Lua interpreter, lua5.4, through the
// harness that decodes an object from JSON on stdin, on statuses shaped as the controllers write them: phases and
// the Ready/Progressing/Blocked/ApprovalRequired conditions src/controller/status.ts derives from each phase. The
// integration test test/integration/kubectl-ptah.test.ts runs it on status objects the suite itself produced.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const dir = fileURLToPath(new URL('../../manifests/argocd/', import.meta.url));
const d = (c: string) => `sha256:${c.repeat(64)}`;
const EPOCH = `v1-${'a'.repeat(32)}`;
const PROGRESSING = new Set(['Pending', 'Observing', 'Reading', 'Planning', 'Applying', 'VerifyingConvergence', 'VerifyingHistory']);

/** The conditions src/controller/status.ts writes for a phase, with the report's reason and message. */
function conditions(phase: string, reason: string, message: string, generation: number) {
  const c = (type: string, on: boolean) => ({ type, status: on ? 'True' : 'False', reason, message, lastTransitionTime: '2026-12-01T11:00:00Z', observedGeneration: generation });
  return [c('Ready', phase === 'InSync'), c('Progressing', PROGRESSING.has(phase)), c('Blocked', phase === 'Blocked'), c('ApprovalRequired', phase === 'AwaitingApproval')];
}

function resource(kind: 'PtahSchema' | 'PtahMigration', phase: string | undefined, reason: string, message: string, extra: Record<string, unknown> = {}, opts: { generation?: number; observed?: number; suspend?: boolean } = {}) {
  const generation = opts.generation ?? 3;
  const observed = opts.observed ?? generation;
  return {
    apiVersion: 'operator.ptah.run/v1alpha1',
    kind,
    metadata: { name: 'x', namespace: 'shop', generation, uid: 'u' },
    spec: { suspend: opts.suspend ?? false, target: { engine: 'PostgreSQL', coordinationKey: 'main', urlFrom: { name: 's', key: 'url' } } },
    status: phase === undefined ? undefined : { observedGeneration: observed, phase, conditions: conditions(phase, reason, message, observed), ...extra },
  };
}

function health(object: unknown): { status: string; message: string } {
  const r = spawnSync('lua5.4', [`${dir}harness.lua`, `${dir}health.lua`], { input: JSON.stringify(object), encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`lua5.4 exited ${r.status}: ${r.stderr}`);
  const line = r.stdout.replace(/\n$/, '');
  const tab = line.indexOf('\t');
  return { status: line.slice(0, tab), message: line.slice(tab + 1) };
}

const claim = { type: 'Apply', id: d('1'), inputFingerprint: d('2'), jobName: 'ptah-apply-abc', startedAt: '2026-12-01T11:59:00Z', attempt: 1, executionBindingID: EPOCH, dispatchStarted: true };
const plan = { name: 'p', uid: 'p1', fingerprint: d('3'), contentDigest: d('4'), destructive: false, statementCount: 1 };

t.test('Healthy: Ready True at the current generation, for both kinds', async (t) => {
  for (const kind of ['PtahSchema', 'PtahMigration'] as const) {
    const h = health(resource(kind, 'InSync', kind === 'PtahSchema' ? 'NoChanges' : 'HistoryMatched', 'the database matches the desired schema'));
    t.same(h, { status: 'Healthy', message: 'the database matches the desired schema' }, kind);
  }
  t.equal(health(resource('PtahSchema', 'InSync', 'ScopedConverged', 'converged "fully" — é')).message, 'converged "fully" — é', 'the message survives quotes and UTF-8');
});

t.test('Progressing: a claim in flight, a pending observation, an awaited approval, a stale generation, no status', async (t) => {
  t.equal(health(resource('PtahSchema', 'Applying', 'ApprovedPlan', 'operation running in Job ptah-apply-abc', { activeOperation: claim })).status, 'Progressing');
  t.equal(health(resource('PtahMigration', 'Reading', 'ReadingHistory', 'reading', { activeOperation: { ...claim, type: 'History' } })).status, 'Progressing');
  t.equal(health(resource('PtahSchema', 'VerifyingConvergence', 'AwaitingApplyWindow', 'its proof starts at …', {
    pendingObservation: { outcome: 'OutcomeUnknown', applyOperationID: d('5'), applyJobName: 'ptah-apply-def', applyGeneration: 3, plan, recordedAt: '2026-12-01T11:58:00Z', observeAfter: '2026-12-01T12:05:00Z' },
  })).status, 'Progressing');
  const awaiting = health(resource('PtahSchema', 'AwaitingApproval', 'PlanReady', 'plan p holds 1 statement(s): approve it', { plan }));
  t.same(awaiting, { status: 'Progressing', message: 'plan p holds 1 statement(s): approve it' });
  const stale = health(resource('PtahSchema', 'InSync', 'NoChanges', 'matches', {}, { generation: 4, observed: 3 }));
  t.equal(stale.status, 'Progressing', 'an InSync status of an older generation is not Healthy');
  t.match(stale.message, 'has not observed generation 4');
  const staleBlocked = health(resource('PtahSchema', 'Blocked', 'DestructiveChangesDisabled', 'destructive', {}, { generation: 4, observed: 3 }));
  t.equal(staleBlocked.status, 'Progressing', 'a Blocked status of an older generation may be fixed by the new spec');
  t.equal(health(resource('PtahSchema', undefined, '', '')).status, 'Progressing', 'before the first pass');
  // Ready True with a claim in flight cannot be written by status.ts, but a newer manager might: it is still work.
  t.equal(health(resource('PtahSchema', 'InSync', 'NoChanges', 'm', { activeOperation: { ...claim, type: 'Observe' } })).status, 'Progressing');
  const readyOld = resource('PtahSchema', 'InSync', 'NoChanges', 'm');
  readyOld.status!.conditions[0]!.observedGeneration = 2;
  t.equal(health(readyOld).status, 'Progressing', 'a Ready condition written for another generation is not trusted');
});

t.test('Degraded: Blocked, Failed, or an unresolved run waiting for a person', async (t) => {
  t.same(health(resource('PtahSchema', 'Blocked', 'DestructiveChangesDisabled', 'plan p is destructive')), { status: 'Degraded', message: 'plan p is destructive' });
  t.equal(health(resource('PtahMigration', 'Failed', 'ApplyFailed', 'migration 0002 failed')).status, 'Degraded');
  const unresolved = health(resource('PtahMigration', 'Blocked', 'ApplyOutcomeUnknown', 'the run ended Unknown', {
    unresolvedRun: { outcome: 'Unknown', operationID: d('8'), recordedAt: '2026-12-01T11:00:00Z' },
  }, { generation: 5, observed: 4 }));
  t.equal(unresolved.status, 'Degraded', 'whatever generation the spec is at');
  t.match(unresolved.message, `unresolved Unknown run ${d('8')}`);
  t.match(unresolved.message, 'PtahMigrationRunAcknowledgment');
  t.equal(health(resource('PtahMigration', 'InSync', 'HistoryMatched', 'm', { resolvedRun: { operationID: d('8'), outcome: 'Partial', resolution: 'ResolvedByHistoryRead', resolvedAt: '2026-12-01T11:30:00Z' } })).status,
    'Healthy', 'a resolved run is not unresolved');
});

t.test('Suspended when spec.suspend, even while a proof waits', async (t) => {
  t.same(health(resource('PtahSchema', 'Suspended', 'Suspended', 'spec.suspend is true: nothing is read or run', {}, { suspend: true })),
    { status: 'Suspended', message: 'spec.suspend is true: nothing is read or run' });
  t.equal(health(resource('PtahMigration', 'InSync', 'HistoryMatched', 'm', {}, { suspend: true, generation: 2, observed: 1 })).status, 'Suspended', 'before the controller saw it');
});

t.test('the harness decodes what the API server writes', async (t) => {
  const obj = resource('PtahSchema', 'InSync', 'NoChanges', 'tab\tnewline\\n \u00e9 \ud83d\ude00 "q" / \b');
  t.equal(health(obj).message, 'tab\tnewline\\n é 😀 "q" / \b');
  const r = spawnSync('lua5.4', [`${dir}harness.lua`, `${dir}health.lua`], { input: '{"metadata": ', encoding: 'utf8' });
  t.not(r.status, 0, 'malformed JSON fails loudly');
});
