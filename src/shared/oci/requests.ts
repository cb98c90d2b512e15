// What the registry side shares: an error that carries the condition reason it maps to, and a bounded fan-out of
// requests (a few at a time hides each round trip; no registry sees a burst).

/** A failure a condition can name: `reason` is the condition reason, the message names what was wrong (no credential). */
export class ReasonedError<R extends string> extends Error {
  constructor(readonly reason: R, message: string) {
    super(message);
  }
}

/** Calls `step` for every item, at most `inFlight` at once; rejects with the first failure. */
export async function eachAtMost<T>(items: Iterable<T>, inFlight: number, step: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: Math.min(inFlight, queue.length) }, async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) await step(next);
  }));
}
