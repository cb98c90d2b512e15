// A PtahSchema deleted while it owes a proof, on the real control plane, runner and PostgreSQL with a real manager
// process. Seed: "Only deletion and a person's settlement end a proof that no read can finish", and "The schema
// finalizer refuses to come off while proof is owed". Deletion runs the proof (its Observe, then its Plan, under
// the Apply's Lease) when a reading can finish it, and ends it unread only when none can
// (src/controller/schema/unreadable.ts); a Warning Event says which it was.
import t, { type Test } from 'tap';
import type { V1Job, V1Lease } from '@kubernetes/client-node';
import { KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { JOB_ANNOTATIONS } from '../../src/shared/job/metadata.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { waitFor } from '../../tools/stack/wait.js';
import { crashWorld, type CrashWorld } from './crash-world.js';
import { eventAbout, eventsAbout } from './migration-world.js';
import { appliesIn, NAME, proofOwedWithNoManager, schemaNow, type HeldSchemaApply } from './running-applies.js';
import { WAIT_MS } from './schema-world.js';

/** A schema deleted with its Apply's proof owed, and what became of it once a manager ran. */
interface DeletedWithProof {
  cw: CrashWorld;
  held: HeldSchemaApply;
  /** The schema as it stood, deleting, before any manager saw it. */
  deleting: PtahSchema;
  /** When the manager that found it deleting started. */
  startedAt: number;
}

/**
 * The proof of a schema Apply owed with no manager running; `meanwhile` is what else happens then; a person deletes
 * the schema (its finalizer keeps it, the proof owed); a manager starts, and the schema goes once its finalizer does.
 */
async function deletedWithProofOwed(t: Test, key: string, meanwhile?: (w: CrashWorld['w'], held: HeldSchemaApply) => Promise<unknown>): Promise<DeletedWithProof> {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, key);
  await meanwhile?.(w, held);
  await w.admin.delete(w.ref('PtahSchema', NAME));
  const deleting = await schemaNow(w);
  t.ok(deleting.metadata.deletionTimestamp, 'fixture: the schema is being deleted');
  t.equal(deleting.status?.pendingObservation?.applyOperationID, held.claim.id, 'fixture: with the Apply\'s proof owed');
  t.notOk(deleting.status?.activeOperation, 'fixture: and nothing claimed');
  const startedAt = Date.now();
  await cw.startManager();
  await waitFor(async () => ((await w.admin.tryGet<PtahSchema>(w.ref('PtahSchema', NAME))) ? undefined : true),
    { what: 'the deleted schema to go', timeoutMs: 2 * WAIT_MS });
  return { cw, held, deleting, startedAt };
}

/** What every way out of a deletion owes: the realm handed back, and the Apply's SQL run once, by the Apply. */
async function realmBackAppliedOnce(t: Test, { cw: { w }, held }: DeletedWithProof): Promise<void> {
  const lease = await w.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: leaseNameFor(held.claim.coordinationDigest!) });
  t.notOk(lease?.spec?.holderIdentity, 'the realm is handed back');
  t.same(await appliesIn(w, held.db), [held.claim.id], 'the database applied the plan once');
}

/** The Warning Event that says the proof was discarded unread, for `reason`. */
async function discardedBecause(t: Test, { cw: { w }, deleting }: DeletedWithProof, reason: string): Promise<string> {
  const event = await eventAbout(w, deleting.metadata.uid!, 'ProofDiscarded', reason);
  t.equal(event.type, 'Warning', `a Warning Event says the proof was discarded unread, and why: ${event.note}`);
  t.same(await eventsAbout(w, deleting.metadata.uid!, 'ProofReadOnDeletion'), [], 'none says it was read');
  return event.note ?? '';
}

/** The proof's readings (claims that prove the held Apply) the status recorded while the schema was being deleted. */
const readingsOnDeletion = (held: HeldSchemaApply) => held.states
  .filter((s) => s.metadata.deletionTimestamp && s.status?.activeOperation?.proofOf === held.claim.id)
  .map((s) => s.status!.activeOperation!)
  .filter((c, i, all) => all.findIndex((o) => o.id === c.id && o.attempt === c.attempt) === i);

/** The Jobs created for the given reading claims. */
const jobsOf = (w: CrashWorld['w'], ids: readonly string[]): V1Job[] =>
  [...w.jobsSeen.values()].filter((j) => ids.includes(j.metadata?.annotations?.[JOB_ANNOTATIONS.operationId] ?? ''));

