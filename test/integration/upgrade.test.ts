// An operator upgrade with work in flight, on the real control plane, runner and PostgreSQL, between two real
// manager builds (the checkout, and a copy of it changed in one place: tools/stack/variants.ts) shipped under two
// image references. Seed: "A release that keeps the execution binding and changes only the manager identity adopts
// every run its predecessor dispatched. A release that also changes the operation Job or its Pod template cannot
// confirm them: a running PtahSchema or PtahMigration Apply is recorded Unknown rather than adopted". The binding
// binds the executor by the digest of its code (src/shared/executor-identity.ts), so a release that changes only
// the manager, and ships its runner under a new image reference, keeps every epoch; one that changes the executor
// rotates them.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration, PtahMigrationApproval } from '../../src/shared/api/migration-kinds.js';
import { KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { JOB_ANNOTATIONS } from '../../src/shared/job/metadata.js';
import { RUNNER_IMAGE, RUNNER_IMAGE_NEXT, RUNNER_IMAGE_OTHER_EXECUTOR } from '../../tools/stack/kubelet/images.js';
import { variantDir, variantExecutorIdentity } from '../../tools/stack/variants.js';
import { waitFor } from '../../tools/stack/wait.js';
import { LEADING } from '../harness/manager-process.js';
import { crashWorld, outcomeOf, podsOf, schemaStatusWrite, sleepingApply, within, type CrashWorld, type ManagerRelease } from './crash-world.js';
import { eventsAbout, jobsOf, MANAGER } from './migration-world.js';
import { heldSchemaApply, migrationAdoption, NAME } from './running-applies.js';
import { schemaJobsOf, WAIT_MS } from './schema-world.js';
import { slowFiles, VERSIONS } from './slow-apply.js';

/** The next release: another manager build (one line of src/controller/ changed), its runner under another reference. */
const MANAGER_ONLY: ManagerRelease = {
  root: variantDir('manager'), runnerImage: RUNNER_IMAGE_NEXT, controllerImage: 'localhost/ptah-operator:next', revision: 'upgrade-next',
};
/** A release that changes the executor (one line of src/executor/ changed), its runner image carrying it. */
const NEW_EXECUTOR: ManagerRelease = {
  root: variantDir('executor'), runnerImage: RUNNER_IMAGE_OTHER_EXECUTOR, controllerImage: 'localhost/ptah-operator:other', revision: 'upgrade-other',
};

const approvalNamed = (cw: CrashWorld, name: string) =>
  cw.w.admin.get<PtahMigrationApproval>({ apiVersion: 'operator.ptah.run/v1alpha1', kind: KINDS.PtahMigrationApproval.kind, namespace: cw.w.ns, name });
const conditionOf = (a: PtahMigrationApproval, type: string) => a.status?.conditions?.find((c) => c.type === type);
const recordedRevision = (job: V1Job) => job.spec?.template.metadata?.annotations?.[JOB_ANNOTATIONS.controllerRevision];

t.test('a release that changes only the manager, under a new image reference, adopts every Apply in flight and keeps every plan and approval', async (t) => {
  t.equal(variantExecutorIdentity('manager'), ownExecutorIdentity(), 'fixture: the next release carries the same executor');
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  await w.artifact('slow-r1', slowFiles(20));
  await cw.startManager();

  // In flight at the upgrade: a PtahSchema Apply waiting on a table lock, a PtahMigration Apply sleeping in its
  // database, and a second migration on the same realm, approved, whose claim waits for that realm.
  const held = await heldSchemaApply(t, cw, 'gamma');
  const running = await sleepingApply(cw, 'alpha', 'alpha');
  const waitingDb = await w.database('upgrade-waiting');
  await w.createMigration({ name: 'waiting', artifact: 'slow-r1', secret: await w.installSample(waitingDb, 'waiting-db'), apply: 'OnApproval', coordinationKey: 'alpha' });
  const planned = await w.waitFor('waiting', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' && m.status.plan ? m : undefined));
  const approval = await w.approve('waiting');
  await w.waitFor('waiting', 'its Apply claimed, waiting for the realm', (m) => (m.status?.activeOperation?.type === 'Apply' ? m : undefined));
  t.notOk(conditionOf(await approvalNamed(cw, approval.metadata.name!), 'Consumed'), 'fixture: its approval is not yet spent');
  const before = {
    catalog: (await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME))).status!.executionBinding!,
    alpha: (await w.get('alpha')).status!.executionBinding!,
    waiting: planned.status!.executionBinding!,
  };
  t.equal(before.alpha.executorIdentity, ownExecutorIdentity(), 'fixture: the binding names this checkout\'s executor');
  t.equal(before.alpha.runnerImage, RUNNER_IMAGE, 'fixture: and records the first runner image');

  // The upgrade, as a Deployment's rollout does it: the old manager is told to stop, the new release starts.
  const stoppingAt = Date.now();
  await cw.stopManager();
  const next = await cw.startManager(undefined, MANAGER_ONLY);
  const ledAt = await next.waitForLog(LEADING, 60_000);
  t.comment(`the old release took ${ledAt - stoppingAt} ms from its SIGTERM to the new release leading`);

  const recorded = await w.waitFor('alpha', 'the new release recorded in the binding', (m) => (m.status?.executionBinding?.controllerRevision === MANAGER_ONLY.revision ? m : undefined));
  t.equal(recorded.status?.executionBinding?.epoch, before.alpha.epoch, 'alpha: the epoch is kept');
  t.equal(recorded.status?.executionBinding?.runnerImage, RUNNER_IMAGE_NEXT, 'alpha: the new runner image reference is recorded');
  t.equal(recorded.status?.activeOperation?.jobUID, running.claim.jobUID, 'alpha: the claim still names the Job dispatched before the upgrade');
  await held.session.query('ROLLBACK');

  // Every Apply runs to its end under the Job its predecessor created, and is recorded Applied.
  t.same(await migrationAdoption(cw, running), [], 'alpha: adopted with the same Job, Pods and Lease epoch, Applied, each version once');
  const synced = await waitFor(async () => {
    const s = await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME));
    return s.status?.phase === 'InSync' && s.status.applied?.operationID === held.claim.id && !s.status.pendingObservation ? s : undefined;
  }, { what: 'catalog InSync, its Apply proven', timeoutMs: WAIT_MS });
  t.equal(synced.status?.executionBinding?.epoch, before.catalog.epoch, 'catalog: the epoch is kept');
  t.same(schemaJobsOf(w, 'apply', NAME).map((j) => j.metadata?.uid), [held.claim.jobUID], 'catalog: no other Apply Job was ever created');
  t.same(await podsOf(cw, held.claim.jobName), held.pods, 'catalog: the same Pods');
  const applies = await w.sql<{ operation_id: string }>(held.db, 'SELECT operation_id FROM ptah_migrations.schema_applies ORDER BY seq');
  t.same(applies.map((r) => r.operation_id), [held.claim.id], 'catalog: the database applied the plan once');
  const proofJobs = [...w.jobsSeen.values()].filter((j) => j.metadata?.labels?.['operator.ptah.run/schema'] === NAME && j.metadata.creationTimestamp && new Date(j.metadata.creationTimestamp).getTime() >= ledAt - 1000);
  t.ok(proofJobs.length > 0 && proofJobs.every((j) => recordedRevision(j) === MANAGER_ONLY.revision), 'catalog: the proof\'s Jobs are the new release\'s');

  // The approval that waited across the upgrade authorizes the plan it was given for.
  const applied = await w.waitFor('waiting', 'the waiting migration applied', (m) => (m.status?.lastRun?.outcome === 'Applied' ? m : undefined), WAIT_MS);
  t.equal(applied.status?.executionBinding?.epoch, before.waiting.epoch, 'waiting: the epoch is kept');
  const spent = await approvalNamed(cw, approval.metadata.name!);
  t.equal(conditionOf(spent, 'Consumed')?.status, 'True', 'waiting: its approval was spent');
  t.notOk(conditionOf(spent, 'Stale'), 'waiting: and never went Stale');
  const waitingJobs = jobsOf(w, 'apply', 'waiting');
  t.equal(waitingJobs.length, 1, 'waiting: one Apply Job');
  t.equal(waitingJobs[0]?.spec?.template.spec?.containers[0]?.image, RUNNER_IMAGE_NEXT, 'waiting: dispatched by the new release, under its runner image');
  t.equal(waitingJobs[0]?.metadata?.annotations?.[JOB_ANNOTATIONS.planUid], planned.status?.plan?.uid, 'waiting: running the plan published before the upgrade');
  t.same((await w.history(waitingDb)).map((h) => h.version), VERSIONS, 'waiting: each version once');

  t.comment(`after the new release led: alpha Applied ${Date.parse(String((await w.get('alpha')).status?.lastRun?.finishedAt)) - ledAt} ms later, ` +
    `catalog proven ${Date.parse(String(synced.status?.applied?.completedAt)) - ledAt} ms later, waiting Applied ${Date.parse(String(applied.status?.lastRun?.finishedAt)) - ledAt} ms later`);
  for (const uid of [recorded.metadata.uid, planned.metadata.uid, synced.metadata.uid]) {
    t.same(await eventsAbout(w, uid!, 'ExecutionBindingChanged'), [], 'no binding changed');
  }
});

