// Reading artifacts back from a real registry (tools/registry, TLS and basic auth): what `kubectl ptah push` stored
// comes back byte for byte; what another tool stored (crane's image, an index, a manifest of another layout) is
// refused with the check that failed; every read is bounded. Signatures are cosign's own (test/fixtures/oci,
// recorded by make-signatures.ts), replayed into the registry: a policy key verifies them in each layout cosign
// writes, through the referrers API and through its tag fallback, and each way a signature can fail to count is
// reported as its own problem.
import t from 'tap';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256Digest } from '../../src/shared/canonical.js';
import { ARTIFACT_TYPES, EMPTY_CONFIG, EMPTY_CONFIG_BYTES, FILE_MEDIA_TYPE, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, TITLE_ANNOTATION } from '../../src/shared/oci/artifact-layout.js';
import { ArtifactManifestError, pullArtifact } from '../../src/shared/oci/artifact-pull.js';
import { RegistryClient, RegistryError } from '../../src/shared/oci/registry-client.js';
import { createPki } from '../../tools/stack/pki.js';
import { startRegistry, type RunningRegistry } from '../../tools/stack/registry.js';
import { runCommand } from '../harness/command.js';
import { pushDirectory } from '../harness/oci-push.js';

const scratch = await mkdtemp(join(tmpdir(), 'ptah-oci-pull-'));
const pki = await createPki(join(scratch, 'pki'));
const registry = await startRegistry(pki);
t.teardown(() => registry.stop());
const client = (reg: RunningRegistry = registry) => new RegistryClient(reg.host, { ca: reg.caPem, credentials: { username: reg.username, password: reg.password } });


/** Puts a manifest of our own making (another layout's), its blobs first; returns its digest. */
async function putRaw(repository: string, tag: string, manifest: object, blobs: Uint8Array[] = []): Promise<string> {
  const c = client();
  for (const blob of [EMPTY_CONFIG_BYTES, ...blobs]) await c.pushBlob(repository, sha256Digest(blob), blob);
  const bytes = Buffer.from(JSON.stringify(manifest));
  return c.putManifest(repository, tag, bytes, (manifest as { mediaType: string }).mediaType);
}

t.test('what push stored comes back byte for byte', async (t) => {
  const dir = join(scratch, 'migrations');
  await mkdir(dir);
  const files: Record<string, string> = {};
  for (let i = 1; i <= 40; i++) files[`${i}_step.up.sql`] = `CREATE TABLE step_${i} (id int);\n`;
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
  const digest = await pushDirectory(registry, dir, 'team/app:v1');
  const pulled = await pullArtifact(client(), 'team/app', digest, 'migrations');
  t.equal(pulled.digest, digest);
  t.equal(pulled.artifactType, ARTIFACT_TYPES.migrations);
  t.same([...pulled.contents.keys()].sort(), (await readdir(dir)).sort(), 'every file of the directory, and no other');
  for (const name of await readdir(dir)) t.equal(pulled.contents.get(name)?.toString('utf8'), await readFile(join(dir, name), 'utf8'), `${name} is byte for byte the file`);
  const resolved = await client().resolve('team/app', 'v1');
  t.equal(resolved.digest, digest, 'the tag resolves (a HEAD) to the pushed digest');
  t.equal(resolved.mediaType, MANIFEST_MEDIA_TYPE);

  await t.rejects(pullArtifact(client(), 'team/app', digest, 'schema'), { name: ArtifactManifestError.name, reason: 'ArtifactTypeMismatch', message: /type is "application\/vnd\.ptah-operator\.migrations\.v1", not application\/vnd\.ptah-operator\.schema\.v1/ },
    'a migration directory is not a desired schema');
  await t.rejects(client().manifest('team/app', digest, 100), { name: RegistryError.name, reason: 'ArtifactTooLarge', message: /more than the 100 (bytes )?allowed/ }, 'a manifest longer than the bound is not read');
  await t.rejects(client().blob('team/app', { digest: pulled.files[0]!.digest, size: 3 }), { name: RegistryError.name, reason: 'ArtifactTooLarge' }, 'a blob longer than its descriptor says is not read past it');
  await t.rejects(client().manifest('team/app', `sha256:${'0'.repeat(64)}`), { name: RegistryError.name, reason: 'ArtifactNotFound' }, 'an unknown digest');
  const wrong = new RegistryClient(registry.host, { ca: registry.caPem, credentials: { username: registry.username, password: 'wrong' } });
  await t.rejects(wrong.resolve('team/app', 'v1'), { name: RegistryError.name, reason: 'RegistryUnauthorized' }, 'wrong credentials');
});

