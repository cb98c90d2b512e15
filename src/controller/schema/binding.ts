// The execution binding of a PtahSchema (the seed's rotateExecutionBinding and reconcileBindingRetirement). A
// change to a bound component installs a new epoch, and work authorized under the old one cannot finish under it.
// A schema leaves up to two things behind, named in the write that installs the epoch
// (status.pendingBindingRetirement): the retired plan, whose approvals are still to be marked stale, and the Job
// the retired claim dispatched. Each obligation is removed as it is met, the record with its last one, and no
// other rotation starts while the record stands. No phase or condition reason takes part in any of this.
import type { PendingBindingRetirement, PendingObservation, PtahSchemaStatus } from '../../shared/api/schema-kinds.js';
import { recordedApplyClaim } from '../../shared/jobclaim.js';
import { mayHaveDispatched } from '../../shared/lifecycle/dispatch.js';
import { bindingOf, bindingToRecord, boundComponentsMoved, newEpoch, rotationMessage } from '../binding.js';
import { isJobTerminal } from '../evidence.js';
import { giveJobCleanupTtl } from '../release.js';
import { markSchemaPlanApprovalsStale } from './approval.js';
import { endPass, operationOf, servesProof, type PassEnd, type SchemaPass } from './context.js';
import { claimFixedVerdict } from '../claim-job.js';
import { finishUncertainSchemaApply } from './proof.js';
import { retireSchemaClaim } from './retire.js';
import { writeSchemaStatus, type Report } from './status.js';

const RETIREMENT_POLL_MS = 5_000;

/** The status the rotation writes besides the record: the new epoch, no plan, a reading due (markExecutionBindingRefreshRequired). */
function rotated(pass: SchemaPass, status: PtahSchemaStatus, epoch: string, record: PendingBindingRetirement | undefined): void {
  status.executionBinding = bindingOf(pass, epoch);
  status.plan = undefined;
  status.nextReconciliationTime = pass.nowIso();
  if (record && (record.plan || record.job)) status.pendingBindingRetirement = record;
  // The proof restarts from its raw observation under the new epoch.
  if (status.pendingObservation) status.pendingObservation = { ...status.pendingObservation, planRequired: false };
}

/** The record once the obligations `met` names are met: it goes with its last one. */
function remainingRecord(record: PendingBindingRetirement, met: { plan?: boolean; job?: boolean }): PendingBindingRetirement | undefined {
  const next: PendingBindingRetirement = { ...record, ...(met.plan ? { plan: undefined } : {}), ...(met.job ? { job: undefined } : {}) };
  return next.plan || next.job ? next : undefined;
}

/** Settles the obligations `met` names; the record goes with its last one (the seed's settleRetirement). */
async function settleRetirement(pass: SchemaPass, met: { plan?: boolean; job?: boolean }, extra?: (status: PtahSchemaStatus) => void): Promise<void> {
  const record = pass.status.pendingBindingRetirement;
  if (!record) return;
  const status: PtahSchemaStatus = { ...pass.status, pendingBindingRetirement: remainingRecord(record, met) };
  extra?.(status);
  await writeSchemaStatus(pass, status);
}

/**
 * The retired Apply's Job the record has to name when no claim of the retired epoch does: an outcome-unknown Apply
 * of that epoch whose Job UID no pass learned. Its Job may still be created late (its UID is then adopted) or is
 * given up on at the Apply's horizon, and gets its cleanup TTL once it stops (retiredApplyJobObligation).
 */
function unaccountedRetiredApplyJob(pending: PendingObservation | undefined, retiredEpoch: string): PendingBindingRetirement['job'] {
  if (!pending || pending.outcome !== 'OutcomeUnknown' || pending.executionBindingID !== retiredEpoch || pending.applyJobUID) return undefined;
  return { operation: 'Apply', name: pending.applyJobName };
}

/**
 * Keeps status.executionBinding the binding in force. Returns the end of the pass when it wrote or waits;
 * undefined when the binding in force is this manager's and nothing of a retired epoch is owed here.
 */
