// PtahMigration paths of a running Apply that no other test runs (issue #8), on the real control plane with the
// real runner, executor and PostgreSQL: the Job replaced under the claim's name, the Job's fixed metadata changed,
// the plan deleted, and a manager release whose Pod template differs from the running Job's. Each fixture is checked
// before the path is taken; status, the realm Lease, Events, every Job ever created and the database's history
// table are the witnesses.
import t, { type Test } from 'tap';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { generatedIdentityLabels, JOB_ANNOTATIONS, JOB_LABELS } from '../../src/shared/job/metadata.js';
import { RUNNER_IMAGE_NEXT, RUNNER_IMAGE_OTHER_EXECUTOR } from '../../tools/stack/kubelet/images.js';
import { variantExecutorIdentity } from '../../tools/stack/variants.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { eventAbout, jobsOf, leaseHolding, MANAGER, migrationWorld, WAIT_MS, type MigrationWorld } from './migration-world.js';
import { historyOf, isTerminal, jobRef, jobTerminal, readLease, renewedAt, startSlowApply, VERSIONS, type RunningApply } from './slow-apply.js';

/**
 * The stored version that recorded the claim's run unresolved, as the watch saw it: the next pass may claim a
 * reading at once, so polling could miss the state in between.
 */
async function recordingWrite(t: Test, states: PtahMigration[], run: RunningApply): Promise<PtahMigration> {
  const recorded = await waitFor(async () => states.find((s) => s.status?.unresolvedRun?.operationID === run.claim.id), { what: 'the run recorded unresolved', timeoutMs: WAIT_MS });
  t.notOk(recorded.status?.activeOperation, 'the record took the claim\'s place in one write');
  return recorded;
}

/** Every state the watch saw that carries the claim names the Job UID the claim first recorded, or none. */
const neverAnotherUid = (states: PtahMigration[], run: RunningApply) =>
  states.filter((s) => s.status?.activeOperation?.id === run.claim.id).every((s) => s.status?.activeOperation?.jobUID === run.claim.jobUID);

/** The Pods that run the claim's operation, found by the operation ID they carry (an orphaned Pod has no owner). */
async function operationPods(w: MigrationWorld, operationId: string): Promise<V1Pod[]> {
  return (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.annotations?.[JOB_ANNOTATIONS.operationId] === operationId);
}

const podsStopped = async (w: MigrationWorld, operationId: string) =>
  ((await operationPods(w, operationId)).every((p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') ? true : undefined);

/**
 * The run was recorded Unknown for `reason` while it could still write: the record names the claim's own Job UID,
 * no release was staged and the realm is still held under the claim's epoch.
 */
async function recordedUnknownWhileWriting(t: Test, w: MigrationWorld, states: PtahMigration[], run: RunningApply, reason: string): Promise<PtahMigration> {
  const recorded = await recordingWrite(t, states, run);
  t.match(recorded.status?.unresolvedRun, { outcome: 'Unknown', operationID: run.claim.id, jobName: run.claim.jobName, jobUID: run.claim.jobUID }, 'the run is unresolved, Unknown, under the Job the claim recorded');
  t.match(recorded.status?.lastRun, { outcome: 'Unknown', operationID: run.claim.id, appliedVersions: [] }, 'its result was not read');
  t.match(recorded.status?.lastRun?.message, new RegExp(`^${reason}: `), `because of ${reason}`);
  t.match(recorded.status?.conditions?.find((c) => c.type === 'Blocked'), { status: 'True', reason: 'ApplyOutcomeUnknown' }, 'Blocked until it is settled');
  t.notOk(recorded.status?.plan, 'nothing is planned beside the record');
  t.notOk(recorded.status?.pendingLockRelease, 'no release was staged: the run may still write');
  t.same(await leaseHolding(w, run.lease.name), [run.lease.holder, run.claim.leaseEpoch], 'the realm is left to expire under the claim\'s epoch');
  await eventAbout(w, recorded.metadata.uid!, 'TargetLockReleaseOwed', run.claim.jobName);
  return recorded;
}

/** After the run's own Pod stopped: the database shows the one run, each version once, and no Apply Job beyond `applyJobs`. */
async function noReplay(t: Test, w: MigrationWorld, db: TestDatabase, run: RunningApply, applyJobs: string[]): Promise<void> {
  await waitFor(() => podsStopped(w, run.claim.id), { what: 'the run\'s Pod to stop', timeoutMs: WAIT_MS });
  await sleep(3_000);
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, run.claim.id]), 'each version applied once, by the one run: no replay');
  t.same(jobsOf(w, 'apply').map((j) => j.metadata?.uid).sort(), [...applyJobs].sort(), 'no Apply Job was created but these');
  t.equal((await operationPods(w, run.claim.id)).length, 1, 'one executor Pod ran the operation');
}

