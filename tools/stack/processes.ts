// The long-running processes the harness starts (etcd, kube-apiserver, kube-controller-manager, PostgreSQL, the fake
// kubelet's containers). Each runs in its own process group so stopping it also stops whatever it forked, and every
// group still alive is killed when this process exits or is interrupted, so a failed or aborted run leaves nothing
// behind. A signal starts an orderly stop (a grace, then SIGKILL); a second one kills every group at once; and if
// this process dies without running any handler (SIGKILL, or a crash), a reaper it started kills them all.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface StartProcessOptions {
  /** Short name for messages, e.g. `kube-apiserver`. */
  name: string;
  command: string;
  args: string[];
  /** stdout and stderr are appended here. */
  logFile: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export class ManagedProcess {
  readonly exited: Promise<ProcessExit>;
  #exit: ProcessExit | undefined;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly logFile: string,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        // Like a container runtime when PID 1 ends: whatever the leader forked into its group ends with it.
        if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
        forget(this);
        resolve(this.#exit);
      });
    });
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name} has no pid: it never started`);
    return this.child.pid;
  }

  /** Set once the process has exited. */
  get exit(): ProcessExit | undefined {
    return this.#exit;
  }

  /**
   * SIGTERM to the leader, then SIGKILL to the whole group after `graceMs`, as a container runtime stops a
   * container: only PID 1 is asked to stop, and passing that on to its children is its own job.
   * Resolves once the leader has exited.
   */
  async stop(graceMs = 5_000): Promise<ProcessExit> {
    if (this.#exit) return this.#exit;
    if (graceMs > 0) this.child.kill('SIGTERM');
    else signalGroup(this.pid, 'SIGKILL');
    const timer = setTimeout(() => signalGroup(this.pid, 'SIGKILL'), graceMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** The last `lines` lines of the process's log, for error messages. */
  logTail(lines = 30): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

const groups = new Set<ManagedProcess>();
const cleanups = new Set<() => Promise<void>>();
let handlersInstalled = false;

/** Starts `command` as the leader of a new process group with its output going to `logFile`. */
export function startProcess(options: StartProcessOptions): ManagedProcess {
  installExitHandlers();
  const fd = openSync(options.logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(options.command, options.args, {
      detached: true,
      stdio: ['ignore', fd, fd],
      env: options.env ?? process.env,
      cwd: options.cwd,
    });
  } finally {
    closeSync(fd);
  }
  const managed = new ManagedProcess(options.name, child, options.logFile);
  if (child.pid !== undefined) remember(managed);
  child.once('error', (err) => {
    forget(managed);
    process.stderr.write(`[harness] could not start ${options.name} (${options.command}): ${err.message}\n`);
  });
  return managed;
}

/** Adopts a child the caller spawned itself (detached, so it leads its own group) into the exit-time cleanup. */
export function trackGroup(name: string, child: ChildProcess, logFile = ''): ManagedProcess {
  installExitHandlers();
  const managed = new ManagedProcess(name, child, logFile);
  if (child.pid !== undefined && child.exitCode === null) remember(managed);
  return managed;
}

/**
 * Registers an orderly shutdown (e.g. a stack's stop()) to run on SIGINT/SIGTERM before the process exits.
 * Returns a function that unregisters it.
 */
export function onInterrupt(cleanup: () => Promise<void>): () => void {
  installExitHandlers();
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** How long an interrupted harness waits for the orderly stop before it kills every group itself. */
const ORDERLY_STOP_MS = 15_000;

function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  startReaper();
  // Last resort: 'exit' handlers cannot wait, so kill every group still alive outright.
  process.once('exit', killAllGroups);
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    // Every signal is handled, never only the first: a process group's signal and the one tsx relays, or a
    // terminal's SIGHUP and then SIGTERM, arrive together, and a second, unhandled one would end this process
    // without its exit handler.
    process.on(signal, () => {
      if (stopping) {
        process.stderr.write(`[harness] ${signal} again: killing everything the harness started\n`);
        process.exit(signalExitCode(signal));
      }
      stopping = true;
      process.stderr.write(`[harness] ${signal}: stopping everything the harness started\n`);
      const forced = setTimeout(() => process.exit(signalExitCode(signal)), ORDERLY_STOP_MS);
      forced.unref();
      void Promise.allSettled([...cleanups].map((c) => c())).finally(() => process.exit(signalExitCode(signal)));
    });
  }
}

function killAllGroups(): void {
  for (const p of groups) signalGroup(p.pid, 'SIGKILL');
  groups.clear();
}

// The reaper: a process of its own (its own group, deaf to the signals that stop a run) that holds the groups this
// process leads, told over a pipe only this process writes. When the pipe closes, however this process ended, it
// kills every group still on its list. An orderly exit has emptied the list first.
const REAPER = `
  const groups = new Set();
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {});
  let pending = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    pending += chunk;
    for (let i = pending.indexOf('\\n'); i >= 0; i = pending.indexOf('\\n')) {
      const line = pending.slice(0, i);
      pending = pending.slice(i + 1);
      const pid = Number(line.slice(1));
      if (line[0] === '+') groups.add(pid); else groups.delete(pid);
    }
  });
  process.stdin.on('end', () => {
    for (const pid of groups) { try { process.kill(-pid, 'SIGKILL'); } catch {} }
    process.exit(0);
  });`;
let reaper: ChildProcess | undefined;

function startReaper(): void {
  reaper = spawn(process.execPath, ['-e', REAPER], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  reaper.unref();
  // The pipe must not keep this process alive, and a reaper that is gone must not crash it.
  (reaper.stdin as unknown as { unref(): void }).unref();
  reaper.stdin?.on('error', () => undefined);
}

function remember(p: ManagedProcess): void {
  groups.add(p);
  reaper?.stdin?.write(`+${p.pid}\n`);
}

function forget(p: ManagedProcess): void {
  if (!groups.delete(p)) return;
  reaper?.stdin?.write(`-${p.child.pid}\n`);
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

function signalExitCode(signal: 'SIGINT' | 'SIGTERM' | 'SIGHUP'): number {
  return 128 + { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[signal];
}
