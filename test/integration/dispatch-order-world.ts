// The dispatch-order tests' harness (the seed's dispatch_order_test), for both families: a resource driven pass by
// pass through its family's real reconciler, on the real API server, with a fault-injecting client between the
// two; a view of what the API server holds about the claim, read around the fault; the invariants every
// intermediate state must satisfy; and the verdicts a row is judged by. A row whose fault is the manager stopping
// right after a step's write kills a real manager process there instead (dispatch-order-stop.ts), judged by the
// same invariants and verdicts. A family (MIGRATION, SCHEMA) supplies only what differs: its worlds and resource,
// its reconcile function, and where it records an unaccounted run, an approval and what its Job reads besides the Job.
import type { V1ConfigMap, V1Job, V1Lease } from '@kubernetes/client-node';
import type { Test } from 'tap';
import type { OwnerDeps, OwnerResource, PassEnd } from '../../src/controller/pass.js';
import { reconcileMigration } from '../../src/controller/migration/reconcile.js';
import { reconcileSchema } from '../../src/controller/schema/reconcile.js';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema, PtahSchemaPlan } from '../../src/shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { restClient, type KubeClient, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import { ORDER, swapped, type DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { PLAN_LABEL } from '../../src/shared/planstore.js';
import { holderIdentityFor, leaseNameFor, realmDigestOf } from '../../src/shared/realm.js';
import { TargetLock } from '../../src/shared/targetlock.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import type { TestDatabase } from '../../tools/stack/postgres.js';
import { waitFor } from '../../tools/stack/wait.js';
import { FaultClient, recordedOnlyConfirmed, type FaultMode } from '../faults/fault-client.js';
import { crashSchemaWorld, crashWorld, type CrashWorld, type Swap } from './crash-world.js';
import { runStopRow } from './dispatch-order-stop.js';
import { jobsOf, manualReconciler, migrationWorld, WAIT_MS, type MigrationWorld } from './migration-world.js';
import { schemaJobsOf, schemaWorld, type SchemaWorld } from './schema-world.js';

/** How a row faults its step: in process (refused, contended, a fault of the client), or by stopping a real manager process right after the step's write. */
export type Arm = 'refused' | 'contended' | FaultMode | 'stop-after';

export interface Row {
  step: DispatchStep;
  arm: Arm;
  /** The two steps whose exchange this boundary is about, and what the swapped run must report. */
  swap: [DispatchStep, DispatchStep];
  problem: string;
}

/** One row per dispatch step; the stage rows only for a family that stages something (rowsFor). */
export const ROWS: Row[] = [
  { step: 'authorize', arm: 'refused', swap: ['authorize', 'lease'], problem: 'was not retired while another holder had the realm' },
  { step: 'lease', arm: 'contended', swap: ['lease', 'mark'], problem: 'marked while another holder has the realm' },
  { step: 'stage', arm: 'fail', swap: ['stage', 'mark'], problem: 'marked with nothing staged' },
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
  // The projection stored, then the stop: the next pass reads it back, finds it matching and goes on.
  { step: 'stage', arm: 'stop-after' },
  { step: 'snapshot', arm: 'stop-after' },
  { step: 'consume', arm: 'stop-after' },
  { step: 'create', arm: 'fail' },
  { step: 'record', arm: 'fail' },
];

/** The manager stopped right after the mark, before the one create: Unknown, and the Job is never created. */
export const STOP_AFTER_MARK: Omit<Row, 'swap' | 'problem'> = { step: 'mark', arm: 'stop-after' };

/** The resource either family reconciles, with the status fields the harness reads of both. */
export type Owner = OwnerResource & { status?: { phase?: string; plan?: unknown } };

/** What the harness needs of a family's world (MigrationWorld and SchemaWorld both are one). */
export interface FamilyWorld<O extends Owner> {
  ns: string;
  admin: KubeClient;
  jobsSeen: Map<string, V1Job>;
  ref(kind: keyof typeof KINDS, name: string): ResourceRef;
  get(name: string): Promise<O>;
  waitFor<T>(name: string, what: string, ready: (o: O) => T | undefined, timeoutMs?: number): Promise<T>;
  /** Approves the resource's current plan as the approver identity. */
  approve(name: string): Promise<KubeObject>;
  startController(): Promise<void>;
}

