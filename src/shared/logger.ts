// The one root pino logger. Redaction is part of its construction, not of each call site, because a log line is
// the easiest place for a credential to leak: headers, kubeconfig fields, Secret payloads and URLs with a
// password in them are removed before anything is written. What one field can put on a line is bounded too: a
// request is attacker-sized, a log line must not be.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export const REDACTED = '[REDACTED]';

/** The longest string a log line carries; the rest is cut, and a marker says how long the string was. */
export const MAX_LOGGED_STRING = 4096;
/** The most items of a list, or properties of an object, a log line carries. */
export const MAX_LOGGED_ENTRIES = 100;

/** Paths pino removes from every log object (fast-redact syntax). */
export const REDACT_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers["proxy-authorization"]',
  '*.headers.authorization',
  'authorization',
  'password',
  '*.password',
  'token',
  '*.token',
  'bearerToken',
  '*.bearerToken',
  'key',
  '*.key',
  'tls.key',
  'secret',
  '*.secret',
  'stringData',
  '*.stringData',
  'secretData',
  '*.secretData',
  // The admission payloads: a Secret or a plan's bytes must never reach a log line.
  'object',
  'oldObject',
  '*.object',
  '*.oldObject',
];

// Every pattern below is linear in the text it scans: each either starts only where a run begins (a lookbehind
// refuses the middle of a run) or always succeeds once started, so no run is re-scanned from every position.
// The quadratic URL pattern this replaces froze the process for 27 s on a 160 KB admission request.

/** A key naming a credential: password, PGPASSWORD, sslpassword, db_password, access_token, clientSecret, ... */
const CREDENTIAL_KEY = '[\\w.-]*(?:password|passwd|pwd|secret|token)';
/** ?password=…, &access_token=…: up to the next parameter or fragment. */
const SECRET_QUERY = new RegExp(`([?&]${CREDENTIAL_KEY}=)[^&\\s#]*`, 'gi');
/**
 * libpq key/value (`host=db password=x`, `password = 'a b\'c'`) and environment assignments (`PGPASSWORD=x`):
 * a quoted value up to its closing quote (or the end, when cut), otherwise up to whitespace. A key right after
 * ? or & is a query parameter, left to SECRET_QUERY so the rest of the URL stays readable.
 */
const KEY_VALUE = new RegExp(`(?<![\\w.?&-])(${CREDENTIAL_KEY}\\s*=\\s*)(?:'(?:[^'\\\\]|\\\\[\\s\\S])*(?:'|\\\\?$)|"(?:[^"\\\\]|\\\\[\\s\\S])*(?:"|\\\\?$)|[^\\s'"]\\S*|(?=\\s|$))`, 'gi');
/**
 * A .pgpass line, hostname:port:database:username:password, starting a line or after whitespace: the port is
 * digits or `*`, fields may escape `:` and `\` (only those: a backslash before whitespace ends the field, so a run of
 * escaped whitespace is not a field every start of which is scanned again); the password runs to the end of the line.
 */
const PGPASS = /(?<!\S)((?:[^\s:\\]|\\[:\\])+:(?:\d{1,5}|\*):(?:[^\s:\\]|\\[:\\])+:(?:[^\s:\\]|\\[:\\])+:)[^\n]*/g;
/** A JSON key naming a credential, at any level of escaping (`"password":`, `\"password\":`). */
const JSON_KEY = new RegExp(`(?<!\\\\)(\\\\*)"${CREDENTIAL_KEY}\\1"\\s*:\\s*`, 'gi');

const isSpace = (code: number): boolean => code === 0x20 || (code >= 0x09 && code <= 0x0d) || code === 0xa0 || code === 0x2028 || code === 0x2029;

/** Whether `text` has a port at `at` (digits up to a path, query, fragment, whitespace or the end). */
function isPort(text: string, at: number): boolean {
  let i = at;
  while (i < text.length && i - at <= 5 && text.charCodeAt(i) >= 0x30 && text.charCodeAt(i) <= 0x39) i++;
  return i > at && i - at <= 5 && (i === text.length || isSpace(text.charCodeAt(i)) || '/?#'.includes(text[i]!));
}

/**
 * The @ that ends a password with spaces, found from a word's end: the last @ of the first later word on the same
 * line that holds one, unless another `://` comes first (or the cut, when the text was cut on that line). Asked from ever later positions, each of its scans moves
 * one pointer forward only, so a text with many URLs is still read once.
 */
class LaterAt {
  private at = -1;
  private newline = -1;
  private scheme = -1;
  /** `cut`: the text was cut short, so a password with no @ up to the cut, on the last line, runs to the cut. */
  constructor(private readonly text: string, private readonly cut: boolean) {}

