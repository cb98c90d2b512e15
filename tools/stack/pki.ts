// The test cluster's own PKI, made with openssl (Node's crypto cannot issue X.509 certificates): one CA that signs
// the API server's serving certificate, the fake kubelet's serving certificate, every client certificate (the API
// server's x509 authenticator takes CN as the user name and each O as a group) and any webhook serving
// certificate a test needs; plus the key pair that signs and verifies ServiceAccount tokens.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface CertFiles {
  cert: string;
  key: string;
}

export interface ClientIdentity {
  /** Becomes the user name (CN). */
  user: string;
  /** Each becomes an O; `system:authenticated` is added by the API server itself, never put here. */
  groups: string[];
}

export interface ServingNames {
  ips?: string[];
  dns?: string[];
}

export interface Pki {
  dir: string;
  ca: CertFiles;
  /** The CA certificate, PEM: the caBundle for webhooks and the trust root of every kubeconfig. */
  caPem: string;
  /** ServiceAccount token signing key (private, PEM) and its public half. */
  serviceAccountKey: string;
  serviceAccountPublicKey: string;
  issueServing(name: string, names: ServingNames): Promise<CertFiles>;
  issueClient(name: string, identity: ClientIdentity): Promise<CertFiles>;
}

const VALID_DAYS = 30;

/** Creates a CA and the ServiceAccount key pair in `dir` (created if missing). */
export async function createPki(dir: string): Promise<Pki> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const ca = { cert: join(dir, 'ca.crt'), key: join(dir, 'ca.key') };
  const serviceAccountKey = join(dir, 'sa.key');
  const serviceAccountPublicKey = join(dir, 'sa.pub');
  await Promise.all([
    (async () => {
      await newKey(ca.key);
      await withExtensions(dir, 'ca', caExtensions(), (ext) =>
        openssl(['req', '-x509', '-new', '-key', ca.key, '-out', ca.cert, '-days', String(VALID_DAYS), '-subj', '/CN=ptah-test-ca', '-config', ext, '-extensions', 'ext']),
      );
    })(),
    (async () => {
      await newKey(serviceAccountKey);
      await openssl(['pkey', '-in', serviceAccountKey, '-pubout', '-out', serviceAccountPublicKey]);
    })(),
  ]);
  return openPki(dir);
}

/** Opens an existing PKI directory written by createPki (e.g. from a test process, to issue a webhook cert). */
export async function openPki(dir: string): Promise<Pki> {
  const ca = { cert: join(dir, 'ca.crt'), key: join(dir, 'ca.key') };
  const caPem = await readFile(ca.cert, 'utf8').catch((e: Error) => {
    throw new Error(`${dir} holds no test CA (${e.message}); was it made by createPki?`);
  });
  return {
    dir,
    ca,
    caPem,
    serviceAccountKey: join(dir, 'sa.key'),
    serviceAccountPublicKey: join(dir, 'sa.pub'),
    issueServing: (name, names) => issue(dir, ca, name, '/CN=' + checkedSubjectPart(name, 'name'), servingExtensions(names)),
    issueClient: (name, identity) => issue(dir, ca, name, clientSubject(identity), clientExtensions()),
  };
}

async function issue(dir: string, ca: CertFiles, name: string, subject: string, extensions: string): Promise<CertFiles> {
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) throw new Error(`certificate file name ${JSON.stringify(name)} must be lower-case letters, digits, '.', '_' or '-'`);
  // A random suffix lets several test processes issue certificates with the same name at once.
  const base = join(dir, `${name}-${randomBytes(4).toString('hex')}`);
  const files = { cert: `${base}.crt`, key: `${base}.key` };
  const csr = `${base}.csr`;
  await newKey(files.key);
  await openssl(['req', '-new', '-key', files.key, '-out', csr, '-subj', subject]);
  await withExtensions(dir, name, extensions, (ext) =>
    openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', `0x${randomBytes(16).toString('hex')}`,
      '-days', String(VALID_DAYS), '-extfile', ext, '-extensions', 'ext', '-out', files.cert]),
  );
  await rm(csr, { force: true });
  return files;
}

function clientSubject(identity: ClientIdentity): string {
  if (identity.groups.includes('system:authenticated')) {
    throw new Error('do not put system:authenticated into a client certificate: the API server adds it to every authenticated user');
  }
  return ['/CN=' + checkedSubjectPart(identity.user, 'user'), ...identity.groups.map((g) => '/O=' + checkedSubjectPart(g, 'group'))].join('');
}

function checkedSubjectPart(value: string, what: string): string {
  // openssl -subj gives '/', '=', '+' and '\' meanings of their own; refuse them rather than escape them.
  if (value === '' || /[/=+\\\n]/.test(value)) throw new Error(`${what} ${JSON.stringify(value)} must be non-empty and hold no '/', '=', '+' or '\\'`);
  return value;
}

function caExtensions(): string {
  return ['basicConstraints = critical, CA:TRUE', 'keyUsage = critical, keyCertSign, cRLSign, digitalSignature', 'subjectKeyIdentifier = hash'].join('\n');
}

function servingExtensions(names: ServingNames): string {
  const san = [...(names.ips ?? []).map((ip) => `IP:${ip}`), ...(names.dns ?? []).map((d) => `DNS:${d}`)];
  if (san.length === 0) throw new Error('a serving certificate needs at least one IP or DNS name: clients ignore the CN');
  return ['basicConstraints = critical, CA:FALSE', 'keyUsage = critical, digitalSignature', 'extendedKeyUsage = serverAuth', `subjectAltName = ${san.join(', ')}`].join('\n');
}

function clientExtensions(): string {
  return ['basicConstraints = critical, CA:FALSE', 'keyUsage = critical, digitalSignature', 'extendedKeyUsage = clientAuth'].join('\n');
}

async function withExtensions<T>(dir: string, name: string, body: string, fn: (file: string) => Promise<T>): Promise<T> {
  const file = join(dir, `${name}-${randomBytes(4).toString('hex')}.ext.cnf`);
  // `req` wants a distinguished_name section even when -subj gives the subject.
  await writeFile(file, `[req]\ndistinguished_name = dn\n[dn]\n[ext]\n${body}\n`);
  try {
    return await fn(file);
  } finally {
    await rm(file, { force: true });
  }
}

async function newKey(file: string): Promise<void> {
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file]);
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args);
  } catch (e) {
    const stderr = (e as { stderr?: string }).stderr?.trim();
    throw new Error(`openssl ${args[0]} failed: ${stderr || (e as Error).message}`);
  }
}
