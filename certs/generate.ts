// Development and test certificates for the webhook: an EC P-256 CA and a serving certificate it signs, made with
// the openssl CLI. Production certificates come from cert-manager or a rotator; these never leave the machine
// (certs/out/ is git-ignored). Run `tsx certs/generate.ts [outDir]` to make a set by hand.
import { execFile } from 'node:child_process';
import { X509Certificate, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Names the API server (Service DNS) and a developer (loopback) use to reach the webhook. */
export const DEFAULT_SANS: readonly string[] = [
  'DNS:ptah-webhook',
  'DNS:ptah-webhook.ptah-system',
  'DNS:ptah-webhook.ptah-system.svc',
  'DNS:localhost',
  'IP:127.0.0.1',
];

export const DEFAULT_OUT_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'out');

export interface GenerateOptions {
  outDir: string;
  /** subjectAltName entries in openssl syntax (`DNS:x`, `IP:y`). */
  sans?: readonly string[];
  commonName?: string;
  /** Validity of the serving certificate. */
  days?: number;
  /** Sign with the CA already in outDir instead of making a new one (used to rotate the leaf only). */
  reuseCa?: boolean;
}

export interface CertificateFiles {
  dir: string;
  caCert: string;
  caKey: string;
  cert: string;
  key: string;
}

export function certificateFiles(dir: string): CertificateFiles {
  return {
    dir,
    caCert: path.join(dir, 'ca.crt'),
    caKey: path.join(dir, 'ca.key'),
    cert: path.join(dir, 'tls.crt'),
    key: path.join(dir, 'tls.key'),
  };
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args, { timeout: 30_000 });
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: string };
    if (err.code === 'ENOENT') throw new Error('openssl is not installed or not on PATH; it is needed to generate development certificates');
    throw new Error(`openssl ${args[0]} failed: ${(err.stderr ?? err.message).trim()}`);
  }
}

const ecKey = (file: string): string[] => ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file];

/** Writes ca.crt/ca.key (unless reused), tls.crt and tls.key into outDir; keys are readable by the owner only. */
export async function generateCertificates(options: GenerateOptions): Promise<CertificateFiles> {
  const files = certificateFiles(options.outDir);
  const sans = options.sans ?? DEFAULT_SANS;
  const days = options.days ?? 30;
  await mkdir(options.outDir, { recursive: true, mode: 0o700 });

  if (!options.reuseCa) {
    await openssl(ecKey(files.caKey));
    await openssl([
      'req', '-x509', '-new', '-key', files.caKey, '-sha256', '-days', String(Math.max(days, 365)),
      '-subj', '/CN=ptah-webhook development CA',
      '-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0',
      '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
      '-out', files.caCert,
    ]);
  }

  // Write the new leaf beside the live one and rename it into place, so a watcher never reads a half-written file
  // (a key and certificate that do not match yet are refused by the watcher and read again on the next change).
  const stage = path.join(options.outDir, `.stage-${randomBytes(4).toString('hex')}`);
  await mkdir(stage, { mode: 0o700 });
  try {
    const key = path.join(stage, 'tls.key');
    const csr = path.join(stage, 'tls.csr');
    const ext = path.join(stage, 'ext.cnf');
    const cert = path.join(stage, 'tls.crt');
    await openssl(ecKey(key));
    await openssl(['req', '-new', '-key', key, '-subj', `/CN=${options.commonName ?? 'ptah-webhook'}`, '-out', csr]);
    await writeFile(ext, [
      `subjectAltName=${sans.join(',')}`,
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      '',
    ].join('\n'));
    await openssl([
      'x509', '-req', '-in', csr, '-CA', files.caCert, '-CAkey', files.caKey,
      '-set_serial', `0x${randomBytes(16).toString('hex').replace(/^[89a-f]/, '7')}`,
      '-days', String(days), '-sha256', '-extfile', ext, '-out', cert,
    ]);
    await chmod(key, 0o600);
    await rename(key, files.key);
    await rename(cert, files.cert);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
  await chmod(files.caKey, 0o600);
  return files;
}

/** Reuses a serving certificate in dir that is valid for at least another day; otherwise generates a fresh set. */
export async function ensureDevCertificates(dir: string = DEFAULT_OUT_DIR, now: Date = new Date()): Promise<CertificateFiles> {
  const files = certificateFiles(dir);
  try {
    const cert = new X509Certificate(await readFile(files.cert));
    await readFile(files.key);
    if (new Date(cert.validTo).getTime() - now.getTime() > 24 * 3600 * 1000) return files;
  } catch {
    // missing or unreadable: make a new set below
  }
  return generateCertificates({ outDir: dir });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2] ?? DEFAULT_OUT_DIR;
  generateCertificates({ outDir }).then(
    (f) => console.log(`wrote ${f.caCert}, ${f.cert} and ${f.key}`),
    (e: Error) => {
      console.error(e.message);
      process.exitCode = 1;
    },
  );
}