/** The record a retired Apply leaves of a run still to be accounted for (its outcome is what the family knows). */
interface UnaccountedRecord {
  outcome: string;
}

/** What one family supplies to the harness, over its resource O and its world W. */
export interface DispatchFamilyUnderTest<O extends Owner, W extends FamilyWorld<O> = FamilyWorld<O>> {
  /** The resource's kind and its approval's. */
  kind: 'PtahMigration' | 'PtahSchema';
  approvalKind: 'PtahMigrationApproval' | 'PtahSchemaApproval';
  name: string;
  /** Whether its dispatch writes something for the Job to read besides the Job (the stage step). */
  stages: boolean;
  /** The outcome its unaccounted record gives a run that may or may not have happened. */
  unknownOutcome: string;
  /** A fresh world of the family, reconciled in process. */
  world(t: Test): Promise<W>;
  /** The same world with the manager as a real process behind the crash proxy (for the rows that stop it). */
  crashWorld(t: Test): Promise<CrashWorld<W>>;
  /** One resource of the family (policy OnApproval) on an empty database; returns the database. */
  populate(world: W): Promise<TestDatabase>;
  reconcile(deps: OwnerDeps, namespace: string, name: string): Promise<PassEnd | undefined>;
  /**
   * The record of the claim's run still to be accounted for, when it names the claim: a migration's unresolvedRun, a
   * schema's pendingObservation (the proof every retired Apply owes; the rows stop before any run is harvested, so
   * here it is the record of an uncertain one).
   */
  unaccounted(o: O, claimId: string): UnaccountedRecord | undefined;
  /** Whether a retired claim left a record of its run (a migration's lastRun; a schema's proof, which is the unaccounted record). */
  recorded(o: O, claimId: string): boolean;
  /** Whether what the claim's Job reads besides the Job is in place (true for a family that stages nothing). */
  staged(world: W, claim: ActiveOperation): Promise<boolean>;
  /** The names of the ConfigMaps the stage step writes for the claim's Job ([] for a family that stages nothing). */
  stagedNames(world: W, claim: ActiveOperation): Promise<string[]>;
  /** The resource's Apply Jobs the world saw, oldest first. */
  applyJobs(world: W): V1Job[];
  /**
   * Lets the controller finish what the row left, so the namespace can go; returns any problem it saw.
   * `startController` starts it (in process), or does nothing when a manager process already runs.
   */
  finish(world: W, db: TestDatabase, end: View, startController: () => Promise<void>): Promise<string[]>;
}

/** The rows a family runs: every step it has (no stage row for a family that stages nothing). */
export function rowsFor<R extends Pick<Row, 'step'>>(family: { stages: boolean }, rows: readonly R[]): R[] {
  return rows.filter((row) => family.stages || row.step !== 'stage');
}

export interface View {
  claim?: ActiveOperation;
  claimIsOurs: boolean;
  /** A record names the claim's run as still to be accounted for (the family's unaccounted). */
  uncertain: boolean;
  /** ...with the family's unknown outcome. */
  unknown: boolean;
  recorded: boolean;
  approvalSpent: boolean;
  staged: boolean;
  jobs: number;
  leaseHolder?: string;
}

const CONTENDER = { resourceUid: 'contender-uid', operationId: `sha256:${'c'.repeat(64)}` };

export interface RowResult {
  problems: string[];
  /** Creates of the claim's Job ever made, and whether the claim ended as an unresolved run (with an unknown outcome). */
  creates: number;
  uncertain: boolean;
  unknown: boolean;
  /** The passes that ran, for diagnosis. */
  passes: string[];
}

/**
 * What the API server holds about one claim (`view`), and the invariants every state a stopped manager could hand to
 * the next must satisfy (`invariants`).
 */
