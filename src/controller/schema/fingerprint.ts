// What a schema claim is decided from. An ordinary claim folds the generation, so any spec edit moves the inputs
// of a claim in flight and its run is settled without reading its result. A proof reading folds the Apply it
// proves instead: the proof outranks the generation gate, so a spec edit does not disturb it.
import type { PtahSchema } from '../../shared/api/schema-kinds.js';
import type { ObjectRef, PinnedArtifact } from '../../shared/api/shapes.js';
import { digest } from '../../shared/canonical.js';
import { pinIdentity } from '../claim-values.js';

export interface SchemaFingerprintInputs {
  type: string;
  artifact: PinnedArtifact | undefined;
  executionBindingID: string;
  coordinationDigest: string;
  planRef?: ObjectRef;
  /** A proof reading: the Apply operation it proves. */
  proofOf?: string;
}

export function schemaInputFingerprint(s: PtahSchema, inputs: SchemaFingerprintInputs): string {
  return digest({
    version: 1,
    family: 'schema',
    type: inputs.type,
    uid: s.metadata.uid ?? '',
    ...(inputs.proofOf ? { proofOf: inputs.proofOf } : { generation: s.metadata.generation ?? 0 }),
    artifact: pinIdentity(inputs.artifact),
    executionBindingID: inputs.executionBindingID,
    coordinationDigest: inputs.coordinationDigest,
    planRef: inputs.planRef ?? null,
  });
}

/**
 * Digest of the policy a plan is bound to (the seed's policyFingerprint): how it may run. spec.policy.apply is not
 * in it: whether a plan runs is read when the Apply is claimed, so switching it neither retires a plan nor its approvals.
 */
export function schemaPolicyFingerprint(s: PtahSchema): string {
  const { allowDestructive, lockTimeout } = s.spec.policy;
  return digest({
    version: 1,
    engine: s.spec.target.engine,
    allowDestructive,
    lockTimeout,
    connectTimeout: s.spec.execution.connectTimeout ?? null,
  });
}
