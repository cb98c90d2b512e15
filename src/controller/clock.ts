// Time as the controller framework sees it: the shared Clock (monotonic and wall time) plus timers. The work queue,
// the informer and the leader elector take a TimerClock so tests can drive backoff, delays and lease expiry step
// by step instead of waiting on (and asserting) wall time.
import { systemClock, type Clock } from '../shared/clock.js';

export interface TimerClock extends Clock {
  /** Runs fn once after ms (monotonic); the returned function cancels it (a no-op once fired). */
  setTimer(fn: () => void, ms: number): () => void;
  /** Resolves after ms, or early (without rejecting) when signal aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function sleepWith(clock: Pick<TimerClock, 'setTimer'>, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = (): void => {
      cancel();
      resolve();
    };
    const cancel = clock.setTimer(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export const systemTimerClock: TimerClock = {
  monotonicMs: systemClock.monotonicMs,
  now: systemClock.now,
  setTimer(fn, ms) {
    const handle = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(handle);
  },
  sleep(ms, signal) {
    return sleepWith(systemTimerClock, ms, signal);
  },
};

/** A clock that moves only when told to: for tests and simulations of the queue, informer and elector. */
export class ManualClock implements TimerClock {
  private current = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  /** @param wallEpochMs the wall-clock time (ms since 1970) that monotonic time 0 corresponds to. */
  constructor(private readonly wallEpochMs = Date.UTC(2030, 0, 1)) {}

  monotonicMs(): number {
    return this.current;
  }

  now(): Date {
    return new Date(this.wallEpochMs + this.current);
  }

  setTimer(fn: () => void, ms: number): () => void {
    const id = this.seq++;
    this.timers.set(id, { at: this.current + Math.max(0, ms), fn });
    return () => {
      this.timers.delete(id);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  /** Timers still waiting to fire. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time forward by ms, firing every timer that falls due in order of due time (ties in creation order). */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= target && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.timers.delete(next[0]);
      this.current = next[1].at;
      next[1].fn();
    }
    this.current = target;
  }
}

/**
 * A Kubernetes MicroTime (RFC 3339 with exactly six fractional digits): the API server refuses a Lease or
 * events.k8s.io Event whose renewTime/eventTime carries JavaScript's three.
 */
export function toMicroTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
