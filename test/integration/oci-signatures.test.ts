// Signatures verified offline with policy keys, against cosign's own output (test/fixtures/oci/signatures.json,
// recorded by make-signatures.ts with cosign v3.1.3 and replayed byte for byte into a real registry): a Sigstore bundle
// referrer, a legacy signature under its `.sig` tag and one as a referrer, found through the referrers API, and a
// bundle found through the tag fallback on a registry without the API. Each way a signature can fail to count is its
// own problem: another key, a payload changed after signing, a signature moved onto another artifact.
import t from 'tap';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256Digest } from '../../src/shared/canonical.js';
import { EMPTY_CONFIG } from '../../src/shared/oci/artifact-layout.js';
import { RegistryClient } from '../../src/shared/oci/registry-client.js';
import { PolicyKeyError, SIGNATURE_MEDIA_TYPES, verifyArtifactSignatures } from '../../src/shared/oci/signatures.js';
import { createPki } from '../../tools/stack/pki.js';
import { startRegistry, type RunningRegistry } from '../../tools/stack/registry.js';
import { FIXTURE_FILE, pushFixture, replay, type SignatureFixtures } from '../fixtures/oci/signature-fixtures.js';

const fixtures = JSON.parse(await readFile(FIXTURE_FILE, 'utf8')) as SignatureFixtures;
const scratch = await mkdtemp(join(tmpdir(), 'ptah-oci-signatures-'));
const pki = await createPki(join(scratch, 'pki'));
const withApi = await startRegistry(pki, { referrers: true });
const withoutApi = await startRegistry(pki, { referrers: false });
t.teardown(async () => { await withApi.stop(); await withoutApi.stop(); });
const client = (reg: RunningRegistry) => new RegistryClient(reg.host, { ca: reg.caPem, credentials: { username: reg.username, password: reg.password } });
const signer = { name: 'signer', pem: fixtures.keys.signer };
const stranger = { name: 'stranger', pem: fixtures.keys.stranger };


const signed = await pushFixture(withApi, 'signed', 'signed');
const strangers = await pushFixture(withApi, 'strangers', 'stranger');
const unsigned = await pushFixture(withApi, 'unsigned', 'unsigned');

t.test('the fixtures are cosign\'s signatures of what push makes', async (t) => {
  t.equal(signed, fixtures.signed.digest, 'the fixture artifact pushes to the digest cosign signed (else: run test/fixtures/oci/make-signatures.ts)');
  t.equal(strangers, fixtures.strangers.digest, 'and the stranger\'s artifact too');
  await replay(client(withApi), 'signed', fixtures.signed.withReferrersApi);
  await replay(client(withApi), 'strangers', fixtures.strangers.withReferrersApi);
});

t.test('each layout cosign writes verifies with the signer\'s key', async (t) => {
  const verdict = await verifyArtifactSignatures(client(withApi), 'signed', signed, [stranger, signer]);
  t.same(verdict.problems, []);
  t.same(verdict.verified.map((v) => `${v.layout} via ${v.via} by ${v.key}`).sort(), [
    'cosign legacy referrer via referrers API by signer',
    'cosign legacy tag via tag by signer',
    'sigstore bundle via referrers API by signer',
  ]);
  t.equal(verdict.found, 3);

  await pushFixture(withoutApi, 'signed', 'signed');
  await replay(client(withoutApi), 'signed', fixtures.signed.withoutReferrersApi);
  t.equal((await client(withApi).referrers('signed', signed))?.via, 'api', 'one registry lists referrers through the API');
  t.equal((await client(withoutApi).referrers('signed', signed))?.via, 'tag', 'the other answers the API 404, and the sha256-<hex> tag lists them');
  const fallback = await verifyArtifactSignatures(client(withoutApi), 'signed', signed, [signer]);
  t.same(fallback.verified, [{ key: 'signer', layout: 'sigstore bundle', via: 'referrers tag' }], 'a registry without the referrers API: the bundle is found through the sha256-<hex> tag');
});

