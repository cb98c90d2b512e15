// The Job side of an OCI artifact (src/runner/oci/source.ts) against a real registry with basic auth over TLS, and
// cosign's own signatures (test/fixtures/oci): a tag resolves to its digest and the policy's facts; the pinned
// digest's files land byte for byte in an empty directory. A moved tag is a new digest while the old one still reads
// the old files. Each refusal has its own reason and writes nothing: a wrong artifact type, a missing annotation, a
// missing or wrong signature, a tag the policy does not allow, a digest mismatch, refused credentials, a Secret with
// no entry for the registry, a registry that is down. No result or message holds a credential.
import t, { type Test } from 'tap';
import { mkdir, mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OciSourceError, pullOciSource, resolveOciSource, type OciSourceInputs } from '../../src/runner/oci/source.js';
import { artifactDigest } from '../../src/shared/artifact.js';
import { parseVerificationPolicy } from '../../src/shared/verification-policy.js';
import { createPki } from '../../tools/stack/pki.js';
import { startRegistry, type RunningRegistry } from '../../tools/stack/registry.js';
import { pushDirectory } from '../harness/oci-push.js';
import { RegistryClient } from '../../src/shared/oci/registry-client.js';
import { FIXTURE_DIR, FIXTURE_FILE, pushFixture, replay, type SignatureFixtures } from '../fixtures/oci/signature-fixtures.js';

const fixtures = JSON.parse(await readFile(FIXTURE_FILE, 'utf8')) as SignatureFixtures;
const scratch = await mkdtemp(join(tmpdir(), 'ptah-oci-source-'));
const pki = await createPki(join(scratch, 'pki'));
const registry = await startRegistry(pki);
t.teardown(() => registry.stop());
const dockerConfigJson = await readFile(join(registry.dockerConfigDir, 'config.json'), 'utf8');
const inputs = (reference: string, extra: Partial<OciSourceInputs> = {}): OciSourceInputs =>
  ({ reference: `${registry.host}/${reference}`, kind: 'migrations', dockerConfigJson, ca: registry.caPem, ...extra });
const signerKey = (key: string) => `signatureKeys:\n  - name: release\n    publicKey: |\n${key.trim().split('\n').map((l) => `      ${l}`).join('\n')}\n`;
const STRICT = parseVerificationPolicy(`version: 1
requiredAnnotations: [org.opencontainers.image.source, org.opencontainers.image.revision]
artifactTypes: [application/vnd.ptah-operator.migrations.v1]
${signerKey(fixtures.keys.signer)}`);
const OPEN = parseVerificationPolicy('version: 1');
const said: string[] = [];
const fixtureFiles = new Map(await Promise.all((await readdir(FIXTURE_DIR)).map(async (name) => [name, await readFile(join(FIXTURE_DIR, name))] as const)));

async function refused(t: Test, step: Promise<unknown>, reason: string, message: RegExp, what: string): Promise<void> {
  const error = await step.then(() => undefined, (e: unknown) => e);
  t.ok(error instanceof OciSourceError, `${what}: refused`);
  said.push((error as Error)?.message ?? '');
  t.match(error, { reason, message }, `${what}: ${reason}`);
}

t.test('a signed artifact resolves, meets the policy, and its pinned files land in a directory', async (t) => {
  const digest = await pushFixture(registry, 'signed', 'signed');
  t.equal(digest, fixtures.signed.digest);
  await replay(new RegistryClient(registry.host, { ca: registry.caPem, credentials: { username: registry.username, password: registry.password } }), 'signed', fixtures.signed.withReferrersApi);
  const resolved = await resolveOciSource(inputs('signed:v1'), STRICT);
  said.push(JSON.stringify(resolved));
  t.equal(resolved.digest, digest, 'the tag resolves to the pushed digest');
  t.equal(resolved.pinned, `${registry.host}/signed@${digest}`);
  t.equal(resolved.namedByTag, true);
  t.same(resolved.verifiedKeys, ['release'], 'cosign\'s signature verifies with the policy key');
  t.equal(resolved.contentDigest, artifactDigest(fixtureFiles), 'the content digest, from the descriptors alone, is the one a ConfigMap of the same files has');
  t.same([resolved.files, resolved.bytes], [fixtureFiles.size, [...fixtureFiles.values()].reduce((n, b) => n + b.byteLength, 0)]);

  const out = join(scratch, 'pulled');
  await mkdir(out);
  const pulled = await pullOciSource({ ...inputs(`signed@${digest}`), contentDigest: resolved.contentDigest }, out);
  t.same(pulled.files, fixtureFiles.size);
  for (const [name, bytes] of fixtureFiles) {
    t.same(await readFile(join(out, name)), bytes, `${name} is the file pushed`);
    t.equal((await stat(join(out, name))).mode & 0o777, 0o444, `${name} is read-only`);
  }
  t.same(await resolveOciSource(inputs(`signed@${digest}`), STRICT).then((r) => r.namedByTag), false, 'named by its digest');
});

