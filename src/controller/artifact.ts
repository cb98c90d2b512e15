// Resolve and Verify, inside the manager, for both families: the artifact is an immutable ConfigMap (a
// migration's files, or a schema's schema.sql), pinned by UID and content digest, and held to the verification
// policy (another immutable ConfigMap). Both are read uncached every time, and the manager reads ConfigMaps only,
// never a Secret.
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { PinnedArtifact } from '../shared/api/shapes.js';
import { artifactDigest } from '../shared/artifact.js';
import { sha256Digest } from '../shared/canonical.js';
import type { OwnerPass, OwnerResource } from './pass.js';
import { parseVerificationPolicy, policyViolations, PolicyFormatError } from '../shared/verification-policy.js';

type AnyPass = OwnerPass<OwnerResource>;

/** Where a resource's spec names its artifact and policy (spec.artifact of a migration, spec.desired of a schema). */
export interface ArtifactSource {
  configMapRef: { name: string };
  verificationPolicyRef: { name: string; key: string };
}

export type ArtifactVerdict = { ok: true; pin: PinnedArtifact } | { ok: false; reason: string; message: string };

const configMapRef = (pass: AnyPass, name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: pass.namespace, name });

/** Every file of a ConfigMap, as the Pod's volume presents it: data as UTF-8, binaryData decoded. */
function artifactFiles(cm: V1ConfigMap): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const [key, value] of Object.entries(cm.data ?? {})) files.set(key, Buffer.from(value, 'utf8'));
  for (const [key, value] of Object.entries(cm.binaryData ?? {})) files.set(key, Buffer.from(value, 'base64'));
  return files;
}

/** The policy key's digest: what the pin, the plan and the approvals bind. */
function policyDigestOf(cm: V1ConfigMap, key: string): string | undefined {
  const text = cm.data?.[key];
  return text === undefined ? undefined : sha256Digest(text);
}

/** Reads, checks and pins the artifact and its policy (the seed's Resolve and Verify). */
export async function resolveArtifact(pass: AnyPass, source: ArtifactSource, requiredKey?: string): Promise<ArtifactVerdict> {
  const { configMapRef: artifactRef, verificationPolicyRef: policyRef } = source;
  const [artifact, policy] = await Promise.all([
    pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, artifactRef.name)),
    pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, policyRef.name)),
  ]);
  if (!artifact) return { ok: false, reason: 'ArtifactNotFound', message: `the artifact ConfigMap ${artifactRef.name} does not exist` };
  if (artifact.immutable !== true) {
    return { ok: false, reason: 'ArtifactNotImmutable', message: `the artifact ConfigMap ${artifactRef.name} is not immutable; create it with immutable: true so its content cannot change under a plan` };
  }
  if (!policy) return { ok: false, reason: 'VerificationPolicyNotFound', message: `the verification policy ConfigMap ${policyRef.name} does not exist` };
  if (policy.immutable !== true) {
    return { ok: false, reason: 'VerificationPolicyNotImmutable', message: `the verification policy ConfigMap ${policyRef.name} is not immutable; create it with immutable: true` };
  }
  const policyText = policy.data?.[policyRef.key];
  if (policyText === undefined) {
    return { ok: false, reason: 'VerificationPolicyInvalid', message: `the verification policy ConfigMap ${policyRef.name} has no key ${policyRef.key}` };
  }
  let rules;
  try {
    rules = parseVerificationPolicy(policyText);
  } catch (e) {
    if (!(e instanceof PolicyFormatError)) throw e;
    return { ok: false, reason: 'VerificationPolicyInvalid', message: `${policyRef.name}/${policyRef.key}: ${e.message}` };
  }
  const files = artifactFiles(artifact);
  if (requiredKey !== undefined && !files.has(requiredKey)) {
    return { ok: false, reason: 'ArtifactInvalid', message: `the artifact ConfigMap ${artifactRef.name} has no key ${requiredKey}` };
  }
  const violations = policyViolations(rules, {
    labels: artifact.metadata?.labels ?? {},
    annotations: artifact.metadata?.annotations ?? {},
    files: Object.fromEntries([...files].map(([name, bytes]) => [name, bytes.length])),
  });
  if (violations.length > 0) {
    return { ok: false, reason: 'ArtifactRefused', message: `the artifact ConfigMap ${artifactRef.name} does not meet the verification policy ${policyRef.name}: ${violations.join('; ')}` };
  }
  return {
    ok: true,
    pin: {
      configMapName: artifactRef.name,
      configMapUID: artifact.metadata?.uid ?? '',
      digest: artifactDigest(files),
      verificationPolicyUID: policy.metadata?.uid ?? '',
      verificationPolicyDigest: sha256Digest(policyText),
      resolvedAt: pass.nowIso(),
    },
  };
}

/** Whether two pins name the same artifact and policy (the resolution time aside). */
export function samePin(a: PinnedArtifact | undefined, b: PinnedArtifact | undefined): boolean {
  return a !== undefined && b !== undefined && a.configMapName === b.configMapName && a.configMapUID === b.configMapUID && a.digest === b.digest &&
    a.verificationPolicyUID === b.verificationPolicyUID && a.verificationPolicyDigest === b.verificationPolicyDigest;
}

/**
 * The verification policy a claim was decided under still binds: the ConfigMap the spec names now, read uncached,
 * is the one pinned (same UID, immutable, same digest). Anything else discards the plan rather than narrowing it.
 */
export async function verificationPolicyStillBinds(pass: AnyPass, source: ArtifactSource, pin: PinnedArtifact): Promise<string | undefined> {
  const { verificationPolicyRef: ref } = source;
  const policy = await pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, ref.name));
  if (!policy) return `the verification policy ConfigMap ${ref.name} no longer exists`;
  if (policy.metadata?.uid !== pin.verificationPolicyUID) return `the verification policy ConfigMap ${ref.name} was replaced`;
  if (policy.immutable !== true || policyDigestOf(policy, ref.key) !== pin.verificationPolicyDigest) return `the verification policy ${ref.name}/${ref.key} changed`;
  return undefined;
}

/**
 * Why the ConfigMap under the pin's name no longer holds the pinned content, if it does not: what a Job that mounts
 * the artifact needs (it mounts it by name, and its runner refuses content of another digest). A copy of the same
 * bytes under that name will do.
 */
export async function pinnedContentGone(pass: AnyPass, pin: PinnedArtifact): Promise<string | undefined> {
  const artifact = await pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, pin.configMapName));
  if (!artifact) return `the artifact ConfigMap ${pin.configMapName} no longer exists`;
  if (artifactDigest(artifactFiles(artifact)) !== pin.digest) return `the artifact ConfigMap ${pin.configMapName} no longer holds the pinned content`;
  return undefined;
}

/** The pinned artifact ConfigMap still stands as pinned (same UID, immutable, same digest). */
export async function artifactStillPinned(pass: AnyPass, source: ArtifactSource, pin: PinnedArtifact): Promise<string | undefined> {
  if (source.configMapRef.name !== pin.configMapName) return `the spec names artifact ${source.configMapRef.name}, not the pinned ${pin.configMapName}`;
  const artifact = await pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, pin.configMapName));
  if (!artifact) return `the artifact ConfigMap ${pin.configMapName} no longer exists`;
  if (artifact.metadata?.uid !== pin.configMapUID) return `the artifact ConfigMap ${pin.configMapName} was replaced`;
  if (artifact.immutable !== true || artifactDigest(artifactFiles(artifact)) !== pin.digest) return `the artifact ConfigMap ${pin.configMapName} changed`;
  return undefined;
}
