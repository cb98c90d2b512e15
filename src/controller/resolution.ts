// A Resolve Job's result, for both families (docs/oci-artifacts.md): the artifact pinned to its digest, under the
// policy the claim pinned; or the registry's or the policy's refusal with the condition reason its code names; or a
// reason to read again. Each family writes the pin (retiring its plan when the pin moved) or retries the Resolve at
// its failure interval.
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation, Condition, OciSource, PinnedArtifact } from '../shared/api/shapes.js';
import { OCI_FAILURE_CODES } from '../shared/oci/failures.js';
import { RUNNER_ERROR } from '../shared/runner-protocol.js';
import { pinText, samePin, verificationPolicyStillBinds, type ArtifactSource } from './artifact.js';
import { readOperationFrame } from './evidence.js';
import { endPass, type OwnerPass, type OwnerResource, type PassEnd } from './pass.js';
import { statusWithCondition, type Report } from './status.js';

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

/** Whether a Resolve claim may still be dispatched: the policy it pinned is the one the spec names now, unchanged. */
export async function resolveStillAuthorized(pass: OwnerPass<OwnerResource>, source: ArtifactSource, claim: ActiveOperation): Promise<string | undefined> {
  const policy = claim.verificationPolicy;
  if (!policy) return 'the Resolve claim pins no verification policy';
  return verificationPolicyStillBinds(pass, source, { verificationPolicyUID: policy.uid, verificationPolicyDigest: policy.digest });
}

/** The status fields a Resolve writes, common to both families. */
interface ResolvedStatus {
  artifact?: PinnedArtifact;
  plan?: unknown;
  refusedReading?: unknown;
  nextReconciliationTime?: string;
  conditions?: Condition[];
}

/** What each family supplies to settle its Resolve. */
export interface ResolveFamily<S extends ResolvedStatus, P extends string> {
  status: S;
  oci: OciSource | undefined;
  /** Runs the Resolve again after the failure interval; a refusal is reported Blocked with its reason. */
  retry(why: string, refused?: { reason: string; message: string }): Promise<PassEnd>;
  /** Retires the claim, writing `record` into the status in the same write. */
  retire(job: V1Job, record: (status: S) => void, report: Report<P>): Promise<void>;
  /** After a pin that moved is written: what the family retires with the old artifact besides its plan. */
  moved?(previous: S): Promise<void>;
}

/**
 * A terminal Resolve: the pin is written as status.artifact, and a pin that moved (a moved tag, another policy)
 * retires the plan and its reading, as a changed ConfigMap does; a refusal is Blocked with its reason until the
 * Resolve runs again after spec.execution.failureRetryInterval.
 */
export async function harvestResolve<S extends ResolvedStatus, P extends string>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, job: V1Job, family: ResolveFamily<S, P>): Promise<PassEnd> {
  const outcome = await readResolution(pass, claim, job, family.oci);
  switch (outcome.kind) {
    case 'wait':
      return endPass(outcome.why, outcome.ms);
    case 'retry':
      return family.retry(outcome.why);
    case 'refused':
      pass.event('Warning', 'ArtifactVerificationRefused', `${outcome.reason}: ${outcome.message}`);
      return family.retry(outcome.message, outcome);
  }
  const { pin } = outcome;
  const previous = family.status;
  const moved = !samePin(previous.artifact, pin);
  await family.retire(job, (status) => {
    Object.assign(status, statusWithCondition(pass, status, 'ArtifactVerified', 'True', 'Verified', `${pinText(pin)} ${verifiedText(pin)}`));
    status.artifact = pin;
    // A new artifact or policy: the reading and the plan were of the old one.
    if (moved) Object.assign(status, { plan: undefined, refusedReading: undefined, nextReconciliationTime: pass.nowIso() });
  }, { phase: 'Pending' as P, reason: 'ArtifactResolved', message: `artifact ${pinText(pin)} pinned` });
  if (!moved) return endPass('artifact resolved again, unchanged');
  pass.event('Normal', 'ArtifactResolved', `artifact ${pinText(pin)} pinned at content digest ${pin.digest}; ${verifiedText(pin)}`);
  await family.moved?.(previous);
  return endPass('artifact pinned');
}

/** The report and condition of a Resolve run again: Blocked with a refusal's reason, or still resolving. */
export function resolveRetryReport<P extends string>(why: string, retryNotBefore: string | undefined, refused?: { reason: string; message: string }): Report<P> {
  return refused
    ? { phase: 'Blocked' as P, reason: refused.reason, message: `${refused.message}; resolved again at ${retryNotBefore ?? 'the failure interval'}` }
    : { phase: 'Resolving' as P, reason: 'ResolveRetried', message: why };
}