t.test('a release that changes only the manager adopts a PtahSchema proof in progress: the proof\'s own Job, under the Apply\'s Lease', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  await cw.startManager();
  const held = await heldSchemaApply(t, cw, 'delta');
  const epoch = (await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME))).status!.executionBinding!.epoch;

  // The old release is stopped the moment the proof's reading has a Job: the upgrade lands while the proof runs.
  const proofDispatched = schemaStatusWrite('the proof\'s reading recorded with its Job UID',
    (s) => Boolean(s.pendingObservation && s.activeOperation && s.activeOperation.type !== 'Apply' && s.activeOperation.jobUID), NAME);
  const kill = cw.killOn(proofDispatched);
  await held.session.query('ROLLBACK');
  const fired = await within(kill, WAIT_MS, proofDispatched.what, () => cw.proxy.disarm());
  const atKill = await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME));
  const proof = atKill.status!.activeOperation!;
  t.ok(atKill.status?.pendingObservation, 'at the upgrade: a proof is owed');
  t.ok(proof.jobUID, `at the upgrade: the proof's ${proof.type} runs as Job ${proof.jobUID}`);

  await cw.startManager(undefined, MANAGER_ONLY);
  const synced = await waitFor(async () => {
    const s = await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME));
    return s.status?.phase === 'InSync' && s.status.applied?.operationID === held.claim.id && !s.status.pendingObservation ? s : undefined;
  }, { what: 'the schema InSync, its Apply proven by the new release', timeoutMs: WAIT_MS });
  t.equal(synced.status?.executionBinding?.epoch, epoch, 'the epoch is kept');
  t.equal(synced.status?.executionBinding?.controllerRevision, MANAGER_ONLY.revision, 'the new release is recorded');
  const sameClaim = [...w.jobsSeen.values()].filter((j) => j.metadata?.annotations?.[JOB_ANNOTATIONS.operationId] === proof.id);
  t.same(sameClaim.map((j) => j.metadata?.uid), [proof.jobUID], 'the proof reading in flight was adopted: no other Job for its claim');
  t.equal(recordedRevision(sameClaim[0]!), MANAGER.controllerRevision, 'and it is the old release\'s Job');
  t.same(held.states.filter((s) => s.status?.pendingObservation).map((s) => s.status!.pendingObservation!.leaseEpoch).filter((e, i, all) => all.indexOf(e) === i), [held.epoch],
    'the proof held the Apply\'s Lease epoch throughout');
  t.same(schemaJobsOf(w, 'apply', NAME).map((j) => j.metadata?.uid), [held.claim.jobUID], 'one Apply Job');
  const applies = await w.sql<{ operation_id: string }>(held.db, 'SELECT operation_id FROM ptah_migrations.schema_applies ORDER BY seq');
  t.same(applies.map((r) => r.operation_id), [held.claim.id], 'the database applied the plan once');
  t.same(await eventsAbout(w, synced.metadata.uid!, 'ExecutionBindingChanged'), [], 'no binding changed');
  t.comment(`the old release was killed ${fired.killedAt - fired.storedAt} ms after the proof's Job UID was stored`);
});

