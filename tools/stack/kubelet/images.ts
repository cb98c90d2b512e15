// What the fake kubelet runs for each container image: there are no images, only local commands and host
// directories bound where the image would hold its files. The image's command replaces the container's `command`
// and the container's `args` are appended. An image that is not listed fails its Pod with a message naming the
// known ones.
import { join } from 'node:path';
import { REPO_ROOT } from '../paths.js';
import { prepareVariant } from '../variants.js';

export interface LocalImage {
  command: string[];
  /** The image's default user (USER in a Dockerfile); the Pod's runAsUser/runAsGroup override it. Default root. */
  user?: { uid: number; gid: number };
  /** The image's environment (ENV in a Dockerfile); the container's env overrides it. */
  env?: Record<string, string>;
  /** Host directories the image "contains", bound read-only at `target` like an image layer (volumes go on top). */
  layers?: { source: string; target: string }[];
}

export type ImageMap = ReadonlyMap<string, LocalImage>;

/** The user distroless "nonroot" images run as. */
export const NONROOT = { uid: 65532, gid: 65532 } as const;

export const RUNNER_IMAGE = 'ptah-runner:dev';
/** Another name for the same runner: the image reference of a release that changes only the manager. */
export const RUNNER_IMAGE_NEXT = 'localhost/ptah-runner:next';
/**
 * The runner of a release that changes the executor (tools/stack/variants.ts, run from source): a manager whose
 * binding names that executor installs a new execution-binding epoch.
 */
export const RUNNER_IMAGE_OTHER_EXECUTOR = 'localhost/ptah-runner:other-executor';

/** Where the repository appears inside the runner image, as the application would in a real one. */
const APP_DIR = '/opt/ptah-operator';
const FIXTURES_DIR = '/opt/ptah-fixtures';

/**
 * Images every stack knows: the operator's runner, and small fixtures for the harness's own tests. The runner runs
 * from source under tsx, or with `runner: 'compiled'` from the build in dist/ under plain node, as in production.
 * The other executor's runner runs from its variant's source, with the checkout's node_modules bound into it; the
 * variants are written afresh here, so they are the checkout's as the stack starts.
 */
export function defaultImages(repoRoot = REPO_ROOT, runner: 'source' | 'compiled' = 'source'): ImageMap {
  const runnerImage: LocalImage = runner === 'compiled'
    ? { command: [process.execPath, `${APP_DIR}/dist/src/runner/main.js`], user: NONROOT, layers: [{ source: repoRoot, target: APP_DIR }] }
    : sourceRunner([{ source: repoRoot, target: APP_DIR }]);
  prepareVariant('manager', repoRoot);
  const otherExecutor = sourceRunner([
    { source: prepareVariant('executor', repoRoot), target: APP_DIR },
    { source: join(repoRoot, 'node_modules'), target: `${APP_DIR}/node_modules` },
  ]);
  return new Map<string, LocalImage>([
    [RUNNER_IMAGE, runnerImage],
    [RUNNER_IMAGE_NEXT, runnerImage],
    [RUNNER_IMAGE_OTHER_EXECUTOR, otherExecutor],
    // `args` is the script: ["echo hi; sleep 1"].
    ['ptah-fixture/sh:test', { command: ['/bin/sh', '-c'] }],
    ['ptah-fixture/job-script:test', {
      command: ['/bin/sh', `${FIXTURES_DIR}/job-script.sh`],
      layers: [{ source: join(repoRoot, 'test/fixtures/kubelet'), target: FIXTURES_DIR }],
    }],
  ]);
}

/**
 * The checkout's runner (from source) under each of `references`, and nothing else: the images a chart install
 * names for its Jobs (`image.repository:tag`), for a stack of a test's own. The variants stay as the shared stack
 * wrote them: writing them again would pull them from under that stack's processes.
 */
export function checkoutRunnerImages(references: readonly string[], repoRoot = REPO_ROOT): ImageMap {
  const runner = sourceRunner([{ source: repoRoot, target: APP_DIR }]);
  return new Map(references.map((reference) => [reference, runner]));
}

function sourceRunner(layers: NonNullable<LocalImage['layers']>): LocalImage {
  return {
    command: [process.execPath, '--import', `file://${APP_DIR}/node_modules/tsx/dist/loader.mjs`, `${APP_DIR}/src/runner/main.ts`],
    user: NONROOT,
    // tsx's cache lives in the temp dir, which a readOnlyRootFilesystem container cannot write (tsx then hangs).
    env: { TSX_DISABLE_CACHE: '1' },
    layers,
  };
}

export function describeImages(images: ImageMap): string {
  return [...images.keys()].sort().join(', ');
}