export function claimObserver<O extends Owner, W extends FamilyWorld<O>>(family: DispatchFamilyUnderTest<O, W>, world: W, claim: ActiveOperation, approvalName: string, realm: string, ours: string): { view(): Promise<View>; invariants(v: View): string[] } {
  const view = async (): Promise<View> => {
    const o = await world.get(family.name);
    const c = o.status?.activeOperation;
    const ap = await world.admin.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(world.ref(family.approvalKind, approvalName));
    const job = await world.admin.tryGet<V1Job>({ apiVersion: 'batch/v1', kind: 'Job', namespace: world.ns, name: claim.jobName });
    const lease = await world.admin.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: world.ns, name: leaseNameFor(realm) });
    const unaccounted = family.unaccounted(o, claim.id);
    return {
      claim: c,
      claimIsOurs: c?.id === claim.id,
      uncertain: unaccounted !== undefined,
      unknown: unaccounted?.outcome === family.unknownOutcome,
      recorded: family.recorded(o, claim.id),
      approvalSpent: ap.status?.conditions?.some((x) => x.type === 'Consumed' && x.status === 'True') ?? false,
      staged: await family.staged(world, claim),
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
    if (marked && !v.staged) out.push('the claim is marked with nothing staged for its Job to read');
    if (marked && v.leaseHolder !== ours) out.push('marked while another holder has the realm');
    return out;
  };
  return { view, invariants };
}

/** What a row ended with, for its final verdicts. */
export interface RowEnd {
  row: Omit<Row, 'swap' | 'problem'>;
  end: View;
  /** Stored creates of the claim's Job, ever and when the fault fired. */
  creates: number;
  createsAtStop: number;
  /** The claim was marked with no Job when the fault fired. */
  markedWithoutJob: boolean;
  /** A create of the claim's Job failed and none was stored (it may have been). */
  createFailed: boolean;
  /** The Apply Jobs of the resource the world saw. */
  applyJobs: number;
  /** What the call-log audit (recordedOnlyConfirmed) found. */
  audit: string | undefined;
}

/** The verdicts every row is judged by, however its fault was made. */
export function finalProblems({ row, end, creates, createsAtStop, markedWithoutJob, createFailed, applyJobs, audit }: RowEnd): string[] {
  const problems: string[] = [];
  if (creates > 1 || applyJobs > 1) problems.push(`more than one Apply Job was created (${creates} creates, ${applyJobs} seen)`);
  if (markedWithoutJob && creates > createsAtStop) problems.push('a claim marked with no Job created one after the restart');
  if (markedWithoutJob && !end.unknown) problems.push('a claim marked with no Job did not end as an unknown outcome naming it');
  if (row.arm === 'refused') {
    if (end.claimIsOurs || creates > 0) problems.push('the refused claim came back or dispatched');
  } else {
    if (end.claimIsOurs && !end.claim?.jobUID) problems.push('the claim never reached its Job after the restart');
    if (!end.claimIsOurs && !end.uncertain && !end.recorded) problems.push('the claim was retired without dispatching and without a record');
    // Unaccounted is right only where nobody can say whether a Job exists: a durable mark without a Job, or a create
    // that failed (it may have been stored). A Job that was created and answered for must be adopted instead.
    if (end.uncertain && !markedWithoutJob && !createFailed) problems.push('the claim was recorded unaccounted although it was not marked without a Job and its create did not fail');
  }
  if (audit) problems.push(audit);
  return problems;
}

/** A fresh in-process world of `family` with its one resource (nothing reconciled yet), and the resource's database. */
export async function inProcessWorld<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>): Promise<{ world: W; db: TestDatabase }> {
  const world = await family.world(t);
  return { world, db: await family.populate(world) };
}

/**
 * Brings a fresh resource to an undispatched Apply claim, then runs the row, with the two steps `swap` names
 * exchanged when given. A row that stops the manager runs on a real manager process (runStopRow); the others drive
 * the family's reconciler pass by pass in this process, through a fault-injecting client.
 */
