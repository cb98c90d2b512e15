// Signatures over an artifact's manifest digest, verified offline with the public keys the verification policy
// names: no keyless identity, no transparency log, no timestamp authority. Three layouts cosign writes are read:
//
//   - legacy tag: the manifest tagged `sha256-<hex>.sig`, one simple-signing layer per signature, the signature in the
//     layer's `dev.cosignproject.cosign/signature` annotation (ECDSA over the layer's bytes);
//   - legacy referrer: the same manifest, pushed as a referrer of type application/vnd.dev.cosign.artifact.sig.v1+json;
//   - Sigstore bundle referrer (cosign v3's default): a referrer of type application/vnd.dev.sigstore.bundle.v0.3+json
//     whose one layer is a bundle holding a DSSE envelope over an in-toto statement naming the digest.
//
// Referrers are listed through the referrers API or, where a registry answers it 404, the `sha256-<hex>` tag. What
// each referrer is, is decided from its own fetched manifest, never from the listing (which may drop or substitute
// its type). A signature counts only when it verifies with a policy key AND the bytes it signs name this digest.
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { INDEX_MEDIA_TYPE } from './artifact-layout.js';
import { SHA256_DIGEST } from './reference.js';
import type { RegistryClient } from './registry-client.js';
import { asObject, isObject, parseJsonBytes } from './json.js';

export const SIGNATURE_MEDIA_TYPES = {
  bundle: 'application/vnd.dev.sigstore.bundle.v0.3+json',
  cosignReferrer: 'application/vnd.dev.cosign.artifact.sig.v1+json',
  simpleSigning: 'application/vnd.dev.cosign.simplesigning.v1+json',
} as const;
const COSIGN_SIGNATURE_ANNOTATION = 'dev.cosignproject.cosign/signature';
const SIMPLE_SIGNING_TYPE = 'cosign container image signature';
const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';
const IN_TOTO_STATEMENT = 'https://in-toto.io/Statement/v1';
/** Bounds on what a signature search reads: referrers examined, and each signature manifest's and blob's bytes. */
export const SIGNATURE_LIMITS = { referrers: 64, manifestBytes: 1 << 20, blobBytes: 1 << 20 } as const;

export type SignatureLayout = 'cosign legacy tag' | 'cosign legacy referrer' | 'sigstore bundle';

export interface PolicyKey {
  /** How the policy names the key, for messages. */
  name: string;
  /** PEM of the public key (SPKI). */
  pem: string;
}

export interface SignatureVerdict {
  /** Each signature that verified: with which key, in which layout, found how. */
  verified: { key: string; layout: SignatureLayout; via: 'tag' | 'referrers API' | 'referrers tag' }[];
  /** Signatures found, verified or not. */
  found: number;
  /** Why each signature found did not count. */
  problems: string[];
}

interface Candidate {
  layout: SignatureLayout;
  via: SignatureVerdict['verified'][number]['via'];
  /** What a key signs, and the signature; or why the candidate could not even be read. */
  signed?: { message: Uint8Array; signature: Buffer; names: (digest: string) => string | undefined };
  unreadable?: string;
}

export class PolicyKeyError extends Error {
  override name = 'PolicyKeyError';
}

/** Reads the policy's keys; a key that is not a PEM public key is refused by name. */
export function policyKeys(keys: readonly PolicyKey[]): { name: string; key: KeyObject }[] {
  return keys.map(({ name, pem }) => {
    try {
      const key = createPublicKey(pem);
      if (!['ec', 'ed25519', 'rsa'].includes(key.asymmetricKeyType ?? '')) throw new Error(`a ${key.asymmetricKeyType} key`);
      return { name, key };
    } catch (e) {
      throw new PolicyKeyError(`the public key ${name} is not a PEM ECDSA, Ed25519 or RSA public key (${(e as Error).message})`);
    }
  });
}

