// What a migration claim is decided from: its input fingerprint (the values every claim is bounded by are shared,
// src/controller/claim-values.ts).
import type { PtahMigration } from '../../shared/api/migration-kinds.js';
import type { ObjectRef, PinnedArtifact } from '../../shared/api/shapes.js';
import { digest } from '../../shared/canonical.js';
import { pinIdentity } from '../claim-values.js';

export interface FingerprintInputs {
  type: string;
  artifact: PinnedArtifact | undefined;
  executionBindingID: string;
  coordinationDigest: string;
  planRef?: ObjectRef;
}

/**
 * Digest of everything a claim was decided from. The generation is one of them, so any spec edit (a suspension
 * included) moves the inputs of a claim in flight, and its run is then settled without reading its result.
 */
export function migrationInputFingerprint(m: PtahMigration, inputs: FingerprintInputs): string {
  return digest({
    version: 1,
    type: inputs.type,
    uid: m.metadata.uid ?? '',
    generation: m.metadata.generation ?? 0,
    artifact: pinIdentity(inputs.artifact),
    executionBindingID: inputs.executionBindingID,
    coordinationDigest: inputs.coordinationDigest,
    planRef: inputs.planRef ?? null,
  });
}
