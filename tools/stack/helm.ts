// The helm CLI the chart's tests run: built from the Go module by tools/helm/build.sh into ~/.cache/ptah-helm (the
// script returns at once when it is cached). test/run.ts starts that build at the lowest CPU priority while the tests
// run (buildHelmAside); a test that asks for helm meanwhile waits for it on the script's build lock.
import { runBuildScript, runTrackedBuild } from './controlplane.js';

const SCRIPT = 'tools/helm/build.sh';

let helmPath: Promise<string> | undefined;
/** The helm binary, built (or waited for) by the build script. */
export function helm(): Promise<string> {
  helmPath ??= runBuildScript(SCRIPT);
  return helmPath;
}

/**
 * Runs the build script under `nice -n 19`, tracked so that an interrupted or exiting harness kills it (a build left
 * running would hold the lock and both cores); its output goes to stderr. Resolves to the binary's path.
 */
export function buildHelmAside(): Promise<string> {
  return runTrackedBuild(SCRIPT, { name: 'helm build', nice: 19 });
}
