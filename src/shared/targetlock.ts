// The database realm's Lease (the seed's targetlock.Acquire/Release): one coordination.k8s.io Lease per
// coordination digest, so two resources that address one physical database serialize on one object.
//
// Each holding carries an epoch (annotation), new whenever the holding starts afresh: on create, on a takeover,
// and on re-acquisition after a release. A claim persists the epoch it expects; an epoch that changed under a
// dispatched claim means someone else may have held the realm in between, which the caller latches as
// continuity loss.
import { randomBytes } from 'node:crypto';
import type { V1Lease } from '@kubernetes/client-node';
import { isAlreadyExists, isConflict, isNotFound, type KubeClient } from './kube-client.js';
import { systemClock, type Clock } from './clock.js';
import { holderIdentityFor, leaseNameFor } from './realm.js';

export const LEASE_EPOCH_ANNOTATION = 'operator.ptah.run/lease-epoch';
export const MIN_LEASE_SECONDS = 5;
export const MAX_LEASE_SECONDS = 86_460;
const EPOCH = /^v1-[0-9a-f]{32}$/;
const MAX_ATTEMPTS = 5;

export interface LeaseHolder {
  /** UID of the PtahSchema or PtahMigration whose claim holds the realm. */
  resourceUid: string;
  operationId: string;
}

export interface AcquireRequest {
  coordinationDigest: string;
  holder: LeaseHolder;
  durationSeconds: number;
  /** The epoch the claim persisted; undefined when it has none yet. */
  expectedEpoch?: string;
}

export type AcquireResult =
  | {
      kind: 'acquired';
      epoch: string;
      /** True when this holder held the realm without interruption under the expected epoch. */
      continuous: boolean;
    }
  | { kind: 'contended'; requeueAfterMs: number; holderIdentity: string };

export interface ReleaseRequest {
  coordinationDigest: string;
  holder: LeaseHolder;
  epoch: string;
}

export class MalformedLeaseError extends Error {
  override name = 'MalformedLeaseError';
}
export class LeaseConcurrencyError extends Error {
  override name = 'LeaseConcurrencyError';
}

export const newLeaseEpoch = (): string => `v1-${randomBytes(16).toString('hex')}`;
export const isLeaseEpoch = (value: unknown): value is string => typeof value === 'string' && EPOCH.test(value);

interface Observation {
  record: string;
  firstSeenMs: number;
}

export class TargetLock {
  /** Per Lease name: when this process first saw the foreign record in its current form. */
  private readonly observations = new Map<string, Observation>();