export async function reconcileSchemaExecutionBinding(pass: SchemaPass): Promise<PassEnd | undefined> {
  if (pass.status.pendingBindingRetirement) return reconcileBindingRetirement(pass);
  const current = pass.status.executionBinding;
  if (!current || !boundComponentsMoved(pass, current)) {
    const binding = bindingToRecord(pass, current);
    // With neither a claim nor a proof the idle preamble (src/controller/idle.ts) writes it, with the generation and
    // the report, in one write.
    if (!binding || (!pass.claim && !pass.status.pendingObservation)) return undefined;
    await writeSchemaStatus(pass, { ...pass.status, executionBinding: binding });
    return endPass(current ? 'execution binding record updated' : 'execution binding installed');
  }
  return rotateExecutionBinding(pass);
}

async function rotateExecutionBinding(pass: SchemaPass): Promise<PassEnd | undefined> {
  const current = pass.status.executionBinding!;
  const claim = pass.claim;
  const operation = claim && operationOf(pass, claim);
  // A claim a newer manager wrote answers no to every question: the binding does not move under it.
  if (claim && !operation?.known) return undefined;
  const epoch = newEpoch();
  const message = rotationMessage(pass, current);
  const report: Report = { phase: 'Pending', reason: 'ExecutionBindingChanged', message };
  const plan = pass.status.plan;
  const record: PendingBindingRetirement = {
    retiredEpoch: current.epoch,
    ...(plan ? { plan: { name: plan.name, uid: plan.uid, fingerprint: plan.fingerprint } } : {}),
  };
  pass.event('Warning', 'ExecutionBindingChanged', message, 'RotateExecutionBinding');
  if (claim && operation?.mutating && mayHaveDispatched(claim)) {
    // A dispatched Apply becomes a proof with an unknown outcome, and the epoch moves in the same write.
    record.job = { operation: claim.type, name: claim.jobName, ...(claim.jobUID ? { uid: claim.jobUID } : {}) };
    await finishUncertainSchemaApply(pass, { reason: 'ExecutionBindingChanged', message: 'the execution binding changed while this Apply was dispatched' },
      (status) => rotated(pass, status, epoch, record));
    return endPass('dispatched Apply recorded uncertain; binding rotated');
  }
  if (claim && operation?.readOnly) {
    // A reading stays in status.activeOperation until its Job has stopped, so a Plan's Lease is not handed back
    // while its Pod can still reach the database.
    record.job = { operation: claim.type, name: claim.jobName, ...(claim.jobUID ? { uid: claim.jobUID } : {}) };
    const status: PtahSchemaStatus = { ...pass.status };
    rotated(pass, status, epoch, record);
    await writeSchemaStatus(pass, status, report);
    return endPass('binding rotated; the reading is kept until its Job stops');
  }
  const applyJob = claim ? undefined : unaccountedRetiredApplyJob(pass.status.pendingObservation, current.epoch);
  if (applyJob) record.job = applyJob;
  if (claim) {
    // An undispatched Apply goes in the write that installs the epoch, handing back a realm it took.
    await retireSchemaClaim(pass, { disposition: 'discard', why: 'ExecutionBindingChanged', record: (status) => rotated(pass, status, epoch, record), report });
  } else {
    const status: PtahSchemaStatus = { ...pass.status };
    rotated(pass, status, epoch, record);
    await writeSchemaStatus(pass, status, report);
  }
  return endPass('execution binding rotated');
}