  private next(current: number, what: string, from: number): number {
    if (current >= from || current === this.text.length) return current;
    const found = this.text.indexOf(what, from);
    return found < 0 ? this.text.length : found;
  }

  find(from: number): number {
    this.at = this.next(this.at, '@', from);
    this.newline = this.next(this.newline, '\n', from);
    this.scheme = this.next(this.scheme, '://', from);
    const length = this.text.length;
    if (this.at >= length && this.cut && this.newline === length && this.scheme === length) return length;
    if (this.at >= length || this.at > this.newline || this.at > this.scheme) return -1;
    let end = this.at;
    for (let i = this.at + 1; i < this.text.length && !isSpace(this.text.charCodeAt(i)); i++) if (this.text.charCodeAt(i) === 0x40) end = i;
    return end;
  }
}

/** How a URL's separators are written in a text: as they are, or percent-encoded (a URL inside another's query). */
interface UrlSpelling {
  /** Finds each `://`. */
  scheme: RegExp;
  /** The separator (`:`, `/` or `@`) written at `i`, if any, and how many characters it takes. */
  separatorAt(text: string, i: number): { separator: string; width: number } | undefined;
  /** Whether the character ends the word a password is read in. */
  endsWord(code: number): boolean;
  /** Whether a password may run on past a space to a later word's @ (raw text; an encoded URL has no raw space). */
  spaced: boolean;
}

const RAW_URL: UrlSpelling = {
  scheme: /:\/\//g,
  separatorAt: (text, i) => (i < text.length && ':/@'.includes(text[i]!) ? { separator: text[i]!, width: 1 } : undefined),
  endsWord: isSpace,
  spaced: true,
};

const ENCODED_URL: UrlSpelling = {
  scheme: /%3a%2f%2f/gi,
  separatorAt: (text, i) => {
    if (text.charCodeAt(i) !== 0x25) return undefined;
    const code = text.slice(i + 1, i + 3).toLowerCase();
    const separator = code === '3a' ? ':' : code === '2f' ? '/' : code === '40' ? '@' : undefined;
    return separator === undefined ? undefined : { separator, width: 3 };
  },
  // The & that starts the next query parameter ends an encoded URL too.
  endsWord: (code) => isSpace(code) || code === 0x26,
  spaced: false,
};

/**
 * `scheme://user:password@host` → `scheme://user:[REDACTED]@host`, in either spelling. The password runs to the last
 * @ of its word, so a raw @ or / in it (`postgres://u:p@ss/w@host/db`) is covered; a raw password with spaces runs to
 * the @ of a later word (LaterAt); when the text was cut (`cut`) and the word reaches the cut, everything after
 * `user:` is treated as password.
 */
