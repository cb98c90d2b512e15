// Lease-based leader election (coordination.k8s.io/v1) with client-go's semantics: one replica holds the Lease and
// runs the controllers; the others watch it and take over only once it has stood unchanged, as they themselves
// observed it, for a full lease duration. A leader that cannot renew within the renew deadline stops leading
// before any follower may take over (renewDeadline < leaseDuration), and on a clean stop it clears the holder so a
// follower takes over at once.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { isAlreadyExists, isConflict, type KubeClient, type KubeObject } from '../shared/kube-client.js';
import { systemTimerClock, toMicroTime, type TimerClock } from './clock.js';
import { leaderElectionMetrics } from './metrics.js';

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export interface LeaderElectionOptions {
  client: Pick<KubeClient, 'tryGet' | 'create' | 'update'>;
  namespace: string;
  /** The Lease's name; also the `name` label of leader_election_master_status. */
  name: string;
  /** This replica's holder identity; default `<hostname>_<uuid>`. */
  identity?: string;
  /** How long a follower waits on an unchanged record before taking over; default 15 s. */
  leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it stops leading; default 10 s. */
  renewDeadlineMs?: number;
  /** Time between attempts to acquire or renew; default 2 s. */
  retryPeriodMs?: number;
  /** Clear the holder on stop() so another replica takes over at once; default true. */
  releaseOnStop?: boolean;
  logger: Logger;
  clock?: TimerClock;
  /** Called when this replica becomes leader; must not block (start work in the background). */
  onStartedLeading: () => void;
  /**
   * Called when this replica stops leading (lost, or stop()). The elector waits for it before it contends again
   * or releases the Lease, so it should resolve once nothing this replica started as leader is still running.
   */
  onStoppedLeading: () => Promise<void> | void;
}

// client-go's JitterFactor: acquire retries wait retryPeriod·(1 + up to 0.2).
const JITTER = 0.2;

export interface LeaderElectionTiming {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/**
 * What makes these timings unsafe, or undefined. A leader must give up (renew deadline) before a follower may take
 * over (lease duration), and must get more than one jittered attempt at renewing in between.
 */
export function leaderElectionTimingProblem({ leaseDurationMs, renewDeadlineMs, retryPeriodMs }: LeaderElectionTiming): string | undefined {
  if (!(leaseDurationMs >= 1000)) return `the lease duration must be at least 1 s, got ${leaseDurationMs} ms`;
  if (!(leaseDurationMs > renewDeadlineMs)) return `the lease duration (${leaseDurationMs} ms) must be greater than the renew deadline (${renewDeadlineMs} ms)`;
  if (!(retryPeriodMs > 0) || !(renewDeadlineMs > retryPeriodMs * (1 + JITTER))) {
    return `the renew deadline (${renewDeadlineMs} ms) must be greater than the retry period (${retryPeriodMs} ms) × ${1 + JITTER}`;
  }
  return undefined;
}

export class LeaderElector {
  readonly identity: string;
  private readonly opts: Required<Omit<LeaderElectionOptions, 'identity'>>;
  private readonly log: Logger;
  /** The record as last seen, and when (by our own clock) it was first seen in that state. */
  private observed?: { record: string; atMs: number };
  /** The Lease as last read or written, for the resourceVersion of the next update. */
  private lease?: Lease;
  private leading = false;
  private abort = new AbortController();
  private loop?: Promise<void>;

