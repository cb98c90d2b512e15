// A person's settlement of a schema proof no reading can finish, on the real control plane, runner and PostgreSQL
// with a real manager process. Seed: "Only deletion and a person's settlement end a proof that no read can finish";
// issue #22 S24: the migration's way (an acknowledgment stamped by admission, naming the Apply, settled by the
// manager and followed by a fresh reading before anything is planned), one mechanism for both families.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import t from 'tap';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema, PtahSchemaRunAcknowledgment } from '../../src/shared/api/schema-kinds.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { waitFor } from '../../tools/stack/wait.js';
import type { V1Pod } from '@kubernetes/client-node';
import { JOB_ANNOTATIONS } from '../../src/shared/job/metadata.js';
import { crashWorld, type CrashWorld } from './crash-world.js';
import { eventAbout, eventsAbout } from './migration-world.js';
import { sharedPostgresUrl } from '../../tools/stack/postgres.js';
import { queryOnce } from './executor-helpers.js';
import { appliesIn, NAME, PRODUCTS, proofOwedWithNoManager, schemaNow } from './running-applies.js';
import { WAIT_MS } from './schema-world.js';

const run = promisify(execFile);

t.test('a proof no reading can finish is settled by a person\'s acknowledgment, in their name, and the database is read again before anything is planned', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, 'acknowledged-proof');
  const applyID = held.claim.id;
  // While no manager runs, the database the Apply ran against cannot be reached (its Secret names one that does not
  // exist): every proof reading fails, and outside deletion a failed reading is only run again.
  const schema = await schemaNow(w);
  const secret = schema.status!.pendingObservation!.target.urlFrom;
  const original = held.db.url;
  const gone = new URL(original);
  gone.pathname = '/ptah_no_such_database';
  const pointAt = (url: string) => w.admin.patch({ apiVersion: 'v1', kind: 'Secret', namespace: w.ns, name: secret.name }, { stringData: { [secret.key]: url } }, 'merge');
  await pointAt(gone.toString());
  await w.admin.patch(w.ref('PtahSchema', NAME), { spec: { execution: { failureRetryInterval: '5s' } } }, 'merge');

  const acknowledge = (operationID: string) => acknowledgeAs(w, schema, operationID, 'ack');
  await t.rejects(acknowledge(`sha256:${'0'.repeat(64)}`), /not sha256:0{64} which this acknowledgment names/, 'admission refuses an acknowledgment naming another operation');

  await cw.startManager();
  await waitFor(async () => ((await schemaNow(w)).status?.activeOperation?.attempt ?? 0) >= 3 ? true : undefined,
    { what: 'the proof\'s reading to fail and be run again, twice', timeoutMs: 2 * WAIT_MS });
  const stuck = await schemaNow(w);
  t.equal(stuck.status?.pendingObservation?.applyOperationID, applyID, 'fixture: the proof stays owed while its reading keeps failing');

  // The person's way: `kubectl ptah acknowledge`, as the approver, which names the Apply the proof is owed for.
  const cli = await run(process.execPath, ['--import', 'tsx', 'src/cli/kubectl-ptah.ts', '--kubeconfig', sharedCluster().state.kubeconfigs.approver,
    'acknowledge', NAME, '--kind', 'schema', '-n', w.ns], { cwd: REPO_ROOT, timeout: 60_000, env: { ...process.env, KUBECONFIG: '' } });
  t.match(cli.stdout, new RegExp(`^ptahschemarunacknowledgment/${NAME}-ack-\\w+ created: acknowledges \\w+ Apply ${applyID} as alice`), `the CLI says what it created: ${cli.stdout.trim()}`);
  const [ack] = await w.admin.list<PtahSchemaRunAcknowledgment>(API_VERSION, KINDS.PtahSchemaRunAcknowledgment.kind, w.ns);
  if (!ack) throw new Error('kubectl ptah acknowledge created no PtahSchemaRunAcknowledgment');
  t.same(ack.spec.schemaRef, { name: NAME, uid: schema.metadata.uid }, 'it names the schema by name and UID');
  t.equal(ack.spec.operationID, applyID, 'and the Apply whose proof is owed');
  t.equal(ack.spec.acknowledgedBy?.username, 'alice', `admission stamped who acknowledged it (${ack.spec.acknowledgedBy?.username})`);
  const settled = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.pendingObservation ? undefined : s;
  }, { what: 'the acknowledgment to end the proof', timeoutMs: WAIT_MS });
  t.match(settled.status?.resolvedProof, { operationID: applyID, acknowledgmentRef: { name: ack.metadata.name, uid: ack.metadata.uid }, acknowledgedBy: { username: 'alice' } },
    'status.resolvedProof names the Apply, the acknowledgment and who made it');
  t.notOk(settled.status?.applied?.operationID === applyID, 'the Apply is not attributed: nothing proved what it did');

  // The write that ended the proof: no record, its release staged, no plan and no claim of an Apply in it.
  const ending = held.states.find((s) => !s.status?.pendingObservation && s.status?.resolvedProof?.operationID === applyID);
  t.ok(ending, 'a stored version ends the proof with the resolution in the same write');
  t.equal(ending?.status?.pendingLockRelease?.operationID ?? applyID, applyID, 'the release that write owes is the Apply\'s (or was already made)');
  t.notOk(ending?.status?.plan, 'and it names no plan');

  const consumed = await waitFor(async () => (conditionOf(await ackNow(w, ack), 'Consumed') ? true : undefined), { what: 'the acknowledgment marked Consumed', timeoutMs: WAIT_MS });
  t.ok(consumed, 'the acknowledgment is marked Consumed');
  const event = await eventAbout(w, schema.metadata.uid!, 'ProofAcknowledged', applyID);
  t.match(event.note, /alice/, `a Normal Event names who acknowledged it: ${event.note}`);
  await t.rejects(acknowledge(applyID), /owes no proof/, 'admission refuses a second acknowledgment: no proof is owed any more');

  // The database comes back: the schema reads it afresh and finds nothing to do. The Apply ran once, by the Apply.
  await pointAt(original);
  const readAgain = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? s : undefined;
  }, { what: 'the schema to read the database again and be ready', timeoutMs: 2 * WAIT_MS });
  t.notOk(readAgain.status?.plan, 'the fresh reading found nothing to plan');
  const afterAck = held.states.slice(held.states.indexOf(ending!));
  t.same(afterAck.filter((s) => s.status?.activeOperation?.type === 'Apply').length, 0, 'no Apply was claimed after the acknowledgment');
  t.ok(afterAck.some((s) => s.status?.activeOperation?.type === 'Plan' || s.status?.activeOperation?.type === 'Observe'), 'a reading ran after it');
  t.same(await appliesIn(w, held.db), [applyID], 'the database applied the plan once');
});

