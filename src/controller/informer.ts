// A LIST+WATCH informer that keeps going through every failure a watch can meet, written on node:http(s) instead
// of client-node 1.4's ListWatch because that one stops for good on any non-410 error, never notices a silent
// connection, mixes typed LIST objects with raw WATCH objects in one cache, lets a throwing handler become an
// unhandled rejection, and leaks an https.Agent per reconnect.
//
// What it does instead:
// - LIST (paged) then WATCH from the list's resourceVersion with bookmarks and a server-side timeout; a watch the
//   server ends normally is reopened from the last resourceVersion seen.
// - 410 Gone (as a status or a watch ERROR event) → relist at once, diffing the cache (deletes included).
// - Any other failure → relist after exponential backoff with jitter (1 s → 30 s by default).
// - A watchdog reopens a watch that has been silent longer than a bound (half-open connections).
// - Handlers only enqueue; an exception (or rejected promise) from one is logged, never propagated.
// - One agent per request, destroyed when the request ends.
// - managedFields are dropped from every object it keeps (controller-runtime's TransformStripManagedFields): nothing
//   that reads the cache asks who wrote a field, and on an operation Pod they are 40% of the object.
//
// The cache exists to map events to keys; safety decisions re-read through the API server (DESIGN.md §5).
import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { countApiRequest } from '../shared/api-request-metrics.js';
import { ApiError, resourcePath, type KubeObject } from '../shared/kube-client.js';
import type { ClusterAccess } from '../shared/kubeconfig.js';
import { systemTimerClock, type TimerClock } from './clock.js';
import { keyOf, type EventHandler, type EventSource, type ObjectEvent } from './controller.js';
import { informerMetrics, type ListReason, type WatchReason } from './metrics.js';

