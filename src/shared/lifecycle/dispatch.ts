// The dispatch sequence (the seed's mutationlifecycle.Dispatch), decided once for both families: it takes a claim
// whose Job does not exist yet to its one permitted create. Each step's durable write is made before the next
// step starts; the family supplies only what differs (how it authorizes, what it stages, how it builds its Job,
// where its claim lives, how it spends its approval, how it retires a claim).
import type { V1Job } from '@kubernetes/client-node';
import { ApiError, refOf, type KubeClient } from '../kube-client.js';
import { match } from '../jobclaim.js';
import { readSnapshotExtras, resolveSnapshot, templateDigestOf, verifySnapshot, type AdmissionSnapshot } from '../podintent.js';
import type { ActiveOperation } from '../api/shapes.js';
import { classifyCreate, failureOf, refusedBeforeStorage } from './classify.js';
import { holdingRequest, type DispatchLeases } from './leases.js';
import type { OperationAnswers } from './operations.js';
import { superviseEveryMs } from './supervision.js';

/** A realm another claimant holds is looked at again this often: its release wakes nothing here. */
const CONTENDED_REALM_POLL_MS = 5_000;

export const ORDER = ['authorize', 'lease', 'stage', 'snapshot', 'consume', 'mark', 'create', 'confirm', 'record'] as const;
export type DispatchStep = (typeof ORDER)[number];
export type DispatchOrder = readonly DispatchStep[];

/** The claim: status.activeOperation of either family. */
export type DispatchClaim = ActiveOperation;

/** Fields of the claim the driver writes, each in its own status patch guarded by the claim's ID. */
export type ClaimWrite = Partial<Pick<DispatchClaim, 'leaseEpoch' | 'admissionSnapshot' | 'dispatchStarted' | 'jobUID'>>;

export type Authorization = { ok: true } | { ok: false; reason: string; message: string };

/** What ends a pass: when to look again, and why (for logs and tests). */
export interface PassEnd {
  requeueAfterMs: number;
  why: string;
}

/** Everything a family supplies to the driver. */
export interface DispatchFamily {
  readonly family: 'schema' | 'migration';
  readonly owner: { apiVersion: string; kind: string; namespace: string; name: string; uid: string };
  readonly claim: DispatchClaim;
  readonly operation: OperationAnswers;
  /**
   * Step 1: re-read (uncached) everything the claim was decided from. The resource itself is the pass's own
   * uncached read, kept current by the pass's writes: the claim was decided in an earlier pass.
   */
  authorize(): Promise<Authorization>;
  /** A claim whose authorization moved is retired undispatched (disposition: discard). */
  retireUnauthorized(refusal: { reason: string; message: string }): Promise<void>;
  /** Step 3: write what the Job reads besides the Job; false ends the pass to try again. */
  stage(): Promise<boolean>;
  /** Rebuilds the claim's Job from its inputs (the same rebuild jobclaim.match is held to). */
  buildJob(snapshot: AdmissionSnapshot | undefined): Promise<V1Job>;
  /**
   * Step 5: spend the approval that authorized a mutating claim; idempotent for this claim. False when the approval
   * can no longer be spent (deleted, replaced, spent by another claim) and the family retired the claim.
   */
  consumeApproval(): Promise<boolean>;
  /** One status patch of claim fields, refused by the family if the claim is no longer this claim. */
  writeClaim(fields: ClaimWrite): Promise<void>;
  /** A mutating claim whose outcome nobody can establish (the seed's finishUncertain…Apply). */
  finishUncertain(reason: string, message: string): Promise<void>;
  /** A read-only claim runs again under a new attempt. */
  retryReadOnly(reason: string): Promise<void>;
  /** Announces the dispatch (Event, telemetry); never fails the pass. */
  announceStarted(job: V1Job): void;
  /** A Warning Event on the owner; never fails the pass. */
  warn(reason: string, message: string): void;
}

export interface DispatchDeps {
  client: KubeClient;
  /** The pass's realm Leases (PassLeases). */
  lock: DispatchLeases;
}

/** The driver was handed a claim it must not dispatch (a defect in the caller, never a retry). */
export class DispatchRefused extends Error {
  override name = 'DispatchRefused';
}

/** A mutating claim that may already have dispatched never enters the driver again (it is supervised instead). */
export function mayHaveDispatched(claim: DispatchClaim): boolean {
  return claim.dispatchStarted === true || Boolean(claim.jobUID);
}

