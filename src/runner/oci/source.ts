// The Job side of an artifact from an OCI registry: the only code that holds the registry's credentials (the Secret
// mounted into the Job, never read by the manager). Two steps, as the seed's Resolve/Verify and its pinned reads:
//
//   resolveOciSource: the reference the spec names (a tag or a digest) to the manifest digest it names now, with the
//     facts the verification policy judges: artifact type, manifest annotations, files, how it was named, and the
//     signatures that verify with the policy's keys. Reads the manifest and the signatures, never a file's blob; the
//     content digest comes from the layer descriptors (a file's layer digest IS the sha256 of its bytes).
//   pullOciSource: the pinned digest's files into an empty directory, every blob checked against its descriptor,
//     the whole against the pinned content digest. A tag is never read here: only the digest the plans bind.
//
// Errors carry the condition reason (RegistryUnreachable, RegistryUnauthorized, ArtifactNotFound, ArtifactTooLarge,
// DigestMismatch, RegistryProtocolError, ArtifactTypeMismatch, ArtifactInvalid, ArtifactRefused) and a message
// with no credential in it.
import { constants } from 'node:fs';
import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { digest } from '../../shared/canonical.js';
import { ArtifactManifestError, pullArtifact, readArtifactManifest, type ArtifactManifestFacts } from '../../shared/oci/artifact-pull.js';
import { ARTIFACT_LIMITS, type ArtifactKind } from '../../shared/oci/artifact-layout.js';
import { credentialsFor, DockerConfigError } from '../../shared/oci/docker-config.js';
import { formatReference, parseReference, ReferenceError, type ArtifactReference } from '../../shared/oci/reference.js';
import { RegistryClient, RegistryError } from '../../shared/oci/registry-client.js';
import type { OciSourceFailure } from '../../shared/oci/failures.js';
import { ReasonedError } from '../../shared/oci/requests.js';
import { PolicyKeyError, verifyArtifactSignatures } from '../../shared/oci/signatures.js';
import { policyViolations, type VerificationPolicy } from '../../shared/verification-policy.js';

export type { OciSourceFailure };

export class OciSourceError extends ReasonedError<OciSourceFailure> {
  override name = 'OciSourceError';
}

export interface OciSourceInputs {
  /** As the spec writes it: `registry/repository:tag`, `…@sha256:…`, or both. */
  reference: string;
  kind: ArtifactKind;
  /** The registry Secret's `.dockerconfigjson`, when the spec names one. */
  dockerConfigJson?: string;
  /** PEM certificates to trust for the registry instead of the system's roots. */
  ca?: string;
  timeoutMs?: number;
}

export interface ResolvedOciSource {
  /** `registry/repository@sha256:…`: what every later step reads, and nothing else. */
  pinned: string;
  digest: string;
  /** artifactDigest of the files (src/shared/artifact.ts), from the layer descriptors. */
  contentDigest: string;
  artifactType: string;
  annotations: Record<string, string>;
  files: number;
  bytes: number;
  namedByTag: boolean;
  /** The policy keys a signature over the digest verified with (empty when the policy names none). */
  verifiedKeys: string[];
}

/** Resolves the reference and holds the artifact to the policy; an artifact the policy refuses is an error. */
export async function resolveOciSource(inputs: OciSourceInputs, policy: VerificationPolicy): Promise<ResolvedOciSource> {
  return withReasons(async () => {
    const { reference, client } = connect(inputs);
    const named = reference.tag ?? reference.digest!;
    const resolved = await client.resolve(reference.repository, named);
    if (reference.digest !== undefined && resolved.digest !== reference.digest) {
      throw new OciSourceError('DigestMismatch', `${formatReference(reference)} names ${reference.digest}, but the registry resolves it to ${resolved.digest}`);
    }
    const manifest = await client.manifest(reference.repository, resolved.digest, ARTIFACT_LIMITS.manifestBytes);
    const facts = readArtifactManifest(manifest, inputs.kind);
    const namedByTag = reference.digest === undefined;
    const signatures = policy.signatureKeys.length > 0
      ? await verifyArtifactSignatures(client, reference.repository, resolved.digest, policy.signatureKeys.map((k) => ({ name: k.name, pem: k.publicKey })))
      : { verified: [], problems: [] };
    const verifiedKeys = [...new Set(signatures.verified.map((v) => v.key))];
    const violations = policyViolations(policy, {
      labels: {},
      annotations: facts.annotations,
      files: Object.fromEntries(facts.files.map((f) => [f.name, f.size])),
      oci: { artifactType: facts.artifactType, namedByTag, verifiedKeys, signatureProblems: signatures.problems },
    });
    if (violations.length > 0) {
      throw new OciSourceError('ArtifactRefused', `${formatReference({ ...reference, digest: resolved.digest })} does not meet the verification policy: ${violations.join('; ')}`);
    }
    return {
      pinned: formatReference({ registry: reference.registry, repository: reference.repository, digest: resolved.digest }),
      digest: resolved.digest,
      contentDigest: contentDigestOf(facts),
      artifactType: facts.artifactType,
      annotations: facts.annotations,
      files: facts.files.length,
      bytes: facts.files.reduce((sum, f) => sum + f.size, 0),
      namedByTag,
      verifiedKeys,
    };
  });
}