t.test('a schema deleted while it owes a proof: deletion reads it (Observe, then Plan, under the Apply\'s Lease), says so, and only then lets go', async (t) => {
  const deleted = await deletedWithProofOwed(t, 'deleted-proof');
  const { cw: { w }, held, deleting } = deleted;
  const readings = readingsOnDeletion(held);
  t.same([...new Set(readings.map((c) => c.type))], ['Observe', 'Plan'], 'the proof\'s Observe and then its Plan were claimed on deletion');
  t.ok(readings.every((c) => c.leaseEpoch === held.epoch), 'each under the Apply\'s Lease epoch');
  const jobs = jobsOf(w, readings.map((c) => c.id));
  t.equal(jobs.length, readings.length, `and each ran as a Job (${jobs.map((j) => j.metadata?.name).join(', ')})`);
  const proven = held.states.find((s) => s.metadata.deletionTimestamp && !s.status?.pendingObservation);
  t.equal(proven?.status?.applied?.operationID, held.claim.id, 'the Apply was proven converged before the record went');
  t.ok(held.states.filter((s) => s.status?.pendingObservation).every((s) => s.status!.pendingObservation!.leaseEpoch === held.epoch), 'the proof held the Apply\'s Lease epoch throughout');
  const event = await eventAbout(w, deleting.metadata.uid!, 'ProofReadOnDeletion', held.claim.id);
  t.equal(event.type, 'Warning', `a Warning Event says the proof was read on deletion: ${event.note}`);
  t.same(await eventsAbout(w, deleting.metadata.uid!, 'ProofDiscarded'), [], 'and none says it was discarded');
  await realmBackAppliedOnce(t, deleted);
});

t.test('changes found on deletion: the proof\'s Plan settles the proof as not converged and publishes no plan', async (t) => {
  // While no manager runs, someone takes the Apply's column away again: the proof's Plan finds a change to make.
  const deleted = await deletedWithProofOwed(t, 'deleted-changes', (w, held) => w.sql(held.db, 'ALTER TABLE products DROP COLUMN note'));
  const { cw, held, deleting, startedAt } = deleted;
  t.ok(readingsOnDeletion(held).some((c) => c.type === 'Plan'), 'the proof\'s Plan ran on deletion');
  const withheld = held.states.find((s) => s.metadata.deletionTimestamp && !s.status?.pendingObservation);
  t.equal(withheld?.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'PlanWithheld', 'the write that settled the proof withheld the plan');
  t.notOk(withheld?.status?.plan, 'and names no plan');
  t.notOk(withheld?.status?.applied?.operationID === held.claim.id, 'the Apply is not attributed');
  const published = cw.proxy.writes().filter((r) => r.at >= startedAt && r.method === 'POST' && r.path.endsWith(`/${KINDS.PtahSchemaPlan.plural}`));
  t.same(published.map((r) => r.status), [], 'the manager published no PtahSchemaPlan for the schema being deleted');
  const event = await eventAbout(cw.w, deleting.metadata.uid!, 'ProofReadOnDeletion', 'did not converge');
  t.equal(event.type, 'Warning', `a Warning Event says the proof was read and found the Apply not converged: ${event.note}`);
  const announced = (await eventsAbout(cw.w, deleting.metadata.uid!, 'PlanPublished')).filter((e) => Date.parse(e.eventTime ?? '') >= startedAt);
  t.same(announced.map((e) => e.note), [], 'no plan was announced on deletion');
  await realmBackAppliedOnce(t, deleted);
});

t.test('no reading can finish: the artifact deleted with the schema ends the proof unread, and the Event says why', async (t) => {
  // As `kubectl delete -f` of the whole sample does: the desired schema's ConfigMap goes with the schema.
  let artifact = '';
  const deleted = await deletedWithProofOwed(t, 'deleted-artifact', async (w) => {
    artifact = (await schemaNow(w)).status!.pendingObservation!.artifact.configMapName!;
    await w.admin.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: w.ns, name: artifact });
  });
  t.same(readingsOnDeletion(deleted.held), [], 'no proof reading was claimed');
  t.match(await discardedBecause(t, deleted, 'ArtifactGone'), artifact, 'the Event names the artifact');
  await realmBackAppliedOnce(t, deleted);
});

t.test('no reading can finish: a proof reading that fails again after it was run again on deletion ends the proof unread', async (t) => {
  // While no manager runs, the database the Apply ran against goes (its Secret names one that does not exist), and
  // a failed reading is run again after 5 s.
  const deleted = await deletedWithProofOwed(t, 'deleted-target', async (w, held) => {
    const secret = (await schemaNow(w)).status!.pendingObservation!.target.urlFrom;
    const gone = new URL(held.db.url);
    gone.pathname = '/ptah_no_such_database';
    await w.admin.patch({ apiVersion: 'v1', kind: 'Secret', namespace: w.ns, name: secret.name }, { stringData: { [secret.key]: gone.toString() } }, 'merge');
    await w.admin.patch(w.ref('PtahSchema', NAME), { spec: { execution: { failureRetryInterval: '5s' } } }, 'merge');
  });
  const readings = readingsOnDeletion(deleted.held);
  t.same(readings.map((c) => `${c.type} ${c.attempt}`), ['Observe 1', 'Observe 2'], 'the proof\'s Observe was run, and run once again');
  t.equal(jobsOf(deleted.cw.w, readings.map((c) => c.id)).length, 2, 'as two Jobs');
  t.match(await discardedBecause(t, deleted, 'ReadingKeepsFailing'), 'ptah_no_such_database', 'the Event says what the reading met');
  await realmBackAppliedOnce(t, deleted);
});
