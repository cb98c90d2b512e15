// The finalizer and deletion (the seed's reconcileDeletion). The schema finalizer stays while a claim or a proof
// is owed: a reading that holds the realm keeps its Lease until its Job stops; a dispatched Apply becomes a proof
// with an unknown outcome; a proof is ended only once no Apply Pod can run and its horizon has passed, by the write
// that drops the record and stages its release.
import { FINALIZERS } from '../../shared/api/names.js';
import { mayHaveDispatched } from '../../shared/lifecycle/dispatch.js';
import { addFinalizer, hasFinalizer, removeFinalizer } from '../finalizer.js';
import { isJobTerminal } from '../evidence.js';
import { endPass, operationOf, type PassEnd, type SchemaPass } from './context.js';
import { acquirePendingLock, finishUncertainSchemaApply, possibleApplyPodActive } from './proof.js';
import { stageRelease } from '../release.js';
import { proofRelease, retireSchemaClaim, completeSchemaPendingLockRelease } from './retire.js';
import { writeSchemaStatus } from './status.js';

const DELETION_POLL_MS = 5_000;

/** What the finalizer is for: a claim, a proof, or an owed release. */
function finalizerWanted(pass: SchemaPass): boolean {
  const { activeOperation, pendingObservation, pendingLockRelease } = pass.status;
  return Boolean(activeOperation || pendingObservation || pendingLockRelease);
}

/**
 * Keeps the finalizer exactly while something it is for stands. A finalizer with no claim and no record (a process
 * stopped between the finalizer's patch and the claim's) is removed before anything else happens.
 */
export async function reconcileSchemaFinalizer(pass: SchemaPass): Promise<PassEnd | undefined> {
  const present = hasFinalizer(pass.s, FINALIZERS.schema);
  const wanted = finalizerWanted(pass);
  if (present && !wanted) {
    pass.s = await removeFinalizer(pass.deps.client, pass.s, FINALIZERS.schema);
    return endPass('finalizer without a claim or record removed');
  }
  if (!present && wanted) {
    pass.s = await addFinalizer(pass.deps.client, pass.s, FINALIZERS.schema);
    return endPass('finalizer restored beside a claim or record');
  }
  return undefined;
}

export async function reconcileSchemaDeletion(pass: SchemaPass): Promise<PassEnd> {
  if (!hasFinalizer(pass.s, FINALIZERS.schema)) return endPass('deleting; nothing held', 60_000);
  const claim = pass.claim;
  if (claim) {
    const operation = operationOf(pass, claim);
    if (!operation.known) {
      pass.event('Warning', 'ActiveRunDiscarded', `the resource is deleted while a ${JSON.stringify(claim.type)} operation ${claim.id}, which this manager does not know, is in flight; it is left untouched`);
    } else if (operation.mutating && mayHaveDispatched(claim)) {
      await finishUncertainSchemaApply(pass, { reason: 'Deleting', message: 'the resource is being deleted while this Apply may have run' });
      return endPass('dispatched Apply on deletion: proof owed');
    } else {
      if (operation.holdsRealm && claim.jobUID) {
        const job = await pass.readJob(claim.jobName);
        if (job && job.metadata?.uid === claim.jobUID && !isJobTerminal(job)) return endPass('deleting: waiting for a reading that holds the realm to stop', DELETION_POLL_MS);
      }
      await retireSchemaClaim(pass, { disposition: 'discard', why: 'Deleting' });
      return endPass('claim retired on deletion');
    }
  }
  const pending = pass.status.pendingObservation;
  if (pending) {
    const renewed = await acquirePendingLock(pass);
    if (renewed) return renewed;
    const active = await possibleApplyPodActive(pass);
    if (active) return active;
    const wait = pending.observeAfter ? Date.parse(pending.observeAfter) - pass.now().getTime() : 0;
    if (wait > 0) return endPass('deleting: waiting for the Apply window to pass', Math.min(wait, DELETION_POLL_MS));
    const next = { ...pass.status, pendingObservation: undefined };
    stageRelease(pass.status.pendingLockRelease, next, proofRelease(pending));
    await writeSchemaStatus(pass, next);
    pass.event('Warning', 'ProofDiscarded', `the resource is deleted with the proof of Apply ${pending.applyOperationID} (${pending.outcome}) owed; nothing of it can still write, and its realm is handed back`);
    await completeSchemaPendingLockRelease(pass);
    return endPass('proof ended on deletion');
  }
  pass.s = await removeFinalizer(pass.deps.client, pass.s, FINALIZERS.schema);
  return endPass('finalizer removed on deletion', 60_000);
}
