// How a container's process gets its filesystem view without images or chroot: it starts in a private mount
// namespace (`unshare -m --propagation private`) where the image's files, each volume and a per-container file over
// its termination message path are bind-mounted at the paths the Pod names. Only that process tree sees the mounts.
// unshare forks that process as the first of a new PID namespace and waits for it, ignoring SIGTERM, so a stop is
// sent to that first process (containerInit). Then it drops to the Pod's user and group (setpriv) and execs the command. Needs root and util-linux.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { posix } from 'node:path';

export interface BindMount {
  source: string;
  target: string;
  readOnly: boolean;
  /** Binds a single file (the mount point is created as a file, not a directory). */
  file: boolean;
}

export interface ProcessUser {
  uid: number;
  gid: number;
  groups: number[];
}

export interface SandboxSpec {
  argv: string[];
  workingDir: string;
  /** The image's files, bound first (read-only); volumes may then cover them, as in a container. */
  layers: BindMount[];
  /** Volumes and the termination-message file. */
  mounts: BindMount[];
  user?: ProcessUser;
  /** securityContext.readOnlyRootFilesystem: the root becomes read-only, mounts keep their own mode. */
  readOnlyRoot: boolean;
  /** securityContext.allowPrivilegeEscalation=false: no_new_privs for the process. */
  noNewPrivileges: boolean;
}

/** The command line that runs `spec.argv` inside its sandbox. The environment is passed through unchanged. */
export function sandboxCommand(spec: SandboxSpec): { command: string; args: string[] } {
  const lines = ['set -e'];
  const byDepth = [...spec.mounts].sort((a, b) => depth(a.target) - depth(b.target));
  for (const m of [...spec.layers, ...byDepth]) {
    // Mount points are created on the host's filesystem (empty directories or files); only the mounts are private.
    if (m.file) lines.push(`[ -e ${q(m.target)} ] || { mkdir -p ${q(posix.dirname(m.target))}; : > ${q(m.target)}; }`);
    else lines.push(`mkdir -p ${q(m.target)}`);
    lines.push(`mount --bind ${q(m.source)} ${q(m.target)}`);
    if (m.readOnly) lines.push(`mount -o remount,bind,ro ${q(m.target)}`);
  }
  if (spec.readOnlyRoot) lines.push('mount -o remount,bind,ro /');
  // cd after the mounts, so a working directory inside a volume is the volume's.
  lines.push(`cd ${q(spec.workingDir)}`, 'unset OLDPWD SHLVL', 'exec "$@"');
  const privileges = [
    ...(spec.user ? [`--reuid=${spec.user.uid}`, `--regid=${spec.user.gid}`,
      spec.user.groups.length > 0 ? `--groups=${spec.user.groups.join(',')}` : '--clear-groups'] : []),
    ...(spec.noNewPrivileges ? ['--no-new-privs'] : []),
  ];
  const drop = privileges.length > 0 ? ['setpriv', ...privileges, '--'] : [];
  // bash, not sh: dash drops environment variables whose names are not shell identifiers (e.g. `my.setting`),
  // which Kubernetes allows.
  // A PID namespace of its own, as a container has: when its first process ends, or unshare is killed
  // (--kill-child), the kernel kills every process left in it, even one that left the process group (the runner
  // starts its executor in a group of its own), so nothing of a stopped container can still reach a database.
  return {
    command: 'unshare',
    args: ['-m', '--propagation', 'private', '--pid', '--fork', '--kill-child', '--', '/bin/bash', '-c', lines.join('\n'), 'sandbox', ...drop, ...spec.argv],
  };
}

/** The first process of the sandbox `unsharePid` started (the container's PID 1), once it has forked it. */
export async function containerInit(unsharePid: number): Promise<number | undefined> {
  const children = await readFile(`/proc/${unsharePid}/task/${unsharePid}/children`, 'utf8').catch(() => '');
  const pid = Number(children.trim().split(/\s+/)[0]);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

/** Whether this process may create mount namespaces; the fake kubelet cannot run containers without them. */
export async function canSandbox(): Promise<string | undefined> {
  try {
    await promisify(execFile)('unshare', ['-m', '--propagation', 'private', '--', 'mount', '--bind', '/', '/']);
    return undefined;
  } catch (e) {
    return `the fake kubelet needs private mount namespaces (root, util-linux unshare and mount) to put volumes at their paths: ${(e as { stderr?: string }).stderr?.trim() || (e as Error).message}`;
  }
}

/** True when `path` is `dir` or lies below it. */
export function isWithin(path: string, dir: string): boolean {
  const rel = posix.relative(dir, path);
  return rel === '' || (!rel.startsWith('..') && !posix.isAbsolute(rel));
}

function depth(path: string): number {
  return posix.normalize(path).split('/').filter(Boolean).length;
}

function q(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
