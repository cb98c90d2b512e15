// The shell of a benchmark that needs the local stack: PostgreSQL, the control plane and the fake kubelet of
// tools/stack/stack.ts (as test/run.ts starts them), then one tap test. The stack's environment is set before
// `prepare` runs, because the test worlds read it when they are imported: `prepare` imports what it needs.
import type { Test } from 'tap';
import { defaultImages } from '../tools/stack/kubelet/images.js';
import { REPO_ROOT } from '../tools/stack/paths.js';
import { startStack } from '../tools/stack/stack.js';

export interface StackRun {
  /** The whole run with its setup and teardown: these take minutes, not tap's default 30 s. */
  timeoutMs: number;
  /** Resolves true when the run met what it must. */
  body(t: Test): Promise<boolean>;
}

export interface StackOptions {
  /**
   * How the fake kubelet runs the runner image: from source under tsx (as the tests do; tsx then compiles every
   * file afresh in each Pod, about 3 s of CPU a Pod here), or from dist/ under plain node, as the image does. A
   * compiled run must build dist/ before its first Pod starts.
   */
  runner?: 'source' | 'compiled';
}

/** Runs the test `prepare` returns on a fresh stack and exits 0 when it passed; otherwise 1, keeping the stack's logs. */
export async function runOnStack(name: string, say: (line: string) => void, prepare: () => Promise<StackRun>, options: StackOptions = {}): Promise<never> {
  const stack = await startStack({ log: say, images: defaultImages(REPO_ROOT, options.runner ?? 'source') });
  Object.assign(process.env, stack.env);
  const { default: t } = await import('tap');
  const run = await prepare();
  let passed = false;
  t.setTimeout(run.timeoutMs);
  await t.test(name, { timeout: run.timeoutMs }, async (tt) => {
    passed = await run.body(tt);
  });
  await stack.stop({ keepDir: !passed });
  if (!passed) say(`logs of the stack kept in ${stack.state.dir}/logs`);
  process.exit(passed ? 0 : 1);
}
