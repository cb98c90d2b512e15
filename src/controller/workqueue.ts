// A work queue of keys with client-go's semantics (util/workqueue), because the reconcilers are level-based: an
// event only says "look at this key again", so N triggers for one key collapse into one pass, and one key is never
// reconciled by two workers at once (a key re-added while a worker holds it runs again after that worker is done).
import { systemTimerClock, type TimerClock } from './clock.js';
import { reportInFlight, workqueueMetrics, type InFlightReport } from './metrics.js';

/** Decides how long a failing key waits before its next try. */
export interface RateLimiter {
  /** The delay for the key's next retry; counts as one more failure of the key. */
  when(key: string): number;
  /** Clears the key's failure history (after a success). */
  forget(key: string): void;
  /** How many failures the key has accumulated since it was last forgotten. */
  retries(key: string): number;
}

/** Per-key exponential backoff: base·2ⁿ after the n-th consecutive failure, capped at max. */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly baseMs = 5,
    private readonly maxMs = 1_000_000,
  ) {
    if (!(baseMs > 0) || !(maxMs >= baseMs)) throw new Error(`exponential backoff needs 0 < base (${baseMs}) <= max (${maxMs})`);
  }

  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    return Math.min(this.baseMs * 2 ** n, this.maxMs);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/**
 * An overall token bucket (qps, burst) across all keys, so a storm of failing keys cannot turn into a storm of
 * API requests. Each call reserves the next token; when the bucket is empty the delay is how long until that
 * reservation's token exists.
 */
export class BucketRateLimiter implements RateLimiter {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps = 10,
    private readonly burst = 100,
    private readonly clock: TimerClock = systemTimerClock,
  ) {
    if (!(qps > 0) || !(burst >= 1)) throw new Error(`token bucket needs qps > 0 (${qps}) and burst >= 1 (${burst})`);
    this.tokens = burst;
    this.last = clock.monotonicMs();
  }

  when(): number {
    const now = this.clock.monotonicMs();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.qps) / 1000);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1000) / this.qps;
  }

  forget(): void {}

  retries(): number {
    return 0;
  }
}

/** The longest delay any of the limiters asks for (each one counts the failure). */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    if (limiters.length === 0) throw new Error('MaxOfRateLimiter needs at least one limiter');
    this.limiters = limiters;
  }

  when(key: string): number {
    return Math.max(...this.limiters.map((l) => l.when(key)));
  }

  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }

  retries(key: string): number {
    return Math.max(...this.limiters.map((l) => l.retries(key)));
  }
}

/** controller-runtime's default: per-key 5 ms → 1000 s, and 10 qps with a burst of 100 overall. */
export function defaultRateLimiter(clock: TimerClock = systemTimerClock): RateLimiter {
  return new MaxOfRateLimiter(new ItemExponentialFailureRateLimiter(5, 1_000_000), new BucketRateLimiter(10, 100, clock));
}

export interface WorkQueueOptions {
  /** The queue's `name` (and `controller`) label; the controller's name. */
  name: string;
  clock?: TimerClock;
  rateLimiter?: RateLimiter;
}

export class WorkQueue {
  readonly name: string;
  private readonly clock: TimerClock;
  private readonly limiter: RateLimiter;
  /** Keys waiting for a worker, in arrival order. */
  private readonly queue: string[] = [];
  /** Keys that need a pass: queued, or re-added while a worker holds them. */
  private readonly dirty = new Set<string>();
  /** Keys a worker holds, with the time it took them. */
  private readonly processing = new Map<string, number>();
  /** When each dirty key was added, for queue_duration. */
  private readonly addedAt = new Map<string, number>();
  private readonly delayed = new Map<string, { readyAt: number; cancel: () => void }>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private readonly drained: Array<() => void> = [];
  private stopping = false;
  private readonly stopReporting: () => void;
  private readonly labels: { name: string; controller: string };

  constructor(options: WorkQueueOptions) {
    if (!options.name) throw new Error('a work queue needs a name (its metrics label)');
    this.name = options.name;
    this.clock = options.clock ?? systemTimerClock;
    this.limiter = options.rateLimiter ?? defaultRateLimiter(this.clock);
    this.labels = { name: this.name, controller: this.name };
    this.updateDepth();
    this.stopReporting = reportInFlight(this.name, () => this.inFlight());
  }

