// The fetch init container of every database Job whose artifact comes from a registry (docs/oci-artifacts.md): the
// pinned digest's files into the Pod's memory volume, before the runner starts. It holds the registry Secret and no
// database URL; the runner, which holds the URL and not the Secret, checks the files' content digest as it checks a
// ConfigMap's. What it did goes to its termination message, one line a person (and the manager) can read:
// `PTAH_FETCH_V1 {"files":N,"bytes":B}` or `PTAH_FETCH_V1 {"error":{"code":…,"message":…}}`.
import { RUNNER_ENV } from '../shared/runner-env.js';
import { canonicalJson } from '../shared/canonical.js';
import { asRefusal, readRegistryInputs, requiredEnv } from './oci/inputs.js';
import { pullOciSource } from './oci/source.js';
import { RunnerRefusal } from './refusal.js';

export const FETCH_SUMMARY_MARKER = 'PTAH_FETCH_V1';

export type FetchOutcome = { files: number; bytes: number } | { error: { code: string; message: string } };

export async function fetchRun(env: Readonly<Record<string, string | undefined>>): Promise<FetchOutcome> {
  try {
    const inputs = await readRegistryInputs(env);
    const directory = requiredEnv(env, RUNNER_ENV.artifactDir);
    const contentDigest = requiredEnv(env, RUNNER_ENV.expectedArtifactDigest);
    return await pullOciSource({ ...inputs, contentDigest }, directory);
  } catch (error) {
    const refusal = asRefusal(error);
    if (refusal instanceof RunnerRefusal) return { error: { code: refusal.code, message: refusal.message } };
    throw error;
  }
}

export function fetchSummary(outcome: FetchOutcome): string {
  return `${FETCH_SUMMARY_MARKER} ${canonicalJson(outcome)}\n`;
}
