// Time, injectable. Lease expiry is measured on the monotonic clock of this process, never from a timestamp
// another node wrote, so a skewed clock elsewhere can neither shorten nor extend a foreign Lease.
export interface Clock {
  /** Monotonic milliseconds; only differences mean anything. */
  monotonicMs(): number;
  /** Wall-clock time, for timestamps written to the API. */
  now(): Date;
}

export const systemClock: Clock = {
  monotonicMs: () => performance.now(),
  now: () => new Date(),
};
