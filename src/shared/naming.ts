// Deterministic Job names (the seed's workload.NameFor / NameForMigration). The name folds every value that
// identifies one dispatch, so a restarted controller can tell a Job it created from one it has not.
import { recentSha256Hex } from './canonical.js';

export type Family = 'schema' | 'migration';

export interface JobNameInput {
  family: Family;
  ownerName: string;
  ownerUid: string;
  operationType: string;
  operationId: string;
  executionBindingId: string;
  inputFingerprint: string;
  attempt: number;
}

const MAX_NAME = 63;
const SUFFIX_LENGTH = 16;

export class JobNameError extends Error {
  override name = 'JobNameError';
}

export function jobNameFor(input: JobNameInput): string {
  const { family, ownerName, ownerUid, operationType, operationId, executionBindingId, inputFingerprint, attempt } = input;
  if (family !== 'schema' && family !== 'migration') throw new JobNameError(`unknown family ${JSON.stringify(family)}`);
  if (!operationType) throw new JobNameError('operation type is empty');
  if (!Number.isSafeInteger(attempt) || attempt < 1) throw new JobNameError(`attempt must be a positive integer, got ${attempt}`);
  const seed = [ownerUid, operationType, operationId, executionBindingId, inputFingerprint, String(attempt)].join('\0');
  const suffix = recentSha256Hex(seed).slice(0, SUFFIX_LENGTH);
  const prefix = `${family === 'schema' ? 'ptah-' : 'ptah-m-'}${operationType.toLowerCase()}-`;
  const room = MAX_NAME - prefix.length - 1 - SUFFIX_LENGTH;
  const trimmed = trimDashes(ownerName);
  if (trimmed === '') throw new JobNameError(`owner name ${JSON.stringify(ownerName)} leaves nothing to name a Job after`);
  const name = trimmed.length > room ? trimmed.slice(0, room).replace(/-+$/, '') : trimmed;
  if (name === '') throw new JobNameError(`owner name ${JSON.stringify(ownerName)} leaves nothing to name a Job after`);
  return `${prefix}${name}-${suffix}`;
}

/** The fields of a claim (status.activeOperation of either family) its Job's name folds. */
export interface NamedClaim {
  type: string;
  id: string;
  executionBindingID: string;
  inputFingerprint: string;
  attempt: number;
}

/** The Job name a claim's own fields give for its owner: the name the claim must have reserved. */
export function claimJobName(family: Family, owner: { name: string; uid: string }, claim: NamedClaim): string {
  return jobNameFor({
    family,
    ownerName: owner.name,
    ownerUid: owner.uid,
    operationType: claim.type,
    operationId: claim.id,
    executionBindingId: claim.executionBindingID,
    inputFingerprint: claim.inputFingerprint,
    attempt: claim.attempt,
  });
}

function trimDashes(s: string): string {
  return s.replace(/^-+/, '').replace(/-+$/, '');
}
