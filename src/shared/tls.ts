// The webhook's serving certificate, read from a directory (tls.crt + tls.key, as a mounted kubernetes.io/tls
// Secret lays them out) and reloaded when the files change. A pair is only put in service after it parses, its
// key matches its certificate and it is not expired; a bad pair is counted and the previous one stays in use.
import { X509Certificate, createHash, createPrivateKey } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from './logger.js';
import { webhookMetrics } from './metrics.js';

export interface KeyPair {
  cert: string;
  key: string;
  notAfter: Date;
  /** SHA-256 of the certificate DER, to tell pairs apart in logs and tests. */
  fingerprint: string;
}

export class CertificateError extends Error {
  override name = 'CertificateError';
}

/** Reads and checks dir/tls.crt and dir/tls.key. */
export async function readKeyPair(dir: string, now: Date = new Date()): Promise<KeyPair> {
  const certFile = path.join(dir, 'tls.crt');
  const keyFile = path.join(dir, 'tls.key');
  let cert: string;
  let key: string;
  try {
    [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  } catch (e) {
    throw new CertificateError(`cannot read the serving certificate in ${dir}: ${(e as Error).message}`);
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (e) {
    throw new CertificateError(`${certFile} is not a PEM certificate: ${(e as Error).message}`);
  }
  let matches: boolean;
  try {
    matches = x509.checkPrivateKey(createPrivateKey(key));
  } catch (e) {
    // Never echo key material: the parser's message is enough.
    throw new CertificateError(`${keyFile} is not a PEM private key: ${(e as Error).message}`);
  }
  if (!matches) throw new CertificateError(`${keyFile} does not belong to the certificate in ${certFile}`);
  const notAfter = new Date(x509.validTo);
  if (notAfter.getTime() <= now.getTime()) throw new CertificateError(`${certFile} expired at ${notAfter.toISOString()}`);
  return { cert, key, notAfter, fingerprint: createHash('sha256').update(x509.raw).digest('hex') };
}

export interface ServingCertificateOptions {
  logger?: Logger;
  /** Poll period; a backstop for file systems where fs.watch misses the Secret volume's symlink swap. */
  pollMs?: number;
  /** Delay that coalesces the burst of events one update causes. */
  debounceMs?: number;
  clock?: () => Date;
}

type Listener = (pair: KeyPair) => void;

/** The current serving pair of one directory, with change notification. Create it with `load`. */
export class ServingCertificate {
  #current: KeyPair;
  readonly #listeners = new Set<Listener>();
  #watcher: FSWatcher | undefined;
  #poll: NodeJS.Timeout | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #reloading: Promise<boolean> | undefined;

  private constructor(
    readonly dir: string,
    initial: KeyPair,
    readonly options: ServingCertificateOptions,
  ) {
    this.#current = initial;
    webhookMetrics.certificateExpiry.set(initial.notAfter.getTime() / 1000);
  }

  /** Reads the pair once; throws CertificateError when the directory does not hold a usable pair. */
  static async load(dir: string, options: ServingCertificateOptions = {}): Promise<ServingCertificate> {
    try {
      return new ServingCertificate(dir, await readKeyPair(dir, options.clock?.()), options);
    } catch (e) {
      webhookMetrics.certificateReadFailures.inc();
      throw e;
    }
  }

  get current(): KeyPair {
    return this.#current;
  }

  /** True while the pair in service has not expired. */
  valid(now: Date = this.options.clock?.() ?? new Date()): boolean {
    return this.#current.notAfter.getTime() > now.getTime();
  }

  /** Calls `listener` with every new pair put in service; returns the unsubscribe function. */
  onChange(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Re-reads the files; true when a different valid pair was put in service. */
  reload(): Promise<boolean> {
    // One read at a time: a burst of events must not race two reads into an older-wins order.
    this.#reloading ??= this.#read().finally(() => {
      this.#reloading = undefined;
    });
    return this.#reloading;
  }

  async #read(): Promise<boolean> {
    let next: KeyPair;
    try {
      next = await readKeyPair(this.dir, this.options.clock?.());
    } catch (e) {
      webhookMetrics.certificateReadFailures.inc();
      this.options.logger?.warn({ err: e, dir: this.dir }, 'serving certificate reload failed; keeping the certificate in use');
      return false;
    }
    if (next.fingerprint === this.#current.fingerprint) return false;
    this.#current = next;
    webhookMetrics.certificateExpiry.set(next.notAfter.getTime() / 1000);
    this.options.logger?.info({ fingerprint: next.fingerprint, notAfter: next.notAfter.toISOString() }, 'serving certificate reloaded');
    for (const listener of this.#listeners) listener(next);
    return true;
  }

  /** Watches the directory (not the files: a Secret volume swaps a symlink) and polls as a backstop. */
  start(): void {
    if (this.#watcher || this.#poll) return;
    const schedule = (): void => {
      clearTimeout(this.#debounce);
      this.#debounce = setTimeout(() => void this.reload(), this.options.debounceMs ?? 200);
      this.#debounce.unref();
    };
    try {
      this.#watcher = watch(this.dir, { persistent: false }, schedule);
      this.#watcher.on('error', (e) => this.options.logger?.warn({ err: e, dir: this.dir }, 'certificate directory watch failed; relying on polling'));
    } catch (e) {
      this.options.logger?.warn({ err: e, dir: this.dir }, 'cannot watch the certificate directory; relying on polling');
    }
    this.#poll = setInterval(() => void this.reload(), this.options.pollMs ?? 30_000);
    this.#poll.unref();
  }

  stop(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
    clearInterval(this.#poll);
    this.#poll = undefined;
    clearTimeout(this.#debounce);
    this.#debounce = undefined;
  }
}
