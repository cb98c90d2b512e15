// What reading an OCI artifact costs the Job side (src/runner/oci/source.ts) against the local registry (TLS, basic
// auth): resolving a tag (HEAD, manifest, policy), and pulling the pinned digest's files into a directory (every blob
// bounded and hashed), per MB, for one large schema.sql and for a directory of 1,000 migration files. The reference,
// in the same run: the same bytes fetched by bare HTTPS GETs with the same credentials and agent, no check at all;
// and crane, an independent client, fetching the large blob (its process start included). See bench/README.md.
//   npx tsx bench/oci.ts [--runs 7]
import { execFileSync } from 'node:child_process';
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
  console.log(`| ${c.name} | ${mb.toFixed(2)} | ${pushMs.toFixed(0)} | ${resolveMs.toFixed(1)} | ${pullMs.toFixed(1)} | ${(pullMs / mb).toFixed(1)} | ${bareMs.toFixed(1)} | ${(pullMs / bareMs).toFixed(2)}× | ${craneMs === undefined ? '–' : craneMs.toFixed(1)} |`);
}
await registry.stop();
await rm(scratch, { recursive: true });
