// The dispatch-order tests' harness for PtahMigration (the seed's dispatch_order_test): a migration driven pass by
// pass through the real reconciler, on the real API server, with a fault-injecting client between the two; a view
// of what the API server holds about the claim, read around the fault; the invariants every intermediate state
// must satisfy; and the verdicts a row is judged by.
import type { V1Job, V1Lease } from '@kubernetes/client-node';
import type { Test } from 'tap';
import { reconcileMigration } from '../../src/controller/migration/reconcile.js';
import type { MigrationDeps } from '../../src/controller/migration/context.js';
import type { PtahMigration, PtahMigrationApproval } from '../../src/shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { restClient } from '../../src/shared/kube-client.js';
import { ORDER, type DispatchOrder, type DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { coordinationDigest, holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import { TargetLock } from '../../src/shared/targetlock.js';
import { sharedCluster } from '../harness/cluster.js';
import { waitFor } from '../harness/wait.js';
import { FaultClient, recordedOnlyConfirmed, type FaultMode } from '../faults/fault-client.js';
import { jobsOf, manualReconciler, migrationWorld, type MigrationWorld } from './migration-world.js';

export type Arm = 'refused' | 'contended' | FaultMode;

export interface Row {
  step: DispatchStep;
  arm: Arm;
  /** The two steps whose exchange this boundary is about, and what the swapped run must report. */
  swap: [DispatchStep, DispatchStep];
  problem: string;
}

/** One row per dispatch step (migration: nothing to stage, so no stage row). */
export const ROWS: Row[] = [
  { step: 'authorize', arm: 'refused', swap: ['authorize', 'lease'], problem: 'was not retired while another holder had the realm' },
  { step: 'lease', arm: 'contended', swap: ['lease', 'mark'], problem: 'marked while another holder has the realm' },
  { step: 'snapshot', arm: 'fail', swap: ['snapshot', 'mark'], problem: 'marked with no admission snapshot' },
  { step: 'consume', arm: 'fail', swap: ['consume', 'mark'], problem: 'the approval it spends is not' },
  { step: 'mark', arm: 'fail', swap: ['mark', 'create'], problem: 'the claim does not say one may' },
  { step: 'create', arm: 'stop-after', swap: ['create', 'mark'], problem: 'the claim does not say one may' },
  { step: 'confirm', arm: 'read-fail', swap: ['confirm', 'record'], problem: 'without reading the created Job back' },
  { step: 'record', arm: 'stop-after', swap: ['record', 'confirm'], problem: 'without reading the created Job back' },
];

/**
 * The other faults a step's durable write can meet, measured in production order (the boundary rows above already
 * have their swapped runs): every write step's write failing, and the process stopping right after it.
 */
export const RECOVERY_ROWS: Omit<Row, 'swap' | 'problem'>[] = [
  { step: 'lease', arm: 'fail' },
  { step: 'lease', arm: 'stop-after' },
  { step: 'snapshot', arm: 'stop-after' },
  { step: 'consume', arm: 'stop-after' },
  { step: 'create', arm: 'fail' },
  { step: 'record', arm: 'fail' },
];

/** The manager stopped right after the mark, before the one create: Unknown, and the Job is never created. */
export const STOP_AFTER_MARK: Omit<Row, 'swap' | 'problem'> = { step: 'mark', arm: 'stop-after' };

interface View {
  claim?: ActiveOperation;
  claimIsOurs: boolean;
  uncertain: boolean;
  approvalSpent: boolean;
  jobs: number;
  leaseHolder?: string;
}

const NAME = 'orders';
const CONTENDER = { resourceUid: 'contender-uid', operationId: `sha256:${'c'.repeat(64)}` };

export interface RowResult {
  problems: string[];
  /** Creates of the claim's Job ever made, and whether the claim ended as an unresolved run. */
  creates: number;
  uncertain: boolean;
  /** The passes that ran, for diagnosis. */
  passes: string[];
}

/** Brings a fresh migration to an undispatched Apply claim, then runs the row with the given dispatch order. */
export async function runRow(t: Test, row: Omit<Row, 'swap' | 'problem'>, order: DispatchOrder): Promise<RowResult> {
  const world = await migrationWorld(t);
  const db = await world.database('dispatch');
  const secret = await world.installSample(db);
  await world.sampleArtifact();
  await world.createMigration({ name: NAME, artifact: 'orders-migrations-r1', secret, apply: 'OnApproval' });
  const managerClient = await restClient(sharedCluster().kubeConfig('manager'), { fieldManager: 'ptah-dispatch-order-test' });
  const faults = new FaultClient(managerClient);
  const deps: MigrationDeps = { ...manualReconciler(world, faults).deps, order };
  const passes: string[] = [];
  const pass = async (): Promise<void> => {
    try {
      const end = await reconcileMigration(deps, world.ns, NAME);
      passes.push(end?.why ?? 'gone');
    } catch (e) {
      passes.push(`error: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  // Fixture: production order until the migration waits for approval, then the approval, then passes until the
  // Apply claim is persisted and nothing of its dispatch has happened yet.
  const production = { ...deps, client: managerClient, order: ORDER };
  await waitFor(async () => {
    await reconcileMigration(production, world.ns, NAME);
    const m = await world.get(NAME);
    return m.status?.phase === 'AwaitingApproval' && m.status.plan ? true : undefined;
  }, { what: 'the migration to wait for approval', timeoutMs: 120_000, intervalMs: 500 });
  const approval = await world.approve(NAME);
  const claim = await waitFor(async () => {
    const c = (await world.get(NAME)).status?.activeOperation;
    if (c?.type === 'Apply') return c;
    await reconcileMigration(production, world.ns, NAME);
    return undefined;
  }, { what: 'the Apply claim', timeoutMs: 60_000, intervalMs: 200 });
  const fixtureProblems: string[] = [];
  if (claim.dispatchStarted || claim.jobUID || claim.admissionSnapshot) fixtureProblems.push('fixture: the Apply claim had already begun its dispatch');

  const m0 = await world.get(NAME);
  const realm = coordinationDigest({ engine: m0.spec.target.engine, namespace: world.ns, coordinationKey: m0.spec.target.coordinationKey });
  const ours = holderIdentityFor(m0.metadata.uid!, claim.id);
  const contenderLock = new TargetLock(world.admin, world.ns);
  const view = async (): Promise<View> => {
    const m = await world.get(NAME);
    const c = m.status?.activeOperation;
    const ap = await world.admin.get<PtahMigrationApproval>(world.ref('PtahMigrationApproval', approval.metadata.name!));
    const job = await world.admin.tryGet<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: world.ns, name: claim.jobName });
    const lease = await world.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: world.ns, name: leaseNameFor(realm) });
    return {
      claim: c,
      claimIsOurs: c?.id === claim.id,
      uncertain: m.status?.unresolvedRun?.operationID === claim.id,
      approvalSpent: ap.status?.conditions?.some((x) => x.type === 'Consumed' && x.status === 'True') ?? false,
      jobs: job ? 1 : 0,
      leaseHolder: lease?.spec?.holderIdentity,
    };
  };
  const invariants = (v: View): string[] => {
    const out: string[] = [];
    if (!v.claimIsOurs) return out;
    const marked = v.claim?.dispatchStarted === true;
    if (v.jobs > 0 && !marked) out.push('a Job exists under the reserved name but the claim does not say one may');
    if (marked && !v.approvalSpent) out.push('marked, but the approval it spends is not spent');
    if (marked && !v.claim?.admissionSnapshot) out.push('marked with no admission snapshot');
    if (marked && v.leaseHolder !== ours) out.push('marked while another holder has the realm');
    return out;
  };
  const problems = new Set<string>(fixtureProblems);
  const check = async () => {
    for (const p of invariants(await view())) problems.add(p);
  };

  // Arm.
  let release: (() => Promise<unknown>) | undefined;
  if (row.arm === 'refused' || row.arm === 'contended') {
    const held = await contenderLock.acquire({ coordinationDigest: realm, holder: CONTENDER, durationSeconds: 960 });
    if (held.kind !== 'acquired') throw new Error('the contender could not take the realm');
    release = () => contenderLock.release({ coordinationDigest: realm, holder: CONTENDER, epoch: held.epoch });
    if (row.arm === 'refused') {
      // Moves the authorization: a spec edit bumps the generation the claim's input fingerprint digests.
      await world.admin.patch(world.ref('PtahMigration', NAME), { spec: { interval: '11m' } }, 'merge');
    }
  } else {
    faults.arm({ step: row.step, mode: row.arm });
  }

  // Passes up to the fault.
  if (row.arm === 'refused' || row.arm === 'contended') {
    await pass();
    await check();
  } else {
    for (let i = 0; i < 4 && !faults.fired; i++) {
      await pass();
      await check();
    }
    if (!faults.fired) problems.add(`the ${row.step} step was not measured: its fault never fired`);
  }
  const atStop = await view();
  if (row.arm === 'refused') {
    if (atStop.claimIsOurs) problems.add('the claim whose authorization moved was not retired while another holder had the realm');
    if (atStop.leaseHolder === ours) problems.add('the refused claim took the realm');
  }
  const markedWithoutJob = atStop.claimIsOurs && atStop.claim?.dispatchStarted === true && atStop.jobs === 0;
  const createsAtStop = faults.createdJobs.filter((n) => n === claim.jobName).length;

  // Recovery: a new process, the contender gone.
  await release?.();
  faults.restart();
  for (let i = 0; i < 12; i++) {
    const v = await view();
    if (!v.claimIsOurs || v.claim?.jobUID) break;
    await pass();
    await check();
  }

  // Verdicts.
  const end = await view();
  const creates = faults.createdJobs.filter((n) => n === claim.jobName).length;
  const applyJobs = jobsOf(world, 'apply', NAME).length;
  if (creates > 1 || applyJobs > 1) problems.add(`more than one Apply Job was created (${creates} creates, ${applyJobs} seen)`);
  if (markedWithoutJob && creates > createsAtStop) problems.add('a claim marked with no Job created one after the restart');
  if (row.arm === 'refused') {
    if (end.claimIsOurs || creates > 0) problems.add('the refused claim came back or dispatched');
  } else {
    if (end.claimIsOurs && !end.claim?.jobUID) problems.add('the claim never reached its Job after 12 passes');
    if (!end.claimIsOurs && !end.uncertain && !(await world.get(NAME)).status?.lastRun) problems.add('the claim was retired without dispatching and without a record');
    // Unaccounted is right only where nobody can say whether a Job exists: a durable mark without a Job, or a create
    // that failed (it may have been stored). A Job that was created and answered for must be adopted instead.
    const createFailed = faults.calls.some((c) => c.verb === 'create' && c.kind === 'Job' && c.name === claim.jobName && !c.ok) &&
      !faults.createdJobs.includes(claim.jobName);
    if (end.uncertain && !markedWithoutJob && !createFailed) problems.add('the claim was recorded unaccounted although it was not marked without a Job and its create did not fail');
  }
  const audit = recordedOnlyConfirmed(faults.calls);
  if (audit) problems.add(audit);

  // Let the controller finish the run and take its finalizer off, so the namespace can go.
  await world.startController();
  return { problems: [...problems], passes, creates, uncertain: end.uncertain };
}

export type { MigrationWorld, PtahMigration };