/** Finds the artifact's signatures and verifies each with the keys. Never throws for a bad signature: it reports it. */
export async function verifyArtifactSignatures(client: RegistryClient, repository: string, digest: string, keys: readonly PolicyKey[]): Promise<SignatureVerdict> {
  if (!SHA256_DIGEST.test(digest)) throw new Error(`verifyArtifactSignatures: ${digest} is not a sha256 digest`);
  const publicKeys = policyKeys(keys);
  const candidates = [...await legacyTagSignatures(client, repository, digest), ...await referrerSignatures(client, repository, digest)];
  const verdict: SignatureVerdict = { verified: [], found: candidates.length, problems: [] };
  for (const [i, candidate] of candidates.entries()) {
    const label = `signature ${i + 1} (${candidate.layout}, via ${candidate.via})`;
    if (!candidate.signed) {
      verdict.problems.push(`${label}: ${candidate.unreadable}`);
      continue;
    }
    const { message, signature, names } = candidate.signed;
    const key = publicKeys.find(({ key }) => verifies(key, message, signature));
    if (!key) {
      verdict.problems.push(`${label}: verifies with none of the policy's keys (${publicKeys.map((k) => k.name).join(', ')})`);
      continue;
    }
    const mismatch = names(digest);
    if (mismatch) {
      verdict.problems.push(`${label}: verifies with ${key.name} but ${mismatch}`);
      continue;
    }
    verdict.verified.push({ key: key.name, layout: candidate.layout, via: candidate.via });
  }
  return verdict;
}

function verifies(key: KeyObject, message: Uint8Array, signature: Buffer): boolean {
  try {
    return verify(key.asymmetricKeyType === 'ed25519' ? null : 'sha256', message, key, signature);
  } catch {
    return false;
  }
}

async function legacyTagSignatures(client: RegistryClient, repository: string, digest: string): Promise<Candidate[]> {
  const manifest = await client.optionalManifest(repository, `${digest.replace(':', '-')}.sig`, SIGNATURE_LIMITS.manifestBytes);
  return manifest ? simpleSigningCandidates(client, repository, manifest, 'cosign legacy tag', 'tag') : [];
}

async function referrerSignatures(client: RegistryClient, repository: string, digest: string): Promise<Candidate[]> {
  const listed = await client.referrers(repository, digest, SIGNATURE_LIMITS.manifestBytes);
  if (!listed) return [];
  const via = listed.via === 'api' ? 'referrers API' : 'referrers tag';
  const index = parseJsonBytes(listed.index);
  if (!isObject(index) || (index.mediaType !== undefined && index.mediaType !== INDEX_MEDIA_TYPE) || !Array.isArray(index.manifests)) return [];
  const candidates: Candidate[] = [];
  for (const entry of index.manifests.slice(0, SIGNATURE_LIMITS.referrers)) {
    if (!isObject(entry) || typeof entry.digest !== 'string' || !SHA256_DIGEST.test(entry.digest)) continue;
    const bytes = await client.manifest(repository, entry.digest, SIGNATURE_LIMITS.manifestBytes);
    const manifest = parseJsonBytes(bytes);
    if (!isObject(manifest)) continue;
    // A listing can name a manifest that is not about this digest (a stale fallback index); its own subject decides.
    if (!isObject(manifest.subject) || manifest.subject.digest !== digest) continue;
    const type = typeof manifest.artifactType === 'string' ? manifest.artifactType : isObject(manifest.config) ? manifest.config.mediaType : undefined;
    if (type === SIGNATURE_MEDIA_TYPES.bundle) candidates.push(await bundleCandidate(client, repository, manifest, via));
    else if (type === SIGNATURE_MEDIA_TYPES.cosignReferrer) candidates.push(...await simpleSigningCandidates(client, repository, bytes, 'cosign legacy referrer', via));
  }
  return candidates;
}

