// What both families' controllers are built from: the dependencies a pass gets (one TargetLock per namespace of
// Leases, the coordination namespace a PtahRealm's Leases live in, the manager identity the execution binding
// binds), one Controller whose work queue never hands one key to two workers (so each resource has one pass, and
// one status writer, at a time), and informers scoped to one namespace in tests. Each family supplies its reconcile function and what wakes it.
import { systemClock, type Clock } from '../shared/clock.js';
import type { KubeObject } from '../shared/kube-client.js';
import type { DispatchOrder } from '../shared/lifecycle/dispatch.js';
import { ownExecutorIdentity } from '../shared/executor-identity.js';
import { RUNNER_PROTOCOL_VERSION } from '../shared/runner-protocol.js';
import { TargetLock } from '../shared/targetlock.js';
import { Controller } from './controller.js';
import type { Informer } from './informer.js';
import type { ControllerEnv } from './manager.js';
import type { ManagerIdentity, OwnerDeps, PassEnd } from './pass.js';

/** The version of the status this manager writes; a change rotates every execution binding. */
export const CONTROLLER_STATE_VERSION = 1;

export interface FamilyControllerOptions {
  /** Images and revision this manager records on its Jobs (the webhook is given the same). */
  manager: Pick<ManagerIdentity, 'controllerImage' | 'controllerRevision' | 'runnerImage'> & Partial<ManagerIdentity>;
  /** Watch one namespace only (--watch-namespace, and the tests); every namespace by default. */
  namespace?: string;
  /**
   * The manager's Lease namespace (--lease-namespace): the Leases of realms named by a realmRef live here, so every
   * manager of one cluster must be given the same one.
   */
  leaseNamespace: string;
  clock?: Clock;
  /** Dispatch order: the dispatch-order tests' seam, never configuration. */
  order?: DispatchOrder;
}

/** An informer of one kind, scoped as the family's options say. */
export type ScopedInformer = <T extends KubeObject>(apiVersion: string, kind: string, labelSelector?: string) => Informer<T>;

export function managerIdentityOf(options: FamilyControllerOptions): ManagerIdentity {
  return {
    controllerStateVersion: CONTROLLER_STATE_VERSION,
    runnerProtocolVersion: RUNNER_PROTOCOL_VERSION,
    // The executor this manager's build carries; its runner image carries the same (one image for both).
    executorIdentity: ownExecutorIdentity(),
    ...options.manager,
  };
}

/** Builds a family's Controller; `wire` registers what wakes it, given an informer factory scoped as the options say. */
export function familyController(
  env: ControllerEnv,
  name: string,
  options: FamilyControllerOptions,
  reconcile: (deps: OwnerDeps, namespace: string, name: string) => Promise<PassEnd | undefined>,
  wire: (controller: Controller, informer: ScopedInformer) => void,
): Controller {
  const locks = new Map<string, TargetLock>();
  const clock = options.clock ?? systemClock;
  const deps: OwnerDeps = {
    client: env.client,
    events: env.events,
    manager: managerIdentityOf(options),
    clock,
    lockFor: (namespace) => {
      let lock = locks.get(namespace);
      if (!lock) locks.set(namespace, (lock = new TargetLock(env.client, namespace, clock)));
      return lock;
    },
    coordinationNamespace: options.leaseNamespace,
    log: env.logger.child({ controller: name }),
    order: options.order,
    readFailures: new Map(),
  };
  const controller = new Controller({
    name,
    workers: env.workers,
    logger: env.logger,
    reconcile: async (_key, ctx) => {
      const end = await reconcile({ ...deps, log: ctx.log }, ctx.namespace ?? '', ctx.name);
      return end ? { requeueAfter: end.requeueAfterMs } : {};
    },
  });
  const namespace = options.namespace;
  // Informers of a whole kind (no label selector) are the caches a step may consult (OwnerDeps.cached).
  const whole = new Map<string, Informer<KubeObject>>();
  deps.cached = (apiVersion, kind) => whole.get(`${apiVersion}/${kind}`)?.list();
  wire(controller, <T extends KubeObject>(apiVersion: string, kind: string, labelSelector?: string) => {
    const informer = env.informer<T>({ apiVersion, kind, ...(namespace ? { namespace } : {}), ...(labelSelector ? { labelSelector } : {}) });
    if (!labelSelector) whole.set(`${apiVersion}/${kind}`, informer as unknown as Informer<KubeObject>);
    return informer;
  });
  return controller;
}
