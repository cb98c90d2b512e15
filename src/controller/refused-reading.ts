// A reading that refused what it was given in a way no quick retry mends (status.refusedReading), the same record in
// both families: which artifact, spec and execution binding it was refused under, and why. Each family decides when
// such a refusal is read again: a migration's artifact never, until one of the three changes (its files are all the
// refusal depends on); a schema's at spec.interval (a desired schema can fail for want of a role or an extension on
// the server, which a person may add).
import type { ActiveOperation, RefusedReading } from '../shared/api/shapes.js';
import type { OwnerPass, OwnerResource } from './pass.js';

const MAX_MESSAGE = 1024;

/** What a reading was given: the artifact it read, the spec's generation, the execution binding it ran under. */
export interface ReadingInputs {
  artifactDigest: string | undefined;
  generation: number;
  executionBindingID: string | undefined;
}

/** The record of `claim`'s refusal; undefined when the claim pins no artifact (then there is nothing to hold it to). */
export function refusedReadingOf(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, refusal: { code: string; message: string }): RefusedReading | undefined {
  const artifactDigest = claim.artifact?.digest;
  if (!artifactDigest) return undefined;
  return {
    artifactDigest,
    generation: pass.generation,
    executionBindingID: claim.executionBindingID,
    code: refusal.code,
    message: refusal.message.slice(0, MAX_MESSAGE),
    refusedAt: pass.nowIso(),
  };
}

/** Whether `refused` was given exactly these inputs: another reading of them would say the same. */
export function refusalStands(refused: RefusedReading | undefined, now: ReadingInputs): refused is RefusedReading {
  return refused !== undefined && refused.artifactDigest === now.artifactDigest && refused.generation === now.generation &&
    refused.executionBindingID === now.executionBindingID;
}

/** What the resource reports while the refusal stands. */
export const refusalMessage = (refused: RefusedReading): string => `${refused.code}: ${refused.message}`.slice(0, MAX_MESSAGE);