  constructor(options: LeaderElectionOptions) {
    const leaseDurationMs = options.leaseDurationMs ?? 15_000;
    const renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    const retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (!options.namespace || !options.name) throw new Error('leader election needs the Lease namespace and name');
    const problem = leaderElectionTimingProblem({ leaseDurationMs, renewDeadlineMs, retryPeriodMs });
    if (problem) throw new Error(problem);
    this.identity = options.identity ?? `${hostname()}_${randomUUID()}`;
    this.opts = {
      ...options,
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
      releaseOnStop: options.releaseOnStop ?? true,
      clock: options.clock ?? systemTimerClock,
    };
    this.log = options.logger.child({ component: 'leader-election', lease: `${options.namespace}/${options.name}`, identity: this.identity });
    leaderElectionMetrics.masterStatus.set({ name: options.name }, 0);
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** Contends for the Lease in the background until stop(). */
  start(): void {
    if (this.loop) throw new Error('leader election was already started');
    this.loop = this.run();
  }

  /** Stops contending; if leading, waits for onStoppedLeading and then clears the holder (releaseOnStop). */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  /** One attempt to acquire or renew the Lease; true when this replica holds it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const { client, namespace, name, clock } = this.opts;
    const nowMs = clock.monotonicMs();
    const now = toMicroTime(clock.now());
    const durationSeconds = Math.ceil(this.opts.leaseDurationMs / 1000);
    const lease = await client.tryGet<Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace, name });
    if (!lease) {
      const created: Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { namespace, name },
        spec: { holderIdentity: this.identity, leaseDurationSeconds: durationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      };
      try {
        this.remember(await client.create(created), nowMs);
        return true;
      } catch (err) {
        if (isAlreadyExists(err)) return false;
        throw err;
      }
    }
    const spec = lease.spec ?? {};
    const record = recordOf(spec);
    // Expiry runs from when *we* first saw this exact record, not from its renewTime: the other node's clock may
    // be skewed either way, ours only has to measure an interval.
    if (this.observed?.record !== record) this.observed = { record, atMs: nowMs };
    this.lease = lease;
    const holder = spec.holderIdentity ?? '';
    const theirDurationMs = (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder !== '' && holder !== this.identity && nowMs < this.observed.atMs + theirDurationMs) return false;

    const ours = holder === this.identity;
    const next: LeaseSpec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: ours && spec.acquireTime ? spec.acquireTime : now,
      renewTime: now,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (ours ? 0 : 1),
    };
    try {
      // update() sends the resourceVersion we read: a concurrent writer makes this a 409, never a lost update.
      this.remember(await client.update<Lease>({ ...lease, spec: next }), nowMs);
      if (!ours) this.log.info({ previousHolder: holder || undefined }, 'acquired the lease');
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  private remember(lease: Lease, atMs: number): void {
    this.lease = lease;
    this.observed = { record: recordOf(lease.spec ?? {}), atMs };
  }

  private async run(): Promise<void> {
    const { clock, retryPeriodMs } = this.opts;
    const signal = this.abort.signal;
    while (!signal.aborted) {
      if (!(await this.attempt(this.opts.renewDeadlineMs))) {
        await clock.sleep(retryPeriodMs * (1 + Math.random() * JITTER), signal);
        continue;
      }
      if (signal.aborted) {
        // Acquired while stopping: hand it straight back.
        await this.release();
        break;
      }
      await this.lead(signal);
    }
  }

  /** Holds the Lease until renewal fails past the deadline or stop(); then runs onStoppedLeading. */
  private async lead(signal: AbortSignal): Promise<void> {
    const { clock, retryPeriodMs, renewDeadlineMs } = this.opts;
    let renewedAt = this.observed?.atMs ?? clock.monotonicMs();
    this.setLeading(true);
    try {
      this.opts.onStartedLeading();
    } catch (err) {
      this.log.error({ err }, 'onStartedLeading threw');
    }
    let lost = false;
    while (!signal.aborted) {
      await clock.sleep(retryPeriodMs, signal);
      if (signal.aborted) break;
      // Counted from before the request left: the write the server keeps happened no earlier than this.
      const attemptAt = clock.monotonicMs();
      const remaining = renewDeadlineMs - (attemptAt - renewedAt);
      if (remaining > 0 && (await this.attempt(remaining))) {
        renewedAt = attemptAt;
        continue;
      }
      if (clock.monotonicMs() - renewedAt >= renewDeadlineMs) {
        lost = true;
        break;
      }
    }
    this.setLeading(false);
    if (lost) this.log.error({ renewDeadlineMs }, 'leader election lost: the lease was not renewed within the renew deadline');
    try {
      await this.opts.onStoppedLeading();
    } catch (err) {
      this.log.error({ err }, 'onStoppedLeading threw');
    }
    // Release only a Lease we still hold by our own reckoning; after a loss someone else may own it.
    if (!lost && this.opts.releaseOnStop && clock.monotonicMs() - renewedAt < renewDeadlineMs) await this.release();
  }

  /** tryAcquireOrRenew bounded by timeoutMs; a timeout or an error counts as a failed attempt. */
  private async attempt(timeoutMs: number): Promise<boolean> {
    let cancel: () => void = () => {};
    const timeout = new Promise<'timeout'>((resolve) => {
      cancel = this.opts.clock.setTimer(() => resolve('timeout'), timeoutMs);
    });
    try {
      const outcome = await Promise.race([this.tryAcquireOrRenew(), timeout]);
      if (outcome === 'timeout') {
        this.log.warn({ timeoutMs }, 'acquire/renew attempt timed out');
        return false;
      }
      return outcome;
    } catch (err) {
      this.log.warn({ err }, 'acquire/renew attempt failed');
      return false;
    } finally {
      cancel();
    }
  }

  /** Clears the holder (leaseDurationSeconds 1) so followers take over without waiting out the lease. */
  private async release(): Promise<void> {
    const lease = this.lease;
    if (!lease || lease.spec?.holderIdentity !== this.identity) return;
    const now = toMicroTime(this.opts.clock.now());
    try {
      await this.opts.client.update<Lease>({
        ...lease,
        spec: { holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions: lease.spec?.leaseTransitions ?? 0 },
      });
      this.log.info('released the lease');
    } catch (err) {
      // A conflict means someone else wrote the Lease since our last renewal: it is no longer ours to release.
      this.log.warn({ err }, 'cannot release the lease');
    }
  }

  private setLeading(leading: boolean): void {
    this.leading = leading;
    leaderElectionMetrics.masterStatus.set({ name: this.opts.name }, leading ? 1 : 0);
  }
}

function recordOf(spec: LeaseSpec): string {
  return JSON.stringify([spec.holderIdentity ?? '', spec.leaseDurationSeconds ?? null, spec.acquireTime ?? null, spec.renewTime ?? null, spec.leaseTransitions ?? 0]);
}
