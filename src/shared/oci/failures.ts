// Why reading an artifact from a registry failed: one reason per cause, the same word in an error, in a resolve's
// runner error code and in the condition a person reads. The manager turns a code back into its reason.
import type { RegistryFailure } from './registry-client.js';
import { RUNNER_ERROR } from '../runner-protocol.js';

export type OciSourceFailure = RegistryFailure | 'ArtifactTypeMismatch' | 'ArtifactInvalid' | 'ArtifactRefused' | 'InvalidInput';

/** The runner error code a resolve frames for each reason (src/runner/resolve.ts). */
export const OCI_FAILURE_CODES: Readonly<Record<OciSourceFailure, string>> = {
  RegistryUnreachable: RUNNER_ERROR.registryUnreachable,
  RegistryUnauthorized: RUNNER_ERROR.registryUnauthorized,
  RegistryProtocolError: RUNNER_ERROR.registryProtocolError,
  ArtifactNotFound: RUNNER_ERROR.artifactNotFound,
  ArtifactTooLarge: RUNNER_ERROR.artifactTooLarge,
  DigestMismatch: RUNNER_ERROR.registryDigestMismatch,
  ArtifactTypeMismatch: RUNNER_ERROR.artifactTypeMismatch,
  ArtifactInvalid: RUNNER_ERROR.invalidArtifact,
  ArtifactRefused: RUNNER_ERROR.artifactRefused,
  InvalidInput: RUNNER_ERROR.invalidInput,
};
