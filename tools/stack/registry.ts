// The stack's OCI registry (tools/registry: go-containerregistry's pkg/registry behind TLS and basic auth) and
// crane, the independent client the tests hold `kubectl ptah push` and the runner to. Both are built by
// tools/registry/build.sh into ~/.cache/ptah-registry; test/run.ts starts that build beside the tests
// (buildRegistryAside), and a test that needs it first waits on the script's lock. Each test starts its own registry:
// it takes milliseconds, and a test may stop its registry to see what "down" does.
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:https';
import { runBuildScript, runTrackedBuild } from './controlplane.js';
import type { Pki } from './pki.js';
import { freePort } from './ports.js';
import { startProcess, type ManagedProcess } from './processes.js';
import { waitFor } from './wait.js';

const SCRIPT = 'tools/registry/build.sh';

let built: Promise<string> | undefined;
/** The directory holding `registry` and `crane`, built (or waited for) by the build script. */
export function registryBinaries(): Promise<string> {
  built ??= runBuildScript(SCRIPT);
  return built;
}

/** Runs the build under `nice -n 19`, tracked so that an interrupted harness kills it. Resolves to the directory. */
export function buildRegistryAside(): Promise<string> {
  return runTrackedBuild(SCRIPT, { name: 'registry build', nice: 19 });
}

export interface RunningRegistry {
  /** `127.0.0.1:<port>`: what a reference names. */
  host: string;
  username: string;
  password: string;
  /** The CA that signed its serving certificate (the stack's), PEM. */
  caPem: string;
  caFile: string;
  /** A directory holding a Docker `config.json` with the credentials: DOCKER_CONFIG for crane and `kubectl ptah push`. */
  dockerConfigDir: string;
  /** crane's path and the environment it needs to trust the registry and find the credentials. */
  crane: { path: string; env: NodeJS.ProcessEnv };
  process: ManagedProcess;
  stop(): Promise<void>;
}

export interface RegistryOptions {
  /** false: no referrers API (404), so clients must use the tag-schema fallback. */
  referrers?: boolean;
}

export async function startRegistry(pki: Pki, options: RegistryOptions = {}): Promise<RunningRegistry> {
  const bin = await registryBinaries();
  const dir = await mkdtemp(join(tmpdir(), 'ptah-registry-'));
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const serving = await pki.issueServing(`registry-${port}`, { ips: ['127.0.0.1'], dns: ['localhost'] });
  const username = `pusher-${randomBytes(3).toString('hex')}`;
  const password = randomBytes(18).toString('base64url');
  const dockerConfigDir = join(dir, 'docker');
  await mkdir(dockerConfigDir);
  await writeFile(join(dockerConfigDir, 'config.json'), JSON.stringify({ auths: { [host]: { auth: Buffer.from(`${username}:${password}`).toString('base64') } } }));
  const proc = startProcess({
    name: `registry ${host}`,
    command: join(bin, 'registry'),
    args: ['-address', host, '-tls-cert', serving.cert, '-tls-key', serving.key, `-referrers=${options.referrers ?? true}`],
    logFile: join(dir, 'registry.log'),
    env: { ...process.env, REGISTRY_USERNAME: username, REGISTRY_PASSWORD: password },
  });
  await waitFor(async () => ((await challenge(host, pki.caPem)) === 401 ? true : undefined), {
    timeoutMs: 15_000, what: `the registry at ${host} to challenge GET /v2/ with 401`, process: proc,
  });
  return {
    host, username, password, caPem: pki.caPem, caFile: pki.ca.cert, dockerConfigDir,
    crane: { path: join(bin, 'crane'), env: { ...process.env, DOCKER_CONFIG: dockerConfigDir, SSL_CERT_FILE: pki.ca.cert } },
    process: proc,
    stop: async () => { await proc.stop(2_000); },
  };
}

/** The status of an unauthenticated `GET /v2/`, or undefined while nothing answers. */
function challenge(host: string, ca: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request(`https://${host}/v2/`, { ca, timeout: 1_000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.once('error', () => resolve(undefined));
    req.once('timeout', () => req.destroy());
    req.end();
  });
}