  constructor(
    private readonly client: KubeClient,
    readonly namespace: string,
    private readonly clock: Clock = systemClock,
  ) {}

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    checkDuration(request.durationSeconds);
    const name = leaseNameFor(request.coordinationDigest);
    const identity = holderIdentityFor(request.holder.resourceUid, request.holder.operationId);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      try {
        return await this.tryAcquire(name, identity, request);
      } catch (e) {
        if (isConflict(e) || isNotFound(e) || isAlreadyExists(e)) continue;
        throw e;
      }
    }
    throw new LeaseConcurrencyError(`Lease ${this.namespace}/${name} kept changing under ${MAX_ATTEMPTS} attempts to acquire it`);
  }

  private async tryAcquire(name: string, identity: string, request: AcquireRequest): Promise<AcquireResult> {
    const now = new MicroTime(this.clock.now());
    const stored = await this.client.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: this.namespace, name });
    if (!stored) {
      const epoch = newLeaseEpoch();
      await this.client.create<V1Lease>({
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name,
          namespace: this.namespace,
          labels: { 'app.kubernetes.io/managed-by': 'ptah-operator', 'operator.ptah.run/coordination': 'database-target' },
          annotations: { [LEASE_EPOCH_ANNOTATION]: epoch },
        },
        spec: { holderIdentity: identity, leaseDurationSeconds: request.durationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      });
      this.observations.delete(name);
      return { kind: 'acquired', epoch, continuous: false };
    }
    const spec = stored.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const storedEpoch = stored.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION];
    if (holder !== '' && holder !== identity) {
      const remainingMs = this.foreignRemainingMs(name, stored);
      if (remainingMs > 0) return { kind: 'contended', requeueAfterMs: remainingMs, holderIdentity: holder };
    }
    const renewing = holder === identity && isLeaseEpoch(storedEpoch);
    const epoch = renewing ? storedEpoch : newLeaseEpoch();
    const taking = holder !== identity;
    const next: V1Lease = {
      ...stored,
      metadata: { ...stored.metadata, annotations: { ...(stored.metadata?.annotations ?? {}), [LEASE_EPOCH_ANNOTATION]: epoch } },
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: request.durationSeconds,
        acquireTime: renewing && spec.acquireTime ? new MicroTime(spec.acquireTime) : now,
        renewTime: notBefore(now, spec.renewTime),
        leaseTransitions: (spec.leaseTransitions ?? 0) + (taking && holder !== '' ? 1 : 0),
      },
    };
    await this.client.update(next);
    this.observations.delete(name);
    return { kind: 'acquired', epoch, continuous: renewing && request.expectedEpoch === epoch };
  }

  /** Time left on a foreign holding, measured from this process's first sight of the record as it stands. */
  private foreignRemainingMs(name: string, lease: V1Lease): number {
    const spec = lease.spec ?? {};
    const duration = spec.leaseDurationSeconds;
    if (!duration || duration <= 0 || (!spec.renewTime && !spec.acquireTime)) {
      throw new MalformedLeaseError(`Lease ${this.namespace}/${name} is held by ${spec.holderIdentity} without a duration or a timestamp; refusing to judge its expiry`);
    }
    const record = JSON.stringify([
      lease.metadata?.resourceVersion,
      lease.metadata?.uid,
      spec.holderIdentity,
      duration,
      String(spec.acquireTime ?? ''),
      String(spec.renewTime ?? ''),
      spec.leaseTransitions ?? 0,
    ]);
    const nowMs = this.clock.monotonicMs();
    let seen = this.observations.get(name);
    if (!seen || seen.record !== record) {
      seen = { record, firstSeenMs: nowMs };
      this.observations.set(name, seen);
    }
    return Math.max(0, Math.ceil(duration * 1000 - (nowMs - seen.firstSeenMs)));
  }

  /** Releases the realm if, and only if, this holder still holds it under `epoch`. Idempotent. */
  async release(request: ReleaseRequest): Promise<'released' | 'not-held'> {
    const name = leaseNameFor(request.coordinationDigest);
    const identity = holderIdentityFor(request.holder.resourceUid, request.holder.operationId);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const stored = await this.client.tryGet<V1Lease>({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: this.namespace, name });
      if (!stored || stored.spec?.holderIdentity !== identity || stored.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION] !== request.epoch) {
        return 'not-held';
      }
      const { holderIdentity: _released, ...rest } = stored.spec ?? {};
      try {
        await this.client.update<V1Lease>({ ...stored, spec: { ...rest, renewTime: notBefore(this.clock.now(), stored.spec?.renewTime) } });
        return 'released';
      } catch (e) {
        if (isConflict(e)) continue;
        throw e;
      }
    }
    throw new LeaseConcurrencyError(`Lease ${this.namespace}/${name} kept changing under ${MAX_ATTEMPTS} attempts to release it`);
  }
}

function checkDuration(seconds: number): void {
  if (!Number.isInteger(seconds) || seconds < MIN_LEASE_SECONDS || seconds > MAX_LEASE_SECONDS) {
    throw new RangeError(`lease duration must be a whole number of seconds in ${MIN_LEASE_SECONDS}..${MAX_LEASE_SECONDS}, got ${seconds}`);
  }
}

/**
 * A Kubernetes MicroTime: the API server refuses a Lease whose timestamps carry JavaScript's three fraction digits.
 * JSON.stringify reaches toISOString through Date's toJSON, so the Lease serializes as client-node's V1MicroTime
 * did (which the manager no longer imports: issue #10).
 */
class MicroTime extends Date {
  override toISOString(): string {
    return `${super.toISOString().slice(0, -1)}000Z`;
  }
}

/** Stored timestamps never move backwards, whatever this node's clock says. */
function notBefore(now: Date, stored: Date | string | undefined): MicroTime {
  const storedMs = stored === undefined ? -Infinity : new Date(stored).getTime();
  return new MicroTime(Math.max(storedMs, now.getTime()));
}