export async function runRow<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>, row: Omit<Row, 'swap' | 'problem'>, swap?: Swap): Promise<RowResult> {
  if (row.arm === 'stop-after') return runStopRow(t, family, row, swap);
  const arm = row.arm;
  const NAME = family.name;
  const { world, db } = await inProcessWorld(t, family);
  const managerClient = await restClient(sharedCluster().kubeConfig('manager'), { fieldManager: 'ptah-dispatch-order-test' });
  const faults = new FaultClient(managerClient);
  // manualReconciler's deps name no family (its pass is the migration's, which is not used here).
  const deps: OwnerDeps = { ...manualReconciler(world as unknown as MigrationWorld, faults).deps, order: swap ? swapped(...swap) : ORDER };
  const passes: string[] = [];
  const pass = async (): Promise<void> => {
    try {
      const end = await family.reconcile(deps, world.ns, NAME);
      passes.push(end?.why ?? 'gone');
    } catch (e) {
      passes.push(`error: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  // Fixture: production order until the resource waits for approval, then the approval, then passes until the
  // Apply claim is persisted and nothing of its dispatch has happened yet.
  const production = { ...deps, client: managerClient, order: ORDER };
  await waitFor(async () => {
    await family.reconcile(production, world.ns, NAME);
    const o = await world.get(NAME);
    return o.status?.phase === 'AwaitingApproval' && o.status.plan ? true : undefined;
  }, { what: `the ${family.kind} to wait for approval`, timeoutMs: 120_000, intervalMs: 500 });
  const approval = await world.approve(NAME);
  const claim = await waitFor(async () => {
    const c = (await world.get(NAME)).status?.activeOperation;
    if (c?.type === 'Apply') return c;
    await family.reconcile(production, world.ns, NAME);
    return undefined;
  }, { what: 'the Apply claim', timeoutMs: 60_000, intervalMs: 200 });
  const fixtureProblems: string[] = [];
  if (claim.dispatchStarted || claim.jobUID || claim.admissionSnapshot) fixtureProblems.push('fixture: the Apply claim had already begun its dispatch');
  if (family.stages && (await family.staged(world, claim))) fixtureProblems.push('fixture: the Apply claim\'s Job input was staged before its dispatch');

  const o0 = await world.get(NAME);
  const realm = realmDigestOf(o0.spec.target, world.ns);
  if (claim.coordinationDigest !== realm) fixtureProblems.push(`fixture: the claim names realm ${claim.coordinationDigest}, not ${realm}`);
  const ours = holderIdentityFor(o0.metadata.uid!, claim.id);
  const contenderLock = new TargetLock(world.admin, world.ns);
  const { view, invariants } = claimObserver(family, world, claim, approval.metadata!.name!, realm, ours);
  const problems = new Set<string>(fixtureProblems);
  const check = async () => {
    for (const p of invariants(await view())) problems.add(p);
  };

  // Arm.
  let release: (() => Promise<unknown>) | undefined;
  if (arm === 'refused' || arm === 'contended') {
    const held = await contenderLock.acquire({ coordinationDigest: realm, holder: CONTENDER, durationSeconds: 960 });
    if (held.kind !== 'acquired') throw new Error('the contender could not take the realm');
    release = () => contenderLock.release({ coordinationDigest: realm, holder: CONTENDER, epoch: held.epoch });
    if (arm === 'refused') {
      // Moves the authorization: a spec edit bumps the generation the claim's input fingerprint digests.
      await world.admin.patch(world.ref(family.kind, NAME), { spec: { interval: '11m' } }, 'merge');
    }
  } else {
    faults.arm({ step: row.step, mode: arm });
  }

  // Passes up to the fault.
  if (arm === 'refused' || arm === 'contended') {
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
  if (arm === 'refused') {
    if (atStop.claimIsOurs) problems.add('the claim whose authorization moved was not retired while another holder had the realm');
    if (atStop.leaseHolder === ours) problems.add('the refused claim took the realm');
  }
  const markedWithoutJob = atStop.claimIsOurs && atStop.claim?.dispatchStarted === true && atStop.jobs === 0;
  const createsAtStop = faults.createdJobs.filter((n) => n === claim.jobName).length;

  // Recovery: the fault spent (a client fault fires once), the contender gone.
  await release?.();
  for (let i = 0; i < 12; i++) {
    const v = await view();
    if (!v.claimIsOurs || v.claim?.jobUID) break;
    await pass();
    await check();
  }
  if (markedWithoutJob) {
    // A claim marked with no Job is never dispatched again: a few more passes, and still no create.
    for (let i = 0; i < 3; i++) await pass();
  }

  // Verdicts.
  const end = await view();
  const creates = faults.createdJobs.filter((n) => n === claim.jobName).length;
  const createFailed = faults.calls.some((c) => c.verb === 'create' && c.kind === 'Job' && c.name === claim.jobName && !c.ok) && creates === 0;
  for (const p of finalProblems({
    row, end, creates, createsAtStop, markedWithoutJob, createFailed,
    applyJobs: family.applyJobs(world).length,
    audit: recordedOnlyConfirmed(faults.calls),
  })) problems.add(p);
  for (const p of await family.finish(world, db, end, () => world.startController())) problems.add(p);
  return { problems: [...problems], passes, creates, uncertain: end.uncertain, unknown: end.unknown };
}

/**
 * The dispatch-order tests of one family: every row (and every recovery row) in production order with no
 * problems, the stop between the mark and the create as an unknown outcome with no Job ever created, and every
 * row with its two boundary steps exchanged reporting the problem that boundary prevents.
 *
 * Its parts: `boundaries` (each row of ROWS faulted in production order),
 * `write-faults` (the other faults of a step's write, RECOVERY_ROWS, and the stop between mark and create) and
 * `swapped` (each boundary with its two steps exchanged). A family whose rows take long runs its parts from
 * separate files, so each stays well inside the per-file time limit and they run in parallel.
 */
export type OrderTestPart = 'boundaries' | 'write-faults' | 'swapped';

export function dispatchOrderTests<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>, parts: readonly OrderTestPart[] = ['boundaries', 'write-faults', 'swapped']): void {
  const rows = rowsFor(family, ROWS);
  if (parts.includes('boundaries')) recoveryTests(t, family, 'each dispatch step, faulted at its boundary, leaves a state the next pass recovers from', rows);
  if (parts.includes('write-faults')) {
    recoveryTests(t, family, 'every other fault of a step\'s write leaves a state the next pass recovers from', rowsFor(family, RECOVERY_ROWS));
    stopAfterMarkTest(t, family);
  }
  if (parts.includes('swapped')) swappedTests(t, family, rows);
}

function recoveryTests<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>, name: string, rows: Omit<Row, 'swap' | 'problem'>[]): void {
  t.test(name, async (t) => {
    for (const row of rows) {
      await t.test(`${row.step}: ${row.arm}`, async (t) => {
        const result = await runRow(t, family, row);
        t.same(result.problems, [], `no problems (passes: ${result.passes.join(' | ')})`);
      });
    }
  });
}

function stopAfterMarkTest<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>): void {
  t.test('a manager stopped between the mark and the create: the outcome is Unknown, the Job is never created', async (t) => {
    const result = await runRow(t, family, STOP_AFTER_MARK);
    t.same(result.problems, [], `no problems (passes: ${result.passes.join(' | ')})`);
    t.equal(result.creates, 0, 'no Job was ever created');
    t.equal(result.uncertain, true, 'the run is recorded unresolved');
    t.equal(result.unknown, true, `its outcome is ${family.unknownOutcome}`);
  });
}

function swappedTests<O extends Owner, W extends FamilyWorld<O>>(t: Test, family: DispatchFamilyUnderTest<O, W>, rows: Row[]): void {
  t.test('each boundary fails with its two steps exchanged', async (t) => {
    for (const row of rows) {
      await t.test(`${row.step}: ${row.arm}, ${row.swap[0]}↔${row.swap[1]}`, async (t) => {
        const result = await runRow(t, family, row, row.swap);
        t.ok(result.problems.some((p) => p.includes(row.problem)), `reports “${row.problem}” (got: ${result.problems.join('; ') || 'nothing'}; passes: ${result.passes.join(' | ')})`);
      });
    }
  });
}

/** PtahMigration: the sample migration; nothing to stage (its Apply reads the files from its verified artifact). */
export const MIGRATION: DispatchFamilyUnderTest<PtahMigration, MigrationWorld> = {
  kind: 'PtahMigration',
  approvalKind: 'PtahMigrationApproval',
  name: 'orders',
  stages: false,
  unknownOutcome: 'Unknown',
  world: (t) => migrationWorld(t),
  async crashWorld(t) {
    return crashWorld(t);
  },
  async populate(world) {
    const db = await world.database('dispatch');
    const secret = await world.installSample(db);
    await world.sampleArtifact();
    await world.createMigration({ name: this.name, artifact: 'orders-migrations-r1', secret, apply: 'OnApproval' });
    return db;
  },
  reconcile: reconcileMigration,
  unaccounted: (m, id) => (m.status?.unresolvedRun?.operationID === id ? m.status.unresolvedRun : undefined),
  recorded: (m) => Boolean(m.status?.lastRun),
  staged: () => Promise.resolve(true),
  stagedNames: () => Promise.resolve([]),
  applyJobs(world) {
    return jobsOf(world, 'apply', this.name);
  },
  async finish(_world, _db, _end, startController) {
    // Let the controller finish the run and take its finalizer off, so the namespace can go.
    await startController();
    return [];
  },
};

const SCHEMA_SQL = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE
);
`;

/** PtahSchema: a first apply on an empty database; its stage step projects the plan into ConfigMaps. */
export const SCHEMA: DispatchFamilyUnderTest<PtahSchema, SchemaWorld> = {
  kind: 'PtahSchema',
  approvalKind: 'PtahSchemaApproval',
  name: 'catalog',
  stages: true,
  unknownOutcome: 'OutcomeUnknown',
  world: (t) => schemaWorld(t),
  crashWorld: (t) => crashSchemaWorld(t),
  async populate(world) {
    const db = await world.database('dispatch');
    const secret = await world.installSample(db);
    await world.desired('catalog-r1', SCHEMA_SQL);
    await world.createSchema({ name: this.name, artifact: 'catalog-r1', secret, apply: 'OnApproval' });
    return db;
  },
  reconcile: reconcileSchema,
  // Every schema Apply leaves a pending observation; only one of an unknown outcome is unaccounted for (an Apply that
  // reported success or a refusal is accounted for and still proven). Counting every record as unaccounted made a
  // stop-after row fail whenever its end was seen before the proof of a successful Apply completed.
  unaccounted: (s, id) => {
    const pending = s.status?.pendingObservation;
    return pending?.applyOperationID === id && pending.outcome === 'OutcomeUnknown' ? pending : undefined;
  },
  // Every schema Apply, read or uncertain, leaves its proof: that is the record.
  recorded: (s, id) => s.status?.pendingObservation?.applyOperationID === id,
  async staged(world, claim) {
    // The plan's projection: a ConfigMap under each of the plan's chunk names, labelled with and owned by the plan.
    if (!claim.planRef) return false;
    const plan = await world.admin.tryGet<PtahSchemaPlan>(world.ref('PtahSchemaPlan', claim.planRef.name));
    if (!plan || plan.metadata.uid !== claim.planRef.uid) return false;
    const projections = await world.admin.list<V1ConfigMap>('v1', 'ConfigMap', world.ns, { labelSelector: `${PLAN_LABEL}=${plan.metadata.name}` });
    const owned = new Set(projections
      .filter((cm) => cm.metadata?.ownerReferences?.some((r) => r.kind === KINDS.PtahSchemaPlan.kind && r.apiVersion === API_VERSION && r.uid === plan.metadata.uid && r.controller === true))
      .map((cm) => cm.metadata!.name!));
    return plan.spec.chunks.length > 0 && plan.spec.chunks.every((name) => owned.has(name));
  },
  async stagedNames(world, claim) {
    // A projection is named after the chunk it projects (a plan with none fails `staged` instead).
    const plan = claim.planRef ? await world.admin.tryGet<PtahSchemaPlan>(world.ref('PtahSchemaPlan', claim.planRef.name)) : undefined;
    return plan?.spec.chunks ?? [];
  },
  applyJobs(world) {
    return schemaJobsOf(world, 'apply', this.name);
  },
  async finish(world, db, end, startController) {
    // A dispatched Apply is run, harvested and proven by the controller, and the database recorded it once. A claim
    // that ended otherwise (refused, or an unknown outcome whose proof waits out the Apply's window) is left: its
    // finalizer stays until the run's control plane goes.
    if (!end.claimIsOurs || !end.claim?.jobUID) return [];
    const applyId = end.claim.id;
    await startController();
    try {
      await world.waitFor(this.name, 'the dispatched Apply proven and settled', (s) => (!s.status?.activeOperation && !s.status?.pendingObservation && s.status?.applied ? s : undefined), WAIT_MS);
    } catch (e) {
      return [`the dispatched Apply did not settle: ${(e as Error).message}`];
    }
    const applies = await world.applies(db);
    if (applies.length !== 1 || applies[0]?.operationId !== applyId) return [`the database recorded ${applies.length} Apply(s) (${applies.map((a) => a.operationId).join(', ')}), not exactly the claim's`];
    return [];
  },
};