function redactUrlUserinfo(text: string, cut: boolean, spelling: UrlSpelling): string {
  const laterAt = new LaterAt(text, cut);
  const scheme = new RegExp(spelling.scheme);
  const at = (i: number) => spelling.separatorAt(text, i);
  let out = '';
  let copied = 0;
  // The word the last password scan covered, so two URLs in one word do not scan it twice.
  let wordEnd = -1;
  let lastAt = -1;
  for (let match = scheme.exec(text); match; match = scheme.exec(text)) {
    let i = match.index + match[0].length;
    while (i < text.length && !spelling.endsWord(text.charCodeAt(i)) && !at(i)) i++;
    scheme.lastIndex = Math.max(scheme.lastIndex, i);
    const colon = at(i);
    if (colon?.separator !== ':') continue;
    const password = i + colon.width;
    if (password >= wordEnd) {
      wordEnd = password;
      lastAt = -1;
      for (; wordEnd < text.length && !spelling.endsWord(text.charCodeAt(wordEnd)); wordEnd++) if (at(wordEnd)?.separator === '@') lastAt = wordEnd;
    }
    let end = lastAt >= password ? lastAt : cut && wordEnd === text.length ? text.length : -1;
    // A password with spaces in it: its @ is in a later word of the same line, with no other URL before it. A port
    // (host:5432) is not a password.
    if (end < 0 && spelling.spaced && !isPort(text, password)) end = laterAt.find(wordEnd);
    if (end < 0) continue;
    out += `${text.slice(copied, password)}${REDACTED}`;
    copied = end;
    scheme.lastIndex = Math.max(end, password);
    if (end === text.length) break;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * The value of each credential-named JSON key, a string up to its closing quote at the key's level of escaping
 * (or to the end, when cut short), or a literal up to the next delimiter. A string keeps its quotes.
 */
function redactJsonValues(text: string): string {
  let out = '';
  let copied = 0;
  JSON_KEY.lastIndex = 0;
  for (let match = JSON_KEY.exec(text); match; match = JSON_KEY.exec(text)) {
    const escapes = match[1]!.length;
    const start = match.index + match[0].length;
    const quote = `${'\\'.repeat(escapes)}"`;
    if (text.startsWith(quote, start)) {
      // The closing quote is the first " preceded by exactly as many backslashes as the opening one; an escaped
      // quote inside the value is preceded by more.
      const from = start + quote.length;
      let end = text.length;
      for (let q = text.indexOf('"', from); q >= 0; q = text.indexOf('"', q + 1)) {
        let run = 0;
        while (q - 1 - run >= from && text.charCodeAt(q - 1 - run) === 0x5c) run++;
        if (run <= escapes) {
          end = q - run;
          break;
        }
      }
      out += `${text.slice(copied, from)}${REDACTED}`;
      copied = end;
      JSON_KEY.lastIndex = Math.max(end, from);
    } else {
      let end = start;
      while (end < text.length && !isSpace(text.charCodeAt(end)) && !',}]{[\\"'.includes(text[end]!)) end++;
      if (end === start) continue;
      out += `${text.slice(copied, start)}${REDACTED}`;
      copied = end;
      JSON_KEY.lastIndex = end;
    }
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * Removes the credentials in `text`, of any length, in time linear in it. `cut` says the text was cut short
 * after its last character, so a credential whose end was cut off is removed up to there.
 */
export function redactCredentials(text: string, cut = false): string {
  return redactJsonValues(redactUrlUserinfo(redactUrlUserinfo(text, cut, RAW_URL), cut, ENCODED_URL))
    .replace(SECRET_QUERY, `$1${REDACTED}`)
    .replace(KEY_VALUE, `$1${REDACTED}`)
    .replace(PGPASS, `$1${REDACTED}`);
}

/**
 * `text` as a log line may carry it: at most MAX_LOGGED_STRING characters (never splitting a surrogate pair)
 * with a marker saying how long it was, and without credentials. Redaction runs on the cut text, told where it
 * was cut, so a credential straddling the cut is not logged in part.
 */
export function scrubCredentials(text: string): string {
  if (text.length <= MAX_LOGGED_STRING) return redactCredentials(text);
  const high = text.charCodeAt(MAX_LOGGED_STRING - 1);
  const keep = high >= 0xd800 && high <= 0xdbff ? MAX_LOGGED_STRING - 1 : MAX_LOGGED_STRING;
  return `${redactCredentials(text.slice(0, keep), true)}…[truncated: ${text.length} characters]`;
}

function scrubDeep(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return scrubCredentials(value);
  if (depth <= 0 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const kept = value.slice(0, MAX_LOGGED_ENTRIES).map((v) => scrubDeep(v, depth - 1));
    return value.length > MAX_LOGGED_ENTRIES ? [...kept, `…[${value.length - MAX_LOGGED_ENTRIES} more items]`] : kept;
  }
  // Errors keep message and stack in non-enumerable properties: copy the error (same class, so its type is
  // still reported) with those scrubbed, and its cause with them.
  if (value instanceof Error) {
    const copy = Object.create(Object.getPrototypeOf(value) as object) as Error;
    const hidden = (key: string, v: unknown) => Object.defineProperty(copy, key, { value: v, writable: true, configurable: true, enumerable: false });
    hidden('message', scrubCredentials(value.message));
    if (value.stack) hidden('stack', scrubCredentials(value.stack));
    if (value.cause !== undefined) hidden('cause', scrubDeep(value.cause, depth - 1));
    Object.assign(copy, scrubEntries(value, depth));
    return copy;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  return scrubEntries(value, depth);
}

function scrubEntries(value: object, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let count = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (count++ === MAX_LOGGED_ENTRIES) {
      out['…'] = `${Object.keys(value).length - MAX_LOGGED_ENTRIES} more properties`;
      break;
    }
    out[key] = scrubDeep((value as Record<string, unknown>)[key], depth - 1);
  }
  return out;
}

export interface LoggerSettings {
  level: LoggerOptions['level'];
  /** Static fields on every line (e.g. component). */
  base?: Record<string, string>;
}

export function createLogger(settings: LoggerSettings, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level: settings.level,
    base: settings.base ?? {},
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    formatters: {
      level: (label) => ({ level: label }),
      // Runs before serializers, so an error's message, stack and cause are scrubbed before they are serialized.
      log: (object) => scrubDeep(object, 6) as Record<string, unknown>,
    },
    hooks: {
      logMethod(args, method) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? scrubCredentials(a) : a)) as Parameters<typeof method>);
      },
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
