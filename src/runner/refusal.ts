// A run the runner will not carry out (or cannot account for): a stable code from RUNNER_ERROR and a sentence a
// person can act on. The message names inputs, never their values.
export class RunnerRefusal extends Error {
  override name = 'RunnerRefusal';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
