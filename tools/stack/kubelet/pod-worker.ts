// One Pod on the fake node, from binding to removal: prepare env and volumes (retrying while a Secret or ConfigMap
// is missing, as the kubelet does), run init containers in order and then the containers as local processes,
// restart them as restartPolicy says, enforce the Pod's activeDeadlineSeconds, and on deletion stop them (SIGTERM,
// SIGKILL after the grace period) and remove the Pod. Every change is written through pods/status.
import { spawn } from 'node:child_process';
import { chmod, mkdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { join } from 'node:path';
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { trackGroup, type ManagedProcess } from '../processes.js';
import { sleep } from '../wait.js';
import { ContainerLog } from './container-log.js';
import { describeImages, type ImageMap, type LocalImage } from './images.js';
import type { LogLookup } from './log-server.js';
import { containerEnv, expandReferences, PodConfigError, PodObjects, writeVolumes } from './pod-config.js';
import { containerInit, isWithin, sandboxCommand, type BindMount, type ProcessUser } from './sandbox.js';

export interface WorkerContext {
  core: CoreV1Api;
  images: ImageMap;
  /** The kubelet's state directory; no volume may be mounted over it. */
  rootDir: string;
  log(line: string): void;
}

type Terminated = { exitCode: number; signal?: number; reason: string; message?: string; startedAt: Date; finishedAt: Date; containerID: string };
type ContainerState =
  | { kind: 'waiting'; reason: string; message?: string }
  | { kind: 'running'; startedAt: Date; containerID: string }
  | ({ kind: 'terminated' } & Terminated);

/**
 * A Pod annotated with this ("true") has every log read of it left unanswered, as a kubelet that stopped
 * responding would: test-only, declared through the resource's spec.execution.podMetadata.
 */
export const HANG_LOG_ANNOTATION = 'fake-kubelet.test/hang-log';

/** The kubelet's limits on a termination message (per container) and on the log-tail fallback. */
const MAX_TERMINATION_MESSAGE_BYTES = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;
const CONFIG_RETRY_MS = 2_000;
const MAX_RESTART_BACKOFF_MS = 10_000;
const HOST_IP = '127.0.0.1';

/** Everything a container's process needs that is read or written before it starts. */
interface Launch {
  image: LocalImage;
  env: Map<string, string>;
  mounts: BindMount[];
  user: ProcessUser | undefined;
  terminationFile: string;
}

class ContainerRun {
  state: ContainerState = { kind: 'waiting', reason: 'ContainerCreating' };
  lastTerminated: Terminated | undefined;
  restartCount = 0;
  log: ContainerLog | undefined;
  previousLog: ContainerLog | undefined;
  process: ManagedProcess | undefined;
  /** The instance now running, until its exit is recorded. */
  running: Promise<number> | undefined;
  launch: Launch | undefined;

  constructor(
    readonly spec: V1Container,
    readonly init: boolean,
  ) {}

  get name(): string {
    return this.spec.name;
  }
}

export class PodWorker {
  readonly #ctx: WorkerContext;
  #pod: V1Pod;
  readonly #dir: string;
  readonly #containers: ContainerRun[];
  readonly #startTime = new Date();
  readonly #transitions = new Map<string, { status: string; at: Date }>();
  /** Set when the Pod is being deleted or has outlived activeDeadlineSeconds: nothing new starts. */
  #stopping = false;
  #failure: { reason: string; message: string } | undefined;
  #gone = false;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #statusWrite: Promise<void> | undefined;
  #statusDirty = false;
  #terminating: Promise<void> | undefined;
  readonly #wakers = new Set<() => void>();
  readonly done: Promise<void>;

  constructor(pod: V1Pod, ctx: WorkerContext) {
    this.#pod = pod;
    this.#ctx = ctx;
    this.#dir = join(ctx.rootDir, 'pods', pod.metadata?.uid ?? 'unknown');
    this.#containers = [
      ...(pod.spec?.initContainers ?? []).map((c) => new ContainerRun(c, true)),
      ...(pod.spec?.containers ?? []).map((c) => new ContainerRun(c, false)),
    ];
    this.done = this.#run().catch((e: Error) => ctx.log(`${this.#ref}: worker failed: ${e.stack ?? e.message}`));
  }

  get #ref(): string {
    return `pod ${this.#pod.metadata?.namespace}/${this.#pod.metadata?.name}`;
  }

  /** A newer version of the Pod from the watch. */
  update(pod: V1Pod): void {
    this.#pod = pod;
    if (pod.metadata?.deletionTimestamp) void this.#terminateAndRemove();
  }

  logs(container: string): LogLookup {
    if (this.#pod.metadata?.annotations?.[HANG_LOG_ANNOTATION] === 'true') return { hang: true };
    const run = this.#containers.find((c) => c.name === container);
    if (!run) return { status: 404, error: `container ${container} is not valid for ${this.#ref}` };
    if (run.log) return { current: run.log, previous: run.previousLog };
    const waiting = run.state.kind === 'waiting' ? `: ${run.state.reason}` : '';
    return { status: 400, error: `container "${container}" in pod "${this.#pod.metadata?.name}" is waiting to start${waiting}`, previous: run.previousLog };
  }

  /** The Pod is gone from the API: kill whatever still runs and forget it. */
  async dispose(): Promise<void> {
    this.#gone = true;
    await this.#stopContainers(0);
    await this.done;
    await rm(this.#dir, { recursive: true, force: true });
  }

  async #run(): Promise<void> {
    await mkdir(this.#dir, { recursive: true });
    if (this.#pod.metadata?.deletionTimestamp) return this.#terminateAndRemove();
    const unknown = this.#containers.find((c) => !this.#ctx.images.has(c.spec.image ?? ''));
    if (unknown) {
      const message = `the fake kubelet has no local command for image ${JSON.stringify(unknown.spec.image)} (container ${unknown.name}); known images: ${describeImages(this.#ctx.images)}`;
      this.#failure = { reason: 'UnknownImage', message };
      for (const c of this.#containers) c.state = { kind: 'waiting', reason: 'ErrImagePull', message };
      await this.#requestStatus();
      return;
    }
    const deadline = this.#pod.spec?.activeDeadlineSeconds;
    if (deadline !== undefined) this.#deadlineTimer = setTimeout(() => void this.#deadlineExceeded(), deadline * 1000);
    if (!(await this.#prepare())) return;
    for (const c of this.#containers.filter((r) => r.init)) {
      await this.#runContainer(c);
      if (c.state.kind !== 'terminated' || c.state.exitCode !== 0) {
        if (!this.#stopping) this.#failure ??= { reason: 'InitContainerFailed', message: `init container ${c.name} failed` };
        break;
      }
    }
    if (!this.#failure && !this.#stopping) await Promise.all(this.#containers.filter((r) => !r.init).map((c) => this.#runContainer(c)));
    clearTimeout(this.#deadlineTimer);
    await this.#requestStatus();
  }

  /**
   * Volumes, env, mounts and user of every container, retried while something is missing (the kubelet keeps such a
   * Pod Pending with the reason on its containers). False once stopping.
   */
  async #prepare(): Promise<boolean> {
    for (;;) {
      if (this.#stopping) return false;
      try {
        const objects = new PodObjects(this.#ctx.core, this.#pod.metadata?.namespace ?? '');
        const volumeDir = join(this.#dir, 'volumes');
        await rm(volumeDir, { recursive: true, force: true });
        const volumes = await writeVolumes(this.#pod, objects, this.#ctx.core, volumeDir);
        for (const c of this.#containers) {
          const image = this.#ctx.images.get(c.spec.image ?? '') as LocalImage;
          const terminationFile = join(this.#dir, 'containers', c.name, 'termination-log');
          c.launch = {
            image,
            env: await containerEnv(this.#pod, c.spec, objects),
            mounts: await this.#mounts(c, volumes, terminationFile),
            user: this.#user(c, image),
            terminationFile,
          };
        }
        return true;
      } catch (e) {
        // Like the kubelet, retry whatever went wrong (a missing Secret, an API hiccup) and say what it was.
        const reason = e instanceof PodConfigError ? e.reason : 'CreateContainerConfigError';
        for (const c of this.#containers) c.state = { kind: 'waiting', reason, message: (e as Error).message };
        await this.#requestStatus();
        await this.#pause(CONFIG_RETRY_MS);
      }
    }
  }

  /** Sleeps, but wakes as soon as the Pod starts stopping. */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => { clearTimeout(timer); this.#wakers.delete(wake); resolve(); };
      const timer = setTimeout(wake, ms);
      this.#wakers.add(wake);
    });
  }

  /** Runs one container until it ends for good under the Pod's restartPolicy. */
  async #runContainer(c: ContainerRun): Promise<void> {
    const policy = c.spec.restartPolicy === 'Always' ? 'Always' : (this.#pod.spec?.restartPolicy ?? 'Always');
    for (let backoff = 1_000; ; backoff = Math.min(backoff * 2, MAX_RESTART_BACKOFF_MS)) {
      if (this.#stopping) return;
      c.running = this.#startOnce(c, c.launch as Launch);
      const exitCode = await c.running;
      if (this.#stopping || policy === 'Never' || (policy === 'OnFailure' && exitCode === 0)) return;
      await this.#pause(backoff);
      c.restartCount++;
    }
  }

  async #startOnce(c: ContainerRun, launch: Launch): Promise<number> {
    await mkdir(join(this.#dir, 'containers', c.name), { recursive: true });
    await writeFile(launch.terminationFile, '');
    // Written by root, used by the Pod's user: the kubelet makes it world-writable too.
    await chmod(launch.terminationFile, 0o666);
    const argv = [...launch.image.command, ...(c.spec.args ?? []).map((a) => expandReferences(a, launch.env))];
    const security = c.spec.securityContext ?? {};
    const sandbox = sandboxCommand({
      argv, mounts: launch.mounts, user: launch.user, workingDir: c.spec.workingDir || '/',
      layers: (launch.image.layers ?? []).map((l) => ({ ...l, readOnly: true, file: false })),
      readOnlyRoot: security.readOnlyRootFilesystem === true,
      noNewPrivileges: security.allowPrivilegeEscalation === false,
    });
    if (this.#stopping) return 137;
    const log = new ContainerLog();
    if (c.log) c.previousLog = c.log;
    c.log = log;
    // Through `env -i`: a test runner can hook every spawn of the process the kubelet lives in and add to its
    // environment (tap adds NODE_OPTIONS, whose loader a container cannot load); exec'd in place, the PID stays.
    const environment = Object.entries(this.#environment(launch)).map(([k, v]) => `${k}=${v ?? ''}`);
    const child = spawn('env', ['-i', ...environment, sandbox.command, ...sandbox.args], { detached: true, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'] });
    const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    child.stdout.on('data', (chunk: Buffer) => log.write('stdout', chunk));
    child.stderr.on('data', (chunk: Buffer) => log.write('stderr', chunk));
    const containerID = `fake://${this.#pod.metadata?.uid}/${c.name}/${c.restartCount}`;
    const startedAt = new Date();
    c.process = trackGroup(`${this.#ref} container ${c.name}`, child);
    c.state = { kind: 'running', startedAt, containerID };
    this.#ctx.log(`${this.#ref}: started container ${c.name} (pid ${child.pid})`);
    void this.#requestStatus();
    const outcome = await Promise.race([closed, spawnError]);
    log.close();
    const exitCode = outcome instanceof Error ? 128 : outcome.code ?? 128 + (constants.signals[outcome.signal as NodeJS.Signals] ?? 0);
    const message = outcome instanceof Error ? `could not start: ${outcome.message}` : await this.#terminationMessage(c, launch.terminationFile, exitCode, log);
    const terminated: Terminated = {
      exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', message: message || undefined, startedAt, finishedAt: new Date(), containerID,
      ...(outcome instanceof Error || !outcome.signal ? {} : { signal: constants.signals[outcome.signal] }),
    };
    c.lastTerminated = terminated;
    c.state = { kind: 'terminated', ...terminated };
    this.#ctx.log(`${this.#ref}: container ${c.name} exited with ${exitCode}`);
    await this.#requestStatus();
    return exitCode;
  }

  async #mounts(c: ContainerRun, volumes: Map<string, string>, terminationFile: string): Promise<BindMount[]> {
    const roVolumes = new Set((this.#pod.spec?.volumes ?? []).filter((v) => v.configMap || v.secret || v.projected || v.downwardAPI).map((v) => v.name));
    const mounts: BindMount[] = [];
    for (const m of c.spec.volumeMounts ?? []) {
      const base = volumes.get(m.name);
      if (!base) throw new PodConfigError('CreateContainerConfigError', `container ${c.name} mounts volume ${m.name}, which the Pod does not declare`);
      if (m.subPathExpr) throw new PodConfigError('CreateContainerConfigError', `volumeMount ${m.name}: subPathExpr is not supported by the fake kubelet`);
      let source = base;
      if (m.subPath) {
        if (m.subPath.startsWith('/') || m.subPath.split('/').includes('..')) throw new PodConfigError('CreateContainerConfigError', `subPath ${m.subPath} must be relative without '..'`);
        source = join(base, m.subPath);
        await mkdir(source, { recursive: true }).catch(() => undefined);
        // Atomic-writer files are symlinks into ..data: bind what they point at, as the kubelet does.
        source = await realpath(source);
      }
      if (isWithin(this.#ctx.rootDir, m.mountPath)) {
        throw new PodConfigError('CreateContainerConfigError', `mountPath ${m.mountPath} would hide the fake kubelet's state directory ${this.#ctx.rootDir}; mount elsewhere`);
      }
      mounts.push({ source, target: m.mountPath, readOnly: Boolean(m.readOnly) || roVolumes.has(m.name), file: (await stat(source)).isFile() });
    }
    mounts.push({ source: terminationFile, target: c.spec.terminationMessagePath || '/dev/termination-log', readOnly: false, file: true });
    return mounts;
  }

  #user(c: ContainerRun, image: LocalImage): ProcessUser | undefined {
    const pod = this.#pod.spec?.securityContext ?? {};
    const own = c.spec.securityContext ?? {};
    const uid = own.runAsUser ?? pod.runAsUser ?? image.user?.uid ?? 0;
    const gid = own.runAsGroup ?? pod.runAsGroup ?? image.user?.gid ?? 0;
    if ((own.runAsNonRoot ?? pod.runAsNonRoot) && uid === 0) {
      throw new PodConfigError('CreateContainerConfigError', `container ${c.name} has runAsNonRoot and image will run as root (image ${c.spec.image} runs as uid 0 and no runAsUser is set)`);
    }
    const groups = [...new Set([...(pod.fsGroup !== undefined ? [pod.fsGroup] : []), ...(pod.supplementalGroups ?? [])])];
    if (uid === 0 && gid === 0 && groups.length === 0) return undefined;
    return { uid, gid, groups };
  }

  /** What a container's process sees: a container's usual variables and its own, nothing of the harness's. */
  #environment(launch: Launch): NodeJS.ProcessEnv {
    return {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOSTNAME: this.#pod.metadata?.name ?? '',
      HOME: launch.user && launch.user.uid !== 0 ? '/' : '/root',
      ...launch.image.env,
      ...Object.fromEntries(launch.env),
    };
  }

  async #terminationMessage(c: ContainerRun, file: string, exitCode: number, log: ContainerLog): Promise<string> {
    const content = await readFile(file).catch(() => Buffer.alloc(0));
    const message = content.subarray(0, MAX_TERMINATION_MESSAGE_BYTES).toString('utf8');
    if (message === '' && exitCode !== 0 && c.spec.terminationMessagePolicy === 'FallbackToLogsOnError') return log.tail(FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES);
    return message;
  }

  async #deadlineExceeded(): Promise<void> {
    if (this.#stopping) return;
    this.#failure = { reason: 'DeadlineExceeded', message: `Pod was active on the node longer than the specified deadline` };
    await this.#stopContainers(this.#pod.spec?.terminationGracePeriodSeconds ?? 30);
    await this.#requestStatus();
  }

  #terminateAndRemove(): Promise<void> {
    this.#terminating ??= (async () => {
      const grace = this.#pod.metadata?.deletionGracePeriodSeconds ?? this.#pod.spec?.terminationGracePeriodSeconds ?? 30;
      await this.#stopContainers(grace);
      await this.#requestStatus();
      try {
        await this.#ctx.core.deleteNamespacedPod({
          name: this.#pod.metadata?.name ?? '', namespace: this.#pod.metadata?.namespace ?? '', gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0, preconditions: { uid: this.#pod.metadata?.uid } },
        });
      } catch (e) {
        if (![404, 409].includes((e as { code?: number }).code ?? 0)) this.#ctx.log(`${this.#ref}: final delete failed: ${(e as Error).message}`);
      }
    })();
    return this.#terminating;
  }

  /** SIGTERM to each running container's main process, SIGKILL to all of it after `graceSeconds`. */
  async #stopContainers(graceSeconds: number): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#deadlineTimer);
    for (const wake of this.#wakers) wake();
    await Promise.all(this.#containers.map(async (c) => {
      // unshare ignores SIGTERM: the container's own first process is asked to stop; stop() kills the rest.
      const init = graceSeconds > 0 && c.process ? await containerInit(c.process.pid) : undefined;
      try {
        if (init !== undefined) process.kill(init, 'SIGTERM');
      } catch {
        // It has just exited: there is nothing left to ask.
      }
      await c.process?.stop(graceSeconds * 1000);
      await c.running;
    }));
  }

  #requestStatus(): Promise<void> {
    this.#statusDirty = true;
    this.#statusWrite ??= (async () => {
      while (this.#statusDirty && !this.#gone) {
        this.#statusDirty = false;
        await this.#writeStatus();
      }
      this.#statusWrite = undefined;
    })();
    return this.#statusWrite;
  }

  async #writeStatus(): Promise<void> {
    const body = { status: this.#status() };
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#ctx.core.patchNamespacedPodStatus(
          { name: this.#pod.metadata?.name ?? '', namespace: this.#pod.metadata?.namespace ?? '', body },
          setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
        );
        return;
      } catch (e) {
        const code = (e as { code?: number }).code;
        if (code === 404) { this.#gone = true; return; }
        if (attempt >= 5) { this.#ctx.log(`${this.#ref}: status write failed: ${(e as Error).message}`); return; }
        await sleep(200 * attempt);
      }
    }
  }

  #phase(): 'Pending' | 'Running' | 'Succeeded' | 'Failed' {
    if (this.#failure && this.#containers.every((c) => c.state.kind !== 'running')) return 'Failed';
    const main = this.#containers.filter((c) => !c.init);
    const policy = this.#pod.spec?.restartPolicy ?? 'Always';
    const finished = main.every((c) => c.state.kind === 'terminated' && (policy === 'Never' || (policy === 'OnFailure' && c.state.exitCode === 0) || this.#stopping));
    if (finished) return main.every((c) => c.state.kind === 'terminated' && c.state.exitCode === 0) ? 'Succeeded' : 'Failed';
    return main.some((c) => c.state.kind !== 'waiting' || c.restartCount > 0) ? 'Running' : 'Pending';
  }

  #status(): Record<string, unknown> {
    const phase = this.#phase();
    const main = this.#containers.filter((c) => !c.init);
    const inits = this.#containers.filter((c) => c.init);
    const initialized = inits.every((c) => c.state.kind === 'terminated' && c.state.exitCode === 0);
    const terminal = phase === 'Succeeded' || phase === 'Failed';
    const notReady = main.filter((c) => c.state.kind !== 'running').map((c) => c.name);
    const ready = !terminal && notReady.length === 0;
    const readyReason = terminal ? 'PodCompleted' : ready ? undefined : 'ContainersNotReady';
    const readyMessage = ready || terminal ? undefined : `containers with unready status: [${notReady.join(' ')}]`;
    const conditions = [
      this.#condition('PodReadyToStartContainers', true),
      this.#condition('Initialized', initialized, initialized ? undefined : 'ContainersNotInitialized'),
      this.#condition('ContainersReady', ready, readyReason, readyMessage),
      this.#condition('Ready', ready, readyReason, readyMessage),
    ];
    return {
      phase,
      conditions,
      hostIP: HOST_IP, hostIPs: [{ ip: HOST_IP }], podIP: HOST_IP, podIPs: [{ ip: HOST_IP }],
      startTime: this.#startTime.toISOString(),
      ...(this.#failure && terminal ? { reason: this.#failure.reason, message: this.#failure.message } : {}),
      containerStatuses: main.map((c) => this.#containerStatus(c)),
      ...(inits.length > 0 ? { initContainerStatuses: inits.map((c) => this.#containerStatus(c)) } : {}),
    };
  }

  /** One condition for the patch, keeping its transition time while its status holds; null clears a stale reason. */
  #condition(type: string, ok: boolean, reason?: string, message?: string): Record<string, unknown> {
    const status = ok ? 'True' : 'False';
    const previous = this.#transitions.get(type);
    const at = previous && previous.status === status ? previous.at : new Date();
    this.#transitions.set(type, { status, at });
    return { type, status, lastTransitionTime: at.toISOString(), reason: reason ?? null, message: message ?? null };
  }

  /** Plain JSON for the patch: absent states are null so a strategic merge removes the previous state. */
  #containerStatus(c: ContainerRun): Record<string, unknown> {
    const running = c.state.kind === 'running';
    return {
      name: c.name,
      image: c.spec.image ?? '',
      imageID: `fake://${c.spec.image}`,
      ready: running && !c.init,
      started: running,
      restartCount: c.restartCount,
      state: containerState(c.state),
      lastState: c.lastTerminated && c.state.kind !== 'terminated' ? containerState({ kind: 'terminated', ...c.lastTerminated }) : containerState(undefined),
      ...(c.state.kind === 'waiting' ? {} : { containerID: c.state.containerID }),
    };
  }
}

function containerState(state: ContainerState | undefined): Record<'waiting' | 'running' | 'terminated', unknown> {
  const none = { waiting: null, running: null, terminated: null };
  switch (state?.kind) {
    case undefined:
      return none;
    case 'waiting':
      return { ...none, waiting: { reason: state.reason, ...(state.message ? { message: state.message } : {}) } };
    case 'running':
      return { ...none, running: { startedAt: state.startedAt.toISOString() } };
    case 'terminated': {
      const { kind: _kind, startedAt, finishedAt, ...rest } = state;
      return { ...none, terminated: { ...rest, startedAt: startedAt.toISOString(), finishedAt: finishedAt.toISOString() } };
    }
  }
}
