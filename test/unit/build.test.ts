// The compiled build: `npm run build` into a temporary outDir, then the manager, the runner and the executor
// started from it under plain node (no tsx), so the emitted ESM import paths are proven to resolve. Each is given
// an input it must refuse, so the test needs no control plane and asserts exit codes and error lines only.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { computeExecutorIdentity } from '../../src/shared/executor-identity.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: REPO_ROOT, env, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Plain node with none of the loaders a dev shell or tap may have put into NODE_OPTIONS. */
const plainNode = (script: string, args: string[] = []): Promise<Exit> => {
  const { NODE_OPTIONS: _options, ...env } = process.env;
  return run(process.execPath, [script, ...args], env);
};

t.test('npm run build emits a build the manager, runner and executor start from under plain node', async (t) => {
  // Inside the repository, so that the build resolves its packages from node_modules/ as dist/ does.
  const cache = join(REPO_ROOT, 'node_modules/.cache');
  await mkdir(cache, { recursive: true });
  const outDir = await mkdtemp(join(cache, 'ptah-build-test-'));
  t.teardown(() => rm(outDir, { recursive: true, force: true }));

  const built = await run('npm', ['run', '--silent', 'build', '--', '--outDir', outDir]);
  t.equal(built.code, 0, `npm run build succeeds: ${built.stdout}${built.stderr}`);
  for (const entry of ['src/main.js', 'src/runner/main.js', 'src/executor/main.js', 'certs/generate.js']) {
    t.ok(existsSync(join(outDir, entry)), `${entry} is emitted`);
  }
  t.notOk(existsSync(join(outDir, 'test')), 'no test code is emitted');
  const recorded = JSON.parse(readFileSync(join(outDir, 'executor-identity.json'), 'utf8')) as { identity?: string };
  t.equal(recorded.identity, computeExecutorIdentity(REPO_ROOT).identity, 'the build records the executor identity computed from its sources');

  // The compiled runner reads the identity its build recorded, and runs nothing under another.
  const identityModule = pathToFileURL(join(outDir, 'src/shared/executor-identity.js')).href;
  const own = await plainNode('--input-type=module', ['-e', `import { ownExecutorIdentity } from '${identityModule}'; console.log(ownExecutorIdentity());`]);
  t.equal(own.stdout.trim(), recorded.identity, `the compiled build knows its identity from the record: ${own.stderr}`);
  const record = readFileSync(join(outDir, 'executor-identity.json'));
  rmSync(join(outDir, 'executor-identity.json'));
  const unrecorded = await plainNode('--input-type=module', ['-e', `import { ownExecutorIdentity } from '${identityModule}'; ownExecutorIdentity();`]);
  t.not(unrecorded.code, 0, 'a build without the record does not guess its identity');
  t.match(unrecorded.stderr, /executor-identity\.json could not be read .*run npm run build/, 'and says how to get one');
  writeFileSync(join(outDir, 'executor-identity.json'), record);

  const manager = await plainNode(join(outDir, 'src/main.js'), ['--no-such-flag']);
  t.equal(manager.code, 2, 'the manager refuses an unknown flag with exit code 2');
  t.match(manager.stderr, /^ptah-manager: invalid command line: Unknown option '--no-such-flag'/m, 'and says which flag');

  const help = await plainNode(join(outDir, 'src/main.js'), ['--help']);
  t.equal(help.code, 0, `--help exits 0: ${help.stderr}`);
  for (const flag of ['--listen-host', '--runner-image', '--read-timeout-ms', 'PTAH_RUNNER_IMAGE', 'default localhost/ptah-operator:dev']) t.match(help.stdout, flag, `--help names ${flag}`);
  const version = await plainNode(join(outDir, 'src/main.js'), ['--version']);
  t.equal(version.code, 0, `--version exits 0: ${version.stderr}`);
  // This build sits in node_modules/.cache with no package.json beside it (the image has one: config.test.ts).
  t.match(version.stdout, /^ptah-manager unknown \(no package\.json beside the build\)\n/, '--version says when it cannot name the release');
  t.match(version.stdout, new RegExp(`\nexecutor ${recorded.identity}\n$`), '--version prints the executor identity its build recorded');

  const runner = await plainNode(join(outDir, 'src/runner/main.js'));
  t.equal(runner.code, 2, 'the runner without its arguments exits 2 (no frame could be written)');
  t.match(runner.stderr, /^ptah-runner: usage: --operation must be one of /m, 'and names the missing operation');

  // The compiled runner starts the compiled executor, not the source under tsx.
  const module = pathToFileURL(join(outDir, 'src/runner/executor-process.js')).href;
  const printed = await plainNode('--input-type=module', ['-e', `import { executorCommand } from '${module}'; console.log(JSON.stringify(executorCommand('plan')));`]);
  t.equal(printed.code, 0, `the compiled executor-process module loads: ${printed.stderr}`);
  t.same(JSON.parse(printed.stdout), { file: process.execPath, args: [join(outDir, 'src/executor/main.js'), 'plan'] }, 'the runner spawns the compiled executor with no loader');
  const executor = await plainNode(join(outDir, 'src/executor/main.js'));
  t.equal(executor.code, 2, 'the compiled executor without a command exits 2');
  t.match(executor.stderr, /^usage: executor <observe\|plan\|apply\|migration-history\|migration-apply>/m, 'and prints its usage');
});
