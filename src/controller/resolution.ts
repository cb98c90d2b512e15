// A Resolve Job's result, for both families (docs/oci-artifacts.md): the artifact pinned to its digest, under the
// policy the claim pinned; or the registry's or the policy's refusal with the condition reason its code names; or a
// reason to read again. Each family writes the pin (retiring its plan when the pin moved) or retries the Resolve at
// its failure interval.
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation, OciSource, PinnedArtifact } from '../shared/api/shapes.js';
import { OCI_FAILURE_CODES } from '../shared/oci/failures.js';
import { RUNNER_ERROR } from '../shared/runner-protocol.js';
import { readOperationFrame } from './evidence.js';
import type { OwnerPass, OwnerResource } from './pass.js';

export type ResolveOutcome =
  | { kind: 'wait'; ms: number; why: string }
  | { kind: 'retry'; why: string }
  | { kind: 'refused'; reason: string; message: string }
  | { kind: 'pinned'; pin: PinnedArtifact };

const REASON_OF_CODE: ReadonlyMap<string, string> = new Map([
  ...Object.entries(OCI_FAILURE_CODES).map(([reason, code]) => [code, reason] as const),
  [RUNNER_ERROR.verificationPolicyMismatch, 'VerificationPolicyChanged'],
]);

/** The condition reason a Resolve's refusal code names; a code no registry step frames is a failed Resolve. */
export function resolveRefusalReason(code: string): string {
  return REASON_OF_CODE.get(code) ?? 'ResolveFailed';
}

export async function readResolution(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, job: V1Job, oci: OciSource | undefined): Promise<ResolveOutcome> {
  const read = await readOperationFrame(pass, claim, job, 'resolve');
  if (read.kind === 'wait') return read;
  if (read.kind === 'none') return { kind: 'retry', why: `the Resolve left no result: ${read.why}` };
  const { error, resolvedArtifact: found } = read.result;
  if (error) return { kind: 'refused', reason: resolveRefusalReason(error.code), message: error.message };
  const policy = claim.verificationPolicy;
  if (!found || !policy || found.verificationPolicyDigest !== policy.digest) return { kind: 'retry', why: 'the Resolve reports another verification policy than its claim pinned' };
  if (!oci) return { kind: 'retry', why: 'the spec no longer names a registry' };
  return {
    kind: 'pinned',
    pin: {
      oci: { reference: oci.reference, pinnedReference: found.pinnedReference, manifestDigest: found.digest, artifactType: found.artifactType, verifiedKeys: found.verifiedKeys },
      digest: found.contentDigest,
      verificationPolicyUID: policy.uid,
      verificationPolicyDigest: policy.digest,
      resolvedAt: pass.nowIso(),
    },
  };
}

/** What a pin says was verified, for a condition and an Event. */
export function verifiedText(pin: PinnedArtifact): string {
  const keys = pin.oci?.verifiedKeys ?? [];
  return keys.length > 0 ? `signed with ${keys.join(', ')}; meets the verification policy` : 'meets the verification policy';
}