t.test('an acknowledgment made while a Pod of the Apply may still run settles nothing until that Pod has stopped', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, 'early-ack');
  const applyID = held.claim.id;
  const schema = await schemaNow(w);
  // A Pod carrying the Apply's operation ID is one of its Pods to the manager (it may still write) until it stops.
  const straggler = await w.admin.create<V1Pod>({
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: 'apply-straggler', namespace: w.ns, annotations: { [JOB_ANNOTATIONS.operationId]: applyID } },
    spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'ptah-fixture/sh:test', args: ['sleep 600'] }] },
  });
  await waitFor(async () => ((await podNow(w, straggler)).status?.phase === 'Running' ? true : undefined), { what: 'the straggler Pod to run', timeoutMs: WAIT_MS });
  const ack = await acknowledgeAs(w, schema, applyID, 'early');
  t.ok(ack.spec.acknowledgedBy, 'fixture: admitted and stamped while the proof is owed');
  await cw.startManager();

  const counted = await waitFor(async () => {
    const pending = (await schemaNow(w)).status?.pendingObservation;
    return !pending || (pending.applyPodCount ?? 0) >= 2 ? { pending } : undefined;
  }, { what: 'the manager to count the straggler as a Pod of the Apply (or to end the proof)', timeoutMs: WAIT_MS });
  t.ok(counted.pending, 'the manager counts the straggler as a Pod of the Apply, and the proof stays owed');
  // Two proof polls (5 s each) while the straggler runs.
  await new Promise((resolve) => setTimeout(resolve, 12_000));
  t.equal((await podNow(w, straggler)).status?.phase, 'Running', 'fixture: the straggler still runs');
  const during = await schemaNow(w);
  t.equal(during.status?.pendingObservation?.applyOperationID, applyID, 'the proof stays owed while a Pod of the Apply may still run');
  t.notOk(held.states.some((s) => s.status?.resolvedProof), 'and no write ended it by the acknowledgment');
  t.notOk(conditionOf(await ackNow(w, ack), 'Consumed'), 'the acknowledgment is not consumed');

  // The straggler is stopped (deleted at once) and gone from the API server: only then may the proof end.
  const stopping = Date.now();
  await w.admin.delete({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: straggler.metadata!.name! }, { gracePeriodSeconds: 0 });
  await waitFor(async () => ((await w.admin.tryGet<V1Pod>({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: straggler.metadata!.name! })) ? undefined : true),
    { what: 'the straggler to be gone', timeoutMs: WAIT_MS });
  const ended = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.pendingObservation ? undefined : s;
  }, { what: 'the proof to end once the straggler stopped', timeoutMs: 2 * WAIT_MS });
  t.equal(ended.status?.resolvedProof?.operationID, applyID, 'the acknowledgment ended the proof, once no Pod of the Apply could run');
  t.ok(Date.parse(ended.status!.resolvedProof!.resolvedAt) >= stopping, `and only then (${ended.status?.resolvedProof?.resolvedAt}, straggler deleted at ${new Date(stopping).toISOString()})`);
  await waitFor(async () => (conditionOf(await ackNow(w, ack), 'Consumed') ? true : undefined), { what: 'the acknowledgment marked Consumed', timeoutMs: WAIT_MS });
  t.same(await appliesIn(w, held.db), [applyID], 'the database applied the plan once');
});

