// The execution binding, for both families: which executor (by the digest of its code), runner protocol and
// controller-state version a resource's plans, approvals and claims are bound to, named by an epoch. A change to a
// bound component installs a new epoch; a change to what the binding only records (the controller image and
// revision, the runner image) keeps it (docs/execution-binding.md).
import { randomBytes } from 'node:crypto';
import type { ExecutionBinding } from '../shared/api/shapes.js';
import type { OwnerPass, OwnerResource } from './pass.js';

type AnyPass = OwnerPass<OwnerResource>;

export const newEpoch = (): string => `v1-${randomBytes(16).toString('hex')}`;

/** The binding this manager would install, under `epoch`. */
export function bindingOf(pass: AnyPass, epoch: string): ExecutionBinding {
  const m = pass.deps.manager;
  return {
    epoch,
    controllerStateVersion: m.controllerStateVersion,
    executorIdentity: m.executorIdentity,
    runnerImage: m.runnerImage,
    runnerProtocolVersion: m.runnerProtocolVersion,
    controllerImage: m.controllerImage,
    controllerRevision: m.controllerRevision,
  };
}

/**
 * Whether a bound component (controller-state version, executor identity, runner protocol) differs from this
 * manager's. A binding written before executors were identified names none, so it differs.
 */
export function boundComponentsMoved(pass: AnyPass, binding: ExecutionBinding): boolean {
  const m = pass.deps.manager;
  return binding.controllerStateVersion !== m.controllerStateVersion || binding.executorIdentity !== m.executorIdentity ||
    binding.runnerProtocolVersion !== m.runnerProtocolVersion;
}

/** Whether only what the binding records (the controller image and revision, the runner image) differs. */
export function recordedComponentsMoved(pass: AnyPass, binding: ExecutionBinding): boolean {
  const m = pass.deps.manager;
  return binding.controllerImage !== m.controllerImage || binding.controllerRevision !== m.controllerRevision || binding.runnerImage !== m.runnerImage;
}

/**
 * The binding to write when no bound component moved: a first one under a new epoch when none is in force, or the
 * one in force with this manager's identity recorded (its epoch kept). Undefined when nothing is to be written
 * here: this manager's binding is in force, or a bound component moved, which is a rotation, each family's own.
 */
export function bindingToRecord(pass: AnyPass, current: ExecutionBinding | undefined): ExecutionBinding | undefined {
  if (!current) return bindingOf(pass, newEpoch());
  if (boundComponentsMoved(pass, current) || !recordedComponentsMoved(pass, current)) return undefined;
  return bindingOf(pass, current.epoch);
}

/** The message a rotation announces: what moved, and that the old epoch's plans and approvals authorize nothing. */
export function rotationMessage(pass: AnyPass, current: ExecutionBinding): string {
  const m = pass.deps.manager;
  return `the execution binding moved (executor ${current.executorIdentity ?? 'unidentified'} → ${m.executorIdentity}, ` +
    `protocol ${current.runnerProtocolVersion} → ${m.runnerProtocolVersion}, state ${current.controllerStateVersion} → ` +
    `${m.controllerStateVersion}); plans and approvals of epoch ${current.epoch} no longer authorize anything`;
}
