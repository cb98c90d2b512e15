// PtahSchema Applies that outlive their manager or their deadline, on the real stack: a manager replaced while an
// Apply runs adopts it with the same Job and Pod; a Job deadline hit mid-Apply is an unknown outcome settled by
// exactly one Observe and one Plan under the Apply's own Lease epoch. The database's own table is the witness.
import type { V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { sleep } from '../../tools/stack/wait.js';
import { schemaJobsOf, schemaWorld, watchSchemas } from './schema-world.js';
import { blockedApply, PROOF_WAIT_MS, proofClaims } from './schema-slow-apply.js';

t.test('a manager replaced while an Apply runs adopts it with the same Job and Pod', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_adopt');
  await w.startController();
  const { claim, job, lock } = await blockedApply(t, w, db);
  const podsBefore = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  await w.stopController();
  await w.startController(undefined, { controllerImage: 'localhost/ptah-operator:next', controllerRevision: 'schema-test-next', runnerImage: (await w.get('catalog')).status!.executionBinding!.runnerImage });
  await sleep(3_000);
  const during = await w.get('catalog');
  t.equal(during.status?.activeOperation?.id, claim.id, 'the new manager keeps the claim');
  t.equal(during.status?.activeOperation?.jobUID, job.metadata?.uid, 'with the same Job');
  await lock.release();
  const settled = await w.waitFor('catalog', 'the adopted Apply proven converged', (s) =>
    (s.status?.phase === 'InSync' && s.status.applied?.operationID === claim.id && !s.status.pendingLockRelease ? s : undefined));
  const podsAfter = (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.uid === job.metadata?.uid));
  t.same(podsAfter.map((p) => p.metadata?.uid), podsBefore.map((p) => p.metadata?.uid), 'the same Pod ran it');
  const applies = await w.applies(db);
  t.equal(applies.filter((a) => a.operationId === claim.id).length, 1, 'the adopted Apply is recorded once');
  t.equal(new Set(applies.map((a) => a.operationId)).size, applies.length, 'no operation ID twice');
  t.equal(new Set(applies.map((a) => a.planContentDigest)).size, applies.length, 'no plan content twice');
  t.equal(settled.status?.executionBinding?.epoch, claim.executionBindingID, 'the epoch is kept: only the recorded manager changed');
});

t.test('a Job deadline hit mid-Apply gives an unknown outcome, then exactly one Observe and one Plan under the same epoch', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_deadline');
  await w.startController();
  const { claim, lock, r1Applies } = await blockedApply(t, w, db, { activeDeadlineSeconds: 30, lockTimeout: '30s' });
  const states = await watchSchemas(t, w, 'catalog');
  const unknown = await w.waitFor('catalog', 'the proof owed after the deadline', (s) => (s.status?.pendingObservation?.applyOperationID === claim.id ? s : undefined));
  const pending = unknown.status!.pendingObservation!;
  t.equal(pending.outcome, 'OutcomeUnknown', 'the deadline leaves the outcome unknown');
  t.equal(pending.leaseEpoch, claim.leaseEpoch, 'the proof holds the Apply\'s epoch');
  await lock.release();
  await w.waitFor('catalog', 'the proof settled', (s) => (!s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingLockRelease ? s : undefined), PROOF_WAIT_MS);
  const proofs = proofClaims(states, claim.id);
  t.same(proofs.map((p) => p.type), ['Observe', 'Plan'], 'exactly one Observe and one Plan');
  t.ok(proofs.every((p) => p.leaseEpoch === claim.leaseEpoch), 'both under the Apply\'s epoch');
  t.equal((await w.applies(db)).length, r1Applies, 'the Apply committed nothing');
  t.equal(schemaJobsOf(w, 'apply', 'catalog').filter((j) => j.metadata?.name === claim.jobName).length, 1, 'never run again');
});
