// A PtahSchema's proof against what a person does meanwhile, on the real control plane, runner and PostgreSQL with
// a real manager process. Seed: the proof "runs before suspension, before the generation gate and before the
// realm census, so a schema owing proof cannot be overtaken by anything"; a suspended migration, by contrast, "does
// not read at all".
import t from 'tap';
import type { V1Lease } from '@kubernetes/client-node';
import type { PendingObservation } from '../../src/shared/api/schema-kinds.js';
import { JOB_ANNOTATIONS } from '../../src/shared/job/metadata.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { waitFor } from '../../tools/stack/wait.js';
import { crashWorld } from './crash-world.js';
import { appliesIn, heldSchemaApply, NAME, proofOwedWithNoManager, schemaNow } from './running-applies.js';
import { schemaJobsOf, WAIT_MS } from './schema-world.js';

t.test('a schema suspended while it owes a proof still proves the Apply, hands the realm back, and then rests suspended', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, 'suspended-proof');
  // A person suspends the schema while no manager runs.
  await waitFor(() => w.admin.patch(w.ref('PtahSchema', NAME), { spec: { suspend: true } }, 'merge'), { what: 'the suspension admitted', timeoutMs: 30_000 });
  const atSuspension = await schemaNow(w);
  t.equal(atSuspension.status?.pendingObservation?.applyOperationID, held.claim.id, 'fixture: suspended with the proof owed');
  t.equal(atSuspension.status?.pendingObservation?.outcome, 'ApplySucceeded', 'fixture: the Apply reported success');
  await cw.startManager();

  const proven = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.applied?.operationID === held.claim.id && !s.status.pendingObservation && !s.status.activeOperation && !s.status.pendingLockRelease ? s : undefined;
  }, { what: 'the suspended schema\'s Apply proven and the realm handed back', timeoutMs: WAIT_MS });
  t.equal(proven.spec.suspend, true, 'fixture: the schema is still suspended');
  const proofs = held.states.map((s) => s.status?.pendingObservation).filter((p) => p?.applyOperationID === held.claim.id);
  t.ok(proofs.length > 0, 'the Apply left its proof owed');
  t.same(proofs[0]?.applyPodUIDs, held.pods, 'the write that recorded the proof already names the Apply\'s Pod');
  t.equal(proofs[0]?.applyPodCount, 1, 'and counts it');
  const readings = [...schemaJobsOf(w, 'observe', NAME), ...schemaJobsOf(w, 'plan', NAME)]
    .filter((j) => held.states.some((s) => s.status?.activeOperation?.proofOf === held.claim.id && s.status.activeOperation.jobName === j.metadata?.name));
  t.ok(readings.length > 0, `the proof's reading ran while suspended (${readings.map((j) => j.metadata?.name).join(', ')})`);
  const lease = await w.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: leaseNameFor(held.claim.coordinationDigest!) });
  t.notOk(lease?.spec?.holderIdentity, 'the realm is not held once the proof is settled');

  const resting = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.phase === 'Suspended' ? s : undefined;
  }, { what: 'the schema to rest Suspended', timeoutMs: WAIT_MS });
  t.notOk(resting.status?.activeOperation, 'nothing else is claimed while suspended');
  t.same(schemaJobsOf(w, 'apply', NAME).map((j) => j.metadata?.uid), [held.claim.jobUID], 'one Apply Job');
  t.same(await appliesIn(w, held.db), [held.claim.id], 'the database applied the plan once');
});

