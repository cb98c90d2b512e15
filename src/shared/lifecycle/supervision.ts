// How often a dispatched Job is looked at while it runs, the first look after its create included, for both
// families. A Job's or a Pod's stop wakes its resource at once (controller/triggers.ts), so these looks are not how
// a result is noticed: they renew the realm's Lease and hold the Job to its claim (the seed's "every pass rebinds by
// UID, renews the Lease, and re-validates"), and they are the safety net for a stop event that never arrived.
import type { OperationAnswers } from './operations.js';

/** A claim holding the realm's Lease: well inside the shortest Lease (a 30 s window + 120 s of grace). */
const SUPERVISE_HOLDER_EVERY_MS = 5_000;
/** A reading that holds no Lease has nothing to renew: the Go operator's read-only Job poll. */
const SUPERVISE_READING_EVERY_MS = 30_000;

/** When to look again at a running Job of a claim with these answers. */
export function superviseEveryMs(operation: Pick<OperationAnswers, 'holdsRealm'>): number {
  return operation.holdsRealm ? SUPERVISE_HOLDER_EVERY_MS : SUPERVISE_READING_EVERY_MS;
}
