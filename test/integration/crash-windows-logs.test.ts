// A pods/log read that never answers (the fake kubelet leaves it hanging, as a kubelet that stopped responding
// would), under a manager process: the read is bounded in time, the pass gives up with a Warning Event and retries,
// the reading is given up on with a status reason that says why, and meanwhile another resource of the same
// manager converges.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { KINDS } from '../../src/shared/api/names.js';
import { HANG_LOG_ANNOTATION } from '../../tools/stack/kubelet/pod-worker.js';
import { waitFor } from '../../tools/stack/wait.js';
import { crashWorld } from './crash-world.js';
import { eventsAbout, SAMPLE, WAIT_MS } from './migration-world.js';
import { sampleObjects, sampleOf } from './operator-install.js';

const STUCK = 'stuck';
const OTHER = 'other';

/** When the Job turned terminal (its Complete or Failed condition), in ms since the epoch. */
function terminalAt(job: V1Job | undefined): number | undefined {
  const at = job?.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')?.lastTransitionTime;
  return at === undefined ? undefined : new Date(at).getTime();
}

t.test('a pods/log read that never answers is bounded, retried and given up on, and does not hold up another resource', async (tt) => {
  const cw = await crashWorld(tt);
  const { w } = cw;
  await cw.startManager();
  const [stuckDb, otherDb] = await Promise.all([w.database('hung-log-stuck'), w.database('hung-log-other')]);
  const [stuckSecret, otherSecret] = await Promise.all([w.installSample(stuckDb, 'stuck-db'), w.installSample(otherDb, 'other-db')]);
  const artifact = (await w.sampleArtifact()).metadata!.name!;

  // Every operation Pod of STUCK carries the fake kubelet's hang switch, declared like any Pod annotation.
  const stuck = sampleOf<PtahMigration>(await sampleObjects(SAMPLE), KINDS.PtahMigration.kind);
  stuck.metadata = { name: STUCK, namespace: w.ns };
  stuck.spec.artifact.configMapRef!.name = artifact;
  stuck.spec.target.urlFrom.name = stuckSecret;
  stuck.spec.policy.apply = 'Always';
  stuck.spec.execution = { ...stuck.spec.execution, podMetadata: { annotations: { [HANG_LOG_ANNOTATION]: 'true' } } };
  const created = await w.admin.create<PtahMigration>(stuck);
  const claim = await w.waitFor(STUCK, 'a History reading dispatched', (m) => (m.status?.activeOperation?.jobUID ? m.status.activeOperation : undefined));
  await w.createMigration({ name: OTHER, artifact, secret: otherSecret, apply: 'Always' });

  const stuckJob = await waitFor(async () => {
    const job = await w.admin.tryGet<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName });
    return terminalAt(job) !== undefined ? job : undefined;
  }, { what: `${STUCK}'s History Job to finish`, timeoutMs: WAIT_MS });
  const finished = terminalAt(stuckJob)!;

  const converged = await w.waitFor(OTHER, 'the other migration to apply and read its history back', (m) =>
    (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined), WAIT_MS);
  const convergedAt = Date.now();
  tt.equal(converged.status?.history?.pendingCount, 0, 'the other migration converged: nothing pending in its database');
  const stuckNow = await w.get(STUCK);
  tt.equal(stuckNow.status?.activeOperation?.id, claim.id, 'meanwhile the stuck reading is still in flight, unharvested');
  tt.equal(stuckNow.status?.activeOperation?.attempt, claim.attempt, 'and still in its first attempt');

  const failed = await waitFor(async () => (await eventsAbout(w, created.metadata!.uid!, 'ResultReadFailed'))[0], { what: 'a ResultReadFailed Event', timeoutMs: WAIT_MS });
  const failedAt = new Date(failed.eventTime ?? failed.metadata?.creationTimestamp ?? 0).getTime();
  tt.comment(`the stuck History Job finished at +0 ms; the other migration converged at +${convergedAt - finished} ms; the first read gave up at +${failedAt - finished} ms: ${failed.note}`);
  tt.match(failed.note, /could not be read: .*timed out after \d+ ms/, 'the read is given up on by its own timeout, and the Event says so');
  tt.ok(convergedAt < failedAt, 'the other migration converged while the read was still hanging');

  const retried = await w.waitFor(STUCK, 'the reading to be given up on and run again', (m) =>
    (m.status?.activeOperation && m.status.activeOperation.attempt > claim.attempt ? m : undefined), 240_000);
  const reason = retried.status?.conditions?.find((c) => c.type === 'Ready');
  tt.comment(`given up at +${Date.now() - finished} ms: ${JSON.stringify(retried.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}: ${c.message}`))}`);
  tt.ok(retried.status?.conditions?.some((c) => c.reason === 'HistoryReadRetried' && /could not be read for \d+ s \(last: .*timed out/.test(c.message ?? '')),
    `a status condition names the retry and why (${reason?.reason}: ${reason?.message})`);
  // The Event is recorded after the status write that carries the condition, by the manager's Event recorder.
  const announced = await waitFor(async () => (await eventsAbout(w, created.metadata!.uid!, 'OperationRetried'))[0], { what: 'an OperationRetried Event', timeoutMs: WAIT_MS }).catch(() => undefined);
  tt.ok(announced, 'and an OperationRetried Event announces it');
  tt.same(await w.history(stuckDb), [], 'the stuck migration applied nothing: its reading was never read');
});
