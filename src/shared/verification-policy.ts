// The verification policy an artifact ConfigMap must meet before anything is read from a database with it.
// The policy is one key of an immutable ConfigMap (spec.artifact.verificationPolicyRef), YAML or JSON:
//
//   version: 1                          # required; the only version this manager reads
//   requiredLabels:                     # the artifact ConfigMap carries each label; a value of "" accepts any value
//     ptah.run/artifact-type: migrations
//   requiredAnnotations:                # the artifact ConfigMap carries each annotation with a non-empty value
//     - ptah.run/source
//     - ptah.run/revision
//   maxTotalBytes: 524288               # the artifact's files (data and binaryData) add up to at most this many bytes
//   fileNamePattern: '^[0-9]{1,30}_[A-Za-z0-9][A-Za-z0-9_-]{0,199}\.(up|down)\.sql$'   # every key matches
//   # Rules for an artifact from an OCI registry (docs/oci-artifacts.md); requiredAnnotations are then the manifest's.
//   artifactTypes: [application/vnd.ptah-operator.migrations.v1]   # the manifest's artifactType is one of these
//   allowTags: false                    # the spec must name the artifact by digest, not by a tag
//   signatureKeys:                      # a signature that verifies with one of these keys names the artifact's digest
//     - name: release
//       publicKey: |
//         -----BEGIN PUBLIC KEY-----
//         ...
//
// Every field but `version` is optional; an unknown field is refused, so a misspelt rule never weakens a policy. A
// rule an artifact cannot meet is a violation, never skipped: a ConfigMap has no signature and no artifact type, so a
// policy naming signatureKeys or artifactTypes refuses every ConfigMap (changing the source never loosens the
// policy), and an OCI artifact has no labels, so requiredLabels refuses every OCI artifact.
import { parse } from 'yaml';

export interface VerificationPolicy {
  version: 1;
  requiredLabels: Record<string, string>;
  requiredAnnotations: string[];
  maxTotalBytes?: number;
  fileNamePattern?: RegExp;
  artifactTypes?: string[];
  /** Absent: tags are allowed. */
  allowTags?: boolean;
  signatureKeys: SignatureKey[];
}

export interface SignatureKey {
  name: string;
  /** PEM of an SPKI public key. */
  publicKey: string;
}

export class PolicyFormatError extends Error {
  override name = 'PolicyFormatError';
}

