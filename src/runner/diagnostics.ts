// The runner's own stderr: its diagnostics and the executor's stderr tail, both redacted and with protocol
// markers defused, so nothing written here can leak a credential or pose as a frame.
import { STDERR_TAIL_BYTES } from './executor-process.js';
import type { BoundedTail } from './bounded-tail.js';
import { defuseMarkers, sanitizeText, type Redactor } from './redact.js';

export class Diagnostics {
  constructor(private readonly redactor: Redactor) {}

  note(text: string): void {
    process.stderr.write(`ptah-runner: ${sanitizeText(text, this.redactor, { oneLine: true, maxLength: 8192 })}\n`);
  }

  executorStderr(tail: BoundedTail): void {
    const bytes = tail.bytes();
    if (bytes.length === 0) return;
    const cut = tail.dropped > 0;
    this.note(cut
      ? `executor stderr, last ${STDERR_TAIL_BYTES} bytes (${tail.dropped} earlier bytes dropped):`
      : 'executor stderr:');
    const text = defuseMarkers(this.redactor.redactTail(bytes.toString('utf8'), cut));
    process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Resolves once everything written to stderr so far has been handed to the OS. */
  flush(): Promise<void> {
    return new Promise((resolve) => process.stderr.write('', () => resolve()));
  }
}
