// Wires the PtahMigration reconciler into the controller manager: one pass per resource at a time (and so one
// writer of its status), woken by the resource itself, the Jobs and Pods it dispatched, and the plans, approvals
// and acknowledgments that name it. Events only wake a key; every decision re-reads uncached.
import '../../shared/kube.js'; // registers the operator's kinds with the REST client
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import { systemClock, type Clock } from '../../shared/clock.js';
import { JOB_LABELS } from '../../shared/job/metadata.js';
import type { KubeObject } from '../../shared/kube-client.js';
import type { DispatchOrder } from '../../shared/lifecycle/dispatch.js';
import { RUNNER_PROTOCOL_VERSION } from '../../shared/runner-protocol.js';
import { TargetLock } from '../../shared/targetlock.js';
import { Controller, ignoreStatusOnlyUpdates, toLabelledOwner, type KeyMapper } from '../controller.js';
import { registerController, type ControllerEnv, type ControllerRegistration } from '../manager.js';
import type { MigrationDeps, MigrationManagerIdentity } from './context.js';
import { reconcileMigration } from './reconcile.js';

export const MIGRATION_CONTROLLER = 'ptahmigration';
/** The version of the status this manager writes; a change rotates every execution binding. */
export const CONTROLLER_STATE_VERSION = 1;

export interface MigrationControllerOptions {
  /** Images and revision this manager records on its Jobs (the webhook is given the same). */
  manager: Pick<MigrationManagerIdentity, 'controllerImage' | 'controllerRevision' | 'runnerImage'> & Partial<Omit<MigrationManagerIdentity, 'executorImage'>>;
  /** Watch one namespace only (tests); every namespace by default. */
  namespace?: string;
  clock?: Clock;
  /** Dispatch order: the dispatch-order tests' seam, never configuration. */
  order?: DispatchOrder;
}

const OWNER = { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind };
const OPERATION_OBJECTS = `${JOB_LABELS.component}=migration-operation`;

/** Maps an approval, acknowledgment or plan to the migration its spec names. */
const toNamedMigration: KeyMapper<KubeObject & { spec?: { migrationRef?: { name?: string } } }> = (obj) => {
  const name = obj.spec?.migrationRef?.name;
  return name && obj.metadata?.namespace ? [`${obj.metadata.namespace}/${name}`] : [];
};

export function migrationControllerRegistration(options: MigrationControllerOptions): ControllerRegistration {
  const manager: MigrationManagerIdentity = {
    controllerStateVersion: CONTROLLER_STATE_VERSION,
    runnerProtocolVersion: RUNNER_PROTOCOL_VERSION,
    ...options.manager,
    // The executor runs inside the runner image, so that image is what the binding names as the executor's: a
    // new runner image is a new execution epoch (docs/execution-binding.md).
    executorImage: options.manager.runnerImage,
  };
  return {
    name: MIGRATION_CONTROLLER,
    setup(env: ControllerEnv): Controller {
      const locks = new Map<string, TargetLock>();
      const clock = options.clock ?? systemClock;
      const deps: MigrationDeps = {
        client: env.client,
        events: env.events,
        manager,
        clock,
        lockFor: (namespace) => {
          let lock = locks.get(namespace);
          if (!lock) locks.set(namespace, (lock = new TargetLock(env.client, namespace, clock)));
          return lock;
        },
        log: env.logger.child({ controller: MIGRATION_CONTROLLER }),
        order: options.order,
        readFailures: new Map(),
      };
      const controller = new Controller({
        name: MIGRATION_CONTROLLER,
        // The work queue never hands one key to two workers, so each resource still has one pass (and one
        // status writer) at a time; resources sharing a realm meet only at its Lease, which is compare-and-swap.
        workers: env.workers,
        logger: env.logger,
        reconcile: async (_key, ctx) => {
          const end = await reconcileMigration({ ...deps, log: ctx.log }, ctx.namespace ?? '', ctx.name);
          return end ? { requeueAfter: end.requeueAfterMs } : {};
        },
      });
      const namespace = options.namespace;
      const informer = <T extends KubeObject>(apiVersion: string, kind: string, labelSelector?: string) =>
        env.informer<T>({ apiVersion, kind, ...(namespace ? { namespace } : {}), ...(labelSelector ? { labelSelector } : {}) });
      controller.watchPrimary(informer(API_VERSION, KINDS.PtahMigration.kind), ignoreStatusOnlyUpdates);
      controller.watchOwned(informer('batch/v1', 'Job', OPERATION_OBJECTS), OWNER);
      controller.watch(informer('v1', 'Pod', OPERATION_OBJECTS), toLabelledOwner(JOB_LABELS.migration));
      controller.watchOwned(informer(API_VERSION, KINDS.PtahMigrationPlan.kind), OWNER);
      controller.watch(informer(API_VERSION, KINDS.PtahMigrationApproval.kind), toNamedMigration);
      controller.watch(informer(API_VERSION, KINDS.PtahMigrationRunAcknowledgment.kind), toNamedMigration);
      return controller;
    },
  };
}

/** Registers the migration controller with every manager started afterwards; returns the unregister function. */
export function registerMigrationController(options: MigrationControllerOptions): () => void {
  return registerController(migrationControllerRegistration(options));
}
