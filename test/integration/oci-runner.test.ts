// The runner's registry steps as a Job runs them, as real processes against a real registry with basic auth over TLS:
// `--operation resolve` (given the registry Secret and the pinned policy, never a database URL) frames the artifact
// pinned to its digest, or a refusal whose code names the check that failed; `--fetch-artifact` (the init
// container of a database Job) writes the pinned digest's files and nothing else. The frame is read with the
// manager's own parser; the files are held to the pushed ones byte for byte; no output holds a credential.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifactDigest } from '../../src/shared/artifact.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';
import { RegistryClient } from '../../src/shared/oci/registry-client.js';
import { parseResultFor, parseSummaryFor, type RunnerResult } from '../../src/shared/runner-protocol.js';
import { createPki } from '../../tools/stack/pki.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { startRegistry } from '../../tools/stack/registry.js';
import { pushDirectory } from '../harness/oci-push.js';
import { FIXTURE_DIR, FIXTURE_FILE, pushFixture, replay, type SignatureFixtures } from '../fixtures/oci/signature-fixtures.js';

const ID = `sha256:${'1'.repeat(64)}`;
const fixtures = JSON.parse(await readFile(FIXTURE_FILE, 'utf8')) as SignatureFixtures;
const scratch = await mkdtemp(join(tmpdir(), 'ptah-oci-runner-'));
const pki = await createPki(join(scratch, 'pki'));
const registry = await startRegistry(pki);
t.teardown(() => registry.stop());
const fixtureFiles = new Map(await Promise.all((await readdir(FIXTURE_DIR)).map(async (name) => [name, await readFile(join(FIXTURE_DIR, name))] as const)));
const signerKey = fixtures.keys.signer.trim().split('\n').map((l) => `      ${l}`).join('\n');
const STRICT_POLICY = `version: 1
requiredAnnotations: [org.opencontainers.image.source]
artifactTypes: [application/vnd.ptah-operator.migrations.v1]
signatureKeys:
  - name: release
    publicKey: |
${signerKey}
`;
const said: string[] = [];

/** A mounted policy ConfigMap key, and the digest the manager would pin it at. */
async function policyFile(name: string, text: string): Promise<{ path: string; digest: string }> {
  const dir = join(scratch, `policy-${name}`);
  await mkdir(dir);
  await writeFile(join(dir, 'policy.yaml'), text);
  return { path: join(dir, 'policy.yaml'), digest: sha256Digest(text) };
}

async function registryConfig(name: string, username: string, password: string): Promise<string> {
  const dir = join(scratch, `docker-${name}`);
  await mkdir(dir);
  const auth = Buffer.from(`${username}:${password}`).toString('base64');
  await writeFile(join(dir, 'config.json'), JSON.stringify({ auths: { [registry.host]: { auth } } }));
  return dir;
}

interface Run { code: number | null; stdout: string; stderr: string; terminationMessage: string }

async function runRunner(args: string[], env: Record<string, string>): Promise<Run> {
  const termination = join(scratch, `termination-${Math.random().toString(36).slice(2)}`);
  await writeFile(termination, '');
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'src/runner/main.ts'), ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: scratch, TMPDIR: tmpdir(), PTAH_TERMINATION_MESSAGE_PATH: termination, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => { stdout += d.toString('utf8'); });
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString('utf8'); });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const run = { code, stdout, stderr, terminationMessage: await readFile(termination, 'utf8') };
  said.push(run.stdout, run.stderr, run.terminationMessage);
  return run;
}

const baseEnv = (): Record<string, string> => ({
  PTAH_OPERATION_ID: ID,
  PTAH_RUNNER_PROTOCOL_VERSION: '1',
  PTAH_EXECUTOR_IDENTITY: ownExecutorIdentity(),
  PTAH_OCI_ARTIFACT_KIND: 'migrations',
  PTAH_OCI_CA_FILE: registry.caFile,
  DOCKER_CONFIG: registry.dockerConfigDir,
});

async function resolve(reference: string, policy: { path: string; digest: string }, env: Record<string, string> = {}): Promise<{ run: Run; result: RunnerResult<'resolve'> }> {
  const run = await runRunner(['--operation', 'resolve'], {
    ...baseEnv(),
    PTAH_OCI_REFERENCE: reference,
    PTAH_VERIFICATION_POLICY_FILE: policy.path,
    PTAH_EXPECTED_VERIFICATION_POLICY_DIGEST: policy.digest,
    ...env,
  });
  return { run, result: parseResultFor(run.stdout, 'resolve', ID) };
}

async function refusedResolve(t: Test, what: string, code: string, message: RegExp, ...args: Parameters<typeof resolve>): Promise<void> {
  const { run, result } = await resolve(...args);
  t.equal(run.code, 0, `${what}: a refusal is still a frame (exit 0)`);
  t.equal(result.error?.code, code, `${what}: ${code}`);
  t.match(result.error?.message, message, `${what}: the message says which check failed`);
  t.equal(result.resolvedArtifact, undefined, `${what}: nothing is pinned`);
  t.equal(parseSummaryFor(run.terminationMessage, 'resolve', ID).errorCode, code, `${what}: the summary carries the code`);
}

