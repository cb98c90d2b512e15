// One container instance's log, kept the way a CRI runtime keeps it: stdout and stderr are read separately and cut
// into entries at newlines, each stamped when it arrives, so the two streams interleave by arrival (whole lines
// unless a line outgrows the runtime's buffer). A line longer than MAX_LOG_LINE_BYTES is cut into partial
// entries exactly as containerd does, so another stream's line can land inside it; the runner protocol must survive that.
export type LogStream = 'stdout' | 'stderr';

export interface LogEntry {
  time: Date;
  stream: LogStream;
  /** The bytes without the newline. */
  data: Buffer;
  /** True when the entry does not end a line: a cut long line, or the output's unterminated last line. */
  partial: boolean;
}

/** containerd's default max_container_log_line_size. */
export const MAX_LOG_LINE_BYTES = 16 * 1024;

export interface LogQuery {
  timestamps?: boolean;
  /** Only the last N entries. */
  tailLines?: number;
  /** Stop after this many bytes of output. */
  limitBytes?: number;
  /** Only entries at or after this instant. */
  since?: Date;
  /** Only one stream (the split-streams API); both by default. */
  stream?: LogStream;
}

type Listener = { entry: (e: LogEntry) => void; end: () => void };

export class ContainerLog {
  readonly #entries: LogEntry[] = [];
  readonly #pending: Record<LogStream, Buffer[]> = { stdout: [], stderr: [] };
  readonly #pendingBytes: Record<LogStream, number> = { stdout: 0, stderr: 0 };
  readonly #listeners = new Set<Listener>();
  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  write(stream: LogStream, chunk: Buffer): void {
    if (this.#closed) return;
    let rest = chunk;
    for (;;) {
      const nl = rest.indexOf(0x0a);
      const room = MAX_LOG_LINE_BYTES - this.#pendingBytes[stream];
      if (nl !== -1 && nl <= room) {
        this.#buffer(stream, rest.subarray(0, nl));
        this.#emit(stream, false);
        rest = rest.subarray(nl + 1);
      } else if (rest.length >= room) {
        this.#buffer(stream, rest.subarray(0, room));
        this.#emit(stream, true);
        rest = rest.subarray(room);
      } else {
        this.#buffer(stream, rest);
        return;
      }
    }
  }

  /** The process has ended: keep unterminated last lines as partial entries and end every follower. */
  close(): void {
    if (this.#closed) return;
    for (const stream of ['stdout', 'stderr'] as const) if (this.#pendingBytes[stream] > 0) this.#emit(stream, true);
    this.#closed = true;
    for (const l of this.#listeners) l.end();
    this.#listeners.clear();
  }

  /** The selected entries rendered as the kubelet's log endpoint renders them. */
  read(query: LogQuery = {}): Buffer {
    return limit(Buffer.concat(select(this.#entries, query).map((e) => render(e, query.timestamps))), query.limitBytes);
  }

  /**
   * Streams the selected entries, then every new one, until the log closes or `limitBytes` is reached.
   * Returns a function that stops following.
   */
  follow(query: LogQuery, out: { write(chunk: Buffer): void; end(): void }): () => void {
    let budget = query.limitBytes ?? Infinity;
    let done = false;
    const send = (chunk: Buffer): void => {
      if (done) return;
      const part = chunk.length > budget ? chunk.subarray(0, budget) : chunk;
      budget -= part.length;
      if (part.length > 0) out.write(part);
      if (budget <= 0) finish();
    };
    const listener: Listener = {
      entry: (e) => { if (!query.stream || e.stream === query.stream) send(render(e, query.timestamps)); },
      end: () => finish(),
    };
    const finish = (): void => {
      if (done) return;
      done = true;
      this.#listeners.delete(listener);
      out.end();
    };
    for (const e of select(this.#entries, query)) send(render(e, query.timestamps));
    if (this.#closed) finish();
    else if (!done) this.#listeners.add(listener);
    return () => { if (!done) { done = true; this.#listeners.delete(listener); } };
  }

  /** The termination-message fallback: at most `lines` last lines and `bytes` last bytes of the whole log. */
  tail(lines: number, bytes: number): string {
    const text = this.read({ tailLines: lines });
    return text.subarray(Math.max(0, text.length - bytes)).toString('utf8');
  }

  #buffer(stream: LogStream, data: Buffer): void {
    if (data.length === 0) return;
    this.#pending[stream].push(Buffer.from(data));
    this.#pendingBytes[stream] += data.length;
  }

  #emit(stream: LogStream, partial: boolean): void {
    const entry: LogEntry = { time: new Date(), stream, data: Buffer.concat(this.#pending[stream]), partial };
    this.#pending[stream] = [];
    this.#pendingBytes[stream] = 0;
    this.#entries.push(entry);
    for (const l of this.#listeners) l.entry(entry);
  }
}

function select(entries: readonly LogEntry[], query: LogQuery): LogEntry[] {
  let picked = entries.filter((e) => (!query.stream || e.stream === query.stream) && (!query.since || e.time >= query.since));
  if (query.tailLines !== undefined) picked = query.tailLines === 0 ? [] : picked.slice(-query.tailLines);
  return picked;
}

function render(e: LogEntry, timestamps = false): Buffer {
  const parts = [e.data];
  if (timestamps) parts.unshift(Buffer.from(`${e.time.toISOString()} `));
  if (!e.partial) parts.push(Buffer.from('\n'));
  return Buffer.concat(parts);
}

function limit(data: Buffer, limitBytes: number | undefined): Buffer {
  return limitBytes !== undefined && data.length > limitBytes ? data.subarray(0, limitBytes) : data;
}
