// `npm run build` (tsc into dist/), for the stacks whose runner image runs the compiled build as production does:
// `npm run local` and the test suite. Incremental, so a build that is already current costs a few seconds.
import { execFile } from 'node:child_process';
import { REPO_ROOT } from './paths.js';

/** Brings dist/ up to date; resolves with the milliseconds it took, rejects with tsc's output. */
export function buildDist(): Promise<number> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    execFile('npm', ['run', '--silent', 'build'], { cwd: REPO_ROOT }, (error, stdout, stderr) => {
      if (error) reject(new Error(`npm run build failed:\n${stdout}${stderr}`));
      else resolve(Date.now() - started);
    });
  });
}
