// The realm Leases as one pass sees them: every acquisition and release of the pass goes through here, and the
// holdings the pass renewed without interruption are remembered, so the dispatch sequence's lease step does not
// renew again what an earlier step of the same pass (a schema proof's acquirePendingLock) renewed a moment before.
import type { Clock } from '../clock.js';
import type { AcquireRequest, AcquireResult, ReleaseRequest, TargetLock } from '../targetlock.js';

/** A realm holding as a claim (or a proof's record) keeps it: the realm, the run it is held for, its duration and epoch. */
export interface Holding {
  coordinationDigest: string;
  /** The UID of the resource whose claim holds the realm. */
  resourceUid: string;
  /** The run the realm is held for: a proof's readings hold it under the Apply they prove. */
  operationId: string;
  durationSeconds: number;
  /** The epoch on record; undefined before the first acquisition. */
  epoch: string | undefined;
}

/**
 * What renewing a holding found. Kept: this holder held the realm without interruption under the epoch on record.
 * Otherwise continuity is lost, whatever the holder does next: the realm was taken again under a new `epoch`, or
 * someone else holds it (no epoch; look again after `requeueAfterMs`).
 */
export type Renewal = { kept: true } | { kept: false; epoch?: string; requeueAfterMs: number };

/** The acquisition a holding is renewed by. */
export const holdingRequest = (h: Holding): AcquireRequest => ({
  coordinationDigest: h.coordinationDigest,
  holder: { resourceUid: h.resourceUid, operationId: h.operationId },
  durationSeconds: h.durationSeconds,
  expectedEpoch: h.epoch,
});

/**
 * Renews a holding under the one continuity rule every renewal shares (a dispatched Apply's, a proof's, a
 * reading's); what a lost holding means is the caller's.
 */
export async function renewHolding(lock: Pick<DispatchLeases, 'acquire'>, holding: Holding): Promise<Renewal> {
  const result = await lock.acquire(holdingRequest(holding));
  if (result.kind === 'contended') return { kept: false, requeueAfterMs: result.requeueAfterMs };
  return result.continuous ? { kept: true } : { kept: false, epoch: result.epoch, requeueAfterMs: 1 };
}

/** What the lease step asks of the pass's Leases. */
export interface DispatchLeases {
  acquire(request: AcquireRequest): Promise<AcquireResult>;
  /**
   * Whether this pass renewed exactly this holding (realm, holder, duration) without interruption under the epoch
   * the request expects. Absent: a lock that remembers nothing, so every lease step renews.
   */
  renewedInPass?(request: AcquireRequest): boolean;
}

interface RenewedInPass {
  request: AcquireRequest;
  atMs: number;
}

const sameHolding = (a: AcquireRequest, b: AcquireRequest): boolean =>
  a.coordinationDigest === b.coordinationDigest && a.holder.resourceUid === b.holder.resourceUid && a.holder.operationId === b.holder.operationId &&
  a.durationSeconds === b.durationSeconds && a.expectedEpoch === b.expectedEpoch;

export class PassLeases implements DispatchLeases {
  private renewals: RenewedInPass[] = [];

  constructor(
    private readonly lock: Pick<TargetLock, 'acquire' | 'release' | 'namespace'>,
    private readonly clock: Clock,
  ) {}

  /** Where the Leases live. */
  get namespace(): string {
    return this.lock.namespace;
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    // Whatever this acquisition finds supersedes what the pass knew of the realm, a failure included.
    this.forget(request.coordinationDigest);
    const result = await this.lock.acquire(request);
    if (result.kind === 'acquired' && result.continuous) this.renewals.push({ request, atMs: this.clock.monotonicMs() });
    return result;
  }

  async release(request: ReleaseRequest): Promise<'released' | 'not-held'> {
    this.forget(request.coordinationDigest);
    return this.lock.release(request);
  }

  renewedInPass(request: AcquireRequest): boolean {
    // A renewal still counts while most of the Lease it bought is left: a pass slowed past half the Lease's
    // duration renews again rather than dispatch on a holding closer to its expiry than a renewal would leave it.
    const freshMs = (request.durationSeconds * 1000) / 2;
    const now = this.clock.monotonicMs();
    return this.renewals.some((r) => sameHolding(r.request, request) && now - r.atMs < freshMs);
  }

  private forget(coordinationDigest: string): void {
    this.renewals = this.renewals.filter((r) => r.request.coordinationDigest !== coordinationDigest);
  }
}
