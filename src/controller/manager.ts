// The in-process controller manager: contends for the manager Lease and, while it leads (and only then), runs the
// registered controllers on informers shared between them. A leadership term starts the informers, waits for
// them to sync, then starts the workers; losing the Lease (or shutting down) stops the workers first, waits for
// passes in flight, then stops the informers, and only after that is the Lease released, so two replicas never
// reconcile at once by our own hand. Every replica keeps serving webhooks; that is not this module's business.
import type { Logger } from 'pino';
import type { KubeClient, KubeObject } from '../shared/kube-client.js';
import type { ClusterAccess } from '../shared/kubeconfig.js';
import type { Controller } from './controller.js';
import { EventRecorder } from './events.js';
import { Informer, type InformerOptions } from './informer.js';
import { LeaderElector } from './leaderelection.js';

/** What an informer watches: one kind, optionally one namespace and selectors. */
export interface InformerSpec {
  apiVersion: string;
  kind: string;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** What a controller's setup gets for one leadership term. */
export interface ControllerEnv {
  /** The term's informer for spec (during setup only); controllers asking for the same spec share one. */
  informer<T extends KubeObject>(spec: InformerSpec): Informer<T>;
  client: KubeClient;
  events: EventRecorder;
  logger: Logger;
  /** The configured concurrency: pass it as the controller's `workers`. */
  workers: number;
}

export interface ControllerRegistration {
  /** Unique; the controller's name in metrics and logs. */
  name: string;
  /** Builds the controller and its watches; called at the start of every leadership term. Must not start it. */
  setup(env: ControllerEnv): Controller;
}

const registry: ControllerRegistration[] = [];

/** Registers a controller for every manager started after this call. The returned function unregisters it. */
export function registerController(registration: ControllerRegistration): () => void {
  if (!registration.name) throw new Error('a controller registration needs a name');
  if (registry.some((r) => r.name === registration.name)) throw new Error(`a controller named ${JSON.stringify(registration.name)} is already registered`);
  registry.push(registration);
  return () => {
    const at = registry.indexOf(registration);
    if (at >= 0) registry.splice(at, 1);
  };
}

export interface ManagerDeps {
  kubeConfig: ClusterAccess;
  client: KubeClient;
  logger: Logger;
  /** Where the manager's Lease lives, and its name. */
  leaseNamespace: string;
  leaseName: string;
  /** Holder identity and Event reportingInstance; default `<hostname>_<uuid>`. */
  identity?: string;
  leaderElection?: { leaseDurationMs?: number; renewDeadlineMs?: number; retryPeriodMs?: number };
  /** Concurrent reconciles per controller, handed to each setup; default 1. */
  workers?: number;
  /** Event reportingController; default `operator.ptah.run/manager`. */
  reportingController?: string;
  /** The controllers to run; default every registerController() call so far. */
  controllers?: readonly ControllerRegistration[];
  /** Informer tuning (watchdog, backoff, …) for every informer of a term. */
  informerOptions?: Pick<InformerOptions, 'backoff' | 'watchdogMs' | 'watchTimeoutSeconds' | 'pageSize' | 'listTimeoutMs'>;
  /** Called when leadership is lost other than by stop(); main may choose to exit, as controller-runtime does. */
  onLeadershipLost?: () => void;
}

export interface ManagerHandle {
  /** Stops the controllers (waiting for passes in flight), the informers, then releases the Lease. */
  stop(): Promise<void>;
  isLeader(): boolean;
  /** False once stopping, while a leader's informers have not synced, and after a term failed to start. */
  ready(): boolean;
}

interface Term {
  abort: AbortController;
  informers: Map<string, Informer<KubeObject>>;
  controllers: Controller[];
  synced: boolean;
  started: Promise<void>;
}

export function startController(deps: ManagerDeps): ManagerHandle {
  const log = deps.logger.child({ component: 'manager' });
  const controllers = [...(deps.controllers ?? registry)];
  const names = new Set<string>();
  for (const c of controllers) {
    if (names.has(c.name)) throw new Error(`two controllers are named ${JSON.stringify(c.name)}`);
    names.add(c.name);
  }
  let term: Term | undefined;
  let failed = false;
  let stopping = false;

  const elector = new LeaderElector({
    client: deps.client,
    namespace: deps.leaseNamespace,
    name: deps.leaseName,
    identity: deps.identity,
    ...deps.leaderElection,
    logger: deps.logger,
    onStartedLeading: () => {
      term = beginTerm();
    },
    onStoppedLeading: async () => {
      const ending = term;
      term = undefined;
      if (ending) await endTerm(ending);
      if (!stopping) deps.onLeadershipLost?.();
    },
  });
  const events = new EventRecorder({
    client: deps.client,
    controller: deps.reportingController ?? 'operator.ptah.run/manager',
    instance: elector.identity,
    logger: deps.logger,
  });

  function beginTerm(): Term {
    const abort = new AbortController();
    const informers = new Map<string, Informer<KubeObject>>();
    let settingUp = true;
    failed = false;
    const env: ControllerEnv = {
      informer<T extends KubeObject>(spec: InformerSpec): Informer<T> {
        if (!settingUp) throw new Error('informers are handed out only during a controller\'s setup');
        const key = JSON.stringify([spec.apiVersion, spec.kind, spec.namespace ?? '', spec.labelSelector ?? '', spec.fieldSelector ?? '']);
        let informer = informers.get(key);
        if (!informer) {
          informer = new Informer<KubeObject>({ ...deps.informerOptions, ...spec, kubeConfig: deps.kubeConfig, logger: deps.logger });
          informers.set(key, informer);
        }
        return informer as unknown as Informer<T>;
      },
      client: deps.client,
      events,
      logger: deps.logger,
      workers: deps.workers ?? 1,
    };
    const t: Term = { abort, informers, controllers: [], synced: false, started: Promise.resolve() };
    t.started = (async () => {
      log.info({ controllers: controllers.map((c) => c.name) }, 'leading: starting controllers');
      for (const registration of controllers) t.controllers.push(registration.setup(env));
      settingUp = false;
      for (const informer of informers.values()) informer.start();
      await Promise.all([...informers.values()].map((i) => i.waitForSync(abort.signal)));
      if (abort.signal.aborted) return;
      for (const c of t.controllers) c.start();
      t.synced = true;
    })().catch((err: unknown) => {
      if (abort.signal.aborted) return;
      failed = true;
      log.error({ err }, 'the controllers could not be started; this replica holds the Lease but reconciles nothing');
    });
    return t;
  }

  async function endTerm(t: Term): Promise<void> {
    t.abort.abort();
    await t.started;
    // Workers first (no new passes; wait for the ones in flight), then the informers that fed them.
    await Promise.all(t.controllers.map((c) => c.stop()));
    await Promise.all([...t.informers.values()].map((i) => i.stop()));
    log.info('stopped leading: controllers and informers stopped');
  }

  elector.start();
  return {
    async stop() {
      stopping = true;
      await elector.stop();
      await events.flush();
    },
    isLeader: () => elector.isLeader(),
    ready: () => !stopping && !failed && (term === undefined || term.synced),
  };
}
