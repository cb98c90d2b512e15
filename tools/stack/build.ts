// `npm run build` (tsc into dist/), for the stacks whose runner image runs the compiled build as production does:
// `npm run local` and the test suite. tsc is incremental (its build info lives in dist/), so an unchanged tree costs
// a few seconds and a changed one is rebuilt, which is how dist/ is known to be current.
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