t.test('an Apply with more Pods than the record keeps: recorded once as unknown, never rewritten in a loop, and still proven', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  await cw.startManager();
  const held = await heldSchemaApply(t, cw, 'many-pods');
  // Pods anyone can create that carry the Apply's operation ID: the record counts them as the Apply's (more than
  // one forces an unknown outcome). They exit at once, so none of them holds the proof up.
  const extra = 9;
  for (let i = 0; i < extra; i++) {
    await w.admin.create({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: `apply-pod-${i}`, namespace: w.ns, annotations: { [JOB_ANNOTATIONS.operationId]: held.claim.id } },
      spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'ptah-fixture/sh:test', args: ['true'] }] },
    });
  }
  await held.session.query('ROLLBACK');
  const proven = await waitFor(async () => {
    const s = await schemaNow(w);
    return !s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingLockRelease ? s : undefined;
  }, { what: 'the proof settled', timeoutMs: WAIT_MS });
  const records = held.states.map((s) => s.status?.pendingObservation).filter((p): p is PendingObservation => p?.applyOperationID === held.claim.id);
  t.ok(records.length > 0, 'the proof was owed');
  t.equal(records[0]?.outcome, 'OutcomeUnknown', 'the first write of the record already says the outcome is unknown');
  t.equal(records.at(-1)?.applyPodCount, extra + 1, `it counts every Pod (${extra + 1})`);
  t.equal(records.at(-1)?.applyPodUIDs?.length, 8, 'and keeps eight UIDs');
  // Before the kept UIDs were compared, every pass rewrote the record and ended at once: the proof never started.
  t.ok(proven, 'the proof ran to its end');
  t.same(await appliesIn(w, held.db), [held.claim.id], 'the database applied the plan once');
  // The Apply did commit, so the proof reads no changes: the unknown outcome converged. The seed: "A schema whose
  // uncertain Apply converges is recorded as converged with no Apply attributed to it".
  const settledAt = held.states.findIndex((s, i) => i > 0 && !s.status?.pendingObservation && held.states[i - 1]?.status?.pendingObservation?.applyOperationID === held.claim.id);
  const settle = held.states[settledAt];
  const ready = settle?.status?.conditions?.find((c) => c.type === 'Ready');
  t.ok(settle, 'the watch saw the write that settled the proof');
  t.equal(settle?.status?.phase, 'InSync', 'that write says the database is in sync');
  t.equal(ready?.reason, 'ConvergedAfterUnknownOutcome', `and reports it converged after an unknown outcome (${ready?.message})`);
  t.not(settle?.status?.applied?.operationID, held.claim.id, 'attributing no Apply: convergence is not attribution');
});

t.test('a target edited while a proof is owed: the proof reads the database the Apply ran against, settles, and only then the new target is read', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, 'edited-target');
  const ranAgainst = (await schemaNow(w)).spec.target.urlFrom.name;
  // While no manager runs, a person points the schema at another database (its own Secret).
  const other = await w.database('edited-target-other');
  await w.admin.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'other-db', namespace: w.ns }, stringData: { url: other.url } });
  await waitFor(() => w.admin.patch(w.ref('PtahSchema', NAME), { spec: { target: { urlFrom: { name: 'other-db', key: 'url' } } } }, 'merge'), { what: 'the target edit admitted', timeoutMs: 30_000 });
  await cw.startManager();

  const proven = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.applied?.operationID === held.claim.id && !s.status.pendingObservation ? s : undefined;
  }, { what: 'the proof settled against the database the Apply ran against', timeoutMs: WAIT_MS });
  t.equal(proven.spec.target.urlFrom.name, 'other-db', 'fixture: the spec names the other database');
  const proofJobs = [...w.jobsSeen.values()].filter((j) => held.states.some((s) => s.status?.activeOperation?.proofOf === held.claim.id && s.status.activeOperation.jobName === j.metadata?.name));
  t.ok(proofJobs.length >= 2, `the proof's Observe and Plan ran (${proofJobs.length} Jobs)`);
  const secrets = proofJobs.map((j) => j.spec?.template.spec?.containers[0]?.env?.find((e) => e.name === 'PTAH_DB_URL')?.valueFrom?.secretKeyRef?.name);
  t.same([...new Set(secrets)], [ranAgainst], 'every proof reading connected to the database the Apply ran against');
  t.notOk(held.states.some((s) => s.status?.activeOperation?.proofOf === held.claim.id && s.status.activeOperation.attempt > 1), 'no proof reading was refused and run again');
  t.equal(proven.status?.applied?.targetIdentityDigest, held.claim.targetIdentityDigest, 'the Apply is proven converged on its own database (attributed)');
  // Then the schema goes on with the database the spec now names.
  await waitFor(async () => {
    const jobs = [...w.jobsSeen.values()].filter((j) => j.metadata?.labels?.['operator.ptah.run/schema'] === NAME &&
      j.spec?.template.spec?.containers[0]?.env?.some((e) => e.name === 'PTAH_DB_URL' && e.valueFrom?.secretKeyRef?.name === 'other-db'));
    return jobs.length > 0 ? true : undefined;
  }, { what: 'a reading of the database the spec now names', timeoutMs: WAIT_MS });
  t.same(await appliesIn(w, held.db), [held.claim.id], 'the first database applied the plan once');
});