/** A world whose migration `orders` runs a slow Apply (slowFiles(seconds)), watched from there on. */
async function slowApplyWatched(t: Test, dbPrefix: string, seconds: number): Promise<{ w: MigrationWorld; db: TestDatabase; run: RunningApply; states: PtahMigration[] }> {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database(dbPrefix);
  const run = await startSlowApply(w, db, seconds);
  return { w, db, run, states: await w.watchMigration('orders') };
}

t.test('a Job replaced under the claim\'s name while the Apply runs is JobReplaced: Unknown, the claim keeps its UID, never a second executor', async (t) => {
  // Seed: "Every pass rebinds by UID, renews the Lease, and re-validates that the Job is still the one the claim
  // named and still owned by exactly this resource. Drift in any of those is an uncertain outcome for a mutating
  // claim, never a discard."
  const { w, db, run, states } = await slowApplyWatched(t, 'job_replaced', 40);

  // No manager runs while the admin swaps the Job: a pass in the gap would find the name empty (JobMissing, the
  // uncertain test's path). The manager started afterwards supervises the run and meets the replacement.
  await w.stopController();
  await w.admin.delete(jobRef(w, run.claim.jobName), { propagationPolicy: 'Orphan' });
  await waitFor(async () => ((await w.admin.tryGet(jobRef(w, run.claim.jobName))) ? undefined : true), { what: 'the Job to be gone', timeoutMs: 60_000 });
  const [orphan] = await operationPods(w, run.claim.id);
  t.equal(orphan?.status?.phase, 'Running', 'fixture: the orphaned Pod still runs the Apply');
  t.notOk(orphan?.metadata?.ownerReferences?.length, 'fixture: it belongs to no Job');
  const replacement = await w.admin.create<V1Job>(replacementOf(run.job));
  t.not(replacement.metadata?.uid, run.claim.jobUID, 'fixture: another Job stands under the reserved name');
  t.equal(replacement.spec?.suspend, true, 'fixture: suspended, so the test itself starts no executor');

  await w.startController();
  await recordedUnknownWhileWriting(t, w, states, run, 'JobReplaced');
  t.ok(neverAnotherUid(states, run), 'the claim never recorded another UID');
  const untouched = await w.admin.get<V1Job>(jobRef(w, run.claim.jobName));
  t.equal(untouched.metadata?.uid, replacement.metadata?.uid, 'the replacement still stands');
  t.equal(untouched.spec?.ttlSecondsAfterFinished, undefined, 'and the manager never wrote to it (no cleanup TTL)');
  await noReplay(t, w, db, run, [run.claim.jobUID!, replacement.metadata!.uid!]);
});

/** `job` as an admin would create it again under its name: the same metadata and template, suspended. */
function replacementOf(job: V1Job): V1Job {
  const generated = Object.keys(generatedIdentityLabels('', ''));
  const without = (labels: Record<string, string> | undefined) => Object.fromEntries(Object.entries(labels ?? {}).filter(([k]) => !generated.includes(k)));
  const { selector: _selector, ...spec } = job.spec!;
  const { name, namespace, labels, annotations, ownerReferences } = job.metadata!;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, labels: without(labels), annotations, ownerReferences },
    spec: { ...spec, suspend: true, template: { ...spec.template, metadata: { ...spec.template.metadata, labels: without(spec.template.metadata?.labels) } } },
  };
}

