// The seed's crash-window rows that only PtahSchema has, each proved by killing a real manager process (src/main.ts,
// running both controllers) right after the row's first write is stored, then asking a new manager what it makes of
// it: the plan's projection ConfigMaps before the dispatch marker (also run against a manager whose stage and mark
// steps are exchanged, where the same verdict must find the problem), the pendingBindingRetirement record written
// in the patch that installs a new execution-binding epoch, and a schema Apply adopted beside two migration Applies.
import t, { type Test } from 'tap';
import type { V1ConfigMap, V1Job, V1Lease } from '@kubernetes/client-node';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PendingObservation, PtahSchema, PtahSchemaApproval, PtahSchemaPlan, PtahSchemaStatus } from '../../src/shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { PLAN_LABEL } from '../../src/shared/planstore.js';
import type { FiredKill, KillTrigger, ProxiedWrite, RecordedRequest } from '../harness/crash-proxy.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { RUNNER_IMAGE_OTHER_EXECUTOR } from '../../tools/stack/kubelet/images.js';
import { variantDir, variantExecutorIdentity } from '../../tools/stack/variants.js';
import { LEADING } from '../harness/manager-process.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { leaseNameFor } from '../../src/shared/realm.js';
import { LEASE_EPOCH_ANNOTATION } from '../../src/shared/targetlock.js';
import { crashSchemaWorld, crashWorld, podsOf, schemaStatusWrite, sleepingApply, within, type CrashWorld, type Swap } from './crash-world.js';
import { approvalConditionOf, approvalNamed, schemaJobsOf, WAIT_MS, watchSchemas, type SchemaWorld } from './schema-world.js';
import { applyClaim, heldSchemaApply, migrationAdoption, NAME, PRODUCTS } from './running-applies.js';
import { slowFiles } from './slow-apply.js';


type Body = { metadata?: { name?: string; labels?: Record<string, string>; ownerReferences?: { kind?: string; uid?: string }[] } } | undefined;
const isStored = (r: RecordedRequest) => r.status >= 200 && r.status < 300;
const jobRef = (w: SchemaWorld, name: string) => ({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name });
const CONFIGMAPS = /^\/api\/v1\/namespaces\/[^/]+\/configmaps$/;

/** A create of one of a plan's projection ConfigMaps: labelled with the plan and owned by a PtahSchemaPlan. */
const isProjectionCreate = (write: ProxiedWrite): boolean => write.method === 'POST' && CONFIGMAPS.test(write.path) &&
  Boolean((write.body as Body)?.metadata?.labels?.[PLAN_LABEL]) &&
  ((write.body as Body)?.metadata?.ownerReferences ?? []).some((r) => r.kind === KINDS.PtahSchemaPlan.kind);

/** The projection ConfigMaps of `plan` as stored now: labelled with it and owned by it as their controller. */
async function projectionsOf(w: SchemaWorld, plan: PtahSchemaPlan): Promise<V1ConfigMap[]> {
  const labelled = await w.admin.list<V1ConfigMap>('v1', 'ConfigMap', w.ns, { labelSelector: `${PLAN_LABEL}=${plan.metadata.name}` });
  return labelled.filter((cm) => cm.metadata?.ownerReferences?.some((r) => r.controller === true && r.kind === KINDS.PtahSchemaPlan.kind &&
    r.apiVersion === API_VERSION && r.uid === plan.metadata.uid));
}

