import { X509Certificate } from 'node:crypto';
import { copyFile, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { DEFAULT_SANS, ensureDevCertificates, generateCertificates } from '../../certs/generate.js';
import { registry } from '../../src/shared/metrics.js';
import { ServingCertificate, readKeyPair } from '../../src/shared/tls.js';
import { tempDir } from '../harness/webhook.js';

async function metricValue(name: string): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return Number(metric?.values[0]?.value ?? 0);
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`gave up waiting for ${what}`);
}

t.test('generated certificates carry the webhook SANs and a CA that signed them', async (t) => {
  const tmp = await tempDir('ptah-certs');
  t.teardown(tmp.remove);
  const files = await generateCertificates({ outDir: tmp.dir });
  const leaf = new X509Certificate(await readFile(files.cert));
  const ca = new X509Certificate(await readFile(files.caCert));
  t.ok(leaf.checkIssued(ca), 'the leaf is issued by the CA');
  t.ok(leaf.verify(ca.publicKey), 'and signed by its key');
  t.equal(leaf.ca, false);
  t.equal(ca.ca, true);
  for (const san of DEFAULT_SANS) {
    const [type, value] = san.split(':') as [string, string];
    t.match(leaf.subjectAltName ?? '', type === 'IP' ? `IP Address:${value}` : `DNS:${value}`, `SAN ${san}`);
  }
  t.equal(leaf.checkHost('ptah-webhook.ptah-system.svc'), 'ptah-webhook.ptah-system.svc');
  t.equal(leaf.checkIP('127.0.0.1'), '127.0.0.1');
  t.match(leaf.keyUsage ?? [], ['1.3.6.1.5.5.7.3.1'], 'serverAuth');
  t.equal((await stat(files.key)).mode & 0o077, 0, 'the key is readable by its owner only');
});

t.test('ensureDevCertificates reuses a valid set and replaces one about to expire', async (t) => {
  const tmp = await tempDir('ptah-certs');
  t.teardown(tmp.remove);
  const first = await ensureDevCertificates(tmp.dir);
  const before = await readFile(first.cert, 'utf8');
  await ensureDevCertificates(tmp.dir);
  t.equal(await readFile(first.cert, 'utf8'), before, 'a certificate valid for more than a day is kept');
  const later = new Date(Date.now() + 40 * 24 * 3600 * 1000);
  await ensureDevCertificates(tmp.dir, later);
  t.not(await readFile(first.cert, 'utf8'), before, 'one that expires within a day (as of `now`) is replaced');
});

t.test('readKeyPair refuses what it cannot serve', async (t) => {
  const tmp = await tempDir('ptah-certs');
  t.teardown(tmp.remove);
  const a = await generateCertificates({ outDir: path.join(tmp.dir, 'a') });
  const b = await generateCertificates({ outDir: path.join(tmp.dir, 'b') });

  const pair = await readKeyPair(a.dir);
  t.match(pair.fingerprint, /^[0-9a-f]{64}$/);
  t.ok(pair.notAfter.getTime() > Date.now());

  await t.rejects(readKeyPair(path.join(tmp.dir, 'missing')), { name: 'CertificateError', message: /cannot read the serving certificate/ });

  await copyFile(b.key, a.key);
  await t.rejects(readKeyPair(a.dir), { name: 'CertificateError', message: /does not belong to the certificate/ }, 'key of another pair');

  await writeFile(a.cert, 'not a certificate');
  await t.rejects(readKeyPair(a.dir), { name: 'CertificateError', message: /is not a PEM certificate/ });

  await writeFile(b.key, 'not a key');
  await t.rejects(readKeyPair(b.dir), { name: 'CertificateError', message: /is not a PEM private key/ });
  const error = await readKeyPair(b.dir).catch((e: Error) => e);
  t.notMatch(String(error), /not a key/, 'the file content is not echoed');

  const c = await generateCertificates({ outDir: path.join(tmp.dir, 'c'), days: 1 });
  await t.rejects(readKeyPair(c.dir, new Date(Date.now() + 3 * 24 * 3600 * 1000)), { name: 'CertificateError', message: /expired at/ });
});

t.test('ServingCertificate follows a replaced pair and keeps the old one over a broken one', async (t) => {
  const tmp = await tempDir('ptah-certs');
  t.teardown(tmp.remove);
  await generateCertificates({ outDir: tmp.dir, commonName: 'first' });
  const serving = await ServingCertificate.load(tmp.dir, { pollMs: 50, debounceMs: 10 });
  t.teardown(() => serving.stop());
  const first = serving.current.fingerprint;
  t.equal(await metricValue('ptah_operator_webhook_certificate_expiry_timestamp_seconds'), serving.current.notAfter.getTime() / 1000, 'expiry gauge');

  const seen: string[] = [];
  serving.onChange((p) => seen.push(p.fingerprint));
  serving.start();

  await generateCertificates({ outDir: tmp.dir, commonName: 'second', reuseCa: true, days: 5 });
  await until(() => serving.current.fingerprint !== first, 'the replaced certificate to be picked up');
  t.same(seen, [serving.current.fingerprint], 'listeners hear about the new pair once');
  t.equal(await metricValue('ptah_operator_webhook_certificate_expiry_timestamp_seconds'), serving.current.notAfter.getTime() / 1000, 'gauge follows');

  const failuresBefore = await metricValue('ptah_operator_webhook_certificate_read_failures_total');
  const good = serving.current.fingerprint;
  await writeFile(path.join(tmp.dir, 'tls.crt'), 'garbage');
  t.equal(await serving.reload(), false, 'a broken file is not put in service');
  t.equal(serving.current.fingerprint, good, 'the previous pair stays');
  t.ok((await metricValue('ptah_operator_webhook_certificate_read_failures_total')) > failuresBefore, 'the failure is counted');
  t.ok(serving.valid());
  t.notOk(serving.valid(new Date(serving.current.notAfter.getTime() + 1000)), 'an expired pair is not valid');
});

t.test('ServingCertificate.load refuses a directory without a usable pair', async (t) => {
  const tmp = await tempDir('ptah-certs');
  t.teardown(tmp.remove);
  await t.rejects(ServingCertificate.load(tmp.dir), { name: 'CertificateError' });
});
