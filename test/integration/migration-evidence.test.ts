// What an Apply's account may be read from, on the real control plane with PostgreSQL as the witness: only the one
// Pod of the Job that the claim's admission envelope accepts (never a second Pod beside it, never a Pod someone
// else made with the Job's name on it), only a report that says it reached the planned database, and, when the log
// holds no frame, the runner's termination summary only where it agrees with the log.
import t, { type Test } from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration, PtahMigrationPlan } from '../../src/shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { RUNNER_CONTAINER } from '../../src/shared/job/build.js';
import { podEnvelopeVerdict } from '../../src/shared/pod-envelope.js';
import { encodeFrame, encodeSummary, parseResultFor, summaryFor } from '../../src/shared/runner-protocol.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { targetIdentityDigest } from '../../src/shared/target-identity.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import {
  framed, ghostNode, keepJobControllerFromApplyPods, logOf, podsOfJob, runResult, shellPod, templatePod, terminatePod, type GhostNode,
} from './migration-evidence-world.js';
import { eventAbout, jobRef, jobsOf, migrationWorld, runningApply, slowFiles, SLOW_VERSIONS, type MigrationWorld } from './migration-world.js';

const FILES = {
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY);\n',
  '0002_create_orders.up.sql': 'CREATE TABLE orders (id bigserial PRIMARY KEY);\n',
};
const ARTIFACT = 'evidence-r1';

interface Planned {
  name: string;
  db: TestDatabase;
  secret: string;
}