t.test('a moved tag is a new digest; the pinned digest still reads what was pinned', async (t) => {
  const dir = join(scratch, 'moving');
  await mkdir(dir);
  await writeFile(join(dir, '1_a.up.sql'), 'CREATE TABLE a ();\n');
  const first = await pushDirectory(registry, dir, 'moving:prod');
  const pinned = await resolveOciSource(inputs('moving:prod'), OPEN);
  await writeFile(join(dir, '2_b.up.sql'), 'CREATE TABLE b ();\n');
  const second = await pushDirectory(registry, dir, 'moving:prod');
  t.not(second, first);
  t.equal((await resolveOciSource(inputs('moving:prod'), OPEN)).digest, second, 'the tag now resolves to the new digest');
  const out = join(scratch, 'moving-out');
  await mkdir(out);
  await pullOciSource({ ...inputs(`moving@${first}`), contentDigest: pinned.contentDigest }, out);
  t.same(await readdir(out), ['1_a.up.sql'], 'the old digest reads the old files');
  await refused(t, resolveOciSource(inputs(`moving:prod@${first}`), OPEN), 'DigestMismatch', new RegExp(`names ${first}, but the registry resolves it to ${second}`), 'a tag and a digest that no longer agree');
});

t.test('each refusal has its own reason and writes nothing', async (t) => {
  const unsigned = await pushFixture(registry, 'unsigned', 'unsigned');
  const strangers = await pushFixture(registry, 'strangers', 'stranger');
  await replay(new RegistryClient(registry.host, { ca: registry.caPem, credentials: { username: registry.username, password: registry.password } }), 'strangers', fixtures.strangers.withReferrersApi);
  await refused(t, resolveOciSource(inputs('signed:v1', { kind: 'schema' }), OPEN), 'ArtifactTypeMismatch', /not application\/vnd\.ptah-operator\.schema\.v1/, 'a migration directory where a schema is expected');
  await refused(t, resolveOciSource(inputs('signed:v1'), parseVerificationPolicy('version: 1\nrequiredAnnotations: [org.opencontainers.image.description]')),
    'ArtifactRefused', /lacks the required annotation org\.opencontainers\.image\.description/, 'a missing annotation');
  await refused(t, resolveOciSource(inputs('signed:v1'), parseVerificationPolicy('version: 1\nartifactTypes: [application/vnd.example.other.v1]')),
    'ArtifactRefused', /is not one of artifactTypes \(application\/vnd\.example\.other\.v1\)/, 'an artifact type the policy does not name');
  await refused(t, resolveOciSource(inputs('unsigned:v1'), STRICT), 'ArtifactRefused', new RegExp(`sha256:${unsigned.slice(7)} does not meet .*verifies with signatureKeys \\(release\\): it carries no signature`), 'no signature');
  await refused(t, resolveOciSource(inputs('strangers:v1'), STRICT), 'ArtifactRefused', /signature 1 \(.*\): verifies with none of the policy's keys \(release\)/, `signed by another key (${strangers.slice(0, 15)}…)`);
  await refused(t, resolveOciSource(inputs('signed:v1'), parseVerificationPolicy('version: 1\nallowTags: false')), 'ArtifactRefused', /named by a tag, and allowTags is false/, 'a tag the policy does not allow');

  const out = join(scratch, 'refused-out');
  await mkdir(out);
  await refused(t, pullOciSource({ ...inputs(`signed@${fixtures.signed.digest}`), contentDigest: `sha256:${'0'.repeat(64)}` }, out), 'DigestMismatch', /not the pinned sha256:0{64}/, 'content of another digest');
  await refused(t, pullOciSource({ ...inputs('signed:v1'), contentDigest: `sha256:${'0'.repeat(64)}` }, out), 'InvalidInput', /not pinned to a digest alone/, 'a pull by tag');
  const wrong = JSON.stringify({ auths: { [registry.host]: { username: registry.username, password: 'wrong-password' } } });
  await refused(t, resolveOciSource(inputs('signed:v1', { dockerConfigJson: wrong }), OPEN), 'RegistryUnauthorized', /refused the credentials given for repository:signed:pull \(401\)/, 'credentials the registry refuses');
  await refused(t, resolveOciSource(inputs('signed:v1', { dockerConfigJson: JSON.stringify({ auths: { 'other.example': { auth: 'eDp5' } } }) }), OPEN),
    'RegistryUnauthorized', new RegExp(`holds no credentials for ${registry.host.replace(/\./g, '\\.')}`), 'a Secret with no entry for the registry');
  const { dockerConfigJson: _none, ...anonymous } = inputs('signed:v1');
  await refused(t, resolveOciSource(anonymous, OPEN), 'RegistryUnauthorized', /asks for credentials \(401\) and none were given/, 'no Secret at all');
  await refused(t, resolveOciSource(inputs('signed:v1', { ca: undefined }), OPEN), 'RegistryUnreachable', /certificate/, 'a registry whose CA is not trusted');
  const otherCa = (await createPki(join(scratch, 'other-pki'))).caPem;
  await refused(t, resolveOciSource(inputs('signed:v1', { ca: otherCa }), OPEN), 'RegistryUnreachable', /certificate/, 'a registry whose certificate another CA signed');
  const down = await startRegistry(pki);
  await down.stop();
  const downConfig = await readFile(join(down.dockerConfigDir, 'config.json'), 'utf8');
  await refused(t, resolveOciSource({ ...inputs('signed:v1', { dockerConfigJson: downConfig }), reference: `${down.host}/signed:v1` }, OPEN), 'RegistryUnreachable', /ECONNREFUSED/, 'a registry that is down');
  t.same(await readdir(out), [], 'no refusal wrote a file');
});

t.test('no result or message holds a credential', async (t) => {
  t.ok(said.length >= 15, `${said.length} results and messages kept`);
  for (const secret of [registry.password, Buffer.from(`${registry.username}:${registry.password}`).toString('base64'), 'wrong-password']) {
    t.notOk(said.some((text) => text.includes(secret)), `none holds ${secret.slice(0, 3)}…`);
  }
});
