// What the evidence tests add to a migration world: Pods the test itself puts under an Apply Job, and a way to keep
// the Job controller from creating the Job's own Pod.
//
// - A ghost Node: a Node object whose kubelet endpoint is a log server in this process. A Pod bound to it runs
//   nowhere; the test writes its status (as a kubelet would) and what its log holds (or that the log is gone, as
//   when a Node is lost). So a Pod that is exactly the Job's template, which the envelope must accept, can be
//   made to report whatever the test needs.
// - A ValidatingAdmissionPolicy refusing the Job controller's Apply Pods in the test's namespace, so the only Pod
//   of an Apply Job is the one the test creates.
// - Forged runner output, written with the runner protocol's own writer.
import type { Test } from 'tap';
import type { V1Job, V1Node, V1Pod } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import type { PtahMigrationPlan } from '../../src/shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { RUNNER_CONTAINER } from '../../src/shared/job/build.js';
import { registerResource, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import { encodeFrame, RUNNER_PROTOCOL_VERSION, type RunnerResult } from '../../src/shared/runner-protocol.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { ContainerLog } from '../../tools/stack/kubelet/container-log.js';
import { startLogServer } from '../../tools/stack/kubelet/log-server.js';
import { waitFor } from '../../tools/stack/wait.js';
import type { MigrationWorld } from './migration-world.js';

const ADMISSION = 'admissionregistration.k8s.io/v1';
registerResource(ADMISSION, 'ValidatingAdmissionPolicy', { plural: 'validatingadmissionpolicies', namespaced: false });
registerResource(ADMISSION, 'ValidatingAdmissionPolicyBinding', { plural: 'validatingadmissionpolicybindings', namespaced: false });

const JOB_CONTROLLER = 'system:serviceaccount:kube-system:job-controller';
const JOB_TRACKING_FINALIZER = 'batch.kubernetes.io/job-tracking';
const KEEP_FINALIZER = 'ptah-test/keep';
/** A Pod carrying this label is refused too, so the test can see the policy in force before it relies on it. */
const PROBE_LABEL = 'ptah-test/admission-probe';

export const podRef = (w: MigrationWorld, name: string): ResourceRef => ({ apiVersion: 'v1', kind: 'Pod', namespace: w.ns, name });

/** Pods whose controller is the Job with `uid`. */
export async function podsOfJob(w: MigrationWorld, uid: string): Promise<V1Pod[]> {
  return (await w.admin.list<V1Pod>('v1', 'Pod', w.ns)).filter((p) => p.metadata?.ownerReferences?.some((r) => r.controller === true && r.uid === uid));
}

/** Until the test ends, the Job controller cannot create an Apply Pod in the world's namespace. */
export async function keepJobControllerFromApplyPods(t: Test, w: MigrationWorld): Promise<void> {
  const name = `ptah-test-no-apply-pods-${w.ns}`;
  const policy = {
    apiVersion: ADMISSION,
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
      matchConditions: [{
        name: 'job-controller-apply-pod-or-probe',
        expression: `object.metadata.?labels[?'${PROBE_LABEL}'].hasValue() || (request.userInfo.username == '${JOB_CONTROLLER}' && ` +
          `object.metadata.?labels[?'operator.ptah.run/operation'].orValue('') == 'apply')`,
      }],
      validations: [{ expression: 'false', message: 'the test keeps the Job controller from creating this Apply Pod' }],
    },
  };
  const binding = {
    apiVersion: ADMISSION,
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name },
    spec: { policyName: name, validationActions: ['Deny'], matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': w.ns } } } },
  };
  await w.admin.create(policy as KubeObject);
  await w.admin.create(binding as KubeObject);
  t.teardown(async () => {
    for (const kind of ['ValidatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy']) {
      await w.admin.delete({ apiVersion: ADMISSION, kind, name }).catch(() => undefined);
    }
  });
  // The API server compiles a new policy asynchronously: wait until a probe Pod is refused by it.
  const probe: V1Pod = {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name: 'admission-probe', namespace: w.ns, labels: { [PROBE_LABEL]: 'true' } },
    spec: { containers: [{ name: 'probe', image: 'ptah-fixture/sh:test', args: ['true'] }] },
  };
  await waitFor(async () => {
    const refused = await w.admin.create(probe, { dryRun: true }).then(() => undefined, (e: Error) => (/no-apply-pods/.test(e.message) ? true : undefined));
    return refused;
  }, { what: 'the policy keeping the Job controller from Apply Pods to be in force', timeoutMs: 30_000, intervalMs: 250 });
}

