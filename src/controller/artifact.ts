// Resolve and Verify for both families. An immutable ConfigMap artifact (a migration's files, or a schema's
// schema.sql) is resolved inside the manager, pinned by UID and content digest, and held to the verification policy
// (another immutable ConfigMap); both are read uncached every time, and the manager reads ConfigMaps only, never a
// Secret. An OCI artifact is resolved by a Resolve Job (docs/oci-artifacts.md): the manager pins the policy it
// reads, and a Resolve is due whenever the spec's reference or the policy moved, or the interval passed.
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { OciSource, PinnedArtifact } from '../shared/api/shapes.js';
import { artifactDigest } from '../shared/artifact.js';
import { sha256Digest } from '../shared/canonical.js';
import type { OwnerPass, OwnerResource } from './pass.js';
import { parseVerificationPolicy, policyViolations, PolicyFormatError } from '../shared/verification-policy.js';

type AnyPass = OwnerPass<OwnerResource>;

/** Where a resource's spec names its artifact and policy (spec.artifact of a migration, spec.desired of a schema). */
export interface ArtifactSource {
  configMapRef?: { name: string };
  oci?: OciSource;
  verificationPolicyRef: { name: string; key: string };
}

export type ArtifactVerdict = { ok: true; pin: PinnedArtifact } | { ok: false; reason: string; message: string };
/** The verification policy as the manager pins it for a Resolve Job. */
export interface PolicyPin {
  uid: string;
  digest: string;
}
/** An OCI source's verdict: its pin stands, it is refused, or a Resolve Job is due. */
export type SourceVerdict = ArtifactVerdict | { ok: 'resolve'; policy: PolicyPin; why: string };

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

type PolicyRead = { ok: true; policy: V1ConfigMap; text: string; rules: ReturnType<typeof parseVerificationPolicy> } | { ok: false; reason: string; message: string };

/** The verification policy the spec names: immutable, holding its key, and well formed. */
async function readPolicy(policy: V1ConfigMap | undefined, policyRef: ArtifactSource['verificationPolicyRef']): Promise<PolicyRead> {
  if (!policy) return { ok: false, reason: 'VerificationPolicyNotFound', message: `the verification policy ConfigMap ${policyRef.name} does not exist` };
  if (policy.immutable !== true) {
    return { ok: false, reason: 'VerificationPolicyNotImmutable', message: `the verification policy ConfigMap ${policyRef.name} is not immutable; create it with immutable: true` };
  }
  const text = policy.data?.[policyRef.key];
  if (text === undefined) {
    return { ok: false, reason: 'VerificationPolicyInvalid', message: `the verification policy ConfigMap ${policyRef.name} has no key ${policyRef.key}` };
  }
  try {
    return { ok: true, policy, text, rules: parseVerificationPolicy(text) };
  } catch (e) {
    if (!(e instanceof PolicyFormatError)) throw e;
    return { ok: false, reason: 'VerificationPolicyInvalid', message: `${policyRef.name}/${policyRef.key}: ${e.message}` };
  }
}

/** Reads, checks and pins the artifact and its policy (the seed's Resolve and Verify). */
export async function resolveArtifact(pass: AnyPass, source: ArtifactSource, requiredKey?: string): Promise<ArtifactVerdict> {
  const { verificationPolicyRef: policyRef } = source;
  if (!source.configMapRef) return { ok: false, reason: 'ArtifactInvalid', message: 'the spec names no artifact ConfigMap' };
  const artifactRef = source.configMapRef;
  const [artifact, policyMap] = await Promise.all([
    pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, artifactRef.name)),
    pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, policyRef.name)),
  ]);
  if (!artifact) return { ok: false, reason: 'ArtifactNotFound', message: `the artifact ConfigMap ${artifactRef.name} does not exist` };
  if (artifact.immutable !== true) {
    return { ok: false, reason: 'ArtifactNotImmutable', message: `the artifact ConfigMap ${artifactRef.name} is not immutable; create it with immutable: true so its content cannot change under a plan` };
  }
  const read = await readPolicy(policyMap, policyRef);
  if (!read.ok) return read;
  const { policy, text: policyText, rules } = read;
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
    a.oci?.reference === b.oci?.reference && a.oci?.manifestDigest === b.oci?.manifestDigest &&
    a.verificationPolicyUID === b.verificationPolicyUID && a.verificationPolicyDigest === b.verificationPolicyDigest;
}

