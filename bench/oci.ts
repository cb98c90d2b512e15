// What reading an OCI artifact costs the Job side (src/runner/oci/source.ts) against the local registry (TLS, basic
// auth): resolving a tag (HEAD, manifest, policy), and pulling the pinned digest's files into a directory (every blob
// bounded and hashed), per MB, for one large schema.sql and for a directory of 1,000 migration files. The reference,
// in the same run: the same bytes fetched by bare HTTPS GETs with the same credentials and agent, no check at all;
// and crane, an independent client, fetching the large blob (its process start included). See bench/README.md.
// A second table times the same two steps as a Job runs them: the compiled runner (dist/, as the runner image holds
// it) as its own process, `--operation resolve` (with the pinned policy) and `--fetch-artifact` (the database Job's
// init container), against a bare `node -e 0` started in the same run (what any Pod's process start costs).
//   npx tsx bench/oci.ts [--runs 7]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pullOciSource, resolveOciSource } from '../src/runner/oci/source.js';
import { parseVerificationPolicy } from '../src/shared/verification-policy.js';
import { RegistryClient } from '../src/shared/oci/registry-client.js';
import { eachAtMost } from '../src/shared/oci/requests.js';
import { pushDirectory } from '../test/harness/oci-push.js';
import { sha256Digest } from '../src/shared/canonical.js';
import { ownExecutorIdentity } from '../src/shared/executor-identity.js';
import { buildDist } from '../tools/stack/build.js';
import { REPO_ROOT } from '../tools/stack/paths.js';
import { createPki } from '../tools/stack/pki.js';
import { startRegistry, type RunningRegistry } from '../tools/stack/registry.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
const runs = Number(values.runs);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

async function time(step: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  await step(); // warm: TLS session, the agent's sockets, the JIT
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await step();
    times.push(ms(start));
  }
  return median(times);
}

/** One bare GET of a blob, the body read to its end and thrown away: the floor under a pull. */
function bareGet(reg: RunningRegistry, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const auth = `Basic ${Buffer.from(`${reg.username}:${reg.password}`).toString('base64')}`;
    request(`https://${reg.host}${path}`, { ca: reg.caPem, headers: { authorization: auth } }, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.byteLength));
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`${path}: ${res.statusCode}`))));
    }).on('error', reject).end();
  });
}

const scratch = await mkdtemp(join(tmpdir(), 'ptah-bench-oci-'));
const registry = await startRegistry(await createPki(join(scratch, 'pki')));
const dockerConfigJson = await readFile(join(registry.dockerConfigDir, 'config.json'), 'utf8');
const policy = parseVerificationPolicy('version: 1\nrequiredAnnotations: [org.opencontainers.image.source]');
const client = new RegistryClient(registry.host, { ca: registry.caPem, credentials: { username: registry.username, password: registry.password } });

interface Case { name: string; kind: 'schema' | 'migrations'; files: Map<string, string> }
const line = (i: number) => `CREATE TABLE t${i} (id bigint PRIMARY KEY, payload text NOT NULL DEFAULT '', created timestamptz NOT NULL DEFAULT now());\n`;
const schemaOf = (bytes: number) => { let s = ''; for (let i = 0; s.length < bytes; i++) s += line(i); return s; };
const cases: Case[] = [
  { name: 'schema.sql, 1 MiB', kind: 'schema', files: new Map([['schema.sql', schemaOf(1 << 20)]]) },
  { name: 'schema.sql, 16 MiB', kind: 'schema', files: new Map([['schema.sql', schemaOf(16 << 20)]]) },
  { name: '1,000 migration files', kind: 'migrations', files: new Map(Array.from({ length: 1000 }, (_, i) => [`${i + 1}_step.up.sql`, `${line(i)}${line(i + 1000)}`])) },
];

await buildDist();
const RUNNER = join(REPO_ROOT, 'dist/src/runner/main.js');
const POLICY_TEXT = 'version: 1\nrequiredAnnotations: [org.opencontainers.image.source]\n';
await writeFile(join(scratch, 'policy.yaml'), POLICY_TEXT);
await writeFile(join(scratch, 'termination'), '');
/** The runner as a Job's container runs it; throws unless it exits 0 (a frame for resolve, the files for fetch). */
function runnerProcess(args: string[], env: Record<string, string>): void {
  const result = spawnSync(process.execPath, [RUNNER, ...args], { env: { PATH: process.env.PATH ?? '', HOME: scratch, TMPDIR: scratch, ...env }, maxBuffer: 64 << 20 });
  if (result.status !== 0) throw new Error(`runner ${args.join(' ')} exited ${result.status}: ${result.stderr.toString()}`);
}
const inJob: string[] = [];

