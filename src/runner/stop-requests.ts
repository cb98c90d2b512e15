// SIGTERM and SIGINT to the runner (PID 1 has no default handlers, so without these it would ignore them). The
// handlers stay installed for the runner's whole life: the first signal asks the run to stop, and no later one
// can kill the runner while it frames.
export class StopRequests {
  requested = false;
  private readonly listeners = new Set<() => void>();

  install(): void {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => this.request());
  }

  request(): void {
    if (this.requested) return;
    this.requested = true;
    for (const listener of this.listeners) listener();
  }

  /** Calls `listener` on the first request; returns the unsubscribe. */
  onRequest(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