/** The object as the cache keeps it: metadata.managedFields left out. */
function withoutManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata?.managedFields === undefined) return obj;
  const { managedFields: _dropped, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

export interface InformerOptions {
  kubeConfig: ClusterAccess;
  /** A kind registered with src/shared/kube-client (apiVersion + kind resolve to the resource path). */
  apiVersion: string;
  kind: string;
  /** Watch one namespace; omitted = all namespaces (or a cluster-scoped kind). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  logger: Logger;
  clock?: TimerClock;
  /** Backoff after a failed LIST or WATCH; default 1 s doubling to 30 s, with jitter. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Reopen a watch that delivered nothing (not even a bookmark) for this long; default 5 minutes. */
  watchdogMs?: number;
  /** Server-side timeoutSeconds of each watch; default a random 5–10 minutes, as client-go's reflector. */
  watchTimeoutSeconds?: number;
  /** LIST page size; default 500. */
  pageSize?: number;
  /** Bound on each LIST page request; default 60 s. */
  listTimeoutMs?: number;
}

type WatchEnd =
  | { kind: 'closed'; events: number; openMs: number }
  | { kind: 'gone' }
  | { kind: 'error'; err: unknown; events: number }
  | { kind: 'watchdog'; events: number }
  | { kind: 'stopped' };

interface WatchEvent {
  type?: string;
  object?: KubeObject & { code?: number; reason?: string; message?: string };
}

export class Informer<T extends KubeObject> implements EventSource<T> {
  /** `apiVersion/Kind[@namespace]`: the metrics label and log field. */
  readonly resource: string;
  private readonly opts: InformerOptions;
  private readonly clock: TimerClock;
  private readonly log: Logger;
  private readonly path: string;
  private readonly cache = new Map<string, T>();
  private readonly handlers: Record<ObjectEvent, Set<EventHandler<T>>> = { add: new Set(), update: new Set(), delete: new Set() };
  private resourceVersion = '';
  private synced = false;
  private readonly syncWaiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  private readonly abort = new AbortController();
  private loop?: Promise<void>;

  constructor(options: InformerOptions) {
    this.opts = options;
    this.clock = options.clock ?? systemTimerClock;
    // Throws for a kind kube-client does not know, or a cluster-scoped path asked with a namespace it ignores.
    this.path = resourcePath(options.apiVersion, options.kind, options.namespace);
    this.resource = `${options.apiVersion}/${options.kind}${options.namespace ? `@${options.namespace}` : ''}`;
    this.log = options.logger.child({ component: 'informer', resource: this.resource, labelSelector: options.labelSelector });
  }

  on(event: ObjectEvent, handler: EventHandler<T>): () => void {
    this.handlers[event].add(handler);
    return () => {
      this.handlers[event].delete(handler);
    };
  }

  /** True once the first LIST has been applied to the cache (and its events delivered). */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once synced; rejects if the informer is stopped first or `signal` aborts. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    if (this.abort.signal.aborted) return Promise.reject(new Error(`informer ${this.resource} was stopped before it synced`));
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject,
      };
      const onAbort = (): void => {
        this.syncWaiters.splice(this.syncWaiters.indexOf(waiter), 1);
        reject(new Error(`gave up waiting for informer ${this.resource} to sync`));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.syncWaiters.push(waiter);
    });
  }

  /** The cached object for `namespace/name` (or `name`). Never mutate it. */
  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  /** Every cached object. Never mutate them. */
  list(): T[] {
    return [...this.cache.values()];
  }

  start(): void {
    if (this.loop) throw new Error(`informer ${this.resource} was already started`);
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    for (const waiter of this.syncWaiters.splice(0)) waiter.reject(new Error(`informer ${this.resource} was stopped before it synced`));
    await this.loop;
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    let failures = 0;
    let listReason: ListReason = 'initial';
    while (!signal.aborted) {
      try {
        informerMetrics.lists.inc({ resource: this.resource, reason: listReason });
        await this.relist(signal);
      } catch (err) {
        if (signal.aborted) return;
        failures++;
        listReason = 'error';
        await this.backOff(failures, err, 'list');
        continue;
      }
      let watchReason: WatchReason = 'list';
      for (;;) {
        informerMetrics.watches.inc({ resource: this.resource, reason: watchReason });
        const end = await this.watchOnce(signal);
        if (end.kind === 'stopped') return;
        // A watch that delivered something, or ran a while before the server ended it, was healthy.
        if (('events' in end && end.events > 0) || (end.kind === 'closed' && end.openMs >= 1000)) failures = 0;
        if (end.kind === 'gone') {
          this.log.info({ resourceVersion: this.resourceVersion }, 'watch expired (410 Gone); relisting');
          listReason = 'gone';
          break;
        }
        if (end.kind === 'watchdog') {
          this.log.warn({ watchdogMs: this.watchdogMs }, 'watch fell silent; reopening it');
          watchReason = 'watchdog';
          continue;
        }
        if (end.kind === 'closed') {
          watchReason = 'closed';
          // A watch that ends at once with nothing in it is a server (or proxy) refusing us: do not spin.
          if (end.events === 0 && end.openMs < 1000) await this.backOff(++failures, new Error('the watch closed immediately'), 'watch');
          continue;
        }
        failures++;
        listReason = 'error';
        await this.backOff(failures, end.err, 'watch');
        break;
      }
    }
  }

  private get watchdogMs(): number {
    return this.opts.watchdogMs ?? 5 * 60_000;
  }

  private async backOff(failures: number, err: unknown, during: 'list' | 'watch'): Promise<void> {
    informerMetrics.failures.inc({ resource: this.resource });
    const initial = this.opts.backoff?.initialMs ?? 1000;
    const max = this.opts.backoff?.maxMs ?? 30_000;
    const base = Math.min(max, initial * 2 ** Math.min(failures - 1, 30));
    // Jitter within [base/2, base): replicas that failed together do not retry together.
    const delayMs = base / 2 + Math.random() * (base / 2);
    this.log.warn({ err, failures, delayMs: Math.round(delayMs) }, `${during} failed; retrying after backoff`);
    await this.clock.sleep(delayMs, this.abort.signal);
  }

  private async relist(signal: AbortSignal): Promise<void> {
    const fresh = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const query = this.query({ limit: this.opts.pageSize ?? 500, continue: continueToken });
      const page = await this.getJson<{ items?: T[]; metadata?: { resourceVersion?: string; continue?: string } }>(`${this.path}${query}`, signal);
      // List items carry no apiVersion/kind; restore them so every cached object looks like a watched one.
      for (const item of page.items ?? []) {
        const obj = withoutManagedFields({ ...item, apiVersion: this.opts.apiVersion, kind: this.opts.kind });
        fresh.set(keyOf(obj), obj);
      }
      resourceVersion = page.metadata?.resourceVersion ?? '';
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken);
    if (!resourceVersion) throw new Error('the LIST response carried no resourceVersion to watch from');

    const previous = new Map(this.cache);
    this.cache.clear();
    for (const [key, obj] of fresh) this.cache.set(key, obj);
    this.resourceVersion = resourceVersion;
    this.touch();
    for (const [key, old] of previous) if (!fresh.has(key)) this.emit('delete', old);
    for (const [key, obj] of fresh) {
      const old = previous.get(key);
      if (!old) this.emit('add', obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.emit('update', obj, old);
    }
    if (!this.synced) {
      this.synced = true;
      this.log.info({ objects: fresh.size }, 'synced');
      for (const waiter of this.syncWaiters.splice(0)) waiter.resolve();
    }
  }

  private watchOnce(stop: AbortSignal): Promise<WatchEnd> {
    if (stop.aborted) return Promise.resolve({ kind: 'stopped' });
    const watchAbort = new AbortController();
    const onStop = (): void => watchAbort.abort();
    stop.addEventListener('abort', onStop, { once: true });
    const openedAt = this.clock.monotonicMs();
    const timeoutSeconds = this.opts.watchTimeoutSeconds ?? 300 + Math.floor(Math.random() * 300);
    const query = this.query({ watch: 'true', allowWatchBookmarks: 'true', resourceVersion: this.resourceVersion, timeoutSeconds });

    return new Promise<WatchEnd>((resolveEnd) => {
      let events = 0;
      let settled = false;
      let cancelWatchdog: () => void = () => {};
      const finish = (end: WatchEnd): void => {
        if (settled) return;
        settled = true;
        cancelWatchdog();
        stop.removeEventListener('abort', onStop);
        watchAbort.abort();
        resolveEnd(stop.aborted ? { kind: 'stopped' } : end);
      };
      const armWatchdog = (): void => {
        cancelWatchdog();
        cancelWatchdog = this.clock.setTimer(() => finish({ kind: 'watchdog', events }), this.watchdogMs);
      };
      armWatchdog();

      this.open(`${this.path}${query}`, watchAbort.signal)
        .then(async (res) => {
          if (res.statusCode !== 200) {
            const err = await errorOf(res, `WATCH ${this.path}`);
            return finish(err.code === 410 ? { kind: 'gone' } : { kind: 'error', err, events });
          }
          const lines = createInterface({ input: res, crlfDelay: Infinity });
          res.on('error', (err) => finish({ kind: 'error', err, events }));
          // readline re-emits its input's errors; unheard, one would be an uncaught exception.
          lines.on('error', (err) => finish({ kind: 'error', err, events }));
          res.on('aborted', () => finish({ kind: 'error', err: new Error('the watch connection was cut'), events }));
          lines.on('line', (line) => {
            if (settled || line.trim() === '') return;
            armWatchdog();
            let event: WatchEvent;
            try {
              event = JSON.parse(line) as WatchEvent;
            } catch {
              return finish({ kind: 'error', err: new Error('the watch stream carried a line that is not JSON'), events });
            }
            if (event.type === 'ERROR') {
              const status = event.object ?? {};
              return finish(
                status.code === 410
                  ? { kind: 'gone' }
                  : { kind: 'error', err: new ApiError({ code: status.code, reason: status.reason, message: status.message }, `WATCH ${this.path}`), events },
              );
            }
            events++;
            this.apply(event);
          });
          lines.on('close', () => finish(res.complete ? { kind: 'closed', events, openMs: this.clock.monotonicMs() - openedAt } : { kind: 'error', err: new Error('the watch connection was cut'), events }));
        })
        .catch((err: unknown) => finish({ kind: 'error', err, events }));
    });
  }

  /** Applies one watch event to the cache and tells the handlers. */
  private apply(event: WatchEvent): void {
    const obj = event.object === undefined ? undefined : withoutManagedFields(event.object as T);
    const rv = obj?.metadata?.resourceVersion;
    if (!obj || !rv) return;
    this.resourceVersion = rv;
    this.touch();
    if (event.type === 'BOOKMARK') return;
    const key = keyOf(obj);
    const old = this.cache.get(key);
    if (event.type === 'DELETED') {
      this.cache.delete(key);
      this.emit('delete', obj);
    } else if (event.type === 'ADDED' || event.type === 'MODIFIED') {
      this.cache.set(key, obj);
      if (!old) this.emit('add', obj);
      else if (old.metadata?.resourceVersion !== rv) this.emit('update', obj, old);
    }
  }

  private emit(event: ObjectEvent, obj: T, old?: T): void {
    for (const handler of this.handlers[event]) {
      try {
        const result: unknown = handler(obj, old);
        // A handler declared async would otherwise turn a throw into an unhandled rejection.
        if (result instanceof Promise) result.catch((err: unknown) => this.handlerFailed(err, event, obj));
      } catch (err) {
        this.handlerFailed(err, event, obj);
      }
    }
  }

  private handlerFailed(err: unknown, event: ObjectEvent, obj: T): void {
    this.log.error({ err, event, namespace: obj.metadata?.namespace, name: obj.metadata?.name }, 'event handler threw');
  }

  private touch(): void {
    informerMetrics.lastEvent.set({ resource: this.resource }, Date.now() / 1000);
  }

  private query(params: Record<string, string | number | undefined>): string {
    const all: Record<string, string | number | undefined> = { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector, ...params };
    const entries = Object.entries(all).filter((e): e is [string, string | number] => e[1] !== undefined && e[1] !== '');
    return entries.length ? `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}` : '';
  }

  private async getJson<R>(path: string, stop: AbortSignal): Promise<R> {
    const timeoutMs = this.opts.listTimeoutMs ?? 60_000;
    if (stop.aborted) throw new Error(`informer ${this.resource} is stopping`);
    const abort = new AbortController();
    const onStop = (): void => abort.abort();
    stop.addEventListener('abort', onStop, { once: true });
    const cancel = this.clock.setTimer(() => abort.abort(), timeoutMs);
    try {
      const res = await this.open(path, abort.signal);
      if (res.statusCode !== 200) throw await errorOf(res, `LIST ${this.path}`);
      return JSON.parse(await readBody(res)) as R;
    } catch (err) {
      if (abort.signal.aborted && !stop.aborted) throw new ApiError({ message: `timed out after ${timeoutMs} ms` }, `LIST ${this.path}`);
      throw err;
    } finally {
      cancel();
      stop.removeEventListener('abort', onStop);
    }
  }

  /**
   * Sends a GET (a LIST page or a WATCH) with the kubeconfig's credentials; resolves with the response once its
   * headers arrive. Counted once, by the status of those headers, or as an error when none came.
   */
  private async open(path: string, signal: AbortSignal): Promise<http.IncomingMessage> {
    let answered: number | undefined;
    try {
      const res = await this.request(path, signal);
      answered = res.statusCode;
      return res;
    } finally {
      countApiRequest('GET', path, answered);
    }
  }

  private async request(path: string, signal: AbortSignal): Promise<http.IncomingMessage> {
    const server = this.opts.kubeConfig.getCurrentCluster()?.server;
    if (!server) throw new Error('the kubeconfig has no current cluster');
    const url = new URL(server.replace(/\/+$/, '') + path);
    const tls: https.RequestOptions = {};
    // Fresh per request: picks up rotated tokens; the agent it makes (TLS, proxy) serves this request only.
    await this.opts.kubeConfig.applyToHTTPSOptions(tls);
    const agent = tls.agent instanceof http.Agent ? tls.agent : undefined;
    const transport = url.protocol === 'http:' ? http : https;
    return new Promise((resolve, reject) => {
      const req = transport.request(url, { ...tls, method: 'GET', signal, headers: { ...tls.headers, accept: 'application/json' } }, resolve);
      // TCP keep-alive probes catch a peer that vanished without a FIN sooner than the watchdog.
      req.on('socket', (socket) => socket.setKeepAlive(true, 30_000));
      req.on('error', reject);
      req.on('close', () => agent?.destroy());
      req.end();
    });
  }
}

function readBody(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('the response was cut')));
  });
}

async function errorOf(res: http.IncomingMessage, request: string): Promise<ApiError> {
  const code = res.statusCode;
  let text = '';
  try {
    text = await readBody(res);
    const status = JSON.parse(text) as { reason?: string; message?: string };
    return new ApiError({ code, reason: status.reason, message: status.message }, request);
  } catch {
    return new ApiError({ code, message: text.slice(0, 256) || undefined }, request);
  }
}