const strict = await policyFile('strict', STRICT_POLICY);
const open = await policyFile('open', 'version: 1\n');
let signedDigest = '';

t.test('resolve: a signed tag is pinned to its digest, with what the policy was met by, and names no database', async (t) => {
  signedDigest = await pushFixture(registry, 'app/migrations', 'signed');
  t.equal(signedDigest, fixtures.signed.digest, 'the fixture cosign signed');
  await replay(new RegistryClient(registry.host, { ca: registry.caPem, credentials: { username: registry.username, password: registry.password } }), 'app/migrations', fixtures.signed.withReferrersApi);
  const { run, result } = await resolve(`${registry.host}/app/migrations:v1`, strict);
  t.equal(run.code, 0);
  t.equal(result.error, undefined, 'no error');
  t.equal(result.childExitCode, -1, 'no executor was started');
  t.equal(result.coordinationDigest, undefined, 'no realm is named');
  t.equal(result.targetIdentityDigest, undefined, 'no database is named');
  t.strictSame(result.resolvedArtifact, {
    pinnedReference: `${registry.host}/app/migrations@${signedDigest}`,
    digest: signedDigest,
    contentDigest: artifactDigest(fixtureFiles),
    artifactType: 'application/vnd.ptah-operator.migrations.v1',
    verificationPolicyDigest: strict.digest,
    verifiedKeys: ['release'],
    files: fixtureFiles.size,
    bytes: [...fixtureFiles.values()].reduce((n, b) => n + b.byteLength, 0),
  }, 'the pin: digest, content digest (as a ConfigMap of the same files has), type, policy and the key that verified');
  const summary = parseSummaryFor(run.terminationMessage, 'resolve', ID);
  t.equal(summary.errorCode, undefined, 'the summary agrees');
});

t.test('resolve: each refusal has its own code and pins nothing', async (t) => {
  const unsignedDir = join(scratch, 'unsigned');
  await mkdir(unsignedDir);
  await writeFile(join(unsignedDir, '1_a.up.sql'), 'CREATE TABLE a (id int);\n');
  await pushDirectory(registry, unsignedDir, 'app/unsigned:v1', { 'org.opencontainers.image.source': 'https://git.example/x' });
  const schemaDir = join(scratch, 'schema');
  await mkdir(schemaDir);
  await writeFile(join(schemaDir, 'schema.sql'), 'CREATE TABLE s (id int);\n');
  await pushDirectory(registry, schemaDir, 'app/schema:v1', { 'org.opencontainers.image.source': 'https://git.example/x' });
  const bare = join(scratch, 'bare');
  await mkdir(bare);
  await writeFile(join(bare, '1_a.up.sql'), 'CREATE TABLE a (id int);\n');
  await pushDirectory(registry, bare, 'app/bare:v1');
  const down = await startRegistry(pki);
  await down.stop();
  const downConfig = join(scratch, 'docker-down');
  await mkdir(downConfig);
  await writeFile(join(downConfig, 'config.json'), JSON.stringify({ auths: { [down.host]: { auth: Buffer.from('u:p').toString('base64') } } }));
  const wrongPassword = await registryConfig('wrong', registry.username, 'not-the-password');
  const otherHost = join(scratch, 'docker-other');
  await mkdir(otherHost);
  await writeFile(join(otherHost, 'config.json'), JSON.stringify({ auths: { 'elsewhere.example:5000': { auth: Buffer.from('u:p').toString('base64') } } }));

  await refusedResolve(t, 'an unsigned artifact under a policy naming a key', 'artifact_refused', /no signature .*verifies|signature/i, `${registry.host}/app/unsigned:v1`, strict);
  await refusedResolve(t, 'a schema where migrations are expected', 'artifact_type_mismatch', /application\/vnd\.ptah-operator\.schema\.v1/, `${registry.host}/app/schema:v1`, open);
  await refusedResolve(t, 'a missing required annotation', 'artifact_refused', /org\.opencontainers\.image\.source/, `${registry.host}/app/bare:v1`, await policyFile('annotated', 'version: 1\nrequiredAnnotations: [org.opencontainers.image.source]\n'));
  await refusedResolve(t, 'a tag where the policy allows none', 'artifact_refused', /tag/, `${registry.host}/app/bare:v1`, await policyFile('no-tags', 'version: 1\nallowTags: false\n'));
  await refusedResolve(t, 'a digest the tag does not name', 'registry_digest_mismatch', /resolves it to/, `${registry.host}/app/bare:v1@${signedDigest}`, open);
  await refusedResolve(t, 'refused credentials', 'registry_unauthorized', /./, `${registry.host}/app/bare:v1`, open, { DOCKER_CONFIG: wrongPassword });
  await refusedResolve(t, 'a Secret with no entry for the registry', 'registry_unauthorized', /holds no credentials for/, `${registry.host}/app/bare:v1`, open, { DOCKER_CONFIG: otherHost });
  await refusedResolve(t, 'a registry that is down', 'registry_unreachable', /./, `${down.host}/app/bare:v1`, open, { DOCKER_CONFIG: downConfig });
  await refusedResolve(t, 'a missing tag', 'artifact_not_found', /./, `${registry.host}/app/bare:v2`, open);
  await refusedResolve(t, 'a policy that is not the pinned one', 'verification_policy_mismatch', /not the one the manager pinned/, `${registry.host}/app/bare:v1`, { path: open.path, digest: strict.digest });
  await refusedResolve(t, 'no reference', 'missing_input', /PTAH_OCI_REFERENCE is not set/, '', open);

  // Controls: the same artifacts and registry do resolve when the check is met.
  const control = await resolve(`${registry.host}/app/bare:v1`, open);
  t.equal(control.result.error, undefined, 'control: the bare artifact resolves under an open policy with the right credentials');
});

