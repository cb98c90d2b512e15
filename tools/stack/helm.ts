// The helm CLI the chart's tests run: built from the Go module by tools/helm/build.sh into ~/.cache/ptah-helm (the
// script returns at once when it is cached). test/run.ts starts that build at the lowest CPU priority while the tests
// run (buildHelmAside); a test that asks for helm meanwhile waits for it on the script's build lock.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { runBuildScript } from './controlplane.js';
import { REPO_ROOT } from './paths.js';
import { trackGroup } from './processes.js';

const SCRIPT = 'tools/helm/build.sh';

let helmPath: Promise<string> | undefined;
/** The helm binary, built (or waited for) by the build script. */
export function helm(): Promise<string> {
  helmPath ??= runBuildScript(SCRIPT);
  return helmPath;
}

/**
 * Runs the build script under `nice -n 19` in its own process group, which an interrupted or exiting harness kills
 * (a build left running would hold the lock and both cores); its output goes to stderr. Resolves to the binary's path.
 */
export function buildHelmAside(): Promise<string> {
  const child = spawn('nice', ['-n', '19', 'bash', join(REPO_ROOT, SCRIPT)], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  trackGroup('helm build', child);
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
  return new Promise((resolve, reject) => {
    child.once('error', (e) => reject(new Error(`${SCRIPT} could not start: ${e.message}`)));
    // 'close', not 'exit': the path is the last line of stdout, complete only once the stream has closed.
    child.once('close', (code, signal) => {
      const path = stdout.trim().split('\n').pop();
      if (code === 0 && path) resolve(path);
      else reject(new Error(`${SCRIPT} ended with ${signal ?? `status ${code}`}${path ? '' : ' and printed nothing'}`));
    });
  });
}
