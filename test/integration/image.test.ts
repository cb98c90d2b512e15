// The image archive tools/image/build.sh builds (reused from its cache when its inputs are unchanged): the OCI
// layout is checked blob by blob (index → manifest → config → layers, every digest and size), the config says
// non-root and node on dist/src/main.js, umoci (an independent OCI implementation) unpacks it, the filesystem holds
// the app and its production dependencies and no shell, and the image's own node runs the manager, the runner (by
// the Job's command, /usr/local/bin/ptah-runner) and the executor chrooted into the unpacked rootfs as uid 65532 on
// a read-only root, each refusing a bad input with its own message.
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MANAGER_IMAGE } from '../../src/shared/api/deployment.js';
import { RUNNER_COMMAND, RUNTIME_ID } from '../../src/shared/job/build.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; timeout?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: REPO_ROOT, env: options.env ?? process.env, timeout: options.timeout ?? 120_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}
interface ImageConfig {
  architecture: string;
  os: string;
  config: { User?: string; Entrypoint?: string[]; Cmd?: string[]; Env?: string[]; WorkingDir?: string };
  rootfs: { type: string; diff_ids: string[] };
}

const sha256 = (bytes: Buffer): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/**
 * Reads the blob `d` names from the layout and checks it is what `d` says: its digest and size. Returns the bytes, or
 * the problems found.
 */
async function blob(layout: string, d: Descriptor): Promise<{ bytes: Buffer; problems: string[] }> {
  const [algorithm, hex] = d.digest.split(':');
  const bytes = await readFile(join(layout, 'blobs', algorithm ?? '', hex ?? ''));
  const problems: string[] = [];
  if (sha256(bytes) !== d.digest) problems.push(`${d.digest}: the blob's digest is ${sha256(bytes)}`);
  if (bytes.length !== d.size) problems.push(`${d.digest}: ${bytes.length} bytes, the descriptor says ${d.size}`);
  return { bytes, problems };
}

interface Checked {
  manifest: { config: Descriptor; layers: Descriptor[]; mediaType: string };
  config: ImageConfig;
  ref: Descriptor;
  problems: string[];
}

/** Every descriptor of the layout, followed from index.json; a layer's uncompressed digest against the config's diff_ids. */
async function checkLayout(layout: string): Promise<Checked> {
  const problems: string[] = [];
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as { schemaVersion: number; manifests: Descriptor[] };
  const ref = index.manifests[0]!;
  if (index.manifests.length !== 1) problems.push(`index.json lists ${index.manifests.length} manifests`);
  const m = await blob(layout, ref);
  problems.push(...m.problems);
  const manifest = JSON.parse(m.bytes.toString('utf8')) as Checked['manifest'];
  const c = await blob(layout, manifest.config);
  problems.push(...c.problems);
  const config = JSON.parse(c.bytes.toString('utf8')) as ImageConfig;
  if (config.rootfs.diff_ids.length !== manifest.layers.length) problems.push('the config lists another number of layers than the manifest');
  for (const [i, layer] of manifest.layers.entries()) {
    const l = await blob(layout, layer);
    problems.push(...l.problems);
    try {
      const diffId = sha256(layer.mediaType.endsWith('+gzip') ? gunzipSync(l.bytes) : l.bytes);
      if (diffId !== config.rootfs.diff_ids[i]) problems.push(`layer ${i}: uncompressed ${diffId}, the config says ${config.rootfs.diff_ids[i]}`);
    } catch (e) {
      problems.push(`layer ${i}: ${(e as Error).message}`);
    }
  }
  return { manifest, config, ref, problems };
}

const SHELLS = new Set(['sh', 'bash', 'dash', 'ash', 'zsh', 'ksh', 'mksh', 'busybox', 'toybox']);

/** Every file or link under `root` named like a shell (or a multi-call binary holding one). */
async function shellsUnder(root: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (SHELLS.has(entry.name)) found.push(path.slice(root.length));
    }
  };
  await walk(root);
  return found;
}

const HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
// By its path: `env -i` has replaced PATH with the image's by the time chroot is looked up.
const CHROOT = '/usr/sbin/chroot';

/**
 * `argv` chrooted into `rootfs` as `user` with only `env`, in a private mount namespace where the rootfs is bound
 * read-only with a tmpfs on /tmp, as a Pod with readOnlyRootFilesystem and an emptyDir /tmp has it.
 */
function inImage(rootfs: string, user: string, env: string[], argv: string[]): Promise<Run> {
  const script = 'set -e; mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"; mount -t tmpfs tmpfs "$1/tmp"; shift; exec "$@"';
  return run('unshare', ['-m', '--propagation', 'private', '--', '/bin/sh', '-c', script, 'sandbox', rootfs,
    'env', '-i', ...env, CHROOT, `--userspec=${user}`, rootfs, ...argv], { env: { PATH: HOST_PATH } });
}

