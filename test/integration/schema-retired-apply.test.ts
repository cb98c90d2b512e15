// A PtahSchema execution-binding rotation that lands while a proof reading runs, on the real control plane, runner
// and PostgreSQL, between two real manager builds (the checkout, and a copy whose executor differs:
// tools/stack/variants.ts). Seed: "A dispatched Apply, or an outcome-unknown Apply of the retired epoch that no pass
// harvested, stays in status.pendingObservation, and no proof is claimed until its Job is accounted for: its UID
// adopted from a late create, or given up on at the Apply's ObserveAfter horizon, and its cleanup TTL set once it
// stops." The rotation records one Job, the reading's; once the reading settles, the Apply's Job is still owed.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PendingBindingRetirement } from '../../src/shared/api/schema-kinds.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { CLEANUP_TTL_SECONDS } from '../../src/shared/job/build.js';
import { JOB_LABELS } from '../../src/shared/job/metadata.js';
import { RUNNER_IMAGE_OTHER_EXECUTOR } from '../../tools/stack/kubelet/images.js';
import { variantDir, variantExecutorIdentity } from '../../tools/stack/variants.js';
import { waitFor } from '../../tools/stack/wait.js';
import type { FaultInjector, FaultKind } from '../harness/fault-injection.js';
import { crashWorld, schemaStatusWrite, within, type ManagerRelease } from './crash-world.js';
import { eventsAbout } from './migration-world.js';
import { appliesIn, installSampleSchema, NAME, PRODUCTS, schemaNow, watchSchemaStates } from './running-applies.js';
import { schemaJobsOf, WAIT_MS } from './schema-world.js';

/** A release that changes the executor (one line of src/executor/ changed), its runner image carrying it. */
const NEW_EXECUTOR: ManagerRelease = {
  root: variantDir('executor'), runnerImage: RUNNER_IMAGE_OTHER_EXECUTOR, controllerImage: 'localhost/ptah-operator:other', revision: 'retired-apply-other',
};

/**
 * The answer to the create of the schema's Apply Job is lost: the API server stores the Job and the manager hears
 * nothing (the connection is cut), so the Apply's outcome is unknown and no pass learns its Job's UID.
 */
function applyCreateAnswerLost(): FaultInjector {
  const counts: Record<FaultKind, number> = { error: 0, reset: 0, latency: 0, watchDrop: 0 };
  return {
    counts,
    applied(kind) {
      counts[kind] += 1;
    },
    decide({ method, path, body }) {
      const labels = (body as V1Job | undefined)?.metadata?.labels;
      const applyCreate = method === 'POST' && /\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs$/.test(path ?? '') && labels?.[JOB_LABELS.operation] === 'apply';
      return applyCreate && counts.reset === 0 ? { kind: 'reset' } : undefined;
    },
  };
}

t.test('a rotation while a proof reading runs keeps the retired Apply\'s Job owed: its UID adopted from the create nobody heard, and its cleanup TTL set', async (t) => {
  t.not(variantExecutorIdentity('executor'), ownExecutorIdentity(), 'fixture: the next release carries another executor');
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const db = await w.database('retired-apply');
  await w.sql(db, PRODUCTS);
  const states = await watchSchemaStates(t, w);
  const lost = applyCreateAnswerLost();
  cw.proxy.injectFaults(lost);
  await cw.startManager();
  // The old release is killed the moment the proof's reading has a Job: the rotation lands while the proof runs.
  const proofDispatched = schemaStatusWrite('the proof\'s reading recorded with its Job UID',
    (s) => Boolean(s.pendingObservation && s.activeOperation?.proofOf === s.pendingObservation.applyOperationID && s.activeOperation.jobUID), NAME);
  const kill = cw.killOn(proofDispatched);
  // A short window: the Apply's horizon (its window and its Pod's grace) passes within a minute.
  await installSampleSchema(w, db, 'retired-apply', 30);
  const fired = await within(kill, 2 * WAIT_MS, proofDispatched.what, () => cw.proxy.disarm());
  cw.proxy.injectFaults(undefined);

  const atKill = await schemaNow(w);
  const pending = atKill.status!.pendingObservation!;
  const reading = atKill.status!.activeOperation!;
  const epoch1 = atKill.status!.executionBinding!.epoch;
  t.equal(lost.counts.reset, 1, 'fixture: the answer to the Apply Job\'s create was lost');
  t.equal(pending.outcome, 'OutcomeUnknown', 'fixture: the Apply\'s outcome is unknown');
  t.notOk(pending.applyJobUID, 'fixture: no pass learned its Job\'s UID');
  t.equal(pending.executionBindingID, epoch1, 'fixture: the Apply is of the epoch in force');
  const applyJob = await w.admin.get<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: pending.applyJobName });
  t.ok(applyJob.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True'), 'fixture: its Job was stored and ran to its end');
  t.notOk(applyJob.spec?.ttlSecondsAfterFinished, 'fixture: and has no cleanup TTL');
  t.ok(reading.jobUID, `fixture: the proof's ${reading.type} runs as Job ${reading.jobName}`);

  await cw.startManager(undefined, NEW_EXECUTOR);
  const proven = await waitFor(async () => {
    const s = await schemaNow(w);
    const done = !s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingBindingRetirement && !s.status?.pendingLockRelease;
    return done && s.status?.executionBinding?.epoch !== epoch1 ? s : undefined;
  }, { what: 'the proof settled under the new epoch and the retired epoch worked off', timeoutMs: 2 * WAIT_MS });
  t.equal(proven.status?.executionBinding?.executorIdentity, variantExecutorIdentity('executor'), 'the new epoch binds the other executor');
  const settledBy = states.find((s) => s.status?.conditions?.find((c) => c.type === 'Ready')?.reason === 'ConvergedAfterUnknownOutcome');
  t.ok(settledBy && !settledBy.status?.pendingObservation && !settledBy.status?.applied, 'the proof settled the unknown outcome, attributing no Apply');

  const jobs = states.map((s) => s.status?.pendingBindingRetirement?.job).filter((j): j is NonNullable<PendingBindingRetirement['job']> => j !== undefined);
  const namedReading = jobs.findIndex((j) => j.name === reading.jobName);
  const namedApply = jobs.findIndex((j) => j.operation === 'Apply' && j.name === pending.applyJobName);
  t.ok(namedReading >= 0, 'the rotation named the reading\'s Job');
  t.ok(namedApply > namedReading, 'once the reading settled, the record named the retired Apply\'s Job');
  const adopted = states.map((s) => s.status?.pendingObservation?.applyJobUID).find((uid) => uid !== undefined);
  t.equal(adopted, applyJob.metadata?.uid, 'the retired Apply\'s Job UID was adopted into the proof');
  const after = await w.admin.get<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: pending.applyJobName });
  t.equal(after.spec?.ttlSecondsAfterFinished, CLEANUP_TTL_SECONDS, 'and its Job got its cleanup TTL');

  t.same(schemaJobsOf(w, 'apply', NAME).map((j) => j.metadata?.uid), [applyJob.metadata?.uid], 'one Apply Job');
  t.same(await appliesIn(w, db), [pending.applyOperationID], 'the database applied the plan once');
  t.equal((await eventsAbout(w, proven.metadata.uid!, 'ExecutionBindingChanged')).length, 1, 'one ExecutionBindingChanged Event');
  t.comment(`the old release was killed ${fired.killedAt - fired.storedAt} ms after the reading's Job UID was stored`);
});
