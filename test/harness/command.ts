// A command-line tool run to its end (helm, kubectl): its exit code and what it printed, never a thrown error, so a
// test asserts on the code and shows the tool's own message.
import { execFile } from 'node:child_process';

export interface CommandRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `bin` with `args` (in `env`, default this process's); a failure to start or a timeout is exit code 1. */
export function runCommand(bin: string, args: string[], timeoutMs = 180_000, env?: NodeJS.ProcessEnv): Promise<CommandRun> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 64 << 20, ...(env ? { env } : {}) }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}