let archive: string;
let layout: string;
let rootfs: string;
let checked: Checked;

t.before(async () => {
  const built = await run('bash', [join(REPO_ROOT, 'tools/image/build.sh')], { timeout: 600_000 });
  if (built.code !== 0) throw new Error(`tools/image/build.sh failed (${built.code}):\n${built.stderr.slice(-4000)}`);
  archive = built.stdout.trim().split('\n').pop() ?? '';
  const dir = await mkdtemp(join(tmpdir(), 'ptah-image-test-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  layout = join(dir, 'layout');
  await mkdir(layout);
  const untar = await run('tar', ['-xf', archive, '-C', layout]);
  if (untar.code !== 0) throw new Error(`tar -xf ${archive}: ${untar.stderr}`);
  checked = await checkLayout(layout);
  const bundle = join(dir, 'bundle');
  const tag = checked.ref.annotations?.['org.opencontainers.image.ref.name'] ?? '';
  const unpacked = await run('umoci', ['unpack', '--image', `${layout}:${tag}`, bundle]);
  if (unpacked.code !== 0) throw new Error(`umoci unpack failed (is umoci installed? .ci/run installs it): ${unpacked.stderr}`);
  rootfs = join(bundle, 'rootfs');
});

t.test('the archive is a valid OCI layout: index → manifest → config → layers, every digest and size as named', async (t) => {
  t.same(JSON.parse(await readFile(join(layout, 'oci-layout'), 'utf8')), { imageLayoutVersion: '1.0.0' }, 'oci-layout');
  t.equal(checked.ref.mediaType, 'application/vnd.oci.image.manifest.v1+json');
  t.equal(checked.manifest.mediaType, 'application/vnd.oci.image.manifest.v1+json');
  t.equal(checked.manifest.config.mediaType, 'application/vnd.oci.image.config.v1+json');
  t.ok(checked.manifest.layers.length >= 2, `${checked.manifest.layers.length} layers`);
  t.same(checked.problems, [], 'every blob matches its descriptor, every layer its diff_id');
  t.equal(checked.ref.annotations?.['io.containerd.image.name'], MANAGER_IMAGE, 'named as the Deployment names its image');
  t.equal(`${MANAGER_IMAGE.split(':').pop()}`, checked.ref.annotations?.['org.opencontainers.image.ref.name'], 'tagged with its tag');
});

t.test('the layout check finds a tampered layer, a wrong size and a diff_id that does not match', async (t) => {
  const copy = await mkdtemp(join(tmpdir(), 'ptah-image-tampered-'));
  t.teardown(() => rm(copy, { recursive: true, force: true }));
  await run('cp', ['-r', `${layout}/.`, copy]);
  const last = checked.manifest.layers.at(-1)!;
  const path = join(copy, 'blobs', ...last.digest.split(':'));
  const bytes = await readFile(path);
  bytes[bytes.length - 9] = bytes[bytes.length - 9]! ^ 0xff;
  await writeFile(path, bytes);
  const tampered = await checkLayout(copy).catch((e: Error) => ({ problems: [e.message] }));
  t.match(tampered.problems.join('\n'), new RegExp(`${last.digest}: the blob's digest is`), 'a changed byte is a digest mismatch');
  await writeFile(path, Buffer.concat([await readFile(join(layout, 'blobs', ...last.digest.split(':'))), Buffer.from([0])]));
  t.match((await checkLayout(copy).catch((e: Error) => ({ problems: [e.message] }))).problems.join('\n'), /bytes, the descriptor says/, 'an extra byte is a size mismatch');
});

t.test('the config: uid 65532, node on dist/src/main.js, the production environment', async (t) => {
  const { config } = checked;
  t.equal(config.os, 'linux');
  const [uid, gid] = (config.config.User ?? '').split(':');
  t.equal(Number(uid), RUNTIME_ID, `User is uid ${RUNTIME_ID} (non-root), as the Pods' runAsUser`);
  t.equal(Number(gid), RUNTIME_ID);
  t.same(config.config.Entrypoint, ['/usr/local/bin/node'], 'the entrypoint is node');
  t.same(config.config.Cmd, ['/opt/ptah-operator/dist/src/main.js'], 'on the compiled manager');
  t.ok(config.config.Env?.includes('NODE_ENV=production'), 'NODE_ENV=production');
  const spec = JSON.parse(await readFile(join(rootfs, '..', 'config.json'), 'utf8')) as { process: { user: { uid: number; gid: number }; args: string[] } };
  t.same(spec.process.user, { uid: RUNTIME_ID, gid: RUNTIME_ID }, 'umoci reads the same user');
  t.same(spec.process.args, ['/usr/local/bin/node', '/opt/ptah-operator/dist/src/main.js'], 'and the same command');
});

t.test('the filesystem: the app, its production dependencies, node, the runner command, and no shell', async (t) => {
  for (const file of ['usr/local/bin/node', RUNNER_COMMAND.slice(1), 'opt/ptah-operator/package.json', 'opt/ptah-operator/dist/src/main.js',
    'opt/ptah-operator/dist/src/runner/main.js', 'opt/ptah-operator/dist/src/executor/main.js', 'opt/ptah-operator/dist/certs/generate.js',
    'opt/ptah-operator/node_modules/pg/package.json', 'opt/ptah-operator/node_modules/fastify/package.json', 'etc/passwd']) {
    t.ok(existsSync(join(rootfs, file)), `/${file}`);
  }
  // The lock marks what only devDependencies need (`dev: true`); its keys are the install paths.
  const lock = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const devOnly = Object.entries(lock.packages).filter(([path, p]) => path !== '' && p.dev === true).map(([path]) => path);
  t.ok(devOnly.includes('node_modules/typescript'), 'the lock marks dev-only packages');
  t.same(devOnly.filter((path) => existsSync(join(rootfs, 'opt/ptah-operator', path))), [], 'none of them is installed');
  t.notOk(existsSync(join(rootfs, 'opt/ptah-operator/src')) || existsSync(join(rootfs, 'opt/ptah-operator/test')), 'no sources, no tests');
  t.match(await readFile(join(rootfs, RUNNER_COMMAND.slice(1)), 'utf8'), /^#!\/usr\/local\/bin\/node\n/, `${RUNNER_COMMAND} is run by node itself`);
  t.ok(((await lstat(join(rootfs, RUNNER_COMMAND.slice(1)))).mode & 0o111) !== 0, `${RUNNER_COMMAND} is executable`);
  t.match(await readFile(join(rootfs, 'etc/passwd'), 'utf8'), new RegExp(`^nonroot:x:${RUNTIME_ID}:${RUNTIME_ID}:`, 'm'), 'the user has a name');
  t.same(await shellsUnder(rootfs), [], 'no shell anywhere');
  t.notOk(existsSync(join(rootfs, 'bin/sh')) || existsSync(join(rootfs, 'usr/bin/sh')), 'in particular no /bin/sh');
});

t.test('the shell check finds a planted shell', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ptah-image-shell-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'usr/bin'), { recursive: true });
  await writeFile(join(dir, 'usr/bin/dash'), '');
  t.same(await shellsUnder(dir), ['/usr/bin/dash']);
});

