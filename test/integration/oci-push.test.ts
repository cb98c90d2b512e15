// `kubectl ptah push` against a real registry (tools/registry: go-containerregistry's registry over TLS from a test
// CA, with basic auth on), held to crane, a client that shares none of our code: the tag crane resolves is the digest
// push printed; the manifest crane reads has the operator's layout; every blob crane fetches is the file's bytes. The
// same directory pushed again makes the same digest and uploads nothing. Each refusal (wrong or missing credentials,
// an untrusted certificate, a registry that is down, a directory that is not flat, a digest that is not the
// content's) exits non-zero with its reason and leaves the registry without the tag. No output holds the password.
import t from 'tap';
import { mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/cli/kubectl-ptah.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { ARTIFACT_TYPES, EMPTY_CONFIG, FILE_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, TITLE_ANNOTATION } from '../../src/shared/oci/artifact-layout.js';
import { createPki } from '../../tools/stack/pki.js';
import { startRegistry, type RunningRegistry } from '../../tools/stack/registry.js';
import { runCommand } from '../harness/command.js';

const scratch = await mkdtemp(join(tmpdir(), 'ptah-oci-push-'));
const pki = await createPki(join(scratch, 'pki'));
const registry = await startRegistry(pki);
t.teardown(() => registry.stop());
const config = join(registry.dockerConfigDir, 'config.json');

interface Pushed {
  code: number;
  out: string[];
  err: string[];
}

async function push(args: string[]): Promise<Pushed> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await run(['push', ...args], { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out, err };
}

const pushWithCredentials = (directory: string, reference: string, ...extra: string[]) =>
  push([directory, reference, '--registry-config', config, '--ca-file', registry.caFile, ...extra]);

async function crane(reg: RunningRegistry, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return runCommand(reg.crane.path, args, 60_000, reg.crane.env);
}

/** The tags crane lists for a repository (none when the repository does not exist). */
async function tags(repository: string): Promise<string[]> {
  const listed = await crane(registry, 'ls', `${registry.host}/${repository}`);
  return listed.code === 0 ? listed.stdout.split('\n').filter(Boolean) : [];
}

async function directory(name: string, files: Record<string, string>): Promise<string> {
  const dir = join(scratch, name);
  await mkdir(dir);
  for (const [file, content] of Object.entries(files)) await writeFile(join(dir, file), content);
  return dir;
}

const everyOutput: string[] = [];
const remember = (p: Pushed) => { everyOutput.push(...p.out, ...p.err); return p; };
const digestOf = (p: Pushed) => /@(sha256:[a-f0-9]{64})$/.exec(p.out[0] ?? '')?.[1];

const migrationFiles = {
  '1_accounts.up.sql': 'CREATE TABLE accounts (id bigint PRIMARY KEY);\n',
  '2_orders.up.sql': 'CREATE TABLE orders (id bigint PRIMARY KEY, account bigint REFERENCES accounts);\n',
  '10_index.up.sql': 'CREATE INDEX orders_account ON orders (account);\n',
};

t.test('a migration directory pushed, read back by crane', async (t) => {
  const dir = await directory('migrations', migrationFiles);
  const pushed = remember(await pushWithCredentials(dir, `${registry.host}/team/app-migrations:v1`,
    '--annotation', 'org.opencontainers.image.source=https://git.example/app', '--annotation', 'org.opencontainers.image.revision=abc123'));
  t.equal(pushed.code, 0, `push exits 0 (${pushed.err.join(' ')})`);
  const digest = digestOf(pushed);
  t.ok(digest, `push prints the pinned reference: ${pushed.out[0]}`);
  t.match(pushed.out[1], /uploaded 4 of its 4 blob/, 'three files and the empty config were uploaded');

  const resolved = await crane(registry, 'digest', `${registry.host}/team/app-migrations:v1`);
  t.equal(resolved.stdout.trim(), digest, 'crane resolves the tag to the digest push printed');
  const fetched = await crane(registry, 'manifest', `${registry.host}/team/app-migrations@${digest}`);
  t.equal(sha256Digest(fetched.stdout), digest, 'the manifest crane fetches hashes to that digest');
  const manifest = JSON.parse(fetched.stdout) as { mediaType: string; artifactType: string; config: unknown; layers: { mediaType: string; digest: string; size: number; annotations: Record<string, string> }[]; annotations: Record<string, string> };
  t.equal(manifest.mediaType, MANIFEST_MEDIA_TYPE);
  t.equal(manifest.artifactType, ARTIFACT_TYPES.migrations, 'the artifact type says a migration directory');
  t.same(manifest.config, EMPTY_CONFIG, 'the config is the empty descriptor');
  t.same(manifest.annotations, { 'org.opencontainers.image.revision': 'abc123', 'org.opencontainers.image.source': 'https://git.example/app' },
    'the annotations given, and no created stamp');
  t.same(manifest.layers.map((l) => l.annotations[TITLE_ANNOTATION]), ['10_index.up.sql', '1_accounts.up.sql', '2_orders.up.sql'], 'one layer per file, in name order');
  for (const layer of manifest.layers) {
    const name = layer.annotations[TITLE_ANNOTATION]!;
    t.equal(layer.mediaType, FILE_MEDIA_TYPE);
    const blob = await crane(registry, 'blob', `${registry.host}/team/app-migrations@${layer.digest}`);
    t.equal(blob.stdout, migrationFiles[name as keyof typeof migrationFiles], `crane's blob of ${name} is the file`);
    t.equal(layer.size, Buffer.byteLength(blob.stdout), `${name}'s size`);
  }

  const again = remember(await pushWithCredentials(dir, `${registry.host}/team/app-migrations:v1-again`,
    '--annotation', 'org.opencontainers.image.revision=abc123', '--annotation', 'org.opencontainers.image.source=https://git.example/app'));
  t.equal(digestOf(again), digest, 'the same files and annotations, given in another order, make the same digest');
  t.match(again.out[1], /uploaded 0 of its 4 blob/, 'and upload nothing the registry holds');
  const other = remember(await pushWithCredentials(dir, `${registry.host}/team/app-migrations:v2`, '--annotation', 'org.opencontainers.image.revision=def456'));
  t.not(digestOf(other), digest, 'another annotation is another artifact');

  const byDigest = remember(await pushWithCredentials(dir, `${registry.host}/team/pinned@${digestOf(other)}`, '--annotation', 'org.opencontainers.image.revision=def456'));
  t.equal(byDigest.code, 0, 'a reference by the content\'s own digest is pushed untagged');
  t.equal((await crane(registry, 'digest', `${registry.host}/team/pinned@${digestOf(other)}`)).code, 0, 'and crane finds it by that digest');
});

t.test('a desired schema over 1 MiB', async (t) => {
  const statements = Array.from({ length: 16_000 }, (_, i) => `CREATE TABLE t${i} (id bigint PRIMARY KEY, payload text NOT NULL DEFAULT '');\n`);
  const schema = statements.join('');
  t.ok(Buffer.byteLength(schema) > 1 << 20, `the schema is ${Buffer.byteLength(schema)} bytes, more than a ConfigMap holds`);
  const dir = await directory('schema', { 'schema.sql': schema });
  const pushed = remember(await pushWithCredentials(dir, `${registry.host}/team/app-schema:v1`));
  t.equal(pushed.code, 0, `push exits 0 (${pushed.err.join(' ')})`);
  const manifest = JSON.parse((await crane(registry, 'manifest', `${registry.host}/team/app-schema:v1`)).stdout) as { artifactType: string; layers: { digest: string }[] };
  t.equal(manifest.artifactType, ARTIFACT_TYPES.schema, 'a directory of one schema.sql is a schema artifact');
  const blob = await crane(registry, 'blob', `${registry.host}/team/app-schema@${manifest.layers[0]!.digest}`);
  t.equal(blob.stdout, schema, 'crane fetches the whole schema back');
});

t.test('refusals name their reason and push nothing', async (t) => {
  const dir = await directory('refused', { '1_a.up.sql': 'CREATE TABLE a ();\n' });
  const wrongConfig = join(scratch, 'wrong.json');
  await writeFile(wrongConfig, JSON.stringify({ auths: { [registry.host]: { username: registry.username, password: 'not-the-password' } } }));
  const emptyConfig = join(scratch, 'empty.json');
  await writeFile(emptyConfig, JSON.stringify({ auths: {} }));

  const wrong = remember(await push([dir, `${registry.host}/team/refused:wrong`, '--registry-config', wrongConfig, '--ca-file', registry.caFile]));
  t.equal(wrong.code, 1);
  t.match(wrong.err.join('\n'), /refused the credentials given for repository:team\/refused:pull,push \(401\)/, 'wrong credentials');
  const none = remember(await push([dir, `${registry.host}/team/refused:none`, '--registry-config', emptyConfig, '--ca-file', registry.caFile]));
  t.equal(none.code, 1);
  t.match(none.err.join('\n'), /asks for credentials \(401\) and none were given/, 'no credentials');
  const untrusted = remember(await push([dir, `${registry.host}/team/refused:untrusted`, '--registry-config', config]));
  t.equal(untrusted.code, 1);
  t.match(untrusted.err.join('\n'), /could not be reached \(HEAD \/v2\/team\/refused\/blobs\/sha256:[a-f0-9]+\): .*(certificate|self-signed|issuer)/i, 'a certificate no trusted CA signed');
  const notDigest = remember(await pushWithCredentials(dir, `${registry.host}/team/refused@sha256:${'0'.repeat(64)}`));
  t.equal(notDigest.code, 1);
  t.match(notDigest.err.join('\n'), /packs to sha256:[a-f0-9]{64}, not the digest the reference names/, 'a digest that is not the content\'s');

  const nested = await directory('nested', { '1_a.up.sql': 'SELECT 1;\n' });
  await mkdir(join(nested, 'sub'));
  await symlink(join(nested, '1_a.up.sql'), join(nested, '2_b.up.sql'));
  const notFlat = remember(await pushWithCredentials(nested, `${registry.host}/team/refused:nested`));
  t.equal(notFlat.code, 1);
  t.match(notFlat.err.join('\n'), /holds entries that are not regular files \(2_b\.up\.sql, sub\)/, 'a subdirectory and a link are named, not left out');
  const badName = await directory('bad-name', { 'schema.sql': 'SELECT 1;\n', 'notes with spaces.txt': 'x' });
  const named = remember(await pushWithCredentials(badName, `${registry.host}/team/refused:badname`, '--kind', 'schema'));
  t.equal(named.code, 1);
  t.match(named.err.join('\n'), /a schema artifact holds exactly one file, schema\.sql.*"notes with spaces\.txt" is not a file name/, 'every problem of the files at once');

  const usage = remember(await pushWithCredentials(dir, 'team/refused:v1'));
  t.equal(usage.code, 2, 'a reference without a registry is a usage error');
  t.match(usage.err.join('\n'), /"team" is not a registry host/);
  const sha512 = remember(await pushWithCredentials(dir, `${registry.host}/team/refused@sha512:${'a'.repeat(128)}`));
  t.equal(sha512.code, 2);
  t.match(sha512.err.join('\n'), /not sha256:<64 lowercase hex>/, 'only sha256 digests');
  const wrongFlag = remember(await push([dir, `${registry.host}/team/refused:v1`, '-n', 'default']));
  t.equal(wrongFlag.code, 2, '-n is not push\'s');

  t.same(await tags('team/refused'), [], 'no refused push left a tag');
  const control = remember(await pushWithCredentials(dir, `${registry.host}/team/refused:control`));
  t.equal(control.code, 0, 'the same directory with the right credentials is pushed (the refusals were not the directory\'s)');
  t.same(await tags('team/refused'), ['control']);
});

t.test('a registry that is down', async (t) => {
  const down = await startRegistry(pki);
  await down.stop();
  const dir = await directory('down', { '1_a.up.sql': 'SELECT 1;\n' });
  const pushed = remember(await push([dir, `${down.host}/team/app:v1`, '--registry-config', join(down.dockerConfigDir, 'config.json'), '--ca-file', down.caFile]));
  t.equal(pushed.code, 1);
  t.match(pushed.err.join('\n'), new RegExp(`${down.host.replace(/\./g, '\\.')} could not be reached \\(HEAD [^)]+\\): .*ECONNREFUSED`), 'the address that refused the connection is named');
});

t.test('no output holds a credential', async (t) => {
  t.ok(everyOutput.length > 20, `${everyOutput.length} lines of output were kept`);
  const secrets = [registry.password, Buffer.from(`${registry.username}:${registry.password}`).toString('base64'), 'not-the-password'];
  for (const secret of secrets) t.notOk(everyOutput.some((line) => line.includes(secret)), `no line holds ${secret.slice(0, 3)}…`);
});
