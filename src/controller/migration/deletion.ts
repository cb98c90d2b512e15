// The finalizer and deletion. The finalizer is held while a claim or a record (an unresolved run, an owed
// release) stands, so that deletion is seen; it never holds deletion up. A dispatched Apply's account and an
// unresolved run are lost with the resource, and a Warning Event says so; the Lease of a run that may still write
// is left to expire, after its executor stopped.
import { FINALIZERS } from '../../shared/api/names.js';
import { mayHaveDispatched } from '../../shared/lifecycle/dispatch.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import { releaseRunEvidence } from '../evidence.js';
import { addFinalizer, hasFinalizer, removeFinalizer } from '../finalizer.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { retireMigrationClaim } from './retire.js';
import { dispatchedApplyMayStillWrite } from './uncertain.js';

/** What the finalizer is for: a claim, an unresolved run, or an owed release. */
function finalizerWanted(pass: MigrationPass): boolean {
  const { activeOperation, unresolvedRun, pendingLockRelease } = pass.status;
  return Boolean(activeOperation || unresolvedRun || pendingLockRelease);
}

/**
 * Keeps the finalizer exactly while something it is for stands. A finalizer with no claim and no record (a
 * process stopped between the finalizer's patch and the claim's) is removed before anything else happens.
 */
export async function reconcileMigrationFinalizer(pass: MigrationPass): Promise<PassEnd | undefined> {
  const present = hasFinalizer(pass.m, FINALIZERS.migration);
  const wanted = finalizerWanted(pass);
  if (present && !wanted) {
    await releaseRunEvidence(pass);
    pass.m = await removeFinalizer(pass.deps.client, pass.m, FINALIZERS.migration);
    return endPass('finalizer without a claim or record removed');
  }
  if (!present && wanted) {
    pass.m = await addFinalizer(pass.deps.client, pass.m, FINALIZERS.migration);
    return endPass('finalizer restored beside a claim or record');
  }
  return undefined;
}

/**
 * Deletion does not wait for anything: it announces what is lost, retires the claim through the family's one
 * retirement function (so any release follows the durable write that clears the claim), and lets go.
 */
export async function reconcileMigrationDeletion(pass: MigrationPass): Promise<PassEnd> {
  if (!hasFinalizer(pass.m, FINALIZERS.migration)) return endPass('deleting; nothing held', 60_000);
  const claim = pass.claim;
  if (claim) {
    const operation = migrationOperation(claim.type);
    if (!operation.known) {
      // Unknown answers no to every question, "may I retire it" included: the claim goes with the resource
      // untouched, and whatever Lease it holds expires by itself.
      pass.event('Warning', 'ActiveRunDiscarded', `the resource is deleted while a ${JSON.stringify(claim.type)} operation ${claim.id}, which this manager does not know, is in flight; ` +
        'it is left untouched and any realm Lease it holds is left to expire');
    } else if (operation.mutating && mayHaveDispatched(claim)) {
      const mayStillWrite = await dispatchedApplyMayStillWrite(pass, claim);
      pass.event('Warning', 'ActiveRunDiscarded', `the resource is deleted while Apply operation ${claim.id} (Job ${claim.jobName}) may have run; ` +
        `its outcome will never be recorded. ${mayStillWrite ? 'It may still be writing, so its realm Lease is left to expire.' : 'Nothing of it can still write.'}`);
      await retireMigrationClaim(pass, { disposition: 'unaccounted', why: 'Deleting', mayStillWrite });
      return endPass('dispatched claim retired on deletion');
    } else {
      // Nothing was dispatched (or it only read): retire it, handing back a realm it may hold.
      await retireMigrationClaim(pass, { disposition: 'discard', why: 'Deleting' });
      return endPass('undispatched claim retired on deletion');
    }
  }
  const unresolved = pass.status.unresolvedRun;
  if (unresolved) {
    pass.event('Warning', 'UnresolvedRunDiscarded', `the resource is deleted with unresolved operation ${unresolved.operationID} (${unresolved.outcome}); its record is lost`);
  }
  await releaseRunEvidence(pass);
  pass.m = await removeFinalizer(pass.deps.client, pass.m, FINALIZERS.migration);
  return endPass('finalizer removed on deletion', 60_000);
}