t.test('what other tools stored is refused with the check that failed', async (t) => {
  const layer = join(scratch, 'layer.tar');
  await writeFile(layer, Buffer.alloc(1024));
  const appended = await runCommand(registry.crane.path, ['append', '-f', layer, '-t', `${registry.host}/others/image:v1`], 60_000, registry.crane.env);
  t.equal(appended.code, 0, `crane append made an image (${appended.stderr.trim()})`);
  const image = await client().resolve('others/image', 'v1');
  await t.rejects(pullArtifact(client(), 'others/image', image.digest, 'migrations'), { reason: 'ArtifactTypeMismatch', message: /the artifact's type is "application\/vnd\.(oci\.image\.config\.v1\+json|docker\.container\.image\.v1\+json)"/ },
    'a container image is not an artifact of ours');

  const content = Buffer.from('SELECT 1;\n');
  const good = { mediaType: FILE_MEDIA_TYPE, digest: sha256Digest(content), size: content.byteLength, annotations: { [TITLE_ANNOTATION]: '1_a.up.sql' } };
  const base = { schemaVersion: 2, mediaType: MANIFEST_MEDIA_TYPE, artifactType: ARTIFACT_TYPES.migrations, config: EMPTY_CONFIG };
  const cases: [string, object, RegExp][] = [
    ['traversal', { ...base, layers: [{ ...good, annotations: { [TITLE_ANNOTATION]: '../1_a.up.sql' } }] }, /layer 0: "\.\.\/1_a\.up\.sql" is not a file name/],
    ['twice', { ...base, layers: [good, good] }, /layer 1: the file 1_a\.up\.sql appears twice/],
    ['tar layer', { ...base, layers: [{ ...good, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' }] }, /layer 0: its mediaType is "application\/vnd\.oci\.image\.layer\.v1\.tar\+gzip"/],
    ['untitled', { ...base, layers: [{ ...good, annotations: {} }] }, /layer 0: it has no org\.opencontainers\.image\.title/],
    ['config', { ...base, config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: EMPTY_CONFIG.digest, size: 2 }, layers: [good] }, /its config is not the empty descriptor/],
    ['sizes', { ...base, layers: [{ ...good, size: 65 << 20 }] }, /layer 0: it is 68157440 bytes, more than 67108864/],
  ];
  for (const [tag, manifest, reason] of cases) {
    const digest = await putRaw('others/raw', tag, manifest, [content]);
    await t.rejects(pullArtifact(client(), 'others/raw', digest, 'migrations'), { reason: 'ArtifactInvalid', message: reason }, tag);
  }
  const index = await putRaw('others/raw', 'index', { schemaVersion: 2, mediaType: INDEX_MEDIA_TYPE, manifests: [] });
  await t.rejects(pullArtifact(client(), 'others/raw', index, 'migrations'), { reason: 'ArtifactInvalid', message: /an image index, not an artifact manifest/ }, 'an index');
  const control = await putRaw('others/raw', 'control', { ...base, layers: [good] }, [content]);
  t.equal((await pullArtifact(client(), 'others/raw', control, 'migrations')).contents.get('1_a.up.sql')?.toString(), 'SELECT 1;\n', 'the same manifest, well formed, is read');
});
