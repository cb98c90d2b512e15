// The runner's entry point: PID 1 of every operation Job's container. The contract is in ./contract.ts.
import { RUNNER_ENV } from '../shared/runner-env.js';
import { databaseUrlSecrets } from '../shared/target-identity.js';
import { ArgsError, parseRunnerArgs } from './args.js';
import { readOperationId, terminationMessagePath } from './contract.js';
import { Diagnostics } from './diagnostics.js';
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
  const redactor = new Redactor([env[RUNNER_ENV.dbUrl], env[RUNNER_ENV.devUrl]].flatMap((url) => (url ? databaseUrlSecrets(url) : [])));
  const diagnostics = new Diagnostics(redactor);
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

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    // Only a defect gets here; its text may hold anything, so only its kind is shown.
    process.stderr.write(`ptah-runner: internal error (${(error as Error)?.name ?? 'unknown'}); no result was framed\n`, () => process.exit(2));
  },
);
