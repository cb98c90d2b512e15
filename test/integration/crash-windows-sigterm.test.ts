// The runner stopped mid-Apply by its Pod's deletion (a drain or an eviction: SIGTERM, its grace period, then
// SIGKILL), under a manager process: the Pod outlives the delete until its evidence is read (the run-evidence
// finalizer), so the run is accounted for exactly as far as its own report goes, nothing runs it again, the realm
// goes back only after the Pod stopped, and the Pod goes once the outcome is recorded.
import t, { type Test } from 'tap';
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Informer } from '../../src/controller/informer.js';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { EVIDENCE_FINALIZER } from '../../src/shared/job/metadata.js';
import type { KubeObject } from '../../src/shared/kube-client.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';
import { crashWorld, NAME, outcomeOf, podsOf, sleepingApply, type CrashWorld, type RunningApply } from './crash-world.js';
import { jobsOf, WAIT_MS } from './migration-world.js';
import { slowFiles } from './slow-apply.js';

/** Every stored version of the namespace's objects of one kind, in the order the watch delivered them. */
async function versionsOf<T extends KubeObject>(tt: Test, cw: CrashWorld, apiVersion: string, kind: string): Promise<T[]> {
  const seen: T[] = [];
  const informer = new Informer<T>({ kubeConfig: sharedCluster().kubeConfig('admin'), apiVersion, kind, namespace: cw.w.ns, logger: pino({ level: 'silent' }) });
  informer.on('add', (o) => void seen.push(o));
  informer.on('update', (o) => void seen.push(o));
  informer.start();
  tt.teardown(() => informer.stop());
  await informer.waitForSync();
  return seen;
}

const revision = (o: KubeObject | undefined): number => Number(o?.metadata?.resourceVersion ?? NaN);
const runnerTerminated = (pod: V1Pod) => pod.status?.containerStatuses?.[0]?.state?.terminated;

interface Interrupted {
  cw: CrashWorld;
  r: RunningApply;
  settled: PtahMigration;
  /** The first version of the Apply's Pod the watch saw with its runner terminated, if it saw one in 30 s. */
  stopped: V1Pod | undefined;
  /** The versions of the Apply's Pods and of the realm Lease the watches have seen so far (they go on watching). */
  pods(): V1Pod[];
  leases(): V1Lease[];
}

/** A slow Apply whose one Pod is deleted with `gracePeriodSeconds` while it sleeps in 0002; returns once the run is settled. */
async function interruptedApply(tt: Test, gracePeriodSeconds?: number): Promise<Interrupted> {
  const cw = await crashWorld(tt);
  const { w } = cw;
  await w.artifact('slow-r1', slowFiles(20));
  await cw.startManager();
  const podVersions = await versionsOf<V1Pod>(tt, cw, 'v1', 'Pod');
  const leaseVersions = await versionsOf<V1Lease>(tt, cw, 'coordination.k8s.io/v1', 'Lease');
  const r = await sleepingApply(cw, NAME);
  tt.equal(r.pods.length, 1, 'one Pod runs the Apply');
  const pod = podVersions.find((p) => p.metadata?.uid === r.pods[0])!;
  tt.same(pod.metadata?.finalizers?.filter((f) => f === EVIDENCE_FINALIZER), [EVIDENCE_FINALIZER], 'the Apply Pod carries the run-evidence finalizer from its template');
  await w.admin.delete({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: pod.metadata!.name! }, gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds });
  const settled = await w.waitFor(NAME, 'the interrupted run to be settled', (m) => (m.status?.activeOperation?.id !== r.claim.id ? m : undefined), WAIT_MS);
  tt.comment(`recorded: ${settled.status?.lastRun?.outcome} (${settled.status?.lastRun?.message})`);
  const leaseName = leaseNameFor(r.claim.coordinationDigest!);
  const pods = () => podVersions.filter((p) => p.metadata?.labels?.['job-name'] === r.claim.jobName);
  // The manager read the runner's end from the Pod before it settled; this watch's event of it may come later.
  const stopped = await waitFor(async () => pods().find((p) => runnerTerminated(p) !== undefined),
    { what: "the Pod's runner to be seen stopped", timeoutMs: 30_000 }).catch(() => undefined);
  return {
    cw, r, settled, stopped, pods,
    leases: () => leaseVersions.filter((l) => l.metadata?.name === leaseName),
  };
}

/** What holds whatever the runner managed to report: nothing ran twice, the realm waited for the Pod, the Pod is let go of. */
async function neverRunAgain(tt: Test, run: Interrupted): Promise<void> {
  const { cw, r, pods, leases, stopped } = run;
  tt.same([...new Set(pods().map((p) => p.metadata?.uid))], r.pods, 'no second Pod ever ran the Apply');
  tt.same(jobsOf(cw.w, 'apply', NAME).map((j) => j.metadata?.uid), [r.claim.jobUID], 'no other Apply Job was ever created');
  // The release follows the status write the settled run was read from; its watch event may come later still.
  const released = await waitFor(async () => leases().find((l) => revision(l) > revision(leases()[0]) && !l.spec?.holderIdentity),
    { what: 'the realm Lease to be released', timeoutMs: 30_000 }).catch(() => undefined);
  tt.ok(stopped && released && revision(released) > revision(stopped),
    `the realm Lease was released (revision ${revision(released)}) only after the Pod's runner had stopped (revision ${revision(stopped)})`);
  const left = await waitFor(async () => { const now = await podsOf(cw, r.claim.jobName); return now.length === 0 ? now : undefined; },
    { what: 'the Apply Pod to be let go of', timeoutMs: 30_000 }).catch(async () => podsOf(cw, r.claim.jobName));
  tt.same(left, [], 'with the outcome recorded the finalizer came off and the deleted Pod is gone');
}

t.test('a graceful delete (SIGTERM): the run is recorded Partial exactly as far as the database went, and never run again', async (tt) => {
  const run = await interruptedApply(tt);
  const { cw, r, settled } = run;
  const applied = (await cw.w.history(r.db)).filter((h) => h.operationId === r.claim.id).map((h) => h.version);
  tt.same(applied, ['0001'], 'the database holds the first version only: the second was rolled back when the executor stopped');
  tt.equal(outcomeOf(settled, r.claim.id), 'Partial', 'the run is recorded Partial');
  tt.same(settled.status?.lastRun?.appliedVersions, ['0001'], 'the record names exactly what the database holds');
  const runner = run.stopped && runnerTerminated(run.stopped);
  tt.comment(`the runner's termination summary: ${runner?.message?.slice(0, 400)}`);
  tt.equal(runner?.exitCode, 0, 'the runner framed its result before it exited');
  await neverRunAgain(tt, run);
});

t.test('a delete with grace 0 (SIGKILL): the run left no report, so it is recorded Unknown, never Partial, and still harvested', async (tt) => {
  const run = await interruptedApply(tt, 0);
  const { cw, r, settled } = run;
  const applied = (await cw.w.history(r.db)).filter((h) => h.operationId === r.claim.id).map((h) => h.version);
  tt.same(applied, ['0001'], 'the database holds the first version: what committed before the kill stays');
  tt.equal(outcomeOf(settled, r.claim.id), 'Unknown', 'a run that reported nothing is Unknown');
  tt.same(settled.status?.lastRun?.appliedVersions, [], 'and the record claims no version it has no report of');
  const runner = run.stopped && runnerTerminated(run.stopped);
  tt.ok(runner && runner.exitCode !== 0, `the runner was killed before it could frame (exit code ${runner?.exitCode})`);
  await neverRunAgain(tt, run);
});