/** Works off one obligation of the retired epoch per pass, in order: the plan's approvals, then the reading's Job. */
async function reconcileBindingRetirement(pass: SchemaPass): Promise<PassEnd | undefined> {
  const record = pass.status.pendingBindingRetirement!;
  if (record.plan) {
    const marked = await markSchemaPlanApprovalsStale(pass, record.plan, 'ExecutionBindingChanged', `plan ${record.plan.name} was computed under execution epoch ${record.retiredEpoch}, which was retired`);
    await settleRetirement(pass, { plan: true });
    return endPass(`retired plan's approvals marked stale (${marked})`);
  }
  const job = record.job!;
  const claim = pass.claim;
  if (claim && claim.jobName === job.name && operationOf(pass, claim).readOnly) {
    const found = await pass.readJob(job.name);
    const ours = found?.metadata?.ownerReferences?.some((r) => r.controller === true && r.uid === pass.uid) === true;
    if (found && ours && !claim.jobUID && !job.uid && claimFixedVerdict(pass, claim, found, { retiredEpoch: true }).ok) {
      const uid = found.metadata!.uid!;
      await writeSchemaStatus(pass, { ...pass.status, activeOperation: { ...claim, jobUID: uid }, pendingBindingRetirement: { ...record, job: { ...job, uid } } });
      return endPass('retired reading\'s Job adopted by UID');
    }
    if (found && ours && !isJobTerminal(found)) return endPass(`waiting for the retired reading's Job ${job.name} to stop`, RETIREMENT_POLL_MS);
    await retireSchemaClaim(pass, {
      disposition: 'discard',
      why: 'ExecutionBindingChanged',
      job: found,
      retiredEpoch: true,
      record: (status) => {
        // The reading named the retired Job in the Apply's place (the rotation records one Job); once it settles,
        // the Apply it was proving still owes its own, and the record passes to it instead of going.
        const applyJob = unaccountedRetiredApplyJob(status.pendingObservation, record.retiredEpoch);
        status.pendingBindingRetirement = applyJob ? { ...record, job: applyJob } : remainingRecord(record, { job: true });
      },
    });
    return endPass('retired reading settled');
  }
  const pending = pass.status.pendingObservation;
  // The retired Apply's Job is the proof's to account for (retiredApplyJobObligation); the pass goes on to the proof.
  if (pending && pending.applyJobName === job.name && !claim) return undefined;
  if (pending && pending.applyJobName === job.name && claim && servesProof(pass, claim)) return undefined;
  await settleRetirement(pass, { job: true });
  return endPass('retired Job no longer carried by any claim');
}

/**
 * The retired Apply's Job, carried by the proof (the seed's adoptRetiredApplyJobUID and cleanupRetiredApplyJob):
 * no proof is claimed until it is accounted for — its UID adopted from a late create, or given up on at the
 * Apply's horizon — and its cleanup TTL set once it stops. Returns the end of the pass while it is owed.
 */
export async function retiredApplyJobObligation(pass: SchemaPass): Promise<PassEnd | undefined> {
  const record = pass.status.pendingBindingRetirement;
  const pending = pass.status.pendingObservation;
  if (!record?.job || !pending || record.job.name !== pending.applyJobName) return undefined;
  // Held to what the record fixes, as the controller-write webhook holds the TTL it admits.
  const applyClaim = recordedApplyClaim(pending);
  const found = await pass.readJob(pending.applyJobName);
  const matches = found !== undefined && found.metadata?.ownerReferences?.some((r) => r.controller === true && r.uid === pass.uid) === true &&
    claimFixedVerdict(pass, applyClaim, found, { retiredEpoch: true }).ok;
  if (!pending.applyJobUID) {
    if (found && matches) {
      const uid = found.metadata!.uid!;
      await writeSchemaStatus(pass, { ...pass.status, pendingObservation: { ...pending, applyJobUID: uid }, pendingBindingRetirement: { ...record, job: { ...record.job, uid } } });
      return endPass('retired Apply Job adopted by UID');
    }
    const horizon = pending.observeAfter ? Date.parse(pending.observeAfter) : 0;
    if (pass.now().getTime() < horizon) return endPass('waiting for the retired Apply\'s Job or its horizon', Math.min(horizon - pass.now().getTime(), RETIREMENT_POLL_MS));
    await settleRetirement(pass, { job: true });
    return endPass('retired Apply Job given up on at its horizon');
  }
  if (found && matches && found.metadata?.uid === pending.applyJobUID) {
    if (!isJobTerminal(found)) return endPass('waiting for the retired Apply Job to stop', RETIREMENT_POLL_MS);
    await giveJobCleanupTtl(pass, applyClaim, found, { retiredEpoch: true });
  }
  await settleRetirement(pass, { job: true });
  return endPass('retired Apply Job accounted for');
}