t.test('an acknowledgment of a schema that owes nothing, or of another schema, settles nothing and is refused by admission', async (t) => {
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, 'nothing-owed');
  const schema = await schemaNow(w);
  await t.rejects(acknowledgeAs(w, { ...schema, metadata: { ...schema.metadata, uid: '00000000-0000-4000-8000-000000000000' } }, held.claim.id, 'wrong-uid'),
    /uid/, 'admission refuses an acknowledgment naming the schema under another UID');
  await cw.startManager();
  await waitFor(async () => {
    const s = await schemaNow(w);
    return !s.status?.pendingObservation && s.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? s : undefined;
  }, { what: 'the proof to be read and the schema ready', timeoutMs: 2 * WAIT_MS });
  t.notOk((await schemaNow(w)).status?.resolvedProof, 'the reading, not a person, settled the proof');
  await t.rejects(acknowledgeAs(w, schema, held.claim.id, 'late'), /owes no proof; there is nothing to acknowledge/, 'admission refuses one once nothing is owed');
});

t.test('a database replaced under the URL the Apply ran against is not read as its proof; a person\'s acknowledgment ends the proof', async (t) => {
  // Issue #22 S10: the proof compares the physical database too. Dropped and created again under its name (a restore,
  // say), the URL and so the target identity are the same, but what the Apply did cannot be read from it.
  const cw = await crashWorld(t, { schemas: true });
  const { w } = cw;
  const held = await proofOwedWithNoManager(t, cw, 'replaced-db');
  const applyID = held.claim.id;
  const owed = await schemaNow(w);
  t.ok(owed.status?.pendingObservation?.physicalIdentityDigest, 'the proof records the physical database the Apply ran against');
  await held.session.end();
  await queryOnce(sharedPostgresUrl(), `DROP DATABASE "${held.db.name}" WITH (FORCE)`);
  await queryOnce(sharedPostgresUrl(), `CREATE DATABASE "${held.db.name}" TEMPLATE template0`);
  await w.sql(held.db, PRODUCTS);
  await w.admin.patch(w.ref('PtahSchema', NAME), { spec: { execution: { failureRetryInterval: '5s' } } }, 'merge');
  await cw.startManager();

  const refused = await waitFor(async () => (await eventsAbout(w, owed.metadata.uid!, 'OperationRetried')).find((e) => e.note?.includes('another physical database')),
    { what: 'the proof reading refused for reaching another physical database', timeoutMs: WAIT_MS });
  t.match(refused.note, /Observe attempt \d+ .*reached another physical database under the same URL than the Apply it proves/, `the proof's reading is refused: ${refused.note}`);
  await waitFor(async () => ((await schemaNow(w)).status?.activeOperation?.attempt ?? 0) >= 3 ? true : undefined,
    { what: 'the proof reading refused twice', timeoutMs: 2 * WAIT_MS });
  t.ok(held.states.every((s) => !s.status?.pendingObservation?.planRequired), 'no observation of the replacement was taken as the proof\'s');
  t.equal((await schemaNow(w)).status?.pendingObservation?.applyOperationID, applyID, 'the proof stays owed');

  const ack = await acknowledgeAs(w, owed, applyID, 'replaced');
  const ended = await waitFor(async () => {
    const s = await schemaNow(w);
    return s.status?.pendingObservation ? undefined : s;
  }, { what: 'the acknowledgment to end the proof', timeoutMs: WAIT_MS });
  t.match(ended.status?.resolvedProof, { operationID: applyID, acknowledgmentRef: { uid: ack.metadata.uid } }, 'the person\'s acknowledgment ended it');
  const next = await waitFor(async () => {
    const at = held.states.findIndex((s) => s.status?.resolvedProof?.operationID === applyID);
    return at < 0 ? undefined : held.states.slice(at).map((s) => s.status?.activeOperation).find((c) => c !== undefined);
  }, { what: 'a claim after the proof ended', timeoutMs: WAIT_MS });
  t.equal(next.type, 'Observe', 'the replacement is read afresh before anything is planned');
});

