// A fault-injecting wrapper around the real API client, for the dispatch-order tests. It classifies every write
// by the dispatch step that makes it (a schema plan's projection ConfigMap is the stage step's), can make one
// step's write fail, can fail the read-back of the created Job, can run a test's own action once just before or
// just after one step's write (something a person does at exactly that point of the dispatch), and keeps a call
// log so a test can audit the order of what reached the API server. A manager stopped right after a step's write is
// not emulated here: the dispatch-order tests kill a real manager process for it (dispatch-order-stop.ts).
import type { V1Job } from '@kubernetes/client-node';
import { ApiError, refOf, type KubeClient, type KubeObject, type ResourceRef, type WriteOptions, type PatchType } from '../../src/shared/kube-client.js';
import { canonicalJson } from '../../src/shared/canonical.js';
import type { DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { PLAN_LABEL } from '../../src/shared/planstore.js';

export type FaultMode = 'fail' | 'read-fail';

export interface Fault {
  step: DispatchStep;
  mode: FaultMode;
}

/** A test's action, run once around the first write the wrapper classifies as `step`. */
export interface StepHook {
  step: DispatchStep;
  when: 'before' | 'after';
  run: () => Promise<void>;
}

export interface CallRecord {
  verb: 'create' | 'update' | 'patch' | 'delete' | 'get';
  kind: string;
  name: string;
  step?: DispatchStep;
  ok: boolean;
}

const APPROVAL_KINDS = new Set(['PtahMigrationApproval', 'PtahSchemaApproval']);
const OWNER_KINDS = new Set(['PtahMigration', 'PtahSchema']);

interface ClaimView {
  admissionSnapshot?: unknown;
  dispatchStarted?: boolean;
  jobUID?: string;
  leaseEpoch?: string;
}

/** Key order is not content: a status sent by a manager and the same status as the API server returns it differ in it. */
const sameJson = (a: unknown, b: unknown): boolean => (a === undefined || b === undefined ? a === b : canonicalJson(a) === canonicalJson(b));

/** Which dispatch step a write to the owner's status is, judged by what it would change in the claim. */
export function classifyClaimChange(before: ClaimView | undefined, after: ClaimView | undefined): DispatchStep | undefined {
  if (!after) return undefined;
  if (!before?.admissionSnapshot && after.admissionSnapshot) return 'snapshot';
  if (before && !sameJson(before.admissionSnapshot, after.admissionSnapshot)) return 'snapshot';
  if (!before?.dispatchStarted && after.dispatchStarted) return 'mark';
  if (!before?.jobUID && after.jobUID) return 'record';
  if (before && before.leaseEpoch !== after.leaseEpoch) return 'lease';
  return undefined;
}

/**
 * Which dispatch step a create is: the Job's create, the realm Lease's, or the stage step's write of a schema plan's
 * projection (a ConfigMap labelled with the plan it projects); any other create is no step.
 */
export function createStep(object: KubeObject): DispatchStep | undefined {
  switch (refOf(object).kind) {
    case 'Job':
      return 'create';
    case 'Lease':
      return 'lease';
    case 'ConfigMap':
      return object.metadata?.labels?.[PLAN_LABEL] ? 'stage' : undefined;
    default:
      return undefined;
  }
}

const claimOf = (o: KubeObject | undefined): ClaimView | undefined =>
  (o as { status?: { activeOperation?: ClaimView } } | undefined)?.status?.activeOperation;

export class FaultClient implements KubeClient {
  readonly calls: CallRecord[] = [];
  /** Names of Jobs whose create this wrapper saw succeed. */
  readonly createdJobs: string[] = [];
  private fault?: Fault & { fired: boolean };
  private hook?: StepHook & { ran: boolean };
  private createdSinceArm = false;

  constructor(private readonly inner: KubeClient) {}

  arm(fault: Fault): void {
    this.fault = { ...fault, fired: false };
  }
  get fired(): boolean {
    return this.fault?.fired ?? false;
  }
  /** Runs `hook.run` once, around the first write of `hook.step` from now on; independent of any fault. */
  hookStep(hook: StepHook): void {
    this.hook = { ...hook, ran: false };
  }
  get hookRan(): boolean {
    return this.hook?.ran ?? false;
  }
  private async runHook(step: DispatchStep | undefined, when: StepHook['when']): Promise<void> {
    const h = this.hook;
    if (!h || h.ran || step === undefined || h.step !== step || h.when !== when) return;
    h.ran = true;
    await h.run();
  }

  private gate(step: DispatchStep | undefined, verb: CallRecord['verb'], kind: string, name: string): void {
    const f = this.fault;
    if (f && !f.fired && f.mode === 'fail' && step === f.step) {
      f.fired = true;
      this.calls.push({ verb, kind, name, step, ok: false });
      throw new ApiError({ code: 500, reason: 'InternalError', message: `injected failure of the ${step} write` }, `${verb} ${kind}/${name}`);
    }
  }

  private after(step: DispatchStep | undefined, verb: CallRecord['verb'], kind: string, name: string): void {
    this.calls.push({ verb, kind, name, step, ok: true });
  }

  private async writeStep(ref: ResourceRef, options: WriteOptions | undefined, dryRun: () => Promise<KubeObject>): Promise<DispatchStep | undefined> {
    if (ref.kind === 'Lease') return 'lease';
    if (options?.subresource !== 'status') return undefined;
    if (APPROVAL_KINDS.has(ref.kind)) return 'consume';
    if (!OWNER_KINDS.has(ref.kind)) return undefined;
    const before = await this.inner.tryGet(ref);
    const wouldStore = await dryRun();
    return classifyClaimChange(claimOf(before), claimOf(wouldStore));
  }

  async create<T extends KubeObject>(object: T, options?: { dryRun?: boolean }): Promise<T> {
    const ref = refOf(object);
    const step = options?.dryRun ? undefined : createStep(object);
    await this.runHook(step, 'before');
    this.gate(step, 'create', ref.kind, ref.name);
    let stored: T;
    try {
      stored = await this.inner.create(object, options);
      if (ref.kind === 'Job' && !options?.dryRun) {
        this.createdJobs.push(ref.name);
        this.createdSinceArm = true;
      }
      this.after(step, 'create', ref.kind, ref.name);
    } catch (e) {
      this.calls.push({ verb: 'create', kind: ref.kind, name: ref.name, step, ok: false });
      throw e;
    }
    await this.runHook(step, 'after');
    return stored;
  }

  async update<T extends KubeObject>(object: T, options?: WriteOptions): Promise<T> {
    const ref = refOf(object);
    const step = await this.writeStep(ref, options, () => this.inner.update(object, { ...options, dryRun: true }));
    await this.runHook(step, 'before');
    this.gate(step, 'update', ref.kind, ref.name);
    const stored = await this.record('update', ref, step, () => this.inner.update(object, options));
    this.after(step, 'update', ref.kind, ref.name);
    await this.runHook(step, 'after');
    return stored;
  }

  async patch<T extends KubeObject>(ref: ResourceRef, patch: unknown, type: PatchType, options?: WriteOptions): Promise<T> {
    const step = await this.writeStep(ref, options, () => this.inner.patch(ref, patch, type, { ...options, dryRun: true }));
    await this.runHook(step, 'before');
    this.gate(step, 'patch', ref.kind, ref.name);
    const stored = await this.record('patch', ref, step, () => this.inner.patch<T>(ref, patch, type, options));
    this.after(step, 'patch', ref.kind, ref.name);
    await this.runHook(step, 'after');
    return stored;
  }

  async delete(ref: ResourceRef, options?: Parameters<KubeClient['delete']>[1]): Promise<void> {
    this.gate(undefined, 'delete', ref.kind, ref.name);
    await this.record('delete', ref, undefined, () => this.inner.delete(ref, options));
    this.after(undefined, 'delete', ref.kind, ref.name);
  }

  private async record<R>(verb: CallRecord['verb'], ref: ResourceRef, step: DispatchStep | undefined, run: () => Promise<R>): Promise<R> {
    try {
      return await run();
    } catch (e) {
      this.calls.push({ verb, kind: ref.kind, name: ref.name, step, ok: false });
      throw e;
    }
  }

  async get<T extends KubeObject>(ref: ResourceRef): Promise<T> {
    // The read-back of a Job this process created is the confirm step.
    const confirming = ref.kind === 'Job' && this.createdJobs.includes(ref.name);
    const f = this.fault;
    if (confirming && f && !f.fired && f.mode === 'read-fail' && f.step === 'confirm' && this.createdSinceArm) {
      f.fired = true;
      this.calls.push({ verb: 'get', kind: ref.kind, name: ref.name, step: 'confirm', ok: false });
      throw new ApiError({ code: 503, reason: 'ServiceUnavailable', message: 'injected read-back failure' }, `get Job/${ref.name}`);
    }
    try {
      const found = await this.inner.get<T>(ref);
      this.calls.push({ verb: 'get', kind: ref.kind, name: ref.name, step: confirming ? 'confirm' : undefined, ok: true });
      return found;
    } catch (e) {
      this.calls.push({ verb: 'get', kind: ref.kind, name: ref.name, step: confirming ? 'confirm' : undefined, ok: false });
      throw e;
    }
  }

  async tryGet<T extends KubeObject>(ref: ResourceRef): Promise<T | undefined> {
    try {
      return await this.get<T>(ref);
    } catch (e) {
      if (e instanceof ApiError && e.code === 404) return undefined;
      throw e;
    }
  }

  list<T extends KubeObject>(...args: Parameters<KubeClient['list']>): Promise<T[]> {
    return this.inner.list<T>(...args);
  }

  readPodLog(...args: Parameters<KubeClient['readPodLog']>): Promise<string> {
    return this.inner.readPodLog(...args);
  }
}

/**
 * Audits the call log: every successful record write (the Job UID) must follow a successful create of that Job
 * and a successful confirm read of it made after the create.
 */
export function recordedOnlyConfirmed(calls: readonly CallRecord[]): string | undefined {
  let created = false;
  let confirmed = false;
  for (const call of calls) {
    if (call.verb === 'create' && call.kind === 'Job' && call.ok) {
      created = true;
      confirmed = false;
    }
    if (call.step === 'confirm' && call.ok && created) confirmed = true;
    if (call.step === 'record' && call.ok && !(created && confirmed)) return 'the Job UID was recorded without reading the created Job back';
  }
  return undefined;
}

export type { V1Job };
