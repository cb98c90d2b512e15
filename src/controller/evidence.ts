// What a terminal Job left to read, for both families. A terminal Job is not an outcome: the account comes from a
// result frame in the log of exactly one Pod the claim's admission envelope accepts, from a container that actually
// terminated, bound to the operation ID. A frame that may still be on its way gets 30 seconds from the Job's
// terminal condition.
import type { V1ContainerStateTerminated, V1Job, V1Pod } from '@kubernetes/client-node';
import type { ActiveOperation, ManagerRecord } from '../shared/api/shapes.js';
import { recordedManager } from '../shared/job/rebuild.js';
import { RUNNER_CONTAINER } from '../shared/job/build.js';
import { EVIDENCE_FINALIZER, familyOfKind, JOB_ANNOTATIONS, operationsOfSelector } from '../shared/job/metadata.js';
import { ApiError, isNotFound } from '../shared/kube-client.js';
import { podEnvelopeVerdict } from '../shared/pod-envelope.js';
import { FrameError, MAX_RESULT_LOG_BYTES, mayStillArrive, parseResultFor, type RunnerResult } from '../shared/runner-protocol.js';
import type { RunnerOperation } from '../shared/runner-env.js';
import { hasFinalizer, removeFinalizer } from './finalizer.js';
import { countResultReadFailure } from './operator-metrics.js';
import type { OwnerPass, OwnerResource } from './pass.js';

type AnyPass = OwnerPass<OwnerResource>;

/** How long after the Job's terminal condition a frame that may still arrive is waited for. */
const FRAME_ARRIVAL_WINDOW_MS = 30_000;
/** How long a terminal Job's Pod may take to report its container terminated before the evidence is given up. */
const POD_STOP_GRACE_MS = 60_000;
/** How long result reads may keep failing (measured in this process) before the log counts as gone. */
const READ_FAILURE_BUDGET_MS = 120_000;

/** The Job's terminal condition (Complete or Failed, True), if it has one. */
function terminalCondition(job: V1Job): { type: string; lastTransitionTime?: Date | string } | undefined {
  return job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
}

export function isJobTerminal(job: V1Job): boolean {
  return terminalCondition(job) !== undefined;
}

