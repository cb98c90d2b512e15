// The realm Leases as one pass sees them: every acquisition and release of the pass goes through here, and the
// holdings the pass renewed without interruption are remembered, so the dispatch sequence's lease step does not
// renew again what an earlier step of the same pass (a schema proof's acquirePendingLock) renewed a moment before.
import type { Clock } from '../clock.js';
import type { AcquireRequest, AcquireResult, ReleaseRequest, TargetLock } from '../targetlock.js';

/** What the lease step asks of the pass's Leases. */
export interface DispatchLeases {
  acquire(request: AcquireRequest): Promise<AcquireResult>;
  /**
   * Whether this pass renewed exactly this holding (realm, holder, duration) without interruption under the epoch
   * the request expects. Absent: a lock that remembers nothing, so every lease step renews.
   */
  renewedInPass?(request: AcquireRequest): boolean;
}

interface Renewal {
  request: AcquireRequest;
  atMs: number;
}

const sameHolding = (a: AcquireRequest, b: AcquireRequest): boolean =>
  a.coordinationDigest === b.coordinationDigest && a.holder.resourceUid === b.holder.resourceUid && a.holder.operationId === b.holder.operationId &&
  a.durationSeconds === b.durationSeconds && a.expectedEpoch === b.expectedEpoch;

export class PassLeases implements DispatchLeases {
  private renewals: Renewal[] = [];

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