t.test('fetch: the pinned digest\'s files land in the empty directory; another content digest or a tag writes nothing', async (t) => {
  const fetch = async (name: string, env: Record<string, string>) => {
    const dir = join(scratch, `fetched-${name}`);
    await mkdir(dir);
    const run = await runRunner(['--fetch-artifact'], { ...baseEnv(), PTAH_ARTIFACT_DIR: dir, ...env });
    return { run, dir, files: await readdir(dir) };
  };
  const pinned = `${registry.host}/app/migrations@${signedDigest}`;
  const ok = await fetch('ok', { PTAH_OCI_REFERENCE: pinned, PTAH_EXPECTED_ARTIFACT_DIGEST: artifactDigest(fixtureFiles) });
  t.equal(ok.run.code, 0, 'exit 0');
  t.match(ok.run.terminationMessage, /^PTAH_FETCH_V1 \{"bytes":\d+,"files":\d+\}\n$/, 'the termination message says what was fetched');
  t.strictSame(ok.files.sort(), [...fixtureFiles.keys()].sort(), 'every file, nothing else');
  for (const [name, bytes] of fixtureFiles) t.ok((await readFile(join(ok.dir, name))).equals(bytes), `${name} byte for byte`);

  const other = await fetch('other', { PTAH_OCI_REFERENCE: pinned, PTAH_EXPECTED_ARTIFACT_DIGEST: `sha256:${'0'.repeat(64)}` });
  t.equal(other.run.code, 1, 'another content digest: exit 1');
  t.match(other.run.terminationMessage, /"code":"registry_digest_mismatch"/);
  t.strictSame(other.files, [], 'and nothing written');

  const tagged = await fetch('tagged', { PTAH_OCI_REFERENCE: `${registry.host}/app/migrations:v1`, PTAH_EXPECTED_ARTIFACT_DIGEST: artifactDigest(fixtureFiles) });
  t.equal(tagged.run.code, 1, 'a tag: exit 1');
  t.match(tagged.run.terminationMessage, /"code":"invalid_input".*not pinned to a digest/);
  t.strictSame(tagged.files, [], 'and nothing written');

  const denied = await fetch('denied', { PTAH_OCI_REFERENCE: pinned, PTAH_EXPECTED_ARTIFACT_DIGEST: artifactDigest(fixtureFiles), DOCKER_CONFIG: await registryConfig('denied', 'someone', 'wrong') });
  t.equal(denied.run.code, 1, 'refused credentials: exit 1');
  t.match(denied.run.terminationMessage, /"code":"registry_unauthorized"/);
  t.strictSame(denied.files, [], 'and nothing written');
});

t.test('a message that would carry the registry password carries [REDACTED] instead', async (t) => {
  // The reference is echoed in the refusal: the runner knows the mounted Secret's values and hides them.
  const leaky = `${registry.host}/app/${registry.password}:v1`;
  const { result } = await resolve(leaky, open);
  t.ok(result.error, 'refused');
  t.match(result.error?.message, /\[REDACTED\]/, 'resolve: the echoed password is redacted');
  const dir = join(scratch, 'fetched-leaky');
  await mkdir(dir);
  const run = await runRunner(['--fetch-artifact'], { ...baseEnv(), PTAH_ARTIFACT_DIR: dir, PTAH_OCI_REFERENCE: leaky, PTAH_EXPECTED_ARTIFACT_DIGEST: artifactDigest(fixtureFiles) });
  t.equal(run.code, 1);
  t.match(run.terminationMessage, /\[REDACTED\]/, 'fetch: the echoed password is redacted');
});

t.test('no output of any run holds a credential', async (t) => {
  const auth = Buffer.from(`${registry.username}:${registry.password}`).toString('base64');
  t.ok(said.length >= 30, `${said.length} outputs were kept`);
  for (const secret of [registry.password, auth, 'not-the-password']) {
    t.notOk(said.some((text) => text.includes(secret)), `no output holds ${secret === auth ? 'the base64 auth' : 'a password'}`);
  }
});