t.test('the claim\'s fixed metadata changed on the running Job is JobIntentMismatch: Unknown, the manager leaves the Job alone, no replay', async (t) => {
  // Seed: "A Job that fails the match, or a claim that cannot rebuild its Job, is settled the way a lost Job is: a
  // mutating claim's run is recorded Unknown and never gets a second executor".
  const { w, db, run, states } = await slowApplyWatched(t, 'intent_mismatch', 30);

  const relabelled = await w.admin.patch<V1Job>(jobRef(w, run.claim.jobName), { metadata: { labels: { [JOB_LABELS.operationId]: '0000000000000000' } } }, 'merge');
  t.equal(relabelled.metadata?.uid, run.claim.jobUID, 'fixture: the claim\'s own Job');
  t.not(run.job.metadata?.labels?.[JOB_LABELS.operationId], '0000000000000000', 'fixture: now labelled as another operation\'s');
  t.notOk(isTerminal(relabelled), 'fixture: while it runs');

  const recorded = await recordedUnknownWhileWriting(t, w, states, run, 'JobIntentMismatch');
  t.match(recorded.status?.lastRun?.message, /labels/, 'naming what no longer matches');
  t.ok(neverAnotherUid(states, run), 'the claim never recorded another UID');
  await eventAbout(w, recorded.metadata.uid!, 'JobCleanupDeferred', run.claim.jobName);
  const ended = await jobTerminal(w, run.claim.jobName);
  t.equal(ended.metadata?.uid, run.claim.jobUID, 'the same Job ran to its end');
  t.equal(ended.spec?.ttlSecondsAfterFinished, undefined, 'without the cleanup TTL: the manager does not touch a Job its claim does not recognise');
  await noReplay(t, w, db, run, [run.claim.jobUID!]);
});

t.test('the plan deleted while its Apply runs: the Lease is kept while the Pod can write, and the terminal pass records Unknown without reading the result', async (t) => {
  // Seed: "A migration Apply whose plan was deleted while it ran is recorded Unknown the same way, because its Job
  // cannot be rebuilt without the plan it runs."
  const { w, db, run, states } = await slowApplyWatched(t, 'plan_deleted', 30);

  await w.admin.delete(w.ref('PtahMigrationPlan', run.claim.planRef!.name));
  await waitFor(async () => ((await w.admin.tryGet(w.ref('PtahMigrationPlan', run.claim.planRef!.name))) ? undefined : true), { what: 'the plan to be gone', timeoutMs: 30_000 });
  const deletedAt = Date.now();
  const renewed = await waitFor(async () => {
    const lease = await readLease(w, run.lease.name);
    return renewedAt(lease) > deletedAt ? lease : undefined;
  }, { what: 'the Lease renewed after the plan was deleted', timeoutMs: 30_000 });
  t.same([renewed.spec?.holderIdentity, renewed.metadata?.annotations?.['operator.ptah.run/lease-epoch']], [run.lease.holder, run.claim.leaseEpoch], 'the supervising pass renewed the realm under the claim\'s epoch');
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, run.claim.jobName))), 'fixture: while the Job still ran');
  t.match((await w.get('orders')).status?.activeOperation, { id: run.claim.id, jobUID: run.claim.jobUID }, 'the claim still stands, held to what it fixes');

  const ended = await jobTerminal(w, run.claim.jobName);
  const recorded = await recordingWrite(t, states, run);
  t.match(recorded.status?.unresolvedRun, { outcome: 'Unknown', operationID: run.claim.id, jobUID: run.claim.jobUID, planRef: run.claim.planRef }, 'the run is unresolved, Unknown, naming the deleted plan');
  t.match(recorded.status?.lastRun, { outcome: 'Unknown', operationID: run.claim.id, appliedVersions: [] }, 'its result was not read');
  t.match(recorded.status?.lastRun?.message, new RegExp(`^InputsChanged: .*${run.claim.planRef!.name}`), 'because the plan it runs is gone');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, run.claim.id]), 'whatever the run did: here it applied everything');
  const terminalAt = Date.parse(String(ended.status?.conditions?.find((c) => c.type === 'Complete' || c.type === 'Failed')?.lastTransitionTime));
  t.ok(Date.parse(recorded.status!.unresolvedRun!.recordedAt) >= Math.floor(terminalAt / 1000) * 1000, 'recorded on a pass that found the Job terminal');
  const staged = states.findIndex((s) => s.status?.pendingLockRelease);
  t.ok(staged >= 0 && states[staged]?.status?.unresolvedRun?.operationID === run.claim.id, 'the release was first staged in the write that recorded the run');
  t.ok(neverAnotherUid(states, run), 'the claim never recorded another UID');
  t.not((await leaseHolding(w, run.lease.name))[0], run.lease.holder, 'and performed once nothing could write');

  const settled = await w.waitFor('orders', 'settled by a reading', (m) => (m.status?.resolvedRun && !m.status.unresolvedRun && m.status.phase === 'InSync' ? m : undefined));
  t.match(settled.status?.resolvedRun, { operationID: run.claim.id, resolution: 'ResolvedByHistoryRead' }, 'a reading of the same database settled it');
  t.equal(jobsOf(w, 'apply').length, 1, 'no second Apply Job');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, run.claim.id]), 'nothing ran again');
});