  /** Keys waiting for a pass (not counting keys a worker holds and nobody re-added). */
  get length(): number {
    return this.dirty.size;
  }

  get shuttingDown(): boolean {
    return this.stopping;
  }

  /** Marks key as needing a pass. A key already waiting is not queued twice. Ignored once shut down. */
  add(key: string): void {
    if (this.stopping || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.addedAt.set(key, this.clock.monotonicMs());
    workqueueMetrics.adds.inc(this.labels);
    this.updateDepth();
    // A key a worker holds is queued again by done(), never handed to a second worker.
    if (this.processing.has(key)) return;
    this.queue.push(key);
    this.dispatch();
  }

  /** Adds key after ms. A key already waiting for an earlier time keeps the earlier time. */
  addAfter(key: string, ms: number): void {
    if (this.stopping) return;
    if (!(ms > 0)) return this.add(key);
    const readyAt = this.clock.monotonicMs() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.readyAt <= readyAt) return;
    existing?.cancel();
    const cancel = this.clock.setTimer(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { readyAt, cancel });
  }

  /** Adds key after the rate limiter's delay for it: one more failure of the key. */
  addRateLimited(key: string): void {
    if (this.stopping) return;
    workqueueMetrics.retries.inc(this.labels);
    this.addAfter(key, this.limiter.when(key));
  }

  /** Ends the key's backoff: its next failure starts again at the base delay. */
  forget(key: string): void {
    this.limiter.forget(key);
  }

  /** Failures counted for key since it was last forgotten. */
  numRequeues(key: string): number {
    return this.limiter.retries(key);
  }

  /**
   * The next key to process; the caller holds it exclusively until done(key). Resolves undefined once the queue
   * is shut down.
   */
  get(): Promise<string | undefined> {
    if (this.queue.length > 0) return Promise.resolve(this.take());
    if (this.stopping) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Releases key; if it was re-added meanwhile it goes back into the queue now. */
  done(key: string): void {
    const startedAt = this.processing.get(key);
    if (startedAt === undefined) return;
    this.processing.delete(key);
    workqueueMetrics.workDuration.observe(this.labels, (this.clock.monotonicMs() - startedAt) / 1000);
    if (this.dirty.has(key)) {
      this.queue.push(key);
      this.dispatch();
    }
    if (this.stopping && this.processing.size === 0) this.finishDrain();
  }

  /**
   * Stops the queue: new adds are ignored, keys not yet handed out and pending delays are dropped (they are only
   * triggers; whoever runs next lists everything again), waiting get() calls resolve undefined. Resolves once
   * every key a worker holds has been released with done().
   */
  shutDown(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      for (const { cancel } of this.delayed.values()) cancel();
      this.delayed.clear();
      this.queue.length = 0;
      this.dirty.clear();
      this.addedAt.clear();
      this.updateDepth();
      for (const waiter of this.waiters.splice(0)) waiter(undefined);
    }
    const done = new Promise<void>((resolve) => this.drained.push(resolve));
    if (this.processing.size === 0) this.finishDrain();
    return done;
  }

  private take(): string {
    const key = this.queue.shift() as string;
    const now = this.clock.monotonicMs();
    this.dirty.delete(key);
    this.processing.set(key, now);
    const addedAt = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (addedAt !== undefined) workqueueMetrics.queueDuration.observe(this.labels, (now - addedAt) / 1000);
    this.updateDepth();
    return key;
  }

  private dispatch(): void {
    while (this.waiters.length > 0 && this.queue.length > 0) (this.waiters.shift() as (key: string) => void)(this.take());
  }

  private finishDrain(): void {
    this.stopReporting();
    for (const resolve of this.drained.splice(0)) resolve();
  }

  private updateDepth(): void {
    workqueueMetrics.depth.set({ ...this.labels, priority: '' }, this.dirty.size);
  }

  private inFlight(): InFlightReport {
    const now = this.clock.monotonicMs();
    let unfinished = 0;
    let longest = 0;
    for (const startedAt of this.processing.values()) {
      const ran = (now - startedAt) / 1000;
      unfinished += ran;
      longest = Math.max(longest, ran);
    }
    return { unfinishedSeconds: unfinished, longestSeconds: longest };
  }
}
