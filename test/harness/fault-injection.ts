// The faults the crash proxy injects for a chaos run (bench/soak.ts): answers an API server under strain gives. Each
// request draws at most one fault: a 503 without forwarding, a reset connection (a write is forwarded first, so
// it may be stored while the manager hears nothing), added latency, or, for a watch, a stream cut after a while.
// Every fault is counted when the proxy applies it.

export type FaultKind = 'error' | 'reset' | 'latency' | 'watchDrop';

export interface FaultRates {
  /** Fractions of requests, drawn in this order; their sum must stay below 1. */
  error: number;
  reset: number;
  latency: number;
  /** Of watch requests: cut the stream after `watchDropAfterMs`. */
  watchDrop: number;
  latencyMs: readonly [number, number];
  watchDropAfterMs: readonly [number, number];
}

export type FaultDecision =
  | { kind: 'error' }
  | { kind: 'reset' }
  | { kind: 'latency'; ms: number }
  | { kind: 'watchDrop'; afterMs: number };

export interface FaultInjector {
  /** `path` (without the query) and `body` (a write's, parsed) let a test aim a fault at one request. */
  decide(request: { method: string; watch: boolean; path?: string; body?: unknown }): FaultDecision | undefined;
  /** The proxy calls this when it applied a fault. */
  applied(kind: FaultKind): void;
  readonly counts: Readonly<Record<FaultKind, number>>;
}

export const DEFAULT_FAULT_RATES: FaultRates = {
  error: 0.02, reset: 0.01, latency: 0.05, watchDrop: 0.2, latencyMs: [50, 800], watchDropAfterMs: [2_000, 30_000],
};

/** `random` returns [0, 1), like Math.random; a seeded one makes a run repeatable up to timing. */
export function faultInjector(rates: FaultRates, random: () => number): FaultInjector {
  const counts: Record<FaultKind, number> = { error: 0, reset: 0, latency: 0, watchDrop: 0 };
  const within = ([min, max]: readonly [number, number]) => Math.round(min + random() * (max - min));
  return {
    counts,
    applied(kind) {
      counts[kind] += 1;
    },
    decide({ watch }) {
      const r = random();
      if (r < rates.error) return { kind: 'error' };
      if (r < rates.error + rates.reset) return { kind: 'reset' };
      if (r < rates.error + rates.reset + rates.latency) return { kind: 'latency', ms: within(rates.latencyMs) };
      if (watch && random() < rates.watchDrop) return { kind: 'watchDrop', afterMs: within(rates.watchDropAfterMs) };
      return undefined;
    },
  };
}
