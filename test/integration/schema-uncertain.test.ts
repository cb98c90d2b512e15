// PtahSchema runs nobody can account for, on the real stack: drift made by hand after the approval, an Apply Pod
// killed mid-run, an Apply Job deleted after the mark (schema-adoption.test.ts has the manager replaced and the
// deadline hit while an Apply runs). Each is settled by a fresh Observe and Plan under the Apply's own Lease epoch, and the database's
// own table shows that nothing was applied twice and nothing ran that was not approved.
import type { V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { sleep } from '../../tools/stack/wait.js';
import { firstPlanAwaitingApproval, schemaJobsOf, schemaWorld, watchSchemas } from './schema-world.js';
import { blockedApply, endWaitingWriters, PROOF_WAIT_MS, proofClaims, R1 } from './schema-slow-apply.js';

t.test('drift made by hand after the approval refuses at apply with no SQL run, and settles through a fresh Observe and Plan under the Apply\'s epoch', async (t) => {
  const w = await schemaWorld(t);
  const { db, plan } = await firstPlanAwaitingApproval(w, 'catalog', 'schema_drift', R1);
  await w.stopController();
  await w.approve('catalog');
  await w.sql(db, 'CREATE TABLE made_by_hand (id int)');
  const states = await watchSchemas(t, w, 'catalog');
  await w.startController();

  const settled = await w.waitFor('catalog', 'a new plan after the refused Apply', (s) =>
    (s.status?.plan && s.status.plan.uid !== plan.metadata.uid && !s.status.pendingObservation && !s.status.activeOperation ? s : undefined));
  const applyClaims = [...new Map(states.flatMap((s) => (s.status?.activeOperation?.type === 'Apply' ? [[s.status.activeOperation.id, s.status.activeOperation] as const] : []))).values()];
  t.equal(applyClaims.length, 1, 'one Apply was claimed');
  const apply = applyClaims[0]!;
  const pendings = states.map((s) => s.status?.pendingObservation).filter((p) => p?.applyOperationID === apply.id);
  t.equal(pendings[0]?.outcome, 'ApplyRefused', 'the Apply reported it changed nothing');
  t.same(await w.tables(db), ['made_by_hand'], 'no SQL of the plan ran');
  t.same(await w.applies(db), [], 'the database records no Apply');
  const proofs = proofClaims(states, apply.id);
  t.same(proofs.map((p) => p.type), ['Observe', 'Plan'], 'exactly one Observe and one Plan proved it');
  t.ok(proofs.every((p) => p.leaseEpoch === pendings[0]?.leaseEpoch && p.leaseEpoch === apply.leaseEpoch), 'both under the Apply\'s own Lease epoch');
  t.equal(settled.status?.plan?.approvalRequiredBecause, 'NotConverged', 'the new plan needs its own approval');
  // The new plan would drop the table made by hand: destructive, so it is held, and the database stays as it is.
  t.equal(settled.status?.plan?.destructive, true, 'the new plan is computed against the drifted database');
  const blocked = await w.waitFor('catalog', 'the destructive follow-up held', (s) => (s.status?.phase === 'Blocked' ? s : undefined));
  t.equal(blocked.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'DestructiveChangesDisabled');
  await sleep(3_000);
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 1, 'the refused Apply was never run again');
  t.same(await w.tables(db), ['made_by_hand'], 'and the database is as the person left it');
});

