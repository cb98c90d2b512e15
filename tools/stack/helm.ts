// The helm CLI the chart's tests run: built from the Go module by tools/helm/build.sh into ~/.cache/ptah-helm (the
// script returns at once when it is cached). test/run.ts builds it once and passes its path in PTAH_HELM_BIN.
import { runBuildScript } from './controlplane.js';

export const HELM_BIN_ENV = 'PTAH_HELM_BIN';

let helmPath: Promise<string> | undefined;
/** The helm binary: PTAH_HELM_BIN, or what the build script reports. */
export function helm(): Promise<string> {
  helmPath ??= process.env[HELM_BIN_ENV] ? Promise.resolve(process.env[HELM_BIN_ENV]) : buildOrLocateHelm();
  return helmPath;
}

export function buildOrLocateHelm(): Promise<string> {
  return runBuildScript('tools/helm/build.sh');
}
