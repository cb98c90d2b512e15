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
//
// Every field but `version` is optional; an unknown field is refused, so a misspelt rule never weakens a policy.
import { parse } from 'yaml';

export interface VerificationPolicy {
  version: 1;
  requiredLabels: Record<string, string>;
  requiredAnnotations: string[];
  maxTotalBytes?: number;
  fileNamePattern?: RegExp;
}

export class PolicyFormatError extends Error {
  override name = 'PolicyFormatError';
}

const FIELDS = new Set(['version', 'requiredLabels', 'requiredAnnotations', 'maxTotalBytes', 'fileNamePattern']);
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
  return {
    version: 1,
    requiredLabels: labels as Record<string, string>,
    requiredAnnotations: annotations as string[],
    ...(maxTotalBytes !== undefined ? { maxTotalBytes } : {}),
    ...(fileNamePattern ? { fileNamePattern } : {}),
  };
}

/** The artifact as the policy judges it. */
export interface ArtifactFacts {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** File name → size in bytes. */
  files: Record<string, number>;
}

/** Every rule the artifact breaks, as sentences naming the rule; empty when it meets the policy. */
export function policyViolations(policy: VerificationPolicy, artifact: ArtifactFacts): string[] {
  const violations: string[] = [];
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