/** One candidate per simple-signing layer of a cosign signature manifest. */
async function simpleSigningCandidates(client: RegistryClient, repository: string, bytes: Buffer, layout: SignatureLayout, via: Candidate['via']): Promise<Candidate[]> {
  const manifest = parseJsonBytes(bytes);
  const layers = isObject(manifest) && Array.isArray(manifest.layers) ? manifest.layers : [];
  const candidates: Candidate[] = [];
  for (const layer of layers.slice(0, SIGNATURE_LIMITS.referrers)) {
    if (!isObject(layer) || layer.mediaType !== SIGNATURE_MEDIA_TYPES.simpleSigning) continue;
    const signature = isObject(layer.annotations) ? layer.annotations[COSIGN_SIGNATURE_ANNOTATION] : undefined;
    const size = typeof layer.size === 'number' ? layer.size : -1;
    if (typeof signature !== 'string' || typeof layer.digest !== 'string' || !SHA256_DIGEST.test(layer.digest) || size < 0 || size > SIGNATURE_LIMITS.blobBytes) {
      candidates.push({ layout, via, unreadable: 'its layer has no signature annotation, or no sha256 digest, or a size out of bounds' });
      continue;
    }
    const payload = await client.blob(repository, { digest: layer.digest, size });
    candidates.push({
      layout, via,
      signed: {
        message: payload,
        signature: Buffer.from(signature, 'base64'),
        names: (digest) => {
          const critical = asObject(asObject(parseJsonBytes(payload))?.critical);
          if (critical?.type !== SIMPLE_SIGNING_TYPE) return `its payload's critical.type is not "${SIMPLE_SIGNING_TYPE}"`;
          const signed = asObject(critical.image)?.['docker-manifest-digest'];
          return signed === digest ? undefined : `it signs ${JSON.stringify(signed)}, not ${digest}`;
        },
      },
    });
  }
  return candidates;
}

/** A Sigstore bundle's DSSE envelope: the key signs PAE(payloadType, payload); the statement must name the digest. */
async function bundleCandidate(client: RegistryClient, repository: string, manifest: Record<string, unknown>, via: Candidate['via']): Promise<Candidate> {
  const layout: SignatureLayout = 'sigstore bundle';
  const layer = Array.isArray(manifest.layers) ? asObject(manifest.layers[0]) : undefined;
  const size = typeof layer?.size === 'number' ? layer.size : -1;
  if (typeof layer?.digest !== 'string' || !SHA256_DIGEST.test(layer.digest) || size < 0 || size > SIGNATURE_LIMITS.blobBytes) {
    return { layout, via, unreadable: 'its manifest has no bundle layer of a sha256 digest and a bounded size' };
  }
  const bundle = asObject(parseJsonBytes(await client.blob(repository, { digest: layer.digest, size })));
  const envelope = asObject(bundle?.dsseEnvelope);
  if (!envelope) return { layout, via, unreadable: 'the bundle holds no DSSE envelope (message-signature bundles are not read)' };
  const sig = Array.isArray(envelope.signatures) ? asObject(envelope.signatures[0])?.sig : undefined;
  if (typeof envelope.payload !== 'string' || typeof envelope.payloadType !== 'string' || typeof sig !== 'string') {
    return { layout, via, unreadable: 'the DSSE envelope lacks its payload, payloadType or signature' };
  }
  const payload = Buffer.from(envelope.payload, 'base64');
  const type = Buffer.from(envelope.payloadType, 'utf8');
  // DSSE's pre-authentication encoding: what the key signed.
  const pae = Buffer.concat([Buffer.from(`DSSEv1 ${type.byteLength} `), type, Buffer.from(` ${payload.byteLength} `), payload]);
  return {
    layout, via,
    signed: {
      message: pae,
      signature: Buffer.from(sig, 'base64'),
      names: (digest) => {
        if (envelope.payloadType !== IN_TOTO_PAYLOAD_TYPE) return `its payload type is ${JSON.stringify(envelope.payloadType)}, not ${IN_TOTO_PAYLOAD_TYPE}`;
        const statement = asObject(parseJsonBytes(payload));
        if (statement?._type !== IN_TOTO_STATEMENT) return `its payload is not an in-toto statement v1`;
        const hex = digest.slice('sha256:'.length);
        const subjects = Array.isArray(statement.subject) ? statement.subject : [];
        return subjects.some((s) => asObject(asObject(s)?.digest)?.sha256 === hex) ? undefined : `its statement names no subject of digest ${digest}`;
      },
    },
  };
}