interface PassState {
  job?: V1Job;
  created?: V1Job;
  confirmed?: V1Job;
  snapshot?: AdmissionSnapshot;
}

type StepOutcome = { next: true } | { next: false; end: PassEnd };
const next: StepOutcome = { next: true };
const end = (why: string, requeueAfterMs = 0): StepOutcome => ({ next: false, end: { why, requeueAfterMs } });

/**
 * Runs the dispatch sequence for one pass. `order` is a test seam: production always uses ORDER; the dispatch
 * order tests pass a sequence with two steps exchanged to prove each boundary matters.
 */
export async function dispatch(family: DispatchFamily, deps: DispatchDeps, order: DispatchOrder = ORDER): Promise<PassEnd> {
  const { claim, operation } = family;
  if (!operation.known) {
    // A type this binary does not know is neither mutating nor read-only: nothing may act on it.
    return { why: `operation type ${JSON.stringify(claim.type)} is not known to this manager`, requeueAfterMs: 60_000 };
  }
  if (operation.mutating && mayHaveDispatched(claim)) {
    throw new DispatchRefused(`claim ${claim.id} may already have dispatched; it is supervised, never dispatched again`);
  }
  const state: PassState = { snapshot: claim.admissionSnapshot };
  const steps: Record<DispatchStep, () => Promise<StepOutcome>> = {
    authorize: () => authorizeStep(family),
    lease: () => leaseStep(family, deps),
    stage: async () => ((await family.stage()) ? next : end('staging not complete')),
    snapshot: () => snapshotStep(family, deps, state),
    consume: async () => {
      if (!operation.mutating || (await family.consumeApproval())) return next;
      return end('the approval could not be spent; the claim was retired');
    },
    mark: async () => {
      if (operation.mutating || operation.holdsRealm) await family.writeClaim({ dispatchStarted: true });
      return next;
    },
    create: () => createStep(family, deps, state),
    confirm: () => confirmStep(family, deps, state),
    record: () => recordStep(family, state),
  };
  for (const step of order) {
    const outcome = await steps[step]();
    if (!outcome.next) return outcome.end;
  }
  return { why: 'dispatched', requeueAfterMs: superviseEveryMs(operation) };
}

async function authorizeStep(family: DispatchFamily): Promise<StepOutcome> {
  const verdict = await family.authorize();
  if (verdict.ok) return next;
  await family.retireUnauthorized({ reason: verdict.reason, message: verdict.message });
  return end(`authorization moved: ${verdict.reason}`);
}

async function leaseStep(family: DispatchFamily, deps: DispatchDeps): Promise<StepOutcome> {
  const { claim, operation, owner } = family;
  if (!operation.holdsRealm) return next;
  if (!claim.coordinationDigest || !claim.leaseDurationSeconds) {
    throw new DispatchRefused(`claim ${claim.id} holds the realm but records no coordination digest or lease duration`);
  }
  const request = holdingRequest({
    coordinationDigest: claim.coordinationDigest,
    resourceUid: owner.uid,
    // A reading that proves a schema Apply runs under the Apply's holding, never a holding of its own.
    operationId: claim.proofOf ?? claim.id,
    durationSeconds: claim.leaseDurationSeconds,
    epoch: claim.leaseEpoch,
  });
  // Held, under the claim's epoch, by a renewal earlier in this pass (a proof's acquirePendingLock): the holding the
  // mark needs is the one that renewal found, and renewing it again proves nothing more.
  if (deps.lock.renewedInPass?.(request)) return next;
  const result = await deps.lock.acquire(request);
  if (result.kind === 'contended') return end(`realm held by ${result.holderIdentity}`, Math.min(result.requeueAfterMs, CONTENDED_REALM_POLL_MS));
  // Before dispatch nothing ran, so a new epoch is adopted: the claim names the holding it dispatches under.
  if (result.epoch !== claim.leaseEpoch) await family.writeClaim({ leaseEpoch: result.epoch });
  return next;
}

/** The Job the snapshot step built; a driver that reaches the create without one was handed a broken order. */
function builtJob(state: PassState): V1Job {
  if (!state.job) throw new DispatchRefused('the Job was not built before the create: the snapshot step builds it, before the mark');
  return state.job;
}