/** A schema waiting for approval of its first plan (an empty database, PRODUCTS desired), with a manager running. */
async function awaitingApproval(tt: Test, order?: Swap): Promise<{ cw: CrashWorld<SchemaWorld>; db: TestDatabase; states: PtahSchema[]; plan: PtahSchemaPlan; waiting: PtahSchema }> {
  const cw = await crashSchemaWorld(tt);
  const { w } = cw;
  const db = await w.database('crash_schema');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', PRODUCTS);
  await cw.startManager(order);
  const states = await watchSchemas(tt, w, NAME);
  await w.createSchema({ name: NAME, artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  const waiting = await w.waitFor(NAME, 'its plan to wait for approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  return { cw, db, states, plan: await w.plan(NAME), waiting };
}

// ---- row 1: a schema plan's projection ConfigMaps → the dispatchStarted write ----

/**
 * The row's first write is the first projection create; a manager that marks before it stages writes the mark
 * first, so the kill is armed on whichever of the window's two writes comes first, and the verdict says which.
 */
const MARK = schemaStatusWrite('the dispatch marker', (s) => applyClaim(s)?.dispatchStarted === true, NAME);
const PROJECTION_OR_MARK: KillTrigger = {
  what: 'the first of a projection ConfigMap create and the Apply claim\'s dispatch marker',
  match: (write) => isProjectionCreate(write) || MARK.match(write),
};

/**
 * "Projections with no Job to mount them. The next pass reads them back, finds them matching and goes on; they are
 * owned by the plan and go with it." Returns the problems found (none for the real order).
 */
async function projectionRow(tt: Test, order?: Swap): Promise<string[]> {
  const { cw, db, states, plan } = await awaitingApproval(tt, order);
  const { w } = cw;
  const problems: string[] = [];
  const kill = cw.killOn(PROJECTION_OR_MARK);
  await w.approve(NAME);
  const fired: FiredKill = await within(kill, WAIT_MS, PROJECTION_OR_MARK.what, () => cw.proxy.disarm());

  // What the API server holds at the kill.
  const atKill = await w.get(NAME);
  const claim = applyClaim(atKill.status);
  if (!claim) return [`no Apply claim stood at the kill (${fired.write.method} ${fired.write.path})`];
  const projections = await projectionsOf(w, plan);
  const uidAtKill = new Map(projections.map((cm) => [cm.metadata!.name!, cm.metadata!.uid!]));
  const jobAtKill = await w.admin.tryGet<V1Job>(jobRef(w, claim.jobName));
  if (!isProjectionCreate(fired.write)) problems.push(`the kill came on ${fired.write.method} ${fired.write.path}: a claim marked before its projections exist`);
  else if (claim.dispatchStarted) problems.push('a claim marked before its projections exist');
  if (projections.length === 0) problems.push('no projection ConfigMap of the plan stood at the kill');
  const killedOn = (fired.write.body as Body)?.metadata?.name;
  if (isProjectionCreate(fired.write) && (!killedOn || !uidAtKill.has(killedOn))) problems.push(`the projection ${killedOn} the kill came on is not stored, labelled and owned by plan ${plan.metadata.name}`);
  if (claim.jobUID) problems.push('the claim named a Job UID at the kill');
  if (jobAtKill) problems.push(`a Job stood under the reserved name ${claim.jobName} at the kill`);
  for (const cm of projections) {
    const owner = cm.metadata?.ownerReferences?.find((r) => r.uid === plan.metadata.uid);
    if (!plan.spec.chunks.includes(cm.metadata!.name!)) problems.push(`projection ${cm.metadata?.name} is not under one of the plan's chunk names`);
    if (cm.metadata?.ownerReferences?.length !== 1 || owner?.blockOwnerDeletion !== true) problems.push(`projection ${cm.metadata?.name} is not owned by the plan alone, blocking its deletion`);
    if (cm.immutable !== true) problems.push(`projection ${cm.metadata?.name} is not immutable`);
  }

  // The new manager (always the real order).
  const next = await cw.startManager();
  const ledAt = await next.waitForLog(LEADING, 60_000);
  const end = await w.waitFor(NAME, `claim ${claim.id} to end InSync, or to be recorded with another outcome`, (s) => {
    if (s.status?.phase === 'InSync' && s.status.applied?.operationID === claim.id && !s.status.pendingObservation && !s.status.activeOperation) return s;
    const pending = s.status?.pendingObservation;
    if (pending?.applyOperationID === claim.id && pending.outcome !== 'ApplySucceeded') return s;
    return s.status?.phase === 'Blocked' ? s : undefined;
  }).catch((e: Error) => {
    problems.push(e.message);
    return undefined;
  });
  if (end && !(end.status?.phase === 'InSync' && end.status.applied?.operationID === claim.id)) {
    problems.push(`the schema ended ${end.status?.phase} (proof owed: ${end.status?.pendingObservation?.outcome ?? 'none'}; applied: ${end.status?.applied?.operationID ?? 'nothing'}), not InSync naming the claim's operation`);
  }

  // It read the projections back (its create answered AlreadyExists, then a read of that name), and kept them.
  const recovery = cw.proxy.requests.filter((r) => r.at >= fired.killedAt);
  for (const [name, uid] of uidAtKill) {
    const createdAgain = recovery.findIndex((r) => isProjectionCreate(r) && (r.body as Body)?.metadata?.name === name);
    if (createdAgain < 0 || recovery[createdAgain]!.status !== 409) problems.push(`the new manager did not meet projection ${name} as already stored (${recovery[createdAgain]?.status ?? 'no create'})`);
    else if (!recovery.slice(createdAgain).some((r) => r.method === 'GET' && r.path.endsWith(`/configmaps/${name}`))) problems.push(`the new manager did not read projection ${name} back`);
    const now = await w.admin.tryGet<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', namespace: w.ns, name });
    if (now?.metadata?.uid !== uid) problems.push(`projection ${name} was replaced (UID ${now?.metadata?.uid}, ${uid} at the kill)`);
  }
  if ((await projectionsOf(w, plan)).length !== plan.spec.chunks.length) problems.push(`the plan's ${plan.spec.chunks.length} chunks are not all projected`);

  // And went on: the same claim dispatched, exactly one Apply Job ever, the plan applied once under the claim.
  if (!states.some((s) => applyClaim(s.status)?.id === claim.id && applyClaim(s.status)?.jobUID)) problems.push('the claim was never dispatched');
  const jobs = schemaJobsOf(w, 'apply', NAME);
  if (jobs.length !== 1 || jobs[0]?.metadata?.name !== claim.jobName) problems.push(`${jobs.length} Apply Jobs were seen (${jobs.map((j) => j.metadata?.name).join(', ')}), not the one under ${claim.jobName}`);
  const creates = cw.proxy.writes().filter((r) => r.method === 'POST' && /\/jobs$/.test(r.path) && (r.body as Body)?.metadata?.name === claim.jobName && isStored(r)).length;
  if (creates !== 1) problems.push(`${creates} creates of ${claim.jobName} were stored, not one`);
  const applies = await w.applies(db);
  if (applies.length !== 1 || applies[0]?.operationId !== claim.id) problems.push(`schema_applies holds ${applies.map((a) => a.operationId).join(', ') || 'nothing'}, not the claim's operation once`);
  else if (applies[0].planContentDigest !== plan.spec.contentDigest) problems.push('the database applied other plan content than the approved plan\'s');

  // They are owned by the plan and go with it: the schema deleted, its plan goes, and the projections with it.
  if (end?.status?.phase === 'InSync' && uidAtKill.size > 0) {
    await w.admin.delete(w.ref('PtahSchema', NAME));
    await waitFor(async () => {
      const left = await Promise.all([...uidAtKill.keys()].map((name) => w.admin.tryGet<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', namespace: w.ns, name })));
      const plans = await w.admin.tryGet(w.ref('PtahSchemaPlan', plan.metadata.name!));
      return left.every((cm) => cm === undefined) && !plans ? true : undefined;
    }, { what: 'the plan and its projections to go with the schema', timeoutMs: 90_000 }).catch((e: Error) => problems.push(e.message));
  }
  tt.comment(`killed ${fired.killedAt - fired.storedAt} ms after ${fired.write.method} ${fired.write.path} was stored; the new manager led ${ledAt - fired.killedAt} ms after the kill`);
  if (problems.length > 0) tt.comment(`problems: ${problems.join('; ')}`);
  return problems;
}

t.test('a schema plan\'s projection ConfigMaps → the dispatchStarted write: killed after the first projection, the new manager reads them back and applies once', async (tt) => {
  tt.same(await projectionRow(tt), []);
});

t.test('a schema plan\'s projection ConfigMaps → the dispatchStarted write, against a manager that marks before it stages: the verdict finds it', async (tt) => {
  const problems = await projectionRow(tt, ['stage', 'mark']);
  tt.ok(problems.some((p) => p.includes('a claim marked before its projections exist')), 'the wrong order is caught: "a claim marked before its projections exist"');
});

// ---- row 2: a schema's pendingBindingRetirement, written in the patch that installs a new epoch ----

t.test('a schema\'s pendingBindingRetirement → the retired plan\'s approvals marked stale: killed after the rotation, the new manager works the record off first', async (tt) => {
  const { cw, db, states, plan: p1, waiting } = await awaitingApproval(tt);
  const { w } = cw;
  const epoch1 = waiting.status!.executionBinding!.epoch;
  tt.equal(waiting.status?.executionBinding?.executorIdentity, ownExecutorIdentity(), 'fixture: the first epoch binds this checkout\'s executor');
  tt.equal(p1.spec.executionBindingID, epoch1, 'fixture: the plan is of the first epoch');

  // An approval created while no manager runs (the manager's webhooks go with it; the world's service admits it).
  await cw.killNow();
  await cw.unregisterManagerWebhooks();
  // Until the API server has noticed the webhooks are gone, a create still meets the dead manager's and is refused.
  const a1 = await waitFor(() => w.approve(NAME), { what: 'an approval admitted with no manager running', timeoutMs: 30_000 });
  const fresh = await approvalNamed(w, a1.metadata.name!);
  tt.notOk(approvalConditionOf(fresh, 'Consumed'), 'fixture: the approval is unspent');
  tt.notOk(approvalConditionOf(fresh, 'Stale'), 'fixture: the approval is not stale');

  const rotation = schemaStatusWrite('the status write installing a new epoch with status.pendingBindingRetirement',
    (s) => s.executionBinding !== undefined && s.executionBinding.epoch !== epoch1 && s.pendingBindingRetirement !== undefined, NAME);
  const kill = cw.killOn(rotation);
  // A release that changes the executor: another build, run from its own tree, whose runner image carries it.
  await cw.startManager(undefined, { root: variantDir('executor'), runnerImage: RUNNER_IMAGE_OTHER_EXECUTOR, revision: 'other-executor' });
  const registeredAt = Date.now();
  const fired = await within(kill, WAIT_MS, rotation.what, () => cw.proxy.disarm());
  tt.ok(fired.storedAt > registeredAt, 'fixture: the rotation was written after the manager\'s webhooks were registered again');

  // What the API server holds at the kill: the new epoch and the record side by side, the approval not yet stale.
  const atKill = await w.get(NAME);
  const record = atKill.status?.pendingBindingRetirement;
  const epoch2 = atKill.status?.executionBinding?.epoch;
  tt.ok(epoch2 && epoch2 !== epoch1, 'at the kill: a new epoch is installed');
  tt.equal(atKill.status?.executionBinding?.executorIdentity, variantExecutorIdentity('executor'), 'at the kill: the new epoch binds the other release\'s executor');
  tt.equal(record?.retiredEpoch, epoch1, 'at the kill: the record names the retired epoch');
  tt.same(record?.plan, { name: p1.metadata.name, uid: p1.metadata.uid, fingerprint: p1.spec.fingerprint }, 'at the kill: the record names the retired plan');
  tt.notOk(record?.job, 'at the kill: no Job is owed (nothing was dispatched)');
  tt.notOk(atKill.status?.plan, 'at the kill: the retired plan has left status.plan');
  tt.notOk(atKill.status?.activeOperation, 'at the kill: no claim');
  const atKillApproval = await approvalNamed(w, a1.metadata.name!);
  tt.notOk(approvalConditionOf(atKillApproval, 'Stale'), 'at the kill: the approval is not yet stale');
  tt.notOk(approvalConditionOf(atKillApproval, 'Consumed'), 'at the kill: the approval is unspent');

  // A new manager of yet another executor (the checkout's again: a rollback). It works the record off before
  // anything else, and only then rotates again: no other rotation starts while the record is present.
  const next = await cw.startManager();
  tt.comment(`killed ${fired.killedAt - fired.storedAt} ms after the rotation was stored; the new manager led ${(await next.waitForLog(LEADING, 60_000)) - fired.killedAt} ms after the kill`);
  const stale = await waitFor(async () => {
    const a = await approvalNamed(w, a1.metadata.name!);
    return approvalConditionOf(a, 'Stale')?.status === 'True' ? a : undefined;
  }, { what: 'the retired plan\'s approval to go Stale', timeoutMs: WAIT_MS });
  tt.equal(approvalConditionOf(stale, 'Stale')?.reason, 'ExecutionBindingChanged', 'the approval went Stale because the binding changed');
  const republished = await w.waitFor(NAME, 'a new plan under the rollback\'s epoch, no record left',
    (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan && s.status.executionBinding?.executorIdentity === ownExecutorIdentity() &&
      !s.status.pendingBindingRetirement ? s : undefined));

  const family = new RegExp(`^/api(s/(${API_VERSION}|batch/v1))?/.*/(${[KINDS.PtahSchema, KINDS.PtahSchemaPlan, KINDS.PtahSchemaApproval].map((k) => k.plural).join('|')}|jobs|configmaps)(/|$)`);
  const recovery = cw.proxy.writes().filter((r) => r.at >= fired.killedAt && isStored(r) && family.test(r.path));
  const first = recovery[0];
  tt.match(first?.path, new RegExp(`/${KINDS.PtahSchemaApproval.plural}/${a1.metadata.name}/status$`), `the new manager's first write marks the approval (it was ${first?.method} ${first?.path})`);
  tt.equal((first?.body as Pick<PtahSchemaApproval, 'status'> | undefined)?.status?.conditions?.find((c) => c.type === 'Stale')?.status, 'True', 'and marks it Stale');
  const schemaWrites = recovery.filter((r) => r.path.includes(`/${KINDS.PtahSchema.plural}/${NAME}`));
  tt.notOk((schemaWrites[0]?.body as { status?: PtahSchemaStatus } | undefined)?.status?.pendingBindingRetirement, 'its first write to the schema removes the record');

  const approvalWrites = cw.proxy.writes().filter((r) => r.path.includes(`/${a1.metadata.name}`));
  tt.notOk(approvalWrites.some((r) => (r.body as Pick<PtahSchemaApproval, 'status'> | undefined)?.status?.conditions?.some((c) => c.type === 'Consumed')), 'no write ever spent the approval');
  tt.notOk(approvalConditionOf(await approvalNamed(w, a1.metadata.name!), 'Consumed'), 'the approval is never Consumed');
  const atKillIndex = states.findIndex((s) => s.metadata.resourceVersion === atKill.metadata.resourceVersion);
  tt.ok(atKillIndex >= 0, 'the watch saw the version stored at the kill');
  const afterKill = states.slice(Math.max(atKillIndex, 0));
  const holdingRecord = afterKill.filter((s) => s.status?.pendingBindingRetirement?.retiredEpoch === epoch1);
  tt.ok(holdingRecord.length > 0, 'fixture: the watch saw the record');
  tt.same([...new Set(holdingRecord.map((s) => s.status?.executionBinding?.epoch))], [epoch2], 'no other rotation while the record is present: every version holding it names the epoch installed with it');
  const lastHolding = afterKill.lastIndexOf(holdingRecord.at(-1)!);
  const firstRotatedAgain = afterKill.findIndex((s) => s.status?.executionBinding && s.status.executionBinding.epoch !== epoch2);
  tt.ok(firstRotatedAgain > lastHolding, `the rollback rotated only after the record was gone (version ${firstRotatedAgain} of the watch, the record last seen at ${lastHolding})`);
  tt.notOk(states.some((s) => applyClaim(s.status)), 'no Apply was ever claimed');
  tt.same(schemaJobsOf(w, 'apply', NAME), [], 'no Apply Job was ever created');
  tt.same(await w.applies(db), [], 'the database records no Apply');
  tt.same(await w.tables(db), [], 'and is untouched');
  const p2 = await w.plan(NAME);
  const epoch3 = republished.status!.executionBinding!.epoch;
  tt.ok(epoch3 !== epoch1 && epoch3 !== epoch2, 'the rollback installed an epoch of its own');
  tt.equal(p2.spec.executionBindingID, epoch3, 'the new plan is published under it');
});

// ---- three Applies of three databases running when the manager is killed: two migrations and a schema ----

t.test('killed while Applies of three databases run (two PtahMigrations, one PtahSchema), the new manager adopts all three with the same Job, Pods and Lease epochs', async (tt) => {
  const cw = await crashWorld(tt, { schemas: true });
  const { w } = cw;
  await w.artifact('slow-r1', slowFiles(20));
  await cw.startManager();
  // Their own realms, so all three Applies run at once.
  const held = await heldSchemaApply(tt, cw, 'gamma');
  const running = await Promise.all(['alpha', 'beta'].map((name) => sleepingApply(cw, name, name)));
  tt.equal(held.pods.length, 1, 'fixture: one Pod runs the schema\'s Apply');
  const killedAt = await cw.killNow();
  const next = await cw.startManager();
  const ledAt = await next.waitForLog(LEADING, 60_000);
  tt.comment(`the new manager led ${ledAt - killedAt} ms after the kill`);

  // The schema's Apply still waits on the lock: the new manager supervises it (renews its realm) without replacing it.
  const realm = leaseNameFor(held.claim.coordinationDigest!);
  const renewed = await waitFor(async () => {
    const lease = await w.admin.get<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: w.ns, name: realm });
    return lease.spec?.renewTime && new Date(lease.spec.renewTime).getTime() > ledAt ? lease : undefined;
  }, { what: 'the new manager to renew the schema Apply\'s realm Lease', timeoutMs: 60_000 });
  tt.equal(renewed.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION], held.epoch, 'catalog: the realm Lease is renewed under the epoch it had before the kill');
  tt.equal(applyClaim((await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME))).status)?.jobUID, held.claim.jobUID, 'catalog: the claim still names the Job dispatched before the kill');
  await held.session.query('ROLLBACK');

  const synced = await waitFor(async () => {
    const s = await w.admin.get<PtahSchema>(w.ref('PtahSchema', NAME));
    return s.status?.phase === 'InSync' && s.status.applied?.operationID === held.claim.id && !s.status.pendingObservation ? s : undefined;
  }, { what: 'the schema InSync, its Apply proven', timeoutMs: WAIT_MS });
  tt.equal(synced.status?.applied?.operationID, held.claim.id, 'catalog: status.applied names the Apply dispatched before the kill');
  const schemaApplyJobs = [...w.jobsSeen.values()].filter((j) => j.metadata?.labels?.['operator.ptah.run/operation'] === 'apply' && j.metadata.labels['operator.ptah.run/schema'] === NAME);
  tt.same(schemaApplyJobs.map((j) => j.metadata?.uid), [held.claim.jobUID], 'catalog: no other Apply Job was ever created');
  tt.same(await podsOf(cw, held.claim.jobName), held.pods, 'catalog: the same Pods');
  const claims = held.states.map((s) => applyClaim(s.status)).filter((c): c is ActiveOperation => c?.id === held.claim.id && Boolean(c.jobUID));
  tt.same([...new Set(claims.map((c) => c.leaseEpoch))], [held.epoch], 'catalog: every stored version of the claim names the Lease epoch it held before the kill');
  tt.notOk(claims.some((c) => c.leaseContinuityLost), 'catalog: no continuity loss');
  const proofs = held.states.map((s) => s.status?.pendingObservation).filter((p): p is PendingObservation => p?.applyOperationID === held.claim.id);
  tt.ok(proofs.length > 0 && proofs.every((p) => p.leaseEpoch === held.epoch && p.applyJobUID === held.claim.jobUID && p.outcome === 'ApplySucceeded'),
    'catalog: the proof owed was the Apply\'s own success, from its Job, under the same Lease epoch');
  const rows = await w.sql<{ operation_id: string }>(held.db, 'SELECT operation_id FROM ptah_migrations.schema_applies ORDER BY seq');
  tt.same(rows.map((r) => r.operation_id), [held.claim.id], 'catalog: the database applied the plan once, under the claim');
  const columns = await w.sql<{ name: string }>(held.db, 'SELECT column_name AS name FROM information_schema.columns WHERE table_name = \'products\' ORDER BY ordinal_position');
  tt.same(columns.map((c) => c.name), ['id', 'sku', 'title', 'note'], 'catalog: the column was added');

  for (const r of running) tt.same(await migrationAdoption(cw, r), [], `${r.name}: adopted with the same Job, Pods and Lease epoch, applied once`);
});
