// Controller<T>: a named reconciler fed by a work queue of object keys, run by N workers. Events from informers
// (the primary kind, and owned Jobs/Pods/ConfigMaps mapped to their owner's key) only enqueue keys: a reconcile
// receives a key, never an object, and re-reads whatever it decides on through the API server.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeObject } from '../shared/kube-client.js';
import { systemTimerClock, type TimerClock } from './clock.js';
import { RECONCILE_RESULTS, controllerMetrics, type ReconcileResultLabel } from './metrics.js';
import { WorkQueue, type RateLimiter } from './workqueue.js';

export type ObjectEvent = 'add' | 'update' | 'delete';

/** Receives one event; `old` is the previous state, for updates only. */
export type EventHandler<T extends KubeObject> = (obj: T, old?: T) => void;

/** What a controller needs from an informer: subscribe to its events (the result unsubscribes). */
export interface EventSource<T extends KubeObject> {
  on(event: ObjectEvent, handler: EventHandler<T>): () => void;
}

/** Decides whether an event is worth a reconcile; `old` is set for updates only. */
export type EventFilter<T extends KubeObject> = (event: ObjectEvent, obj: T, old?: T) => boolean;

/** Maps an event's object to the keys to reconcile (none, its own, its owner's, …). */
export type KeyMapper<T extends KubeObject> = (obj: T) => string[];

/** `namespace/name` for namespaced objects, `name` for cluster-scoped ones. */
export function keyOf(obj: KubeObject): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error('the object has no metadata.name');
  return obj.metadata?.namespace ? `${obj.metadata.namespace}/${name}` : name;
}

export function parseKey(key: string): { namespace?: string; name: string } {
  const parts = key.split('/');
  if (parts.length === 1 && parts[0]) return { name: parts[0] };
  if (parts.length === 2 && parts[0] && parts[1]) return { namespace: parts[0], name: parts[1] };
  throw new Error(`malformed object key ${JSON.stringify(key)}: want "namespace/name" or "name"`);
}

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? (apiVersion.split('/')[0] as string) : '');

/**
 * Maps an object to its controlling owner of the given kind (the ownerReference with controller=true), as
 * controller-runtime's Owns() does. The group must match; the version may differ.
 */
export function toControllerOwner<T extends KubeObject>(owner: { apiVersion: string; kind: string }): KeyMapper<T> {
  const group = groupOf(owner.apiVersion);
  return (obj) => {
    const ref = obj.metadata?.ownerReferences?.find((r) => r.controller === true);
    if (!ref || ref.kind !== owner.kind || groupOf(ref.apiVersion) !== group) return [];
    return [obj.metadata?.namespace ? `${obj.metadata.namespace}/${ref.name}` : ref.name];
  };
}

/** Maps an object to the owner named by one of its labels (e.g. a Job's Pods, which carry the owner's name). */
export function toLabelledOwner<T extends KubeObject>(label: string): KeyMapper<T> {
  return (obj) => {
    const name = obj.metadata?.labels?.[label];
    if (!name) return [];
    return [obj.metadata?.namespace ? `${obj.metadata.namespace}/${name}` : name];
  };
}

const toSelf: KeyMapper<KubeObject> = (obj) => [keyOf(obj)];

/**
 * A filter for primary objects: skips updates that changed nothing but status (status writes are the
 * controller's own and would otherwise feed back into endless passes). Adds and deletes always pass.
 */
export function ignoreStatusOnlyUpdates<T extends KubeObject>(event: ObjectEvent, obj: T, old?: T): boolean {
  if (event !== 'update' || !old) return true;
  const a = obj.metadata ?? {};
  const b = old.metadata ?? {};
  if (a.generation === undefined || a.generation !== b.generation) return true;
  const same = (x: unknown, y: unknown): boolean => JSON.stringify(x ?? null) === JSON.stringify(y ?? null);
  return !(
    same(a.labels, b.labels) &&
    same(a.annotations, b.annotations) &&
    same(a.finalizers, b.finalizers) &&
    same(a.ownerReferences, b.ownerReferences) &&
    same(a.deletionTimestamp, b.deletionTimestamp)
  );
}

export interface ReconcileContext {
  key: string;
  namespace?: string;
  name: string;
  /** Unique per pass; also on every line of `log`. */
  reconcileID: string;
  log: Logger;
  /** Aborted when the controller stops (leadership lost, shutdown): stop at the next boundary. */
  signal: AbortSignal;
}

export interface ReconcileResult {
  /** Reconcile again after the rate limiter's delay (counts as a retry of the key). */
  requeue?: boolean;
  /** Reconcile again after this many ms (the key's backoff is reset); wins over `requeue`. */
  requeueAfter?: number;
}

/** A reconcile: returns how to requeue; throwing is an error and requeues the key with backoff. */
export type Reconcile = (key: string, ctx: ReconcileContext) => Promise<ReconcileResult | void>;

/** An error retrying cannot fix (bad input that only a new object generation can change): not requeued. */
export class TerminalError extends Error {
  override name = 'TerminalError';
}

export interface ControllerOptions {
  name: string;
  reconcile: Reconcile;
  /** Concurrent reconciles (controller-runtime's MaxConcurrentReconciles); default 1. */
  workers?: number;
  logger: Logger;
  clock?: TimerClock;
  rateLimiter?: RateLimiter;
}

export class Controller {
  readonly name: string;
  readonly queue: WorkQueue;
  private readonly reconcile: Reconcile;
  private readonly workers: number;
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private readonly unsubscribes: Array<() => void> = [];
  private running: Promise<void>[] = [];
  private state: 'new' | 'running' | 'stopped' = 'new';