console.log(`# bench/oci.ts: ${runs} runs each, median; ${cpus().length} CPUs, Node ${process.version}, registry ${registry.host}`);
console.log('| artifact | MB | push (ms) | resolve (ms) | pull (ms) | pull ms/MB | bare GETs (ms) | pull / bare | crane blob (ms) |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const c of cases) {
  const dir = join(scratch, c.name.replace(/[^a-z0-9]+/gi, '-'));
  await mkdir(dir);
  for (const [name, content] of c.files) await writeFile(join(dir, name), content);
  const repo = `bench/${c.kind}-${c.files.size}`;
  const pushStart = process.hrtime.bigint();
  await pushDirectory(registry, dir, `${repo}:v1`, { 'org.opencontainers.image.source': 'https://git.example/bench' });
  const pushMs = ms(pushStart);
  const inputs = { reference: `${registry.host}/${repo}:v1`, kind: c.kind, dockerConfigJson, ca: registry.caPem } as const;
  const resolved = await resolveOciSource(inputs, policy);
  const resolveMs = await time(() => resolveOciSource(inputs, policy));
  let n = 0;
  const pullMs = await time(async () => {
    const out = join(scratch, `out-${n++}`);
    await mkdir(out);
    await pullOciSource({ ...inputs, reference: resolved.pinned, contentDigest: resolved.contentDigest }, out);
    await rm(out, { recursive: true });
  });
  const manifest = JSON.parse((await client.manifest(repo, resolved.digest)).toString('utf8')) as { layers: { digest: string }[] };
  const bareMs = await time(async () => {
    await bareGet(registry, `/v2/${repo}/manifests/${resolved.digest}`);
    await eachAtMost(manifest.layers, 4, async (l) => { await bareGet(registry, `/v2/${repo}/blobs/${l.digest}`); });
  });
  const craneMs = manifest.layers.length === 1 ? await time(async () => {
    execFileSync(registry.crane.path, ['blob', `${registry.host}/${repo}@${manifest.layers[0]!.digest}`], { env: registry.crane.env, maxBuffer: 64 << 20 });
  }) : undefined;
  const mb = resolved.bytes / (1 << 20);
  const jobEnv = {
    PTAH_OPERATION_ID: `sha256:${'1'.repeat(64)}`, PTAH_RUNNER_PROTOCOL_VERSION: '1', PTAH_EXECUTOR_IDENTITY: ownExecutorIdentity(),
    PTAH_OCI_ARTIFACT_KIND: c.kind, PTAH_OCI_CA_FILE: registry.caFile, DOCKER_CONFIG: registry.dockerConfigDir,
    PTAH_TERMINATION_MESSAGE_PATH: join(scratch, 'termination'),
  };
  const resolveProcMs = await time(async () => runnerProcess(['--operation', 'resolve'], {
    ...jobEnv, PTAH_OCI_REFERENCE: inputs.reference, PTAH_VERIFICATION_POLICY_FILE: join(scratch, 'policy.yaml'), PTAH_EXPECTED_VERIFICATION_POLICY_DIGEST: sha256Digest(POLICY_TEXT),
  }));
  const fetchProcMs = await time(async () => {
    const out = join(scratch, `fetched-${n++}`);
    await mkdir(out);
    runnerProcess(['--fetch-artifact'], { ...jobEnv, PTAH_OCI_REFERENCE: resolved.pinned, PTAH_ARTIFACT_DIR: out, PTAH_EXPECTED_ARTIFACT_DIGEST: resolved.contentDigest });
    await rm(out, { recursive: true });
  });
  const nodeMs = await time(async () => { execFileSync(process.execPath, ['-e', '0']); });
  inJob.push(`| ${c.name} | ${resolveProcMs.toFixed(0)} | ${fetchProcMs.toFixed(0)} | ${((fetchProcMs - nodeMs) / (resolved.bytes / (1 << 20))).toFixed(1)} | ${nodeMs.toFixed(0)} | ${(resolveProcMs / nodeMs).toFixed(2)}× | ${(fetchProcMs / nodeMs).toFixed(2)}× |`);
  console.log(`| ${c.name} | ${mb.toFixed(2)} | ${pushMs.toFixed(0)} | ${resolveMs.toFixed(1)} | ${pullMs.toFixed(1)} | ${(pullMs / mb).toFixed(1)} | ${bareMs.toFixed(1)} | ${(pullMs / bareMs).toFixed(2)}× | ${craneMs === undefined ? '–' : craneMs.toFixed(1)} |`);
}
console.log('\n# In the Job: the compiled runner as its own process, against a bare node start');
console.log('| artifact | resolve process (ms) | fetch process (ms) | fetch ms/MB beyond node start | node -e 0 (ms) | resolve / node | fetch / node |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const row of inJob) console.log(row);
await registry.stop();
await rm(scratch, { recursive: true });