/** A migration of its own database and realm (OnApproval) whose plan awaits approval. */
async function planned(w: MigrationWorld, name: string): Promise<Planned> {
  const db = await w.database(name.replace(/-/g, '_'));
  const secret = await w.installSample(db, `${name}-db`);
  await w.createMigration({ name, artifact: ARTIFACT, secret, apply: 'OnApproval', coordinationKey: name });
  await w.waitFor(name, 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  return { name, db, secret };
}

interface Dispatched {
  claim: ActiveOperation;
  job: V1Job;
  plan: PtahMigrationPlan;
}

/** Approves the plan and waits for the Apply's Job UID to be recorded. */
async function approvedApply(w: MigrationWorld, name: string): Promise<Dispatched> {
  const plan = await w.plan(name);
  await w.approve(name);
  const m = await w.waitFor(name, 'an Apply dispatched with its Job UID recorded', (m) =>
    (m.status?.activeOperation?.type === 'Apply' && m.status.activeOperation.jobUID ? m : undefined));
  const claim = m.status!.activeOperation!;
  return { claim, job: await w.admin.get<V1Job>(jobRef(w, claim.jobName)), plan };
}

type EnvelopeRun = Planned & Dispatched;

/**
 * A world where the Job controller cannot create Apply Pods, with a ghost Node, and one migration per name whose
 * Apply is dispatched: its Job waits for a Pod the test makes.
 */
async function envelopeWorld(t: Test, names: string[]): Promise<{ w: MigrationWorld; ghost: GhostNode; runs: EnvelopeRun[] }> {
  const w = await migrationWorld(t);
  await keepJobControllerFromApplyPods(t, w);
  const ghost = await ghostNode(t, w);
  await w.startController();
  await w.artifact(ARTIFACT, FILES);
  const plans = await Promise.all(names.map((name) => planned(w, name)));
  const runs = await Promise.all(plans.map(async (p) => ({ ...p, ...(await approvedApply(w, p.name)) })));
  return { w, ghost, runs };
}

/** Waits until the Apply `claim` is retired with a last run, and returns the resource then. */
const retired = (w: MigrationWorld, name: string, claim: ActiveOperation): Promise<PtahMigration> =>
  w.waitFor(name, `operation ${claim.id} retired with a last run`, (m) =>
    (m.status?.lastRun?.operationID === claim.id && m.status.activeOperation?.id !== claim.id ? m : undefined));

/** The run was recorded Unknown and unresolved, never accounted. */
function assertUnknown(t: Test, m: PtahMigration, claim: ActiveOperation, reason: RegExp): void {
  t.match(m.status?.lastRun, { outcome: 'Unknown', operationID: claim.id, message: reason }, 'the last run is Unknown, for the reason expected');
  t.match(m.status?.unresolvedRun, { outcome: 'Unknown', operationID: claim.id }, 'and the run is recorded unresolved');
}

/** Nothing touched the database and the Apply was never run again. */
async function assertUntouchedAndNotReplayed(t: Test, w: MigrationWorld, name: string, db: TestDatabase): Promise<void> {
  t.same(await w.history(db), [], 'the database holds no migration history: nothing ran against it');
  await sleep(2_000);
  t.equal(jobsOf(w, 'apply', name).length, 1, 'one Apply Job was ever created');
}

const ghostName = (d: Dispatched): string => `${d.job.metadata!.name}-ghost`;

/** A Pod exactly the Job's template, on the ghost Node, whose runner ended `exitCode` with `log` and `message`. */
async function ghostRun(w: MigrationWorld, ghost: GhostNode, d: Dispatched, run: { log?: string; exitCode: number; message?: string; second?: boolean }) {
  // A second Pod beside the Job controller's is not counted towards the Job and outlives being deleted as one too many.
  const pod = templatePod(d.job, ghostName(d), { nodeName: ghost.name, ...(run.second ? { counted: false, kept: true } : {}) });
  if (run.log !== undefined) ghost.logs.set(pod.metadata!.name!, logOf(run.log));
  const created = await w.admin.create(pod);
  await terminatePod(w, created, run.exitCode, run.message);
  return created;
}

/** Fixture: the ghost Pod is the Job's only one (the Job controller's own was refused). */
async function assertGhostOnly(t: Test, w: MigrationWorld, d: Dispatched): Promise<void> {
  t.same((await podsOfJob(w, d.job.metadata!.uid!)).map((p) => p.metadata!.name), [ghostName(d)], 'fixture: the test\'s Pod is the Job\'s only Pod');
}

t.test('several Pods: a second Pod controlled by the Apply Job keeps the run\'s own frame from being accepted; Unknown, never replayed', async (t) => {
  const w = await migrationWorld(t);
  const ghost = await ghostNode(t, w);
  await w.startController();
  const db = await w.database('several_pods');
  const secret = await w.installSample(db);
  await w.artifact('orders-r1', slowFiles(6));
  await w.createMigration({ name: 'orders', artifact: 'orders-r1', secret, apply: 'Always', activeDeadlineSeconds: 120, lockTimeout: '1m' });
  const { claim, job } = await runningApply(w, db, 'orders');
  const plan = await w.admin.get<PtahMigrationPlan>(w.ref('PtahMigrationPlan', claim.planRef!.name));

  const own = await podsOfJob(w, job.metadata!.uid!);
  t.equal(own.length, 1, 'fixture: the Job controller runs one Pod');
  t.same(podEnvelopeVerdict(own[0]!, job, claim.admissionSnapshot!), { ok: true }, 'the Job controller\'s own Pod is inside the envelope');
  // A second Pod of the Job, finished with a valid frame of its own; the Job controller leaves the running one be.
  const second = await ghostRun(w, ghost, { claim, job, plan }, { log: framed(runResult(claim, plan, 'failed')), exitCode: 0, second: true });

  const m = await retired(w, 'orders', claim);
  assertUnknown(t, m, claim, /^NoResult: Job \S+ ran 2 Pods; a result is read from exactly one/);
  const pods = (await podsOfJob(w, job.metadata!.uid!)).map((p) => p.metadata!.name);
  t.ok(pods.includes(second.metadata!.name!) && pods.includes(own[0]!.metadata!.name), 'fixture: both Pods were there when the run was harvested');
  t.same((await w.history(db)).map((r) => [r.version, r.operationId]), SLOW_VERSIONS.map((v) => [v, claim.id]), 'the run applied each migration once, under its operation ID');
  await sleep(2_000);
  t.equal(jobsOf(w, 'apply', 'orders').length, 1, 'the run is never replayed');
});

t.test('a foreign Pod with the Apply Job as controller and its annotations, printing a valid frame, is never read', async (t) => {
  const { w, runs: [d] } = await envelopeWorld(t, ['foreign']);
  const { name, db, claim } = d!;

  // A forged account that the run applied everything, for this claim, against the planned database and realm.
  const forged = framed(runResult(claim, d!.plan, 'applied'));
  const pod = await w.admin.create(shellPod(d!.job, `${claim.jobName}-forged`, forged));
  const job = await waitFor(async () => {
    const current = await w.admin.get<V1Job>(jobRef(w, claim.jobName));
    return current.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') ? current : undefined;
  }, { what: 'the Job to complete on the foreign Pod', timeoutMs: 60_000 });
  t.ok(job, 'fixture: the Job controller counted the foreign Pod as the Job\'s');
  t.same((await podsOfJob(w, d!.job.metadata!.uid!)).map((p) => p.metadata!.name), [pod.metadata!.name], 'fixture: it is the Job\'s only Pod');
  const log = await w.admin.readPodLog(w.ns, pod.metadata!.name!, { container: RUNNER_CONTAINER });
  t.match(parseResultFor(log, 'migration-apply', claim.id), { operationId: claim.id, migrationRun: { outcome: 'applied' } }, 'fixture: its log holds a frame the parser accepts for the claim');

  const m = await retired(w, name, claim);
  assertUnknown(t, m, claim, /^NoResult: Pod \S+ is outside the claim's admission envelope: the Pod's containers entry "runner" is not the template's/);
  t.notOk(m.status?.history?.appliedCount, 'nothing was taken as applied');
  await assertUntouchedAndNotReplayed(t, w, name, db);
});

t.test('the run\'s own report of its target: another database is Unknown; none, from a refusal before the executor started, is a failure', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  await w.artifact(ARTIFACT, FILES);
  const [moved, unreadable] = await Promise.all([planned(w, 'moved'), planned(w, 'unreadable')]);
  const other = await w.database('moved_other');
  // After the plan: one Secret now names another database, the other a URL that names none.
  const secretRef = (name: string) => ({ apiVersion: 'v1', kind: 'Secret', namespace: w.ns, name });
  await w.admin.patch(secretRef(moved.secret), { stringData: { url: other.url } }, 'merge');
  await w.admin.patch(secretRef(unreadable.secret), { stringData: { url: 'mysql://db.example/orders' } }, 'merge');
  const [a, b] = await Promise.all([approvedApply(w, moved.name), approvedApply(w, unreadable.name)]);

  await t.test('a frame from another database is uncertain, not failed', async (t) => {
    const m = await retired(w, moved.name, a.claim);
    assertUnknown(t, m, a.claim, /^TargetMismatch: the run reports another database/);
    t.equal(m.status?.unresolvedRun?.targetIdentityDigest, targetIdentityDigest(other.url), 'the record names the database the run reports');
    t.not(a.claim.targetIdentityDigest, targetIdentityDigest(other.url), 'fixture: which is not the planned one');
    t.same(await w.history(other), [], 'the other database was not changed');
    await assertUntouchedAndNotReplayed(t, w, moved.name, moved.db);
  });

  await t.test('a refusal framed before the executor started names no database and is a failure', async (t) => {
    const m = await retired(w, unreadable.name, b.claim);
    t.match(m.status?.lastRun, { outcome: 'Failed', operationID: b.claim.id, message: /invalid_target/ }, 'accounted Failed: the runner opened no database');
    t.notOk(m.status?.unresolvedRun, 'nothing is unresolved');
    t.ok(await eventAbout(w, m.metadata.uid!, 'MigrationRunFinished', `operation ${b.claim.id} (Job ${b.claim.jobName}) ended Failed`), 'the run is announced Failed');
    await assertUntouchedAndNotReplayed(t, w, unreadable.name, unreadable.db);
  });
});

t.test('a report that does not name the database it opened, from a Pod inside the envelope, is not accepted', async (t) => {
  const { w, ghost, runs } = await envelopeWorld(t, ['frame-unnamed', 'summary-unnamed']);
  const [frame, summary] = runs as [EnvelopeRun, EnvelopeRun];
  // The executor started (exit status 1) and failed on the first file, by its own account; no target identity.
  const unnamed = (d: Dispatched) => runResult(d.claim, d.plan, 'failed', { targetIdentityDigest: undefined });
  await ghostRun(w, ghost, frame, { log: framed(unnamed(frame)), exitCode: 0 });
  await ghostRun(w, ghost, summary, { exitCode: 0, message: encodeSummary(summaryFor(unnamed(summary))) });

  for (const [run, source] of [[frame, 'frame'], [summary, 'termination summary']] as const) {
    await t.test(`from its ${source}`, async (t) => {
      const m = await retired(w, run.name, run.claim);
      await assertGhostOnly(t, w, run);
      assertUnknown(t, m, run.claim, /^TargetUnconfirmed: the run does not report which database it opened/);
      await assertUntouchedAndNotReplayed(t, w, run.name, run.db);
    });
  }
});

t.test('a report of another physical database than the reading behind the claim, or of none, is not accepted', async (t) => {
  const { w, ghost, runs } = await envelopeWorld(t, ['frame-other-physical', 'frame-no-physical']);
  const [other, none] = runs as [EnvelopeRun, EnvelopeRun];
  t.ok(other.claim.physicalIdentityDigest && none.claim.physicalIdentityDigest, 'fixture: the claims carry the physical database their readings opened');
  // The same URL and realm, an Applied account, but another physical database (a database recreated under its name).
  await ghostRun(w, ghost, other, { log: framed(runResult(other.claim, other.plan, 'applied', { physicalIdentityDigest: sha256Digest('another cluster'), physicalIdentityKind: 'system-identifier' })), exitCode: 0 });
  await ghostRun(w, ghost, none, { log: framed(runResult(none.claim, none.plan, 'applied', { physicalIdentityDigest: undefined, physicalIdentityKind: undefined })), exitCode: 0 });
  for (const [run, reason] of [[other, /^TargetMismatch: the run reports another physical database/], [none, /^TargetUnconfirmed: the run does not report which physical database it opened/]] as const) {
    await t.test(run.name, async (t) => {
      const m = await retired(w, run.name, run.claim);
      await assertGhostOnly(t, w, run);
      assertUnknown(t, m, run.claim, reason);
      await assertUntouchedAndNotReplayed(t, w, run.name, run.db);
    });
  }
});

t.test('the termination summary stands in for a missing frame only where it agrees with the log', async (t) => {
  const { w, ghost, runs } = await envelopeWorld(t, ['log-gone', 'header-agrees', 'header-disagrees']);
  const [gone, agrees, disagrees] = runs as [EnvelopeRun, EnvelopeRun, EnvelopeRun];
  const failed = (d: Dispatched) => runResult(d.claim, d.plan, 'failed');
  const summaryOf = (d: Dispatched) => encodeSummary(summaryFor(failed(d)));
  const headerOf = (text: string) => `${text.split('\n')[0]}\n`;
  // The log is gone (the Node lost it); the log ends inside the summary's own frame; the log ends inside another frame.
  await ghostRun(w, ghost, gone, { exitCode: 0, message: summaryOf(gone) });
  await ghostRun(w, ghost, agrees, { log: `ptah-runner: a diagnostic line\n${headerOf(encodeFrame(failed(agrees)))}`, exitCode: 0, message: summaryOf(agrees) });
  const otherFrame = encodeFrame(runResult(disagrees.claim, disagrees.plan, 'applied'));
  await ghostRun(w, ghost, disagrees, { log: headerOf(otherFrame), exitCode: 0, message: summaryOf(disagrees) });

  for (const [run, what] of [[gone, 'when the log is gone'], [agrees, 'when it names the frame the log ends inside']] as const) {
    await t.test(`it is read ${what}`, async (t) => {
      const m = await retired(w, run.name, run.claim);
      await assertGhostOnly(t, w, run);
      t.match(m.status?.lastRun, { outcome: 'Failed', operationID: run.claim.id, message: 'executor_failed (from the runner\'s termination summary)' },
        'accounted from the summary: the only account that says it came from one');
      t.notOk(m.status?.unresolvedRun, 'nothing is unresolved');
      await assertUntouchedAndNotReplayed(t, w, run.name, run.db);
    });
  }
  await t.test('it is refused when the log holds the header of another frame', async (t) => {
    const m = await retired(w, disagrees.name, disagrees.claim);
    await assertGhostOnly(t, w, disagrees);
    assertUnknown(t, m, disagrees.claim, /^NoResult: no result frame: the log ends inside a frame/);
    const event = await eventAbout(w, m.metadata.uid!, 'TerminationSummaryRefused', 'does not agree with the frame headers in its log');
    t.ok(event, 'the refusal is announced');
    await assertUntouchedAndNotReplayed(t, w, disagrees.name, disagrees.db);
  });
});
