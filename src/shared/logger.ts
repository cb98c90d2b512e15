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
 * digits or `*`, fields may escape `:` and `\`; the password runs to the end of the line.
 */
const PGPASS = /(?<!\S)((?:[^\s:\\]|\\.)+:(?:\d{1,5}|\*):(?:[^\s:\\]|\\.)+:(?:[^\s:\\]|\\.)+:)[^\n]*/g;
/** A JSON key naming a credential, at any level of escaping (`"password":`, `\"password\":`). */
const JSON_KEY = new RegExp(`(?<!\\\\)(\\\\*)"${CREDENTIAL_KEY}\\1"\\s*:\\s*`, 'gi');

const isSpace = (code: number): boolean => code === 0x20 || (code >= 0x09 && code <= 0x0d) || code === 0xa0 || code === 0x2028 || code === 0x2029;

/**
 * `scheme://user:password@host` → `scheme://user:[REDACTED]@host`. The password runs to the last @ of its
 * whitespace-delimited token, so a raw @ or / in it (`postgres://u:p@ss/w@host/db`) is covered; when the text
 * was cut (`cut`) and the token reaches the cut, everything after `user:` is treated as password.
 */
function redactUrlUserinfo(text: string, cut: boolean): string {
  let out = '';
  let copied = 0;
  let searchFrom = 0;
  // The token the last password scan covered, so two URLs in one token do not scan it twice.
  let tokenEnd = -1;
  let lastAt = -1;
  for (;;) {
    const separator = text.indexOf('://', searchFrom);
    if (separator < 0) break;
    let i = separator + 3;
    while (i < text.length && !isSpace(text.charCodeAt(i)) && text[i] !== ':' && text[i] !== '/' && text[i] !== '@') i++;
    searchFrom = i;
    if (text[i] !== ':') continue;
    const password = i + 1;
    if (password >= tokenEnd) {
      tokenEnd = password;
      lastAt = -1;
      while (tokenEnd < text.length && !isSpace(text.charCodeAt(tokenEnd))) {
        if (text.charCodeAt(tokenEnd) === 0x40) lastAt = tokenEnd;
        tokenEnd++;
      }
    }
    const end = lastAt >= password ? lastAt : cut && tokenEnd === text.length ? text.length : -1;
    if (end < 0) continue;
    out += `${text.slice(copied, password)}${REDACTED}`;
    copied = end;
    searchFrom = Math.max(end, password);
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
  return redactJsonValues(redactUrlUserinfo(text, cut))
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