t.test('a release that changes the executor cannot confirm the Apply in flight: it is recorded Unknown, never adopted or run again', async (t) => {
  const other = variantExecutorIdentity('executor');
  t.not(other, ownExecutorIdentity(), 'fixture: the release carries another executor');
  const cw = await crashWorld(t);
  const { w } = cw;
  await w.artifact('slow-r1', slowFiles(25));
  await cw.startManager();
  const running = await sleepingApply(cw, 'omega', 'omega');
  const epoch = (await w.get('omega')).status!.executionBinding!.epoch;

  await cw.stopManager();
  await cw.startManager(undefined, NEW_EXECUTOR);
  const rotated = await w.waitFor('omega', 'the run recorded and the epoch moved', (m: PtahMigration) =>
    (outcomeOf(m, running.claim.id) === 'Unknown' && m.status?.executionBinding?.epoch !== epoch ? m : undefined), WAIT_MS);
  t.equal(rotated.status?.executionBinding?.executorIdentity, other, 'the new epoch binds the other executor');
  t.match(rotated.status?.unresolvedRun, { outcome: 'Unknown', operationID: running.claim.id, jobUID: running.claim.jobUID }, 'the run is unresolved, Unknown');
  t.match(rotated.status?.lastRun?.message, /^ExecutionBindingChanged: /, 'because the binding moved');
  t.ok((await eventsAbout(w, rotated.metadata.uid!, 'ExecutionBindingChanged')).length > 0, 'an ExecutionBindingChanged Event says so');
  await waitFor(async () => {
    const job = await w.admin.get<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: running.claim.jobName });
    return job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ? true : undefined;
  }, { what: 'the old release\'s Apply Job to end', timeoutMs: WAIT_MS });
  t.same(jobsOf(w, 'apply', 'omega').map((j) => j.metadata?.uid), [running.claim.jobUID], 'no second Apply Job');
  t.same((await w.history(running.db)).filter((h) => h.operationId === running.claim.id).map((h) => h.version), VERSIONS, 'each version applied once, by the one run');
});