t.test('signatures that do not count', async (t) => {
  const byStranger = await verifyArtifactSignatures(client(withApi), 'signed', signed, [stranger]);
  t.same(byStranger.verified, [], 'no signature verifies with a key that did not sign');
  t.equal(byStranger.problems.length, 3);
  t.match(byStranger.problems.join('\n'), /verifies with none of the policy's keys \(stranger\)/);

  const otherSigner = await verifyArtifactSignatures(client(withApi), 'strangers', strangers, [signer]);
  t.same(otherSigner.verified, [], 'an artifact signed by the stranger only is not signed by the signer');
  t.equal(otherSigner.found, 2);
  t.same((await verifyArtifactSignatures(client(withApi), 'strangers', strangers, [stranger])).verified.length, 2, 'control: the stranger\'s key verifies them');

  const none = await verifyArtifactSignatures(client(withApi), 'unsigned', unsigned, [signer]);
  t.same(none, { verified: [], found: 0, problems: [] }, 'an unsigned artifact has no signature at all');

  // The signer's legacy signature of `signed`, put under the `.sig` tag of `unsigned`: it verifies, but names another digest.
  const c = client(withApi);
  const legacy = fixtures.signed.withReferrersApi.find((e) => e.tag?.endsWith('.sig'))!;
  await replay(c, 'unsigned', [{ ...legacy, tag: `${unsigned.replace(':', '-')}.sig` }]);
  const moved = await verifyArtifactSignatures(c, 'unsigned', unsigned, [signer]);
  t.same(moved.verified, [], 'a signature moved onto another artifact does not count');
  t.match(moved.problems, [new RegExp(`verifies with signer but it signs "${signed}", not ${unsigned}`)]);

  // The signer's bundle of `signed`, as a referrer of `unsigned`: listed there, it verifies, and names another subject.
  const bundle = fixtures.signed.withReferrersApi.find((e) => JSON.parse(Buffer.from(e.manifest, 'base64').toString()).artifactType === SIGNATURE_MEDIA_TYPES.bundle)!;
  const referrer = JSON.parse(Buffer.from(bundle.manifest, 'base64').toString()) as { subject: { digest: string; size: number } };
  referrer.subject = { ...referrer.subject, digest: unsigned, size: (await c.manifest('unsigned', unsigned)).byteLength };
  await replay(c, 'unsigned', [{ manifest: Buffer.from(JSON.stringify(referrer)).toString('base64'), blobs: bundle.blobs }]);
  const rebound = await verifyArtifactSignatures(c, 'unsigned', unsigned, [signer]);
  t.same(rebound.verified, [], 'a bundle re-pointed at another artifact does not count');
  t.match(rebound.problems.join('\n'), new RegExp(`sigstore bundle, via referrers API\\): verifies with signer but its statement names no subject of digest ${unsigned}`));

  // The legacy payload changed after signing (its descriptor updated, the signature kept): the signature fails.
  const manifest = JSON.parse(Buffer.from(legacy.manifest, 'base64').toString()) as { layers: { digest: string; size: number }[] };
  const payload = Buffer.from(legacy.blobs[manifest.layers[0]!.digest]!, 'base64');
  const changed = Buffer.from(payload.toString().replace('"optional":null', '"optional":{}'));
  t.not(changed.toString(), payload.toString(), 'the payload was changed');
  manifest.layers[0] = { ...manifest.layers[0]!, digest: sha256Digest(changed), size: changed.byteLength };
  await pushFixture(withApi, 'tampered', 'signed');
  await replay(c, 'tampered', [{ tag: `${signed.replace(':', '-')}.sig`, manifest: Buffer.from(JSON.stringify(manifest)).toString('base64'), blobs: { [sha256Digest(changed)]: changed.toString('base64'), [EMPTY_CONFIG.digest]: Buffer.from('{}').toString('base64'), ...legacy.blobs } }]);
  const tampered = await verifyArtifactSignatures(c, 'tampered', signed, [signer]);
  t.same(tampered.verified, []);
  t.match(tampered.problems, [/cosign legacy tag, via tag\): verifies with none of the policy's keys \(signer\)/], 'a payload changed after signing');
});

t.test('a policy key that is not a public key is refused by name', async (t) => {
  await t.rejects(verifyArtifactSignatures(client(withApi), 'signed', signed, [{ name: 'team-key', pem: 'not a key' }]), { name: PolicyKeyError.name, message: /the public key team-key is not a PEM/ });
});
