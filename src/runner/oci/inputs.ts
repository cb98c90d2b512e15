// What every registry step of a Job reads from its environment and mounts (src/shared/runner-env.ts): the reference,
// the artifact kind, the registry Secret's config.json (DOCKER_CONFIG) and the registry's CA. Each file is read
// bounded, through the volume's own layout (src/runner/mounted-files.ts); a refusal names the input, never its value.
import { join } from 'node:path';
import { ARTIFACT_TYPES, type ArtifactKind } from '../../shared/oci/artifact-layout.js';
import { OCI_FAILURE_CODES } from '../../shared/oci/failures.js';
import { RUNNER_ENV } from '../../shared/runner-env.js';
import { RUNNER_ERROR } from '../../shared/runner-protocol.js';
import type { Env } from '../contract.js';
import { MountedFilesError, readMountedFile } from '../mounted-files.js';
import { RunnerRefusal } from '../refusal.js';
import { OciSourceError, type OciSourceInputs } from './source.js';

/** The file a `kubernetes.io/dockerconfigjson` Secret's key is projected to, under DOCKER_CONFIG. */
export const REGISTRY_CONFIG_FILE = 'config.json';
const MAX_REGISTRY_CONFIG_BYTES = 64 * 1024;
const MAX_CA_BYTES = 1024 * 1024;

export function requiredEnv(env: Env, name: string): string {
  const value = env[name];
  if (value === undefined || value === '') throw new RunnerRefusal(RUNNER_ERROR.missingInput, `${name} is not set`);
  return value;
}

export async function mountedText(path: string, maxBytes: number, what: string): Promise<Buffer> {
  try {
    return await readMountedFile(path, maxBytes, what);
  } catch (error) {
    if (error instanceof MountedFilesError) throw new RunnerRefusal(RUNNER_ERROR.missingInput, error.message);
    throw error;
  }
}

export async function readRegistryInputs(env: Env): Promise<OciSourceInputs> {
  const reference = requiredEnv(env, RUNNER_ENV.ociReference);
  const kind = requiredEnv(env, RUNNER_ENV.ociArtifactKind);
  if (!Object.hasOwn(ARTIFACT_TYPES, kind)) {
    throw new RunnerRefusal(RUNNER_ERROR.invalidInput, `${RUNNER_ENV.ociArtifactKind} is not one of ${Object.keys(ARTIFACT_TYPES).join(', ')}`);
  }
  const configDir = env[RUNNER_ENV.registryConfigDir];
  const caFile = env[RUNNER_ENV.ociCaFile];
  return {
    reference,
    kind: kind as ArtifactKind,
    ...(configDir ? { dockerConfigJson: (await mountedText(join(configDir, REGISTRY_CONFIG_FILE), MAX_REGISTRY_CONFIG_BYTES, 'registry Secret')).toString('utf8') } : {}),
    ...(caFile ? { ca: (await mountedText(caFile, MAX_CA_BYTES, 'registry CA')).toString('utf8') } : {}),
  };
}

/** A registry step's failure as the runner refusal its reason maps to (src/shared/oci/failures.ts). */
export function asRefusal(error: unknown): unknown {
  return error instanceof OciSourceError ? new RunnerRefusal(OCI_FAILURE_CODES[error.reason], error.message) : error;
}
