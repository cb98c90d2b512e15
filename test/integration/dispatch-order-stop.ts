// The dispatch-order rows whose fault is the manager stopping right after a step's durable write, run as the
// crash-window suite runs its rows: the manager is a real process (src/main.ts, or the swapped test entry) behind
// the crash proxy, SIGKILLed once the API server has stored the step's write and before the manager hears so, and a
// fresh manager process (always the real order) takes over. Nothing the stopped manager held in memory survives
// into the next one, so what the next one does is decided by what the API server holds.
//
// A process has no passes to look between, so the in-process rows' invariants are judged twice over: on every write
// the managers made, in the order the proxy received them (each marked claim the API server stored, and the Job's
// create, against the writes stored before it), and on what the API server holds at the kill and while the new
// manager recovers. The final verdicts are the in-process rows' (finalProblems).
import type { V1Lease } from '@kubernetes/client-node';
import type { Test } from 'tap';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import type { DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { PLAN_LABEL } from '../../src/shared/planstore.js';
import { holderIdentityFor, leaseNameFor, realmDigestOf } from '../../src/shared/realm.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import type { KillTrigger, ProxiedWrite, RecordedRequest } from '../harness/crash-proxy.js';
import { classifyClaimChange, recordedOnlyConfirmed, type CallRecord } from '../faults/fault-client.js';
import { within, type Swap } from './crash-world.js';
import { claimObserver, finalProblems, type DispatchFamilyUnderTest, type FamilyWorld, type Owner, type Row, type RowResult } from './dispatch-order-world.js';
import { WAIT_MS } from './migration-world.js';

type Body = {
  metadata?: { name?: string; labels?: Record<string, string> };
  spec?: { holderIdentity?: string };
  status?: { activeOperation?: ActiveOperation; conditions?: { type: string; status: string }[] };
} | undefined;

const stored = (r: { status: number }) => r.status >= 200 && r.status < 300;
const bodyOf = (w: ProxiedWrite): Body => w.body as Body;
const consumed = (w: ProxiedWrite) => bodyOf(w)?.status?.conditions?.some((c) => c.type === 'Consumed' && c.status === 'True') ?? false;

/** Paths of what a row's manager writes, in one namespace: the resource, its approvals, its realm Lease, its Jobs. */
function pathsOf(family: { kind: string; approvalKind: string; name: string }, ns: string, leaseName: string) {
  const q = (s: string) => s.replace(/[.]/g, '\\.');
  const group = `^/apis/${q(API_VERSION)}/namespaces/${ns}`;
  const plural = (kind: string) => Object.values(KINDS).find((k) => k.kind === kind)!.plural;
  return {
    leaseName,
    ownerStatus: new RegExp(`${group}/${plural(family.kind)}/${family.name}/status$`),
    approvalStatus: new RegExp(`${group}/${plural(family.approvalKind)}/[^/]+/status$`),
    /** The realm's Lease, not the manager's election Lease (which lives in the same namespace). */
    realmLease: new RegExp(`^/apis/coordination\\.k8s\\.io/v1/namespaces/${ns}/leases(/${leaseName})?$`),
    jobs: new RegExp(`^/apis/batch/v1/namespaces/${ns}/jobs$`),
    job: new RegExp(`^/apis/batch/v1/namespaces/${ns}/jobs/([^/]+)$`),
    configMaps: new RegExp(`^/api/v1/namespaces/${ns}/configmaps$`),
  };
}
type Paths = ReturnType<typeof pathsOf>;

const isRealmLeaseWrite = (p: Paths, w: ProxiedWrite) =>
  (w.method === 'POST' || w.method === 'PUT') && p.realmLease.test(w.path) && (w.method === 'PUT' || bodyOf(w)?.metadata?.name === p.leaseName);
const isProjectionCreate = (p: Paths, w: ProxiedWrite) => w.method === 'POST' && p.configMaps.test(w.path) && Boolean(bodyOf(w)?.metadata?.labels?.[PLAN_LABEL]);
const isSpendingWrite = (p: Paths, w: ProxiedWrite) => w.method === 'PUT' && p.approvalStatus.test(w.path) && consumed(w);
const applyClaimIn = (p: Paths, w: ProxiedWrite): ActiveOperation | undefined => {
  if ((w.method !== 'PUT' && w.method !== 'PATCH') || !p.ownerStatus.test(w.path)) return undefined;
  const claim = bodyOf(w)?.status?.activeOperation;
  return claim?.type === 'Apply' ? claim : undefined;
};

/**
 * The first write of `step` an Apply claim's dispatch makes, recognised in the manager's request stream once the
 * resource waits for approval and its realm is free: the realm Lease taken by a holder, a projection ConfigMap, the
 * Apply claim's first write with an admission snapshot, the approval spent, the claim's first write with its mark,
 * the Apply Job's create, the claim's first write with a Job UID. The same step the fault client gives those writes.
 */
function triggerFor(p: Paths, step: DispatchStep): KillTrigger {
  const what = `the ${step} step's write`;
  switch (step) {
    case 'lease':
      return { what, match: (w) => isRealmLeaseWrite(p, w) && Boolean(bodyOf(w)?.spec?.holderIdentity) };
    case 'stage':
      return { what, match: (w) => isProjectionCreate(p, w) };
    case 'snapshot':
      return { what, match: (w) => Boolean(applyClaimIn(p, w)?.admissionSnapshot) };
    case 'consume':
      return { what, match: (w) => isSpendingWrite(p, w) };
    case 'mark':
      return { what, match: (w) => applyClaimIn(p, w)?.dispatchStarted === true };
    case 'create':
      return { what, match: (w) => w.method === 'POST' && p.jobs.test(w.path) && bodyOf(w)?.metadata?.labels?.['operator.ptah.run/operation'] === 'apply' };
    case 'record':
      return { what, match: (w) => Boolean(applyClaimIn(p, w)?.jobUID) };
    default:
      throw new Error(`no durable write of the ${step} step to stop after`);
  }
}

/** A call of the fault client's log, with which manager made it and, for a status write, the claim it wrote. */
type LoggedCall = CallRecord & { generation: number; claimId?: string };

/**
 * The managers' requests as the fault client's call log (recordedOnlyConfirmed audits it): the Job creates, the
 * reads of a Job after a create of it was stored (confirm), and the resource's status writes, each classified by
 * what it changes in the claim against the last one stored, as the fault client classifies them.
 */
function callLog(p: Paths, requests: readonly RecordedRequest[]): LoggedCall[] {
  const calls: LoggedCall[] = [];
  const created = new Set<string>();
  let claim: ActiveOperation | undefined;
  for (const r of requests) {
    const ok = stored(r);
    const read = p.job.exec(r.path);
    const { generation } = r;
    if (r.method === 'POST' && p.jobs.test(r.path)) {
      const name = bodyOf(r)?.metadata?.name ?? '';
      if (ok) created.add(name);
      calls.push({ verb: 'create', kind: 'Job', name, step: 'create', ok, generation });
    } else if (r.method === 'GET' && read && created.has(decodeURIComponent(read[1]!))) {
      calls.push({ verb: 'get', kind: 'Job', name: decodeURIComponent(read[1]!), step: 'confirm', ok, generation });
    } else if ((r.method === 'PUT' || r.method === 'PATCH') && p.ownerStatus.test(r.path)) {
      const next = bodyOf(r)?.status?.activeOperation;
      calls.push({ verb: r.method === 'PUT' ? 'update' : 'patch', kind: 'owner', name: '', step: classifyClaimChange(claim, next), ok, generation, claimId: next?.id });
      if (ok) claim = next;
    } else if (isRealmLeaseWrite(p, r) || isProjectionCreate(p, r) || isSpendingWrite(p, r)) {
      const step = isRealmLeaseWrite(p, r) ? 'lease' : isProjectionCreate(p, r) ? 'stage' : 'consume';
      calls.push({ verb: r.method === 'POST' ? 'create' : 'update', kind: step, name: bodyOf(r)?.metadata?.name ?? '', step, ok, generation });
    }
  }
  return calls;
}

/**
 * The invariants of every state the managers stored: each stored write of the claim marked (dispatchStarted) came
 * after its approval was spent, carries its admission snapshot, follows the stored creates of everything its Job
 * reads besides the Job, and follows a stored write of the realm Lease naming this claim's holder; and the Job's
 * create came after a stored mark.
 */
function orderProblems(p: Paths, requests: readonly RecordedRequest[], claim: ActiveOperation, approvalName: string, ours: string, stagedNames: readonly string[]): string[] {
  const problems = new Set<string>();
  let spent = false;
  let marked = false;
  let holder: string | undefined;
  const projected = new Set<string>();
  for (const r of requests.filter(stored)) {
    if (isSpendingWrite(p, r) && bodyOf(r)?.metadata?.name === approvalName) spent = true;
    if (isRealmLeaseWrite(p, r)) holder = bodyOf(r)?.spec?.holderIdentity;
    if (isProjectionCreate(p, r)) projected.add(bodyOf(r)?.metadata?.name ?? '');
    if (r.method === 'POST' && p.jobs.test(r.path) && bodyOf(r)?.metadata?.name === claim.jobName && !marked) {
      problems.add('a Job exists under the reserved name but the claim does not say one may');
    }
    if ((r.method !== 'PUT' && r.method !== 'PATCH') || !p.ownerStatus.test(r.path)) continue;
    const written = bodyOf(r)?.status?.activeOperation;
    marked = written?.id === claim.id && written.dispatchStarted === true;
    if (!marked) continue;
    if (!spent) problems.add('marked, but the approval it spends is not spent');
    if (!written?.admissionSnapshot) problems.add('marked with no admission snapshot');
    if (!stagedNames.every((n) => projected.has(n))) problems.add('the claim is marked with nothing staged for its Job to read');
    if (holder !== ours) problems.add('marked while another holder has the realm');
  }
  return [...problems];
}

/** The Apply claim's steps as the managers made them (a kill between two managers), for diagnosis. */
function trace(p: Paths, requests: readonly RecordedRequest[], claim: ActiveOperation | undefined): string[] {
  const lines: string[] = [];
  let generation = 0;
  for (const call of callLog(p, requests)) {
    if (!call.step || (call.kind === 'Job' && call.name !== claim?.jobName) || (call.kind === 'owner' && call.claimId !== claim?.id)) continue;
    if (call.generation !== generation) lines.push('killed');
    generation = call.generation;
    lines.push(`${call.step}${call.ok ? '' : ' (not stored)'}`);
  }
  return lines;
}

/**
 * Brings a fresh resource of `family`, reconciled by a real manager process (its two steps `swap`ped, when given),
 * to its Apply claim's dispatch, kills that process right after the row's step write is stored, and lets a fresh
 * manager (the real order) take over.
 */
export async function runStopRow<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>, row: Omit<Row, 'swap' | 'problem'>, swap?: Swap): Promise<RowResult> {
  const NAME = family.name;
  const cw = await family.crashWorld(t);
  const world = cw.w;
  const db = await family.populate(world);
  const problems = new Set<string>();
  await cw.startManager(swap);

  // Fixture: the resource waits for approval, and the realm is free (a schema's Plan held it and hands it back).
  const waiting = await world.waitFor(NAME, 'the resource to wait for approval', (o) => (o.status?.phase === 'AwaitingApproval' && o.status.plan ? o : undefined));
  const realm = realmDigestOf(waiting.spec.target, world.ns);
  const leaseName = leaseNameFor(realm);
  await waitFor(async () => {
    const lease = await world.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: world.ns, name: leaseName });
    return lease?.spec?.holderIdentity ? undefined : true;
  }, { what: 'the realm to be free before the approval', timeoutMs: WAIT_MS });
  const p = pathsOf(family, world.ns, leaseName);
  const armedAt = Date.now();
  const since = () => cw.proxy.requests.filter((r) => r.at >= armedAt);
  const kill = cw.killOn(triggerFor(p, row.step));
  const approval = await world.approve(NAME);
  const fired = await within(kill, WAIT_MS, `the kill on the ${row.step} step's write`, () => cw.proxy.disarm()).catch(() => undefined);
  if (!fired) {
    return { problems: [`the ${row.step} step was not measured: its fault never fired`], creates: 0, uncertain: false, unknown: false, passes: trace(p, since(), undefined) };
  }

  // What the API server holds at the kill.
  const atKill = await world.get(NAME);
  const claim = atKill.status?.activeOperation;
  if (claim?.type !== 'Apply') {
    return { problems: [`no Apply claim stood at the kill (${fired.write.method} ${fired.write.path})`], creates: 0, uncertain: false, unknown: false, passes: trace(p, since(), undefined) };
  }
  const ours = holderIdentityFor(atKill.metadata.uid!, claim.id);
  if (row.step === 'lease' && bodyOf(fired.write)?.spec?.holderIdentity !== ours) problems.add('the kill came on a Lease write of another holder than the claim');
  const approvalName = approval.metadata!.name!;
  const { view, invariants } = claimObserver(family, world, claim, approvalName, realm, ours);
  const check = async () => {
    for (const problem of invariants(await view())) problems.add(problem);
  };
  const atStop = await view();
  for (const problem of invariants(atStop)) problems.add(problem);
  const markedWithoutJob = atStop.claimIsOurs && atStop.claim?.dispatchStarted === true && atStop.jobs === 0;
  const jobCreates = () => cw.proxy.writes().filter((r) => r.method === 'POST' && p.jobs.test(r.path) && bodyOf(r)?.metadata?.name === claim.jobName);
  const createsAtStop = jobCreates().filter(stored).length;

  // Recovery: a fresh manager process, the real order, until the claim reaches its Job or leaves.
  await cw.startManager();
  await waitFor(async () => {
    const v = await view();
    for (const problem of invariants(v)) problems.add(problem);
    return !v.claimIsOurs || v.claim?.jobUID ? true : undefined;
  }, { what: 'the claim to reach its Job or leave', timeoutMs: WAIT_MS, intervalMs: 200 }).catch(() => undefined);
  if (markedWithoutJob) {
    // A claim marked with no Job is never dispatched again: the manager looks at it a few more times, and still no create.
    await sleep(5_000);
    await check();
  }

  const end = await view();
  const creates = jobCreates().filter(stored).length;
  const createFailed = jobCreates().some((r) => !stored(r)) && creates === 0;
  for (const problem of orderProblems(p, cw.proxy.requests, claim, approvalName, ours, await family.stagedNames(world, claim))) problems.add(problem);
  for (const problem of finalProblems({
    row, end, creates, createsAtStop, markedWithoutJob, createFailed,
    applyJobs: family.applyJobs(world).length, audit: recordedOnlyConfirmed(callLog(p, cw.proxy.requests)),
  })) problems.add(problem);
  for (const problem of await family.finish(world, db, end, async () => undefined)) problems.add(problem);
  return { problems: [...problems], creates, uncertain: end.uncertain, unknown: end.unknown, passes: trace(p, since(), claim) };
}
