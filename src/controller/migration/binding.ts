// The execution binding: which executor image, runner protocol and controller-state version this resource's
// plans, approvals and claims are bound to, named by an epoch. A change to any of them installs a new epoch, and
// work authorized under the old one cannot finish under the new one. A migration leaves nothing behind: an
// undispatched claim goes in the write that installs the epoch, and a dispatched Apply is recorded unresolved
// first, so the epoch moves on the next pass once no claim is in flight.
import { mayHaveDispatched } from '../../shared/lifecycle/dispatch.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import { bindingOf, bindingToRecord, boundComponentsMoved, newEpoch, rotationMessage } from '../binding.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { retireMigrationClaim } from './retire.js';
import { finishUncertainMigrationApply } from './uncertain.js';
import { writeMigrationStatus } from './status.js';

/**
 * Keeps status.executionBinding the binding in force. Returns the end of the pass when it wrote; undefined when
 * the binding in force is this manager's.
 */
export async function reconcileMigrationExecutionBinding(pass: MigrationPass): Promise<PassEnd | undefined> {
  const current = pass.status.executionBinding;
  if (!current || !boundComponentsMoved(pass, current)) {
    const binding = bindingToRecord(pass, current);
    // With no claim in flight the idle preamble (src/controller/idle.ts) writes it, with the generation and the
    // report, in one write.
    if (!binding || !pass.claim) return undefined;
    // Under a claim the epoch is kept: a release that changes only the manager's identity adopts the run in flight.
    await writeMigrationStatus(pass, { ...pass.status, executionBinding: binding });
    return endPass(current ? 'execution binding record updated' : 'execution binding installed');
  }
  const claim = pass.claim;
  const operation = claim && migrationOperation(claim.type);
  if (claim && !operation?.known) {
    // A claim a newer manager wrote answers no to every question, "may it be discarded" included: the binding
    // does not move under it (reconcileActiveMigration reports it Blocked until a manager that knows it finishes it).
    return undefined;
  }
  if (claim && operation?.mutating && mayHaveDispatched(claim)) {
    return applyUncertainUnderBindingChange(pass);
  }
  const epoch = newEpoch();
  const message = rotationMessage(pass, current);
  pass.event('Warning', 'ExecutionBindingChanged', message, 'RotateExecutionBinding');
  // The plan was computed under the old epoch and the reading is read again under the new one.
  const rotate = { executionBinding: bindingOf(pass, epoch), plan: undefined, nextReconciliationTime: pass.nowIso() };
  if (claim) {
    // An undispatched claim (or a read-only one, which holds nothing) goes in the write that installs the epoch.
    await retireMigrationClaim(pass, {
      disposition: 'discard',
      why: 'ExecutionBindingChanged',
      record: (status) => Object.assign(status, rotate),
      report: { phase: 'Pending', reason: 'ExecutionBindingChanged', message },
    });
  } else {
    await writeMigrationStatus(pass, { ...pass.status, ...rotate }, { phase: 'Pending', reason: 'ExecutionBindingChanged', message });
  }
  return endPass('execution binding rotated');
}

/**
 * A dispatched Apply cannot finish under a new epoch: its run is recorded unresolved (Unknown) first, and the
 * epoch moves on the next pass, once no claim is in flight.
 */
export async function applyUncertainUnderBindingChange(pass: MigrationPass): Promise<PassEnd> {
  await finishUncertainMigrationApply(pass, {
    reason: 'ExecutionBindingChanged',
    message: 'the execution binding changed while this Apply was dispatched; its Job cannot be confirmed under the new binding',
  });
  return endPass('dispatched Apply recorded unresolved before the binding moves');
}