export interface PulledOciSource {
  files: number;
  bytes: number;
}

/**
 * Writes the pinned artifact's files into `directory` (which must be empty), read-only. `pinned` names the digest;
 * `contentDigest` is what the plan bound: files that add up to another are refused before any is written.
 */
export async function pullOciSource(inputs: OciSourceInputs & { contentDigest: string }, directory: string): Promise<PulledOciSource> {
  return withReasons(async () => {
    const { reference, client } = connect(inputs);
    if (reference.digest === undefined || reference.tag !== undefined) {
      throw new OciSourceError('InvalidInput', `${inputs.reference} is not pinned to a digest alone: an artifact is pulled only by the digest its plan binds`);
    }
    if ((await readdir(directory)).length > 0) throw new OciSourceError('InvalidInput', `the directory ${directory} is not empty`);
    const artifact = await pullArtifact(client, reference.repository, reference.digest, inputs.kind);
    if (artifact.contentDigest !== inputs.contentDigest) {
      throw new OciSourceError('DigestMismatch', `${inputs.reference} holds files of content digest ${artifact.contentDigest}, not the pinned ${inputs.contentDigest}`);
    }
    let bytes = 0;
    for (const [name, content] of artifact.contents) {
      // O_EXCL: a name written twice, or a link planted in the directory, is an error rather than followed.
      const handle = await open(join(directory, name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o444);
      try {
        await handle.writeFile(content);
      } finally {
        await handle.close();
      }
      bytes += content.byteLength;
    }
    return { files: artifact.contents.size, bytes };
  });
}

/** The content digest of the files a manifest lists, without reading them: `sha256:` of canonical {name: layer digest}. */
function contentDigestOf(facts: ArtifactManifestFacts): string {
  return digest(Object.fromEntries(facts.files.map((f) => [f.name, f.digest])));
}

function connect(inputs: OciSourceInputs): { reference: ArtifactReference; client: RegistryClient } {
  const reference = parseReference(inputs.reference);
  const credentials = inputs.dockerConfigJson === undefined ? undefined : credentialsFor(inputs.dockerConfigJson, reference.registry, 'the registry Secret\'s .dockerconfigjson');
  if (inputs.dockerConfigJson !== undefined && !credentials) {
    throw new OciSourceError('RegistryUnauthorized', `the registry Secret holds no credentials for ${reference.registry} (its auths are matched by host and port)`);
  }
  const client = new RegistryClient(reference.registry, {
    ...(credentials ? { credentials } : {}),
    ...(inputs.ca !== undefined ? { ca: inputs.ca } : {}),
    ...(inputs.timeoutMs !== undefined ? { timeoutMs: inputs.timeoutMs } : {}),
  });
  return { reference, client };
}

/** Every failure as an OciSourceError with its reason. */
async function withReasons<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (e) {
    if (e instanceof OciSourceError) throw e;
    if (e instanceof RegistryError || e instanceof ArtifactManifestError) throw new OciSourceError(e.reason, e.message);
    if (e instanceof ReferenceError || e instanceof DockerConfigError || e instanceof PolicyKeyError) throw new OciSourceError('InvalidInput', e.message);
    throw e;
  }
}
