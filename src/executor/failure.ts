// The one error type the executor's commands throw: a stable code and a sentence a person can act on. Every
// message passes through redact() before it leaves the process, so a URL or password a driver echoed never does.
import type { ExecutorError } from '../shared/executor-report.js';

export class ExecutorFailure extends Error {
  override name = 'ExecutorFailure';
  constructor(readonly code: string, message: string) {
    super(redact(message));
  }

  toReport(): ExecutorError {
    return { code: this.code, message: redact(this.message) };
  }
}

const secrets = new Set<string>();

/** Registers the credential-bearing parts of a database URL so redact() removes them wherever they appear. */
export function registerUrlSecrets(url: string): void {
  secrets.add(url);
  try {
    const parsed = new URL(url);
    if (parsed.password) {
      secrets.add(parsed.password);
      secrets.add(decodeURIComponent(parsed.password));
    }
  } catch {
    // An unparseable URL is still removed whole.
  }
}

const URL_CREDENTIALS = /\b(postgres(?:ql)?:\/\/[^\s:/@]*:)[^\s@]*@/gi;

export function redact(text: string): string {
  let out = text;
  // Longest first, so a URL is removed whole before its password is.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (secret.length >= 3) out = out.split(secret).join('***');
  }
  return out.replace(URL_CREDENTIALS, '$1***@');
}

export function errorMessage(err: unknown): string {
  return redact(err instanceof Error ? err.message : String(err));
}