  constructor(options: ControllerOptions) {
    const workers = options.workers ?? 1;
    if (!options.name) throw new Error('a controller needs a name');
    if (!Number.isSafeInteger(workers) || workers < 1) throw new Error(`controller ${options.name}: workers must be a positive integer, got ${workers}`);
    this.name = options.name;
    this.reconcile = options.reconcile;
    this.workers = workers;
    this.log = options.logger.child({ controller: options.name });
    this.queue = new WorkQueue({ name: options.name, clock: options.clock ?? systemTimerClock, rateLimiter: options.rateLimiter });
  }

  /** Enqueues the keys `map` gives for every event of `source` that `filter` lets through. */
  watch<T extends KubeObject>(source: EventSource<T>, map: KeyMapper<T>, filter?: EventFilter<T>): this {
    const enqueue = (event: ObjectEvent, obj: T, old?: T): void => {
      try {
        if (filter && !filter(event, obj, old)) return;
        for (const key of map(obj)) this.queue.add(key);
      } catch (err) {
        // A mapper that throws on one odd object must not take down the informer feeding every controller.
        this.log.error({ err, event, namespace: obj.metadata?.namespace, name: obj.metadata?.name }, 'cannot map an event to keys');
      }
    };
    this.unsubscribes.push(
      source.on('add', (obj) => enqueue('add', obj)),
      source.on('update', (obj, old) => enqueue('update', obj, old)),
      source.on('delete', (obj) => enqueue('delete', obj)),
    );
    return this;
  }

  /** Watches the primary kind: each object's own key. */
  watchPrimary<T extends KubeObject>(source: EventSource<T>, filter?: EventFilter<T>): this {
    return this.watch(source, toSelf, filter);
  }

  /** Watches a kind this controller owns, mapped to the owner's key through the controller ownerReference. */
  watchOwned<T extends KubeObject>(source: EventSource<T>, owner: { apiVersion: string; kind: string }, filter?: EventFilter<T>): this {
    return this.watch(source, toControllerOwner<T>(owner), filter);
  }

  /** Runs `cleanup` when the controller stops: what it reports about its term goes with the term. */
  onStop(cleanup: () => void): this {
    this.unsubscribes.push(cleanup);
    return this;
  }

  enqueue(key: string): void {
    this.queue.add(key);
  }

  start(): void {
    if (this.state !== 'new') throw new Error(`controller ${this.name} was already started`);
    this.state = 'running';
    controllerMetrics.maxConcurrentReconciles.set({ controller: this.name }, this.workers);
    controllerMetrics.activeWorkers.set({ controller: this.name }, 0);
    for (const result of RECONCILE_RESULTS) controllerMetrics.reconcileTotal.inc({ controller: this.name, result }, 0);
    this.log.info({ workers: this.workers }, 'starting workers');
    this.running = Array.from({ length: this.workers }, () => this.work());
  }

  /**
   * Stops handing out keys at once, aborts the signal of passes in flight, and resolves when they have returned.
   * Keys still queued are dropped: whoever reconciles next starts from a fresh list.
   */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.abort.abort(new Error(`controller ${this.name} is stopping`));
    for (const unsubscribe of this.unsubscribes.splice(0)) unsubscribe();
    await this.queue.shutDown();
    await Promise.all(this.running);
    this.log.info('all workers finished');
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      controllerMetrics.activeWorkers.inc({ controller: this.name });
      try {
        await this.reconcileOne(key);
      } finally {
        controllerMetrics.activeWorkers.dec({ controller: this.name });
        this.queue.done(key);
      }
    }
  }

  private async reconcileOne(key: string): Promise<void> {
    const reconcileID = randomUUID();
    let parsed: { namespace?: string; name: string };
    try {
      parsed = parseKey(key);
    } catch (err) {
      // Nothing can ever reconcile a malformed key; retrying it would loop forever.
      this.log.error({ err, key }, 'dropping a malformed key');
      this.queue.forget(key);
      return;
    }
    const log = this.log.child({ namespace: parsed.namespace, name: parsed.name, reconcileID });
    const ctx: ReconcileContext = { key, ...parsed, reconcileID, log, signal: this.abort.signal };
    const labels = { controller: this.name };
    const endTimer = controllerMetrics.reconcileTime.startTimer(labels);
    let result: ReconcileResultLabel;
    try {
      const outcome = (await this.reconcile(key, ctx)) ?? {};
      const after = outcome.requeueAfter;
      if (after !== undefined && !(Number.isFinite(after) && after >= 0)) {
        throw new Error(`reconcile returned requeueAfter=${String(after)}; want a finite number of ms >= 0`);
      }
      if (after !== undefined && after > 0) {
        this.queue.forget(key);
        this.queue.addAfter(key, after);
        result = 'requeue_after';
      } else if (outcome.requeue) {
        this.queue.addRateLimited(key);
        result = 'requeue';
      } else {
        this.queue.forget(key);
        result = 'success';
      }
    } catch (err) {
      result = 'error';
      controllerMetrics.reconcileErrors.inc(labels);
      if (err instanceof TerminalError) {
        controllerMetrics.terminalReconcileErrors.inc(labels);
        this.queue.forget(key);
        log.error({ err }, 'Reconciler error (terminal, not requeued)');
      } else {
        this.queue.addRateLimited(key);
        log.error({ err, retries: this.queue.numRequeues(key) }, 'Reconciler error');
      }
    } finally {
      endTimer();
    }
    controllerMetrics.reconcileTotal.inc({ ...labels, result });
  }
}
