// A proof no reading can finish, on deletion (the seed: "Only deletion and a person's settlement end a proof that no
// read can finish"). Deletion runs the proof as any pass does (reconcilePendingObservation: the Observe, then the
// Plan, under the Apply's Lease) and ends it unread only when no reading can finish it, which is one of:
// - ArtifactGone: the artifact the Apply ran is gone from under its name, or holds other content. Every proof
//   reading mounts it and its runner refuses any other digest; looked at before a proof reading is claimed or
//   dispatched (the manager may read ConfigMaps).
// - ReadingRefused: the reading cannot be dispatched (its Job cannot be built from the proof's snapshot, or the
//   driver refuses it), a defect no retry mends.
// - ReadingKeepsFailing: a reading already run again during the deletion failed again. This is how a gone target
//   Secret shows (the manager never reads a Secret; the reading's Pod never starts and ends at its deadline), and a
//   database that is gone or refuses the reading. Outside deletion a failed reading runs again until a person mends
//   its cause; a person deleting the schema will not, so one more attempt covers a passing fault and no more.
// Either way a Warning Event says what became of the proof: ProofReadOnDeletion (harvest.ts) or ProofDiscarded.
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { pinnedContentGone } from '../artifact.js';
import { endPass, servesProof, type PassEnd, type SchemaPass } from './context.js';
import { endProofUnread } from './retire.js';

export interface Unreadable {
  reason: 'ArtifactGone' | 'ReadingRefused' | 'ReadingKeepsFailing';
  message: string;
}

export const isDeleting = (pass: SchemaPass): boolean => Boolean(pass.s.metadata.deletionTimestamp);

/** ArtifactGone, for a schema being deleted with a proof owed (undefined otherwise). */
export async function proofArtifactGone(pass: SchemaPass): Promise<Unreadable | undefined> {
  const pending = pass.status.pendingObservation;
  if (!isDeleting(pass) || !pending) return undefined;
  const gone = await pinnedContentGone(pass, pending.artifact);
  return gone ? { reason: 'ArtifactGone', message: gone } : undefined;
}

/** ReadingKeepsFailing: the failed attempt of this proof reading is itself a retry made during the deletion. */
export function readingKeepsFailing(pass: SchemaPass, claim: ActiveOperation): boolean {
  const deletedAt = pass.s.metadata.deletionTimestamp;
  if (!deletedAt || !servesProof(pass, claim)) return false;
  return claim.attempt > 1 && Date.parse(claim.startedAt) >= new Date(deletedAt).getTime();
}

/**
 * Ends the proof unread on deletion (endProofUnread). Nothing of the Apply can still write by now: no proof reading
 * is claimed before that.
 */
export async function discardProofUnread(pass: SchemaPass, why: Unreadable): Promise<PassEnd> {
  const pending = pass.status.pendingObservation;
  if (!pending) return endPass('no proof owed');
  await endProofUnread(pass, { why: why.reason });
  pass.event('Warning', 'ProofDiscarded', `the resource is deleted with the proof of Apply ${pending.applyOperationID} (${pending.outcome}) owed, and no reading can finish it ` +
    `(${why.reason}: ${why.message}); nothing of the Apply can still write, and its realm is handed back unproven`);
  return endPass(`proof ended unread on deletion (${why.reason})`);
}