const FIELDS = new Set(['version', 'requiredLabels', 'requiredAnnotations', 'maxTotalBytes', 'fileNamePattern', 'artifactTypes', 'allowTags', 'signatureKeys']);
const MAX_SIGNATURE_KEYS = 16;
const MAX_PATTERN_LENGTH = 512;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads a policy document; throws PolicyFormatError naming the field that is wrong. */
export function parseVerificationPolicy(text: string): VerificationPolicy {
  let document: unknown;
  try {
    document = parse(text);
  } catch (e) {
    throw new PolicyFormatError(`the policy is not YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  if (!isRecord(document)) throw new PolicyFormatError('the policy is not a mapping of rules');
  for (const key of Object.keys(document)) {
    if (!FIELDS.has(key)) throw new PolicyFormatError(`the policy has an unknown field ${JSON.stringify(key)}; known fields: ${[...FIELDS].join(', ')}`);
  }
  if (document.version !== 1) throw new PolicyFormatError('the policy must say version: 1');

  const labels = document.requiredLabels ?? {};
  if (!isRecord(labels) || Object.values(labels).some((v) => typeof v !== 'string')) {
    throw new PolicyFormatError('requiredLabels must map label keys to string values ("" accepts any value)');
  }
  const annotations = document.requiredAnnotations ?? [];
  if (!Array.isArray(annotations) || annotations.some((a) => typeof a !== 'string' || a === '')) {
    throw new PolicyFormatError('requiredAnnotations must be a list of annotation keys');
  }
  const maxTotalBytes = document.maxTotalBytes;
  if (maxTotalBytes !== undefined && (typeof maxTotalBytes !== 'number' || !Number.isSafeInteger(maxTotalBytes) || maxTotalBytes < 1)) {
    throw new PolicyFormatError('maxTotalBytes must be a positive integer');
  }
  const pattern = document.fileNamePattern;
  let fileNamePattern: RegExp | undefined;
  if (pattern !== undefined) {
    if (typeof pattern !== 'string' || pattern === '' || pattern.length > MAX_PATTERN_LENGTH) {
      throw new PolicyFormatError(`fileNamePattern must be a regular expression of 1 to ${MAX_PATTERN_LENGTH} characters`);
    }
    try {
      fileNamePattern = new RegExp(pattern, 'u');
    } catch (e) {
      throw new PolicyFormatError(`fileNamePattern is not a regular expression: ${(e as Error).message}`);
    }
  }
  const artifactTypes = document.artifactTypes;
  if (artifactTypes !== undefined && (!Array.isArray(artifactTypes) || artifactTypes.length === 0 || artifactTypes.some((a) => typeof a !== 'string' || a === ''))) {
    throw new PolicyFormatError('artifactTypes must be a non-empty list of media types');
  }
  const allowTags = document.allowTags;
  if (allowTags !== undefined && typeof allowTags !== 'boolean') throw new PolicyFormatError('allowTags must be true or false');
  return {
    version: 1,
    requiredLabels: labels as Record<string, string>,
    requiredAnnotations: annotations as string[],
    ...(maxTotalBytes !== undefined ? { maxTotalBytes } : {}),
    ...(fileNamePattern ? { fileNamePattern } : {}),
    ...(artifactTypes !== undefined ? { artifactTypes: artifactTypes as string[] } : {}),
    ...(allowTags !== undefined ? { allowTags } : {}),
    signatureKeys: parseSignatureKeys(document.signatureKeys),
  };
}

/** The keys as given; whether each is a usable public key is the verifier's to say (src/shared/oci/signatures.ts). */
function parseSignatureKeys(value: unknown): SignatureKey[] {
  if (value === undefined) return [];
  const shape = `signatureKeys must be a list of 1 to ${MAX_SIGNATURE_KEYS} {name, publicKey} with distinct names and a PEM public key each`;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SIGNATURE_KEYS) throw new PolicyFormatError(shape);
  const names = new Set<string>();
  return value.map((entry: unknown, i) => {
    if (!isRecord(entry) || Object.keys(entry).some((k) => k !== 'name' && k !== 'publicKey')) throw new PolicyFormatError(`${shape} (entry ${i})`);
    const { name, publicKey } = entry;
    if (typeof name !== 'string' || name === '' || names.has(name)) throw new PolicyFormatError(`${shape} (entry ${i}: its name)`);
    if (typeof publicKey !== 'string' || !publicKey.includes('-----BEGIN PUBLIC KEY-----')) throw new PolicyFormatError(`${shape} (${name}: its publicKey is not PEM)`);
    names.add(name);
    return { name, publicKey };
  });
}

/** The artifact as the policy judges it. */
export interface ArtifactFacts {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** File name → size in bytes. */
  files: Record<string, number>;
  /** Present for an artifact from a registry; absent for a ConfigMap. */
  oci?: OciArtifactFacts;
}

export interface OciArtifactFacts {
  artifactType: string;
  /** Whether the spec names it by a tag (resolved to its digest) rather than by the digest. */
  namedByTag: boolean;
  /** The names of the policy keys a signature over its digest verified with (only read when the policy names keys). */
  verifiedKeys: string[];
  /** Why each signature found did not count. */
  signatureProblems: string[];
}

/** Every rule the artifact breaks, as sentences naming the rule; empty when it meets the policy. */
export function policyViolations(policy: VerificationPolicy, artifact: ArtifactFacts): string[] {
  const violations: string[] = [];
  const oci = artifact.oci;
  if (oci && Object.keys(policy.requiredLabels).length > 0) violations.push('it is an OCI artifact, which carries no labels: requiredLabels cannot be met');
  if (!oci && policy.artifactTypes) violations.push('it is a ConfigMap, which has no artifact type: artifactTypes can only be met by an OCI artifact');
  if (!oci && policy.signatureKeys.length > 0) violations.push('it is a ConfigMap, which cannot be signed: signatureKeys can only be met by an OCI artifact');
  if (oci && policy.artifactTypes && !policy.artifactTypes.includes(oci.artifactType)) {
    violations.push(`its artifact type ${oci.artifactType} is not one of artifactTypes (${policy.artifactTypes.join(', ')})`);
  }
  if (oci?.namedByTag && policy.allowTags === false) violations.push('it is named by a tag, and allowTags is false: name it by its digest');
  if (oci && policy.signatureKeys.length > 0 && oci.verifiedKeys.length === 0) {
    const why = oci.signatureProblems.length > 0 ? oci.signatureProblems.slice(0, 3).join('; ') : 'it carries no signature';
    violations.push(`no signature over its digest verifies with signatureKeys (${policy.signatureKeys.map((k) => k.name).join(', ')}): ${why}`);
  }
  for (const [key, value] of Object.entries(policy.requiredLabels)) {
    const actual = artifact.labels[key];
    if (actual === undefined) violations.push(`it lacks the required label ${key}`);
    else if (value !== '' && actual !== value) violations.push(`its label ${key} is ${JSON.stringify(actual)}, not ${JSON.stringify(value)}`);
  }
  for (const key of policy.requiredAnnotations) {
    if (!artifact.annotations[key]) violations.push(`it lacks the required annotation ${key}`);
  }
  const names = Object.keys(artifact.files);
  if (names.length === 0) violations.push('it holds no files');
  const total = Object.values(artifact.files).reduce((sum, size) => sum + size, 0);
  if (policy.maxTotalBytes !== undefined && total > policy.maxTotalBytes) {
    violations.push(`its files add up to ${total} bytes, more than maxTotalBytes ${policy.maxTotalBytes}`);
  }
  if (policy.fileNamePattern) {
    const bad = names.filter((name) => !policy.fileNamePattern!.test(name));
    if (bad.length > 0) violations.push(`file${bad.length > 1 ? 's' : ''} ${bad.slice(0, 5).join(', ')}${bad.length > 5 ? ', …' : ''} do${bad.length > 1 ? '' : 'es'} not match fileNamePattern`);
  }
  return violations;
}
