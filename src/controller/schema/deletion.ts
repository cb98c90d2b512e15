// The finalizer and deletion (the seed's reconcileDeletion). The schema finalizer stays while a claim or a proof
// is owed: a reading that holds the realm keeps its Lease until its Job stops; a dispatched Apply becomes a proof
// with an unknown outcome; and the proof is run as on any pass (its Observe and Plan under the Apply's Lease), and
// ended unread only when no reading can finish it (unreadable.ts), a Warning Event saying which it was.
import { FINALIZERS } from '../../shared/api/names.js';
import { mayHaveDispatched } from '../../shared/lifecycle/dispatch.js';
import { addFinalizer, hasFinalizer, removeFinalizer } from '../finalizer.js';
import { isJobTerminal } from '../evidence.js';
import { reconcileActiveSchema } from './active.js';
import { endPass, operationOf, servesProof, type PassEnd, type SchemaPass } from './context.js';
import { finishUncertainSchemaApply, reconcilePendingObservation } from './proof.js';
import { retireSchemaClaim } from './retire.js';

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
      // No proof reading can be claimed beside it: the manager that knows it finishes it, and then the proof.
      if (pass.status.pendingObservation) return endPass('deleting: a proof waits behind an operation this manager does not know', 60_000);
    } else if (operation.mutating && mayHaveDispatched(claim)) {
      await finishUncertainSchemaApply(pass, { reason: 'Deleting', message: 'the resource is being deleted while this Apply may have run' });
      return endPass('dispatched Apply on deletion: proof owed');
    } else if (servesProof(pass, claim)) {
      return reconcileActiveSchema(pass, claim);
    } else {
      if (operation.holdsRealm && claim.jobUID) {
        const job = await pass.readJob(claim.jobName);
        if (job && job.metadata?.uid === claim.jobUID && !isJobTerminal(job)) return endPass('deleting: waiting for a reading that holds the realm to stop', DELETION_POLL_MS);
      }
      await retireSchemaClaim(pass, { disposition: 'discard', why: 'Deleting' });
      return endPass('claim retired on deletion');
    }
  }
  if (pass.status.pendingObservation) return reconcilePendingObservation(pass);
  pass.s = await removeFinalizer(pass.deps.client, pass.s, FINALIZERS.schema);
  return endPass('finalizer removed on deletion', 60_000);
}
