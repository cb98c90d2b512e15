// The values every claim is bounded by, in both families: its operation ID, the placeholder Lease epoch it
// persists before any acquisition, and an Apply's time window and Lease.
import { randomBytes } from 'node:crypto';
import type { ActiveOperation, PinnedArtifact } from '../shared/api/shapes.js';
import { sha256Digest } from '../shared/canonical.js';
import { DEFAULT_ACTIVE_DEADLINE_SECONDS, JOB_DEADLINE_GRACE_SECONDS } from '../shared/job/build.js';
import { MAX_LEASE_SECONDS } from '../shared/targetlock.js';

/** Beyond the Job's deadline grace, the time the Lease outlives the Job, so it lapses only after the executor stopped. */
export const LEASE_GRACE_SECONDS = 60;
/** The longest Apply window whose Lease still fits the Lease's upper bound. */
export const MAX_APPLY_WINDOW_SECONDS = MAX_LEASE_SECONDS - JOB_DEADLINE_GRACE_SECONDS - LEASE_GRACE_SECONDS;

/** A fresh operation ID: `sha256:` of 32 random bytes. */
export function newOperationId(): string {
  return sha256Digest(randomBytes(32));
}

/** The epoch a claim expects before it ever took the Lease: derived from its ID, so it names no real holding. */
export function placeholderLeaseEpoch(operationId: string): string {
  return `v1-${operationId.slice('sha256:'.length, 'sha256:'.length + 32)}`;
}

/** Whether the claim ever took the realm: it names an epoch, and not the placeholder it was claimed with. */
export function leaseTaken(claim: { id: string; leaseEpoch?: string }): boolean {
  return Boolean(claim.leaseEpoch) && claim.leaseEpoch !== placeholderLeaseEpoch(claim.id);
}

/**
 * An Apply's execution window in seconds: spec.execution.activeDeadlineSeconds, cut to what a Lease can outlive
 * (the Lease must be able to last the window plus both graces).
 */
export function applyWindowSeconds(m: { spec: { execution?: { activeDeadlineSeconds?: number } } }): number {
  return Math.min(m.spec.execution?.activeDeadlineSeconds ?? DEFAULT_ACTIVE_DEADLINE_SECONDS, MAX_APPLY_WINDOW_SECONDS);
}

/**
 * The Apply Lease: window + the Job's deadline grace + a lease grace. The runner kills the executor at the end of
 * the window, so the executor stops by its own clock at least two minutes before the Lease can lapse.
 */
export function applyLeaseDuration(windowSeconds: number): number {
  return windowSeconds + JOB_DEADLINE_GRACE_SECONDS + LEASE_GRACE_SECONDS;
}

/** dispatchNotAfter and executionNotAfter of an Apply claimed at `startedAt`: both end the window. */
export function applyDeadlines(startedAt: Date, windowSeconds: number): { dispatchNotAfter: string; executionNotAfter: string } {
  const end = new Date(startedAt.getTime() + windowSeconds * 1000).toISOString();
  return { dispatchNotAfter: end, executionNotAfter: end };
}

/**
 * The part of an input fingerprint a pinned artifact contributes: the exact ConfigMap, or the OCI manifest digest the
 * reference resolved to, and the policy; not when it was pinned. A ConfigMap pin folds exactly what it always did, so a
 * claim in flight across an upgrade keeps its fingerprint.
 */
export function pinIdentity(artifact: PinnedArtifact | undefined): Record<string, unknown> | null {
  if (!artifact) return null;
  const { configMapName, configMapUID, digest, verificationPolicyUID, verificationPolicyDigest, oci } = artifact;
  return { configMapName, configMapUID, digest, verificationPolicyUID, verificationPolicyDigest, ...(oci ? { oci: { pinnedReference: oci.pinnedReference } } : {}) };
}

/**
 * A Resolve claim (docs/oci-artifacts.md), in both families: read-only, no Lease, no database; it pins no artifact
 * (it finds one), so its fingerprint folds none, and it carries the verification policy the manager read, which its
 * Job must find unchanged. `fingerprint` is the family's input fingerprint of a claim pinning nothing.
 */
export function resolveClaim(now: string, epoch: string, policy: { uid: string; digest: string }, fingerprint: string): Omit<ActiveOperation, 'jobName'> {
  return { type: 'Resolve', id: newOperationId(), inputFingerprint: fingerprint, startedAt: now, attempt: 1, executionBindingID: epoch, verificationPolicy: policy };
}
