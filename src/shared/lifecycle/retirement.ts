// Which realm release the write that retires a claim owes (the seed's mutationlifecycle.Retirement), decided
// once for both families. The families differ in one input: whether the record a mutating run leaves keeps
// the realm (a schema's pending observation does; a migration's unresolved run does not).

export const DISPOSITIONS = ['discard', 'unaccounted', 'accounted'] as const;
/** Why the claim is going: discarded, a run nobody accounted for, or accounted for by its own result. */
export type Disposition = (typeof DISPOSITIONS)[number];

/** Whose epoch the retiring write hands back: nothing, the claim's, or the proof's. */
export type Release = 'none' | 'claim' | 'proof';

export interface RealmClaim {
  mutating: boolean;
  /** The claim is one of the readings that settle an outstanding proof. */
  servesProof: boolean;
  /** The claim holds a Lease epoch. */
  locked: boolean;
  /** A schema Apply's proof is outstanding (status.pendingObservation). */
  proofOutstanding: boolean;
}

export interface RetirementInput {
  claim: RealmClaim;
  disposition: Disposition;
  /** The record a mutating run leaves keeps the realm (schema: true; migration: false). */
  recordHoldsRealm: boolean;
  /** Something the claim dispatched may still write (a Job not terminal, a Pod not stopped, an unanswered read). */
  mayStillWrite: boolean;
  /** This write removes the outstanding proof. */
  endsProof: boolean;
}

export class RetirementInputError extends Error {
  override name = 'RetirementInputError';
}

/** What holds the realm while the claim stands. */
export function realmHeldBy(claim: RealmClaim): 'proof' | 'claim' | 'none' {
  if (claim.proofOutstanding && claim.servesProof) return 'proof';
  if (claim.locked && (claim.mutating || claim.servesProof)) return 'claim';
  return 'none';
}

export function retirement(input: RetirementInput): Release {
  const { claim, disposition, recordHoldsRealm, mayStillWrite, endsProof } = input;
  if (!(DISPOSITIONS as readonly unknown[]).includes(disposition)) {
    throw new RetirementInputError(`disposition ${JSON.stringify(disposition)} is none of ${DISPOSITIONS.join(', ')}`);
  }
  switch (realmHeldBy(claim)) {
    case 'proof':
      // Only the write that settles the proof hands the Apply's epoch back.
      return endsProof ? 'proof' : 'none';
    case 'claim':
      // A mutating run's realm stays while its record holds it or while anything it dispatched can still write.
      return claim.mutating && disposition !== 'discard' && (recordHoldsRealm || mayStillWrite) ? 'none' : 'claim';
    case 'none':
      return 'none';
  }
}