const podNow = (w: CrashWorld['w'], pod: V1Pod) => w.admin.get<V1Pod>({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name: pod.metadata!.name! });
const ackNow = (w: CrashWorld['w'], ack: PtahSchemaRunAcknowledgment) =>
  w.admin.get<PtahSchemaRunAcknowledgment>({ apiVersion: API_VERSION, kind: KINDS.PtahSchemaRunAcknowledgment.kind, namespace: w.ns, name: ack.metadata.name! });
const conditionOf = (ack: PtahSchemaRunAcknowledgment, type: string) => ack.status?.conditions?.find((c) => c.type === type && c.status === 'True');

/** A PtahSchemaRunAcknowledgment of `schema` naming `operationID`, created by the approver (admission stamps them). */
function acknowledgeAs(w: CrashWorld['w'], schema: PtahSchema, operationID: string, label: string): Promise<PtahSchemaRunAcknowledgment> {
  return w.approver.create<PtahSchemaRunAcknowledgment>({
    apiVersion: API_VERSION,
    kind: KINDS.PtahSchemaRunAcknowledgment.kind,
    metadata: { name: `${NAME}-${label}-${randomBytes(3).toString('hex')}`, namespace: w.ns },
    spec: { schemaRef: { name: NAME, uid: schema.metadata.uid! }, operationID },
  } as PtahSchemaRunAcknowledgment);
}