t.test('a release that changes the manager identity and the runner image reference adopts the running Apply; one that changes the executor moves the binding (Unknown)', async (t) => {
  // Seed: "A release that keeps the execution binding and changes only the manager identity adopts every run its
  // predecessor dispatched. A release that also changes the operation Job or its Pod template cannot confirm them:
  // a running PtahSchema or PtahMigration Apply is recorded Unknown rather than adopted".
  // What a release configures (MigrationControllerOptions.manager) reaches the Pod template as the controller image
  // and revision and the runner image (recorded; the rebuild takes them from the live Job) and the executor
  // identity (bound: the binding names it and the runner checks it). The versions come from the binding in force.
  const { w, db, run } = await slowApplyWatched(t, 'release_template', 45);
  const binding = run.m.status!.executionBinding!;

  await w.stopController();
  const recordedOnly = { ...MANAGER, controllerImage: 'localhost/ptah-operator:next', controllerRevision: 'migration-test-next', runnerImage: RUNNER_IMAGE_NEXT };
  await w.startController(undefined, recordedOnly);
  const restartedAt = Date.now();
  const adopted = await w.waitFor('orders', 'the new release recorded beside the claim', (m) =>
    (m.status?.executionBinding?.controllerRevision === recordedOnly.controllerRevision ? m : undefined));
  t.equal(adopted.status?.executionBinding?.epoch, binding.epoch, 'a release changing only what the Job records keeps the epoch');
  t.equal(adopted.status?.executionBinding?.runnerImage, RUNNER_IMAGE_NEXT, 'and records its runner image reference');
  t.equal(adopted.status?.executionBinding?.executorIdentity, binding.executorIdentity, 'the executor identity is the one bound');
  await waitFor(async () => (renewedAt(await readLease(w, run.lease.name)) > restartedAt ? true : undefined), { what: 'a supervising pass of the new release', timeoutMs: 30_000 });
  const supervised = await w.get('orders');
  t.match(supervised.status?.activeOperation, { id: run.claim.id, jobUID: run.claim.jobUID }, 'and supervises the running Apply as its own');
  t.notOk(supervised.status?.unresolvedRun, 'it is not recorded Unknown');
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, run.claim.jobName))), 'fixture: the Job was still running');

  await w.stopController();
  const newRunner = { ...recordedOnly, runnerImage: RUNNER_IMAGE_OTHER_EXECUTOR, executorIdentity: variantExecutorIdentity('executor') };
  t.not(newRunner.executorIdentity, binding.executorIdentity, 'fixture: the other release\'s executor has another identity');
  await w.startController(undefined, newRunner);
  const rotated = await w.waitFor('orders', 'the run recorded and the epoch moved', (m) =>
    (m.status?.lastRun?.operationID === run.claim.id && m.status.executionBinding?.epoch !== binding.epoch ? m : undefined));
  t.notOk(isTerminal(await w.admin.get<V1Job>(jobRef(w, run.claim.jobName))), 'fixture: the Job was still running');
  t.match(rotated.status?.lastRun, { outcome: 'Unknown', operationID: run.claim.id, jobUID: run.claim.jobUID, appliedVersions: [] }, 'a new executor records the running Apply Unknown, never adopted');
  t.match(rotated.status?.lastRun?.message, /^ExecutionBindingChanged: /, 'because it moved the binding');
  t.equal(rotated.status?.executionBinding?.executorIdentity, newRunner.executorIdentity, 'the new epoch binds the new executor');
  t.same(await leaseHolding(w, run.lease.name), [run.lease.holder, run.claim.leaseEpoch], 'the realm is left to expire while the Job can write');
  await jobTerminal(w, run.claim.jobName);
  t.equal(jobsOf(w, 'apply').length, 1, 'no second Apply Job');
  t.same(await historyOf(w, db), VERSIONS.map((v) => [v, run.claim.id]), 'each version applied once, by the one run');
});