/** A Node no kubelet runs on; its log endpoint serves what the test puts in `logs` (a Pod not there: log gone). */
export interface GhostNode {
  name: string;
  /** The runner container's log of each Pod, by Pod name. */
  logs: Map<string, ContainerLog>;
}

export async function ghostNode(t: Test, w: MigrationWorld): Promise<GhostNode> {
  const cluster = sharedCluster();
  const pki = await cluster.pki();
  const name = `ghost-${w.ns}`.slice(0, 63);
  const serving = await pki.issueServing(name, { ips: ['127.0.0.1'] });
  const logs = new Map<string, ContainerLog>();
  const server = await startLogServer({
    cert: await readFile(serving.cert, 'utf8'),
    key: await readFile(serving.key, 'utf8'),
    clientCA: pki.caPem,
    lookup: (namespace, pod, container) => {
      const log = namespace === w.ns && container === RUNNER_CONTAINER ? logs.get(pod) : undefined;
      return log ? { current: log } : { status: 404, error: `the log of ${namespace}/${pod} is gone` };
    },
  });
  const node: V1Node = {
    apiVersion: 'v1', kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    status: {
      addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
      daemonEndpoints: { kubeletEndpoint: { Port: server.port } },
      conditions: [{ type: 'Ready', status: 'True', reason: 'GhostReady', message: 'a Node the evidence test stands in for', lastHeartbeatTime: new Date(), lastTransitionTime: new Date() }],
    },
  };
  await w.admin.create(node);
  t.teardown(async () => {
    // Nothing runs the ghost's Pods, so nothing would finish deleting them: they go at once.
    for (const pod of await w.admin.list<V1Pod>('v1', 'Pod', w.ns).catch(() => [])) {
      if (pod.spec?.nodeName !== name) continue;
      const ref = podRef(w, pod.metadata!.name!);
      if (pod.metadata?.finalizers?.length) await w.admin.patch(ref, { metadata: { finalizers: null } }, 'merge').catch(() => undefined);
      await w.admin.delete(ref, { gracePeriodSeconds: 0 }).catch(() => undefined);
    }
    await w.admin.delete({ apiVersion: 'v1', kind: 'Node', name }).catch(() => undefined);
    await server.close();
  });
  return { name, logs };
}

/** A log holding `text` on the runner's stdout, closed as a terminated container's is. */
export function logOf(text: string): ContainerLog {
  const log = new ContainerLog();
  log.write('stdout', Buffer.from(text));
  log.close();
  return log;
}

interface PodOptions {
  /** Where the Pod is bound (a ghost Node), or unset for the fake kubelet to take it. */
  nodeName?: string;
  /** Counted by the Job controller towards the Job's completion (the finalizer its own Pods carry). */
  counted?: boolean;
  /** Kept by a finalizer of the test's, so a deletion (the Job controller removing a Pod too many) leaves it in place. */
  kept?: boolean;
}

/** The metadata the Job controller gives the Pods it creates from the Job's template. */
function podMetadataOf(job: V1Job, name: string, { counted = true, kept = false }: PodOptions): V1Pod['metadata'] {
  const finalizers = [...(counted ? [JOB_TRACKING_FINALIZER] : []), ...(kept ? [KEEP_FINALIZER] : [])];
  const template = job.spec!.template.metadata ?? {};
  return {
    name,
    namespace: job.metadata!.namespace,
    labels: { ...template.labels },
    annotations: { ...template.annotations },
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: job.metadata!.name!, uid: job.metadata!.uid!, controller: true, blockOwnerDeletion: true }],
    ...(finalizers.length > 0 ? { finalizers } : {}),
  };
}