t.test('an Apply Pod killed mid-run leaves an unknown outcome that a fresh reading re-plans, never replays', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_pod_killed');
  await w.startController();
  // A short window: the proof of an unknown outcome waits until no Pod of the Apply can still run (its window and grace).
  const { claim, job, lock, r1Applies } = await blockedApply(t, w, db, { activeDeadlineSeconds: 60, lockTimeout: '50s' });
  const states = await watchSchemas(t, w, 'catalog');
  const pods = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  t.equal(pods.length, 1, 'fixture: the Apply Job runs one Pod');
  await w.admin.delete({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: pods[0]!.metadata!.name! }, { gracePeriodSeconds: 0 });
  const unknown = await w.waitFor('catalog', 'the proof owed with an unknown outcome', (s) =>
    (s.status?.pendingObservation?.applyOperationID === claim.id ? s : undefined));
  t.equal(unknown.status?.pendingObservation?.outcome, 'OutcomeUnknown');
  // The watch saw every stored version: the one before the record holds the claim, the record's first holds no
  // claim, and none holds both or neither.
  const first = states.findIndex((s) => s.status?.pendingObservation?.applyOperationID === claim.id);
  t.ok(first > 0, 'fixture: the watch saw the versions before and after the swap');
  t.equal(states[first - 1]?.status?.activeOperation?.id, claim.id, 'the version before the record holds the Apply claim');
  t.notOk(states[first]?.status?.activeOperation, 'the record\'s first version holds no claim: the claim and the record were swapped in one write');
  t.notOk(states.some((s) => s.status?.activeOperation?.id === claim.id && s.status.pendingObservation?.applyOperationID === claim.id), 'no version holds both');
  // A kubelet stopping a Pod kills its whole container; the fake kubelet stops the runner and can leave its executor
  // child waiting on the lock, so its session is ended here as the container's death would end it.
  await endWaitingWriters(w, db);
  await lock.release();
  const settled = await w.waitFor('catalog', 'the proof settled', (s) => (!s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingLockRelease ? s : undefined), PROOF_WAIT_MS);
  t.ok(Date.parse(states.find((s) => s.status?.activeOperation?.proofOf === claim.id)?.status?.activeOperation?.startedAt ?? '') >= Date.parse(unknown.status!.pendingObservation!.observeAfter!),
    'no proof reading started before the Apply\'s window and grace had passed');
  const applies = await w.applies(db);
  t.equal(applies.length, r1Applies, 'the killed Apply committed nothing');
  t.notOk(applies.some((a) => a.operationId === claim.id), 'its operation ID is not in the database');
  t.same(proofClaims(states, claim.id).map((p) => p.type), ['Observe', 'Plan'], 'one Observe and one Plan proved it');
  t.equal(settled.status?.plan?.approvalRequiredBecause, 'NotConverged', 're-planned, and the new plan waits for an approval even under Always');
  t.equal(settled.status?.phase, 'AwaitingApproval');
  await sleep(3_000);
  t.equal(schemaJobsOf(w, 'apply', 'catalog').filter((j) => j.metadata?.annotations?.['operator.ptah.run/operation-id'] === claim.id).length, 1, 'the Apply was never run again');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').length, 2, 'only r1\'s and the killed r2 Apply ever ran');
});

t.test('an Apply Job deleted after the mark is an unknown outcome, never created again', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_job_deleted');
  await w.startController();
  const { claim, lock } = await blockedApply(t, w, db, { activeDeadlineSeconds: 60, lockTimeout: '50s' });
  t.equal(claim.dispatchStarted, true, 'fixture: the dispatch marker is durable');
  await w.admin.delete({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }, { propagationPolicy: 'Background' });
  const unknown = await w.waitFor('catalog', 'the proof owed with an unknown outcome', (s) => (s.status?.pendingObservation?.applyOperationID === claim.id ? s : undefined));
  t.equal(unknown.status?.pendingObservation?.outcome, 'OutcomeUnknown');
  t.ok(unknown.status?.pendingObservation?.observeAfter, 'the proof waits out the Apply\'s window');
  await lock.release();
  await sleep(5_000);
  const jobs = schemaJobsOf(w, 'apply', 'catalog').filter((j) => j.metadata?.name === claim.jobName);
  t.equal(jobs.length, 1, 'the Job under the reserved name was created once');
  t.notOk(await w.admin.tryGet({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }), 'and never again');
  t.ok((await w.get('catalog')).status?.pendingObservation, 'the proof is still owed, holding the realm until the window passes');
});
