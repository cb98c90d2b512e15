// The one error type of `kubectl ptah` a person can act on, in a module of its own so the entry point can report it
// without loading the commands (and the cluster client they bring) to print a usage error.

/** A failure the person can act on; printed as `error: <message>` with exit code 1 (or 2 for usage). */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
  }
}