/** A Pod made by the test that is the Job's template exactly, as the Job controller would make it. */
export function templatePod(job: V1Job, name: string, options: PodOptions = {}): V1Pod {
  const spec = structuredClone(job.spec!.template.spec!);
  return { apiVersion: 'v1', kind: 'Pod', metadata: podMetadataOf(job, name, options), spec: { ...spec, ...(options.nodeName ? { nodeName: options.nodeName } : {}) } };
}

/**
 * A Pod made by the test with the Job as its controller and the template's labels and annotations, whose runner
 * container is a shell printing `stdout` (ptah-fixture/sh:test runs `/bin/sh -c <args>` on the fake kubelet).
 */
export function shellPod(job: V1Job, name: string, stdout: string): V1Pod {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: podMetadataOf(job, name, {}),
    spec: {
      restartPolicy: 'Never',
      containers: [{ name: RUNNER_CONTAINER, image: 'ptah-fixture/sh:test', args: ['printf \'%s\' "$FORGED"'], env: [{ name: 'FORGED', value: stdout }] }],
    },
  };
}

/** Writes the terminated status a kubelet writes for a Pod whose runner container exited `exitCode` with `message`. */
export async function terminatePod(w: MigrationWorld, pod: V1Pod, exitCode: number, message?: string): Promise<V1Pod> {
  const at = new Date().toISOString();
  const status = {
    phase: exitCode === 0 ? 'Succeeded' : 'Failed',
    startTime: at,
    containerStatuses: [{
      name: RUNNER_CONTAINER,
      image: pod.spec!.containers[0]!.image,
      imageID: '',
      ready: false,
      restartCount: 0,
      started: false,
      state: { terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt: at, finishedAt: at, ...(message ? { message } : {}) } },
    }],
  };
  return w.admin.patch<V1Pod>(podRef(w, pod.metadata!.name!), { status }, 'merge', { subresource: 'status' });
}

/** The plan's migrations as a run report lists them. */
const applied = (plan: PtahMigrationPlan) => plan.spec.migrations.map(({ version, name, checksum }) => ({ version, name, checksum }));
const planned = (plan: PtahMigrationPlan) => plan.spec.migrations.map(({ version, checksum }) => ({ version, checksum }));

/** A result a runner would frame for the claim; `fields` overrides or (as undefined) removes fields. */
export function runResult(claim: ActiveOperation, plan: PtahMigrationPlan, outcome: 'applied' | 'failed', fields: Partial<RunnerResult<'migration-apply'>> = {}): RunnerResult<'migration-apply'> {
  const base: RunnerResult<'migration-apply'> = outcome === 'applied'
    ? {
      protocolVersion: RUNNER_PROTOCOL_VERSION, operation: 'migration-apply', operationId: claim.id, childExitCode: 0,
      coordinationDigest: claim.coordinationDigest, targetIdentityDigest: claim.targetIdentityDigest, mutationStarted: true, uncertain: false,
      migrationRun: { outcome: 'applied', applied: applied(plan), planned: planned(plan) },
    }
    : {
      protocolVersion: RUNNER_PROTOCOL_VERSION, operation: 'migration-apply', operationId: claim.id, childExitCode: 1,
      coordinationDigest: claim.coordinationDigest, targetIdentityDigest: claim.targetIdentityDigest, mutationStarted: false, uncertain: false,
      error: { code: 'executor_failed', message: 'the first migration failed; nothing was applied' },
      migrationRun: { outcome: 'failed', applied: [], planned: planned(plan), failedVersion: plan.spec.migrations[0]!.version },
    };
  // A started executor reports the physical database it opened, as the reading behind the claim did.
  const started = (fields.childExitCode ?? base.childExitCode) !== -1;
  const identity = started && claim.physicalIdentityDigest ? { physicalIdentityDigest: claim.physicalIdentityDigest, physicalIdentityKind: 'system-identifier' as const } : {};
  const result = { ...base, ...identity, ...fields } as Record<string, unknown>;
  for (const key of Object.keys(result)) if (result[key] === undefined) delete result[key];
  return result as unknown as RunnerResult<'migration-apply'>;
}

/** The frame a runner writes for `result`, with a stderr line before it as a real log has. */
export const framed = (result: RunnerResult<'migration-apply'>): string => `ptah-runner: a diagnostic line\n${encodeFrame(result)}`;
