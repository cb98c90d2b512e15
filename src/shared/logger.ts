// The one root pino logger. Redaction is part of its construction, not of each call site, because a log line is
// the easiest place for a credential to leak: headers, kubeconfig fields, Secret payloads and URLs with a
// password in them are removed before anything is written.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export const REDACTED = '[REDACTED]';

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

// scheme://user:password@host → scheme://user:[REDACTED]@host; also password/token query parameters.
const URL_USERINFO = /([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*):[^\s@/]*@/gi;
const SECRET_QUERY = /([?&](?:password|passwd|pwd|token|access_token|secret|sslpassword)=)[^&\s#]*/gi;

/** Removes the credential parts of any URL-like text in `text`. */
export function scrubCredentials(text: string): string {
  return text.replace(URL_USERINFO, `$1:${REDACTED}@`).replace(SECRET_QUERY, `$1${REDACTED}`);
}

function scrubDeep(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return scrubCredentials(value);
  if (depth <= 0 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth - 1));
  // Errors keep message and stack in non-enumerable properties: copy the error (same class, so its type is
  // still reported) with those scrubbed, and its cause with them.
  if (value instanceof Error) {
    const copy = Object.create(Object.getPrototypeOf(value) as object) as Error;
    const hidden = (key: string, v: unknown) => Object.defineProperty(copy, key, { value: v, writable: true, configurable: true, enumerable: false });
    hidden('message', scrubCredentials(value.message));
    if (value.stack) hidden('stack', scrubCredentials(value.stack));
    if (value.cause !== undefined) hidden('cause', scrubDeep(value.cause, depth - 1));
    for (const [k, v] of Object.entries(value)) (copy as unknown as Record<string, unknown>)[k] = scrubDeep(v, depth - 1);
    return copy;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubDeep(v, depth - 1);
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