async function imageRun(t: Test, argv: string[]): Promise<Run> {
  const env = checked.config.config.Env ?? [];
  const result = await inImage(rootfs, checked.config.config.User ?? '', env, argv);
  t.notMatch(result.stderr, /chroot: |unshare: |mount: |env: /, 'the sandbox itself started');
  return result;
}

t.test('the image\'s node runs the manager, the runner and the executor on its own rootfs, read-only, as uid 65532', async (t) => {
  const node = await imageRun(t, ['/usr/local/bin/node', '-p', 'process.versions.node + " " + process.getuid()']);
  t.equal(node.code, 0, `node starts: ${node.stderr}`);
  const [version, uid] = node.stdout.trim().split(' ');
  t.equal(Number(uid), RUNTIME_ID, 'as uid 65532');
  const engines = (JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  t.equal(version?.split('.')[0], engines.replace(/^>=/, '').split('.')[0], `node ${version}: the major of package.json's engines (${engines})`);

  const [entrypoint = '', ...cmd] = [...(checked.config.config.Entrypoint ?? []), ...(checked.config.config.Cmd ?? [])];
  const manager = await imageRun(t, [entrypoint, ...cmd, '--port', '70000']);
  t.equal(manager.code, 2, 'the manager (Entrypoint + Cmd) refuses --port 70000 with exit code 2');
  t.match(manager.stderr, /^ptah-manager: .*--port/m, 'naming --port');

  const runner = await imageRun(t, [RUNNER_COMMAND]);
  t.equal(runner.code, 2, `${RUNNER_COMMAND} (the Job's command) without arguments exits 2`);
  t.match(runner.stderr, /^ptah-runner: usage: --operation must be one of /m, 'and names the missing operation');

  const executor = await imageRun(t, [entrypoint, '/opt/ptah-operator/dist/src/executor/main.js']);
  t.equal(executor.code, 2, 'the executor without a command exits 2');
  t.match(executor.stderr, /^usage: executor </m, 'and prints its usage');

  const write = await imageRun(t, [entrypoint, '-e', 'require("fs").writeFileSync("/opt/ptah-operator/x", "")']);
  t.not(write.code, 0, 'the root filesystem is read-only in the sandbox');
  t.match(write.stderr, /EROFS|EACCES/, 'a write is refused');
});