async function snapshotStep(family: DispatchFamily, deps: DispatchDeps, state: PassState): Promise<StepOutcome> {
  const { claim } = family;
  const template = (await family.buildJob(undefined)).spec?.template;
  if (!template) throw new DispatchRefused('the rebuilt Job has no Pod template');
  const templateDigest = templateDigestOf(template);
  const persisted = claim.admissionSnapshot;
  if (persisted && verifySnapshot(persisted) && persisted.templateDigest === templateDigest) {
    state.snapshot = persisted;
    // The Job the create submits is built here, under the snapshot, before the consume and the mark: building it
    // reads and can fail, and nothing that can fail may sit between the mark and the create.
    state.job = await family.buildJob(persisted);
    return next;
  }
  if (persisted) {
    // Refused, never refreshed (the seed: a later pass "refuses a template whose digest disagrees"). The snapshot is
    // the envelope the claim's Job and Pod are judged by; re-resolving it would let the envelope move under the
    // claim. Nothing has been dispatched, so retiring the claim costs only a new claim (and, in the one window
    // where the approval was spent before a stop, a new approval, which authorizes nothing by itself).
    const message = verifySnapshot(persisted)
      ? `the operation Pod template (${templateDigest}) no longer matches the admission snapshot (${persisted.templateDigest}) the claim recorded`
      : 'the admission snapshot the claim recorded does not verify';
    family.warn('AdmissionSnapshotRefused', `operation ${claim.id}: ${message}; the claim is withdrawn before dispatch`);
    await family.retireUnauthorized({ reason: 'TemplateMoved', message });
    return end('template disagrees with the admission snapshot');
  }
  // Resolving the snapshot is its own boundary: the pass that writes it ends without creating anything.
  await family.writeClaim({ admissionSnapshot: resolveSnapshot(template, await readSnapshotExtras(deps.client)) });
  return end('admission snapshot recorded');
}

async function createStep(family: DispatchFamily, deps: DispatchDeps, state: PassState): Promise<StepOutcome> {
  const job = builtJob(state);
  try {
    state.created = await deps.client.create(job);
    return next;
  } catch (e) {
    const verdict = classifyCreate(failureOf(e), family.operation.mutating);
    const message = e instanceof Error ? e.message : String(e);
    switch (verdict) {
      case 'withdraw': {
        // Refused before storage: nothing stands under the reserved name, so the marker goes back.
        await family.writeClaim({ dispatchStarted: false });
        const stage = refusedBeforeStorage(failureOf(e)) ?? 'refused';
        family.warn('JobCreateRefused', `the create of Job ${job.metadata?.name} was refused before storage (${stage}); the claim withdraws its marker and creates it on a later pass: ${message}`);
        return end(`create refused before storage (${stage}): ${message}`, 5_000);
      }
      case 'uncertain':
        await family.finishUncertain('CreateOutcomeUnknown', `the Job create may have been stored: ${message}`);
        return end('create outcome unknown');
      case 'retry':
        await family.retryReadOnly(`a Job already stands under ${job.metadata?.name}`);
        return end('read-only claim retried');
      case 'requeue':
        return end(`create failed: ${message}`, 5_000);
    }
  }
}

async function confirmStep(family: DispatchFamily, deps: DispatchDeps, state: PassState): Promise<StepOutcome> {
  const job = builtJob(state);
  let stored: V1Job;
  try {
    stored = await deps.client.get<V1Job>(refOf(job));
  } catch (e) {
    // The mark is durable: the next pass adopts the Job it finds or declares the outcome unknown.
    return end(`read-back failed: ${e instanceof ApiError ? e.message : String(e)}`, 2_000);
  }
  const verdict = match(stored, family.claim, { kind: 'rebuild', rebuilt: job });
  if (!verdict.ok) {
    if (family.operation.mutating) await family.finishUncertain('JobIntentMismatch', `the created Job is not the claim's: ${verdict.reason}`);
    else await family.retryReadOnly(`the created Job is not the claim's: ${verdict.reason}`);
    return end('created Job failed its read-back');
  }
  state.confirmed = stored;
  return next;
}

async function recordStep(family: DispatchFamily, state: PassState): Promise<StepOutcome> {
  const job = state.confirmed ?? state.created;
  const uid = job?.metadata?.uid;
  if (!job || !uid) return end('no created Job to record');
  await family.writeClaim({ jobUID: uid });
  family.announceStarted(job);
  return next;
}

/** Returns ORDER with two steps exchanged: the dispatch-order tests' seam. */
export function swapped(a: DispatchStep, b: DispatchStep): DispatchOrder {
  return ORDER.map((s) => (s === a ? b : s === b ? a : s));
}
