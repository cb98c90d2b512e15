// Keeping credentials out of everything the runner writes. Free text (the executor's stderr, error messages,
// diagnostics) has every secret replaced; data (plan statements, migration names, versions) cannot be edited
// without changing what it says, so a report whose data holds a secret is refused instead.
import { FRAME_END_MARKER, FRAME_MARKER, MAX_ERROR_MESSAGE_LENGTH, SUMMARY_MARKER } from '../shared/runner-protocol.js';

export const REDACTED = '[REDACTED]';
/** Shorter secrets are ordinary words and SQL fragments; data is checked only for ones that cannot be. */
const MIN_DATA_SECRET_LENGTH = 8;

export class Redactor {
  private readonly secrets: string[];

  constructor(secrets: Iterable<string>) {
    // Each also as it appears inside a JSON string (a structured log escapes quotes and backslashes). Longest
    // first, so a password inside a URL never leaves the rest of the URL behind.
    const all = [...secrets].flatMap((s) => [s, JSON.stringify(s).slice(1, -1)]);
    this.secrets = [...new Set(all)].filter((s) => s !== '').sort((a, b) => b.length - a.length);
  }

  redact(text: string): string {
    let out = text;
    for (const secret of this.secrets) out = out.split(secret).join(REDACTED);
    return out;
  }

  /**
   * Redacts a tail whose beginning was cut off: besides every whole secret, a cut-off end of one at the very
   * start (after any partial UTF-8 character the cut left) is replaced too.
   */
  redactTail(text: string, wasCut: boolean): string {
    if (!wasCut) return this.redact(text);
    const body = text.replace(/^\uFFFD{1,3}/, '');
    let cutSecret = 0;
    for (const secret of this.secrets) {
      for (let keep = Math.min(secret.length - 1, body.length); keep > cutSecret; keep--) {
        if (body.startsWith(secret.slice(secret.length - keep))) {
          cutSecret = keep;
          break;
        }
      }
    }
    return this.redact(cutSecret > 0 ? REDACTED + body.slice(cutSecret) : body);
  }

  /** Whether a data string holds a secret long enough to be told apart from ordinary text. */
  holdsSecret(text: string): boolean {
    return this.secrets.some((secret) => secret.length >= MIN_DATA_SECRET_LENGTH && text.includes(secret));
  }
}

/**
 * Free text fit for the frame or the log: redacted, protocol markers defused (so no output of the executor can
 * pose as a frame or a summary), optionally folded onto one line and bounded.
 */
export function sanitizeText(text: string, redactor: Redactor, options: { oneLine: boolean; maxLength?: number }): string {
  let out = wellFormed(defuseMarkers(redactor.redact(text)));
  if (options.oneLine) out = out.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  const max = options.maxLength ?? MAX_ERROR_MESSAGE_LENGTH;
  return out.length > max ? wellFormed(`${out.slice(0, max - 1)}…`) : out;
}

/** Lone UTF-16 surrogates (from a cut or from the executor's JSON) have no UTF-8 form; U+FFFD stands in. */
function wellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

export function defuseMarkers(text: string): string {
  return text.replace(new RegExp(`${FRAME_END_MARKER}|${FRAME_MARKER}|${SUMMARY_MARKER}`, 'g'), (marker) => marker.replace(/_/g, '-'));
}