/** How a person recognises a pin: the ConfigMap, or the reference and the digest it resolved to. */
export function pinText(pin: PinnedArtifact): string {
  return pin.oci ? `${pin.oci.reference} (${pin.oci.manifestDigest})` : `${pin.configMapName} (${pin.digest})`;
}

/**
 * An OCI source: the pin in status stands while it names the spec's reference under the policy as it is now and the
 * interval has not passed since it was resolved; otherwise a Resolve Job is due, held to the policy read now.
 */
export async function ociArtifactVerdict(pass: AnyPass, source: ArtifactSource & { oci: OciSource }, pinned: PinnedArtifact | undefined, intervalMs: number): Promise<SourceVerdict> {
  const read = await readPolicy(await pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, source.verificationPolicyRef.name)), source.verificationPolicyRef);
  if (!read.ok) return read;
  const policy: PolicyPin = { uid: read.policy.metadata?.uid ?? '', digest: sha256Digest(read.text) };
  const current = pinned?.oci?.reference === source.oci.reference && pinned.verificationPolicyUID === policy.uid && pinned.verificationPolicyDigest === policy.digest;
  if (current && pass.now().getTime() < Date.parse(pinned.resolvedAt) + intervalMs) return { ok: true, pin: pinned };
  const why = current ? `${source.oci.reference} is resolved again (spec.interval passed)` : pinned?.oci ? 'the reference or the verification policy changed' : `${source.oci.reference} is not resolved yet`;
  return { ok: 'resolve', policy, why };
}

/**
 * The verification policy a claim was decided under still binds: the ConfigMap the spec names now, read uncached,
 * is the one pinned (same UID, immutable, same digest). Anything else discards the plan rather than narrowing it.
 */
export async function verificationPolicyStillBinds(pass: AnyPass, source: ArtifactSource, pin: Pick<PinnedArtifact, 'verificationPolicyUID' | 'verificationPolicyDigest'>): Promise<string | undefined> {
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
  // An OCI artifact is named by its digest: the fetch reads exactly the pinned content or refuses.
  if (pin.oci || !pin.configMapName) return undefined;
  const artifact = await pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, pin.configMapName));
  if (!artifact) return `the artifact ConfigMap ${pin.configMapName} no longer exists`;
  if (artifactDigest(artifactFiles(artifact)) !== pin.digest) return `the artifact ConfigMap ${pin.configMapName} no longer holds the pinned content`;
  return undefined;
}

/** The pinned artifact ConfigMap still stands as pinned (same UID, immutable, same digest). */
export async function artifactStillPinned(pass: AnyPass, source: ArtifactSource, pin: PinnedArtifact): Promise<string | undefined> {
  if (pin.oci) return source.oci?.reference === pin.oci.reference ? undefined : `the spec no longer names ${pin.oci.reference}`;
  if (source.configMapRef?.name !== pin.configMapName || !pin.configMapName) return `the spec names artifact ${source.configMapRef?.name ?? source.oci?.reference}, not the pinned ${pin.configMapName}`;
  const artifact = await pass.deps.client.tryGet<V1ConfigMap>(configMapRef(pass, pin.configMapName));
  if (!artifact) return `the artifact ConfigMap ${pin.configMapName} no longer exists`;
  if (artifact.metadata?.uid !== pin.configMapUID) return `the artifact ConfigMap ${pin.configMapName} was replaced`;
  if (artifact.immutable !== true || artifactDigest(artifactFiles(artifact)) !== pin.digest) return `the artifact ConfigMap ${pin.configMapName} changed`;
  return undefined;
}
