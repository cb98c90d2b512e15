// The resolve operation (docs/oci-artifacts.md, "Where resolution runs"): the reference the spec names, resolved to
// its digest and held to the verification policy, in a Job that holds the registry Secret and no database URL. It
// starts no executor and opens no database, so its frame names no realm and no target and its childExitCode is -1.
// The policy is the one the manager pinned: its text must have the digest the Job names.
import { sha256Digest, isDigest } from '../shared/canonical.js';
import { RUNNER_ENV } from '../shared/runner-env.js';
import { RUNNER_ERROR, type ResolvedArtifact } from '../shared/runner-protocol.js';
import { parseVerificationPolicy, PolicyFormatError } from '../shared/verification-policy.js';
import type { Env } from './contract.js';
import { asRefusal, mountedText, readRegistryInputs, requiredEnv } from './oci/inputs.js';
import { resolveOciSource } from './oci/source.js';
import { RunnerRefusal } from './refusal.js';

const MAX_POLICY_BYTES = 256 * 1024;

export async function resolveRun(env: Env): Promise<{ resolvedArtifact: ResolvedArtifact }> {
  const inputs = await readRegistryInputs(env);
  const expected = requiredEnv(env, RUNNER_ENV.expectedVerificationPolicyDigest);
  if (!isDigest(expected)) throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${RUNNER_ENV.expectedVerificationPolicyDigest} is not a sha256 digest`);
  const text = await mountedText(requiredEnv(env, RUNNER_ENV.verificationPolicyFile), MAX_POLICY_BYTES, 'verification policy');
  if (sha256Digest(text) !== expected) {
    throw new RunnerRefusal(RUNNER_ERROR.verificationPolicyMismatch, 'the mounted verification policy is not the one the manager pinned; nothing was resolved');
  }
  let policy;
  try {
    policy = parseVerificationPolicy(text.toString('utf8'));
  } catch (error) {
    if (error instanceof PolicyFormatError) throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `the verification policy: ${error.message}`);
    throw error;
  }
  try {
    const resolved = await resolveOciSource(inputs, policy);
    return {
      resolvedArtifact: {
        pinnedReference: resolved.pinned,
        digest: resolved.digest,
        contentDigest: resolved.contentDigest,
        artifactType: resolved.artifactType,
        verificationPolicyDigest: expected,
        verifiedKeys: [...resolved.verifiedKeys].sort(),
        files: resolved.files,
        bytes: resolved.bytes,
      },
    };
  } catch (error) {
    throw asRefusal(error);
  }
}