/** A Pod in a terminal phase: none of its containers runs any more. */
export function podStopped(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

/**
 * An Apply's Pods, namespace-wide: those carrying its operation ID, and those controlled by any of `jobUIDs` (a
 * selector on labels could miss one).
 */
export async function applyPodsOf(pass: AnyPass, operationId: string, jobUIDs: readonly (string | undefined)[]): Promise<V1Pod[]> {
  const uids = new Set(jobUIDs.filter((uid): uid is string => uid !== undefined));
  const pods = await pass.deps.client.list<V1Pod>('v1', 'Pod', pass.namespace);
  return pods.filter((pod) => pod.metadata?.annotations?.[JOB_ANNOTATIONS.operationId] === operationId ||
    pod.metadata?.ownerReferences?.some((r) => r.controller === true && uids.has(r.uid)) === true);
}

/**
 * Whether an Apply may still write, decided once for both families: a Job under its name that is not terminal
 * (whichever UID it has), or one of its Pods that has not stopped.
 */
export function applyMayStillRun(job: V1Job | undefined, pods: readonly V1Pod[]): boolean {
  return (job !== undefined && !isJobTerminal(job)) || pods.some((pod) => !podStopped(pod));
}

function msSinceTerminal(job: V1Job, now: Date): number {
  const at = terminalCondition(job)?.lastTransitionTime;
  const ms = at === undefined ? NaN : new Date(at).getTime();
  return Number.isFinite(ms) ? now.getTime() - ms : Infinity;
}

export type PodEvidence =
  | { kind: 'pod'; pod: V1Pod; terminated: V1ContainerStateTerminated }
  | { kind: 'wait'; why: string }
  | { kind: 'none'; why: string };

/**
 * The one Pod whose frame counts: controlled by exactly this Job (by UID, looked up namespace-wide, not by
 * label), inside the claim's admission envelope (src/shared/pod-envelope.ts: the Job's template, under the
 * snapshot's ServiceAccount, RuntimeClass and PriorityClass) and carrying the claim's operation ID, with its runner
 * container terminated. Any other Pod of the Job makes the evidence unusable, whatever it is.
 */
export async function collectTerminalPodEvidence(pass: AnyPass, claim: ActiveOperation, job: V1Job): Promise<PodEvidence> {
  const jobUid = job.metadata?.uid;
  const pods = await pass.deps.client.list<V1Pod>('v1', 'Pod', pass.namespace);
  const owned = pods.filter((pod) => {
    const controllers = (pod.metadata?.ownerReferences ?? []).filter((r) => r.controller === true);
    return controllers.length === 1 && controllers[0]!.kind === 'Job' && controllers[0]!.uid === jobUid;
  });
  if (owned.length === 0) return { kind: 'none', why: `Job ${claim.jobName} left no Pod to read` };
  if (owned.length > 1) return { kind: 'none', why: `Job ${claim.jobName} ran ${owned.length} Pods; a result is read from exactly one` };
  const pod = owned[0]!;
  const outside = (reason: string): PodEvidence => ({ kind: 'none', why: `Pod ${pod.metadata?.name} is outside the claim's admission envelope: ${reason}` });
  if (!claim.admissionSnapshot) return outside('the claim recorded no admission snapshot');
  // Any creator can write a controller reference and the annotations: the Pod is held to the template itself.
  const envelope = podEnvelopeVerdict(pod, job, claim.admissionSnapshot);
  if (!envelope.ok) return outside(envelope.reason);
  if (pod.metadata?.annotations?.[JOB_ANNOTATIONS.operationId] !== claim.id) return outside('it carries another operation ID');
  const terminated = pod.status?.containerStatuses?.find((c) => c.name === RUNNER_CONTAINER)?.state?.terminated;
  if (terminated) return { kind: 'pod', pod, terminated };
  if (msSinceTerminal(job, pass.now()) > POD_STOP_GRACE_MS) {
    return { kind: 'none', why: `the runner container of Pod ${pod.metadata?.name} never reported terminating` };
  }
  return { kind: 'wait', why: `the runner container of Pod ${pod.metadata?.name} has not terminated yet` };
}

export type LogRead = { kind: 'log'; text: string } | { kind: 'gone'; why: string } | { kind: 'retry'; why: string };

/**
 * The runner container's log, bounded to what a whole frame needs. A Pod that is gone, or reads that kept failing
 * for two minutes in this process, count as a log that is gone. Each read is bounded by the client's request
 * timeout (src/shared/kube-client.ts), so a kubelet that never answers costs a pass that long, and then a retry.
 */
export async function readRunnerLog(pass: AnyPass, claim: ActiveOperation, pod: V1Pod): Promise<LogRead> {
  try {
    const text = await pass.deps.client.readPodLog(pass.namespace, pod.metadata?.name ?? '', { container: RUNNER_CONTAINER, limitBytes: MAX_RESULT_LOG_BYTES });
    pass.deps.readFailures.delete(claim.id);
    return { kind: 'log', text };
  } catch (err) {
    if (isNotFound(err)) return { kind: 'gone', why: 'the Pod\'s log is gone' };
    countResultReadFailure(pass.kind, err);
    const now = pass.deps.clock.monotonicMs();
    const first = pass.deps.readFailures.get(claim.id) ?? now;
    pass.deps.readFailures.set(claim.id, first);
    pass.event('Warning', 'ResultReadFailed', `the log of Pod ${pod.metadata?.name} could not be read: ${(err as Error).message}`);
    if (now - first >= READ_FAILURE_BUDGET_MS) {
      pass.deps.readFailures.delete(claim.id);
      return { kind: 'gone', why: `the log of Pod ${pod.metadata?.name} could not be read for ${Math.round((now - first) / 1000)} s (last: ${(err as Error).message})` };
    }
    return { kind: 'retry', why: (err as Error).message };
  }
}

/**
 * Whether to wait for a frame that may still arrive: the parse found none yet (or a log ending inside one), and
 * the Job turned terminal less than 30 seconds ago. Measured from the Job, so a restart neither resets nor extends it.
 */
export function awaitFrameArrival(pass: AnyPass, job: V1Job, parseError: unknown): number | undefined {
  if (!mayStillArrive(parseError)) return undefined;
  const elapsed = msSinceTerminal(job, pass.now());
  return elapsed < FRAME_ARRIVAL_WINDOW_MS ? Math.min(2_000, FRAME_ARRIVAL_WINDOW_MS - elapsed) : undefined;
}

/** Which manager release dispatched the run, as the Job recorded it (absent when no Job was read). */
export function dispatchedBy(job: V1Job | undefined): { dispatchedBy?: ManagerRecord } {
  const recorded = recordedManager(job);
  return recorded ? { dispatchedBy: recorded } : {};
}

export type FrameRead<O extends RunnerOperation> =
  | { kind: 'frame'; result: RunnerResult<O> }
  /** No frame: why, and what a stand-in may read instead (the runner's terminated state and the log, if any). */
  | { kind: 'none'; why: string; terminated?: V1ContainerStateTerminated; log?: string }
  | { kind: 'wait'; ms: number; why: string };

/** The operation's result frame, from the one Pod the envelope accepts; or why there is none; or how long to wait for it. */
export async function readOperationFrame<O extends RunnerOperation>(pass: AnyPass, claim: ActiveOperation, job: V1Job, operation: O): Promise<FrameRead<O>> {
  const evidence = await collectTerminalPodEvidence(pass, claim, job);
  if (evidence.kind === 'wait') return { kind: 'wait', ms: 2_000, why: evidence.why };
  if (evidence.kind === 'none') return { kind: 'none', why: evidence.why };
  const log = await readRunnerLog(pass, claim, evidence.pod);
  if (log.kind === 'retry') return { kind: 'wait', ms: 5_000, why: `the result could not be read yet: ${log.why}` };
  const text = log.kind === 'log' ? log.text : undefined;
  let why = log.kind === 'gone' ? log.why : '';
  if (text !== undefined) {
    try {
      return { kind: 'frame', result: parseResultFor(text, operation, claim.id) };
    } catch (e) {
      if (!(e instanceof FrameError)) throw e;
      const wait = awaitFrameArrival(pass, job, e);
      if (wait !== undefined) return { kind: 'wait', ms: wait, why: 'the result frame may still arrive' };
      why = e.foreignProtocolVersion !== undefined ? `the runner speaks protocol ${e.foreignProtocolVersion}, not this manager's` : `no result frame: ${e.message}`;
    }
  }
  return { kind: 'none', why, terminated: evidence.terminated, ...(text !== undefined ? { log: text } : {}) };
}

/**
 * Lets go of the Pods whose evidence this resource no longer needs: removes EVIDENCE_FINALIZER from every Pod of
 * its operations that carries it, except the claim in flight's, whose outcome is not recorded yet. Called after the
 * status write that records an outcome, and before the resource's own finalizer comes off, so a process that stops
 * in between leaves a Pod the next such call lets go of.
 */
export async function releaseRunEvidence(pass: AnyPass): Promise<void> {
  const family = familyOfKind(pass.owner().kind);
  if (!family) return;
  const pods = await pass.deps.client.list<V1Pod>('v1', 'Pod', pass.namespace, { labelSelector: operationsOfSelector(family, pass.name) });
  const inFlight = pass.claim?.id;
  for (const pod of pods) {
    if (!hasFinalizer(pod, EVIDENCE_FINALIZER) || (inFlight !== undefined && pod.metadata?.annotations?.[JOB_ANNOTATIONS.operationId] === inFlight)) continue;
    try {
      await removeFinalizer(pass.deps.client, pod, EVIDENCE_FINALIZER);
    } catch (err) {
      // Gone already, or changed since the list (the finalizer test failed): the next call reads it again.
      if (!isNotFound(err) && !(err instanceof ApiError && err.code === 422)) throw err;
    }
  }
}
