// Check 3: the run is bound to the realm and the database its claim (and, for an Apply, its plan) named. The
// identity digest is computed here, from the URL the Pod was actually given; the controller only compares.
import { RUNNER_ENV } from '../shared/runner-env.js';
import { RUNNER_ERROR } from '../shared/runner-protocol.js';
import { targetIdentityDigest, TargetIdentityError } from '../shared/target-identity.js';
import type { RunnerInputs } from './contract.js';
import { RunnerRefusal } from './refusal.js';

/** The target identity digest of the run's database URL; refuses a URL that names no single target. */
export function identifyTarget(inputs: RunnerInputs): string {
  try {
    return targetIdentityDigest(inputs.dbUrl);
  } catch (error) {
    // TargetIdentityError messages never hold the URL; anything else is not shown at all.
    const reason = error instanceof TargetIdentityError ? error.message : 'the database URL could not be read';
    throw new RunnerRefusal(RUNNER_ERROR.invalidTarget, `${RUNNER_ENV.dbUrl}: ${reason}`);
  }
}

export function checkBindings(inputs: RunnerInputs, identityDigest: string): void {
  if (inputs.expectedCoordinationDigest !== undefined && inputs.expectedCoordinationDigest !== inputs.coordinationDigest) {
    throw new RunnerRefusal(
      RUNNER_ERROR.coordinationBindingMismatch,
      `${RUNNER_ENV.coordinationDigest} is not the realm the plan was made for (${RUNNER_ENV.expectedCoordinationDigest}); the target's coordination key changed after planning`,
    );
  }
  if (inputs.expectedTargetIdentityDigest !== undefined && inputs.expectedTargetIdentityDigest !== identityDigest) {
    throw new RunnerRefusal(
      RUNNER_ERROR.targetBindingMismatch,
      `${RUNNER_ENV.dbUrl} names another database than the one the plan was made for (${RUNNER_ENV.expectedTargetIdentityDigest}); the target Secret changed after planning`,
    );
  }
}
