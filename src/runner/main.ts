// The runner's entry point: PID 1 of every operation Job's container. The contract is in ./contract.ts.
import { constants, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { configSecrets } from '../shared/oci/docker-config.js';
import { RUNNER_ENV } from '../shared/runner-env.js';
import { databaseUrlSecrets } from '../shared/target-identity.js';
import { ArgsError, parseRunnerArgs } from './args.js';
import { readOperationId, terminationMessagePath } from './contract.js';
import { Diagnostics } from './diagnostics.js';
import { fetchRun, fetchSummary } from './fetch.js';
import { REGISTRY_CONFIG_FILE } from './oci/inputs.js';
import { publish } from './publish.js';
import { Redactor } from './redact.js';
import { runOperation } from './run.js';
import { StopRequests } from './stop-requests.js';
import { runnerClock } from './test-hooks.js';

/** Exit status: 0 when a frame was written, 2 when none could be. */
async function main(): Promise<number> {
  // First, so that no signal during start-up can end the runner without a frame.
  const stops = new StopRequests();
  stops.install();
  const env = process.env;
  // Every Secret value the runner was given, known before anything could print one.
  const redactor = new Redactor([
    ...[env[RUNNER_ENV.dbUrl], env[RUNNER_ENV.devUrl]].flatMap((url) => (url ? databaseUrlSecrets(url) : [])),
    ...registrySecrets(env[RUNNER_ENV.registryConfigDir]),
  ]);
  const diagnostics = new Diagnostics(redactor);
  if (process.argv.length === 3 && process.argv[2] === '--fetch-artifact') return fetchArtifact(diagnostics, redactor);
  let args;
  try {
    args = parseRunnerArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof ArgsError)) throw error;
    diagnostics.note(`usage: ${error.message}`);
    return 2;
  }
  const operationId = readOperationId(env);
  if (operationId === undefined) {
    diagnostics.note(`${RUNNER_ENV.operationId} is missing or not an operation ID ([A-Za-z0-9][A-Za-z0-9._:-]{0,255}); no result can be framed`);
    return 2;
  }
  const result = await runOperation({ args, operationId, env, stops, clock: runnerClock(env), redactor, diagnostics });
  const written = await publish(result, terminationMessagePath(env), diagnostics);
  await diagnostics.flush();
  return written ? 0 : 2;
}

/** The credentials of the mounted registry Secret, if any (read once, bounded by the Secret's own size limit). */
function registrySecrets(configDir: string | undefined): string[] {
  if (!configDir) return [];
  try {
    return configSecrets(readFileSync(join(configDir, REGISTRY_CONFIG_FILE), 'utf8'));
  } catch {
    return [];
  }
}

/** The fetch init container (src/runner/fetch.ts): exit 0 when the files are in place, 1 when they are not. */
async function fetchArtifact(diagnostics: Diagnostics, redactor: Redactor): Promise<number> {
  const outcome = await fetchRun(process.env);
  const shown = 'error' in outcome ? { error: { code: outcome.error.code, message: redactor.redact(outcome.error.message) } } : outcome;
  diagnostics.note('error' in shown ? `fetch refused (${shown.error.code}): ${shown.error.message}` : `fetched ${shown.files} files, ${shown.bytes} bytes`);
  // Opened, never created, and truncated, as the runner's own summary is (src/runner/publish.ts).
  await writeFile(terminationMessagePath(process.env), fetchSummary(shown), { flag: constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW })
    .catch(() => diagnostics.note('the termination message could not be written'));
  await diagnostics.flush();
  return 'error' in shown ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    // Only a defect gets here; its text may hold anything, so only its kind is shown.
    process.stderr.write(`ptah-runner: internal error (${(error as Error)?.name ?? 'unknown'}); no result was framed\n`, () => process.exit(2));
  },
);
