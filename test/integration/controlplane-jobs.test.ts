// The shared control plane runs Jobs the way a cluster does: the Job controller creates Pods, the fake kubelet binds
// and runs them as local processes, and what the operator depends on (logs through pods/log, termination
// messages, exit codes, Secret env, volumes, deadlines, TTL and garbage collection) comes back through the API.
import t from 'tap';
import { Writable } from 'node:stream';
import {
  BatchV1Api, CoreV1Api, Log, type V1Container, type V1Job, type V1JobCondition, type V1Pod, type V1PodSpec,
} from '@kubernetes/client-node';
import { sharedCluster, testNamespace } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';
import { RUNNER_IMAGE } from '../../tools/stack/kubelet/images.js';
import { RUNNER_ENV } from '../../src/shared/runner-env.js';

const cluster = sharedCluster();
const admin = cluster.kubeConfig('admin');
const core = admin.makeApiClient(CoreV1Api);
const batch = admin.makeApiClient(BatchV1Api);

const SCRIPT_IMAGE = 'ptah-fixture/job-script:test';
const SH_IMAGE = 'ptah-fixture/sh:test';
const WAIT_MS = 60_000;

function jobOf(name: string, container: V1Container, extra: { job?: Partial<V1Job['spec']>; pod?: Partial<V1PodSpec> } = {}): V1Job {
  return {
    metadata: { name },
    spec: {
      backoffLimit: 0,
      ...extra.job,
      template: { spec: { restartPolicy: 'Never', containers: [container], ...extra.pod } },
    },
  };
}

function podOf(name: string, container: V1Container, extra: Partial<V1PodSpec> = {}): V1Pod {
  return { metadata: { name }, spec: { restartPolicy: 'Never', containers: [container], ...extra } };
}

/** Waits until the Job has a Complete or Failed condition that is True and returns it. */
function finished(namespace: string, name: string): Promise<V1JobCondition> {
  return waitFor(async () => {
    const job = await batch.readNamespacedJob({ name, namespace });
    return job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
  }, { what: `Job ${namespace}/${name} to finish`, timeoutMs: WAIT_MS });
}

async function jobPods(namespace: string, name: string): Promise<V1Pod[]> {
  return (await core.listNamespacedPod({ namespace, labelSelector: `batch.kubernetes.io/job-name=${name}` })).items;
}

function podWhere(namespace: string, name: string, what: string, test: (pod: V1Pod) => boolean): Promise<V1Pod> {
  return waitFor(async () => {
    const pod = await core.readNamespacedPod({ name, namespace });
    return test(pod) ? pod : undefined;
  }, { what: `pod ${namespace}/${name} ${what}`, timeoutMs: WAIT_MS });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
}

function isNotFound(e: unknown): boolean {
  return (e as { code?: number }).code === 404;
}

t.test('a Job runs to Complete and its log, termination message, Secret env and ConfigMap file come back', async (t) => {
  const ns = await testNamespace(t);
  const secretValue = `s3cret-${Math.random().toString(36).slice(2, 8)}`;
  await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'fixture' }, stringData: { value: secretValue } } });
  await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'fixture' }, data: { 'settings.txt': 'from-the-configmap' } } });
  await batch.createNamespacedJob({
    namespace: ns,
    body: jobOf('complete', {
      name: 'main',
      image: SCRIPT_IMAGE,
      env: [
        { name: 'FIXTURE_SECRET', valueFrom: { secretKeyRef: { name: 'fixture', key: 'value' } } },
        { name: 'FIXTURE_CONFIG_FILE', value: '/ptah-fixture/config/settings.txt' },
        { name: 'FIXTURE_TERMINATION_MESSAGE', value: 'finished as planned' },
      ],
      volumeMounts: [{ name: 'config', mountPath: '/ptah-fixture/config' }],
    }, { pod: { securityContext: { runAsUser: 1234, runAsGroup: 2345 }, volumes: [{ name: 'config', configMap: { name: 'fixture' } }] } }),
  });

  const condition = await finished(ns, 'complete');
  t.equal(condition.type, 'Complete', `the Job completed (${condition.reason ?? ''} ${condition.message ?? ''})`);
  const pods = await jobPods(ns, 'complete');
  t.equal(pods.length, 1, 'one Pod ran');
  const pod = pods[0] as V1Pod;
  const name = pod.metadata?.name ?? '';
  t.equal(pod.status?.phase, 'Succeeded');
  t.equal(pod.spec?.nodeName, cluster.state.nodeName, 'the fake kubelet bound it');
  const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
  t.match(terminated, { exitCode: 0, reason: 'Completed', message: 'finished as planned' }, 'the termination message reached the Pod status');

  const log = await core.readNamespacedPodLog({ name, namespace: ns, container: 'main' });
  const lines = log.split('\n');
  t.match(lines[0], /^first stdout line pid=\d+ uid=1234 gid=2345$/, 'ran as runAsUser/runAsGroup');
  t.same(lines.slice(1), ['a stderr line', `secret=${secretValue}`, 'config=from-the-configmap', ''],
    'stderr interleaved between stdout lines, Secret env and ConfigMap file visible to the process');
  t.equal(await core.readNamespacedPodLog({ name, namespace: ns, tailLines: 1 }), 'config=from-the-configmap\n', 'tailLines');
  t.equal(await core.readNamespacedPodLog({ name, namespace: ns, limitBytes: 12 }), 'first stdout', 'limitBytes');
});

t.test('a failing container reports its real exit code and, with FallbackToLogsOnError, its log tail', async (t) => {
  const ns = await testNamespace(t);
  await batch.createNamespacedJob({
    namespace: ns,
    body: jobOf('fails', {
      name: 'main', image: SCRIPT_IMAGE, terminationMessagePolicy: 'FallbackToLogsOnError',
      env: [{ name: 'FIXTURE_EXIT_CODE', value: '3' }],
    }),
  });
  const condition = await finished(ns, 'fails');
  t.match(condition, { type: 'Failed', reason: 'BackoffLimitExceeded' });
  const [pod] = await jobPods(ns, 'fails');
  t.equal(pod?.status?.phase, 'Failed');
  const terminated = pod?.status?.containerStatuses?.[0]?.state?.terminated;
  t.equal(terminated?.exitCode, 3);
  t.equal(terminated?.reason, 'Error');
  t.match(terminated?.message, /a stderr line\nsecret=unset\nconfig=\n$/, 'the message is the tail of the log');
});

t.test('volumes and security: projected ServiceAccount volume, emptyDir, atomic-writer layout, read-only root', async (t) => {
  const ns = await testNamespace(t);
  await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'layout' }, data: { 'a.txt': 'A' } } });
  const script = [
    'cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo',
    'test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-present',
    'echo written > /scratch/file && cat /scratch/file',
    'ls -a /ptah-fixture/layout | grep -v "^\\.\\.20" | tr "\\n" " "; echo',
    'readlink /ptah-fixture/layout/a.txt',
    'touch /ptah-fixture/layout/new 2>/dev/null && echo configmap-writable || echo configmap-read-only',
    'touch /root-write-probe 2>/dev/null && echo root-writable || echo root-read-only',
    'grep NoNewPrivs /proc/self/status | tr -d "\t "',
  ].join('\n');
  await core.createNamespacedPod({
    namespace: ns,
    body: podOf('volumes', {
      name: 'main', image: SH_IMAGE, args: [script],
      securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false },
      volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }, { name: 'layout', mountPath: '/ptah-fixture/layout' }],
    }, {
      securityContext: { runAsUser: 4321, runAsGroup: 4321 },
      volumes: [{ name: 'scratch', emptyDir: {} }, { name: 'layout', configMap: { name: 'layout' } }],
    }),
  });
  const pod = await podWhere(ns, 'volumes', 'to finish', (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed');
  const log = await core.readNamespacedPodLog({ name: 'volumes', namespace: ns });
  t.equal(pod.status?.phase, 'Succeeded', 'the script ran to its end');
  t.same(log.split('\n'), [ns, 'token-present', 'written', '. .. ..data a.txt ', '..data/a.txt', 'configmap-read-only', 'root-read-only', 'NoNewPrivs:1', '']);
});

t.test('ptah-runner:dev runs the repository runner the way the operation Job runs it (nonroot, read-only root, /work)', async (t) => {
  const ns = await testNamespace(t);
  await core.createNamespacedPod({
    namespace: ns,
    body: podOf('runner', {
      name: 'runner', image: RUNNER_IMAGE, command: ['/ptah-runner'], args: ['--operation', 'observe'], workingDir: '/work',
      securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, runAsNonRoot: true },
      volumeMounts: [{ name: 'work', mountPath: '/work' }],
    }, { automountServiceAccountToken: false, volumes: [{ name: 'work', emptyDir: {} }] }),
  });
  const pod = await podWhere(ns, 'runner', 'to finish', (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed');
  const log = await core.readNamespacedPodLog({ name: 'runner', namespace: ns });
  t.equal(pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, 2, 'the runner refuses to work without an operation ID');
  t.match(log, new RegExp(RUNNER_ENV.operationId), 'and says so in its log');
});

t.test('follow streams a running container; deleting the Pod sends SIGTERM and removes it', async (t) => {
  const ns = await testNamespace(t);
  // The second line can only be written once the test deletes the Pod, so the stream must have been live.
  const script = "trap 'echo line-2; exit 0' TERM; echo line-1; while :; do sleep 0.1; done";
  await core.createNamespacedPod({ namespace: ns, body: podOf('follow', { name: 'main', image: SH_IMAGE, args: [script] }, { terminationGracePeriodSeconds: 20 }) });
  await podWhere(ns, 'follow', 'to run', (p) => p.status?.phase === 'Running');

  const chunks: string[] = [];
  let firstChunk: () => void = () => undefined;
  let failed: (e: Error) => void = () => undefined;
  const gotFirst = new Promise<void>((resolve, reject) => { firstChunk = resolve; failed = reject; });
  const ended = new Promise<void>((resolve, reject) => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) { chunks.push(chunk.toString()); firstChunk(); done(); },
      final(done) { resolve(); done(); },
    });
    new Log(admin).log(ns, 'follow', 'main', sink, { follow: true }).catch((e: Error) => { failed(e); reject(e); });
  });
  await gotFirst;
  t.equal(chunks.join(''), 'line-1\n', 'the first line arrives while the container runs');
  await core.deleteNamespacedPod({ name: 'follow', namespace: ns });
  await ended;
  t.equal(chunks.join(''), 'line-1\nline-2\n', 'the stream carries what the container wrote on SIGTERM, then ends');
  const removed = await waitFor(async () => {
    try {
      await core.readNamespacedPod({ name: 'follow', namespace: ns });
      return undefined;
    } catch (e) {
      return isNotFound(e) ? true : undefined;
    }
  }, { what: 'the deleted Pod to be removed', timeoutMs: WAIT_MS });
  t.equal(removed, true, 'the kubelet removed the Pod after its container stopped');
});

t.test('a Job past activeDeadlineSeconds fails with DeadlineExceeded and its process is killed', async (t) => {
  const ns = await testNamespace(t);
  // Ignores SIGTERM, so only the SIGKILL after the grace period can end it. Its PID as the host sees it: the
  // container has a PID namespace of its own (where it is 1), but /proc is the host's.
  const script = "trap '' TERM; read -r pid _ < /proc/self/stat; echo pid=$pid; while :; do sleep 1; done";
  await batch.createNamespacedJob({
    namespace: ns,
    body: jobOf('deadline', { name: 'main', image: SH_IMAGE, args: [script] }, { job: { activeDeadlineSeconds: 8 }, pod: { terminationGracePeriodSeconds: 2 } }),
  });
  const pid = await waitFor(async () => {
    const [pod] = await jobPods(ns, 'deadline');
    if (!pod?.metadata?.name || pod.status?.phase !== 'Running') return undefined;
    const match = /pid=(\d+)/.exec(await core.readNamespacedPodLog({ name: pod.metadata.name, namespace: ns }));
    return match ? Number(match[1]) : undefined;
  }, { what: 'the deadline Job to print its PID', timeoutMs: WAIT_MS });
  t.ok(processAlive(pid), `process ${pid} runs before the deadline`);

  const condition = await finished(ns, 'deadline');
  t.match(condition, { type: 'Failed', reason: 'DeadlineExceeded' });
  await waitFor(async () => (processAlive(pid) ? undefined : true), { what: `process ${pid} to be killed`, timeoutMs: WAIT_MS });
  t.notOk(processAlive(pid), `process ${pid} is gone`);
});

t.test('ttlSecondsAfterFinished: the TTL controller deletes the Job and the garbage collector its Pods', async (t) => {
  const ns = await testNamespace(t);
  await batch.createNamespacedJob({ namespace: ns, body: jobOf('ttl', { name: 'main', image: SH_IMAGE, args: ['exit 0'] }, { job: { ttlSecondsAfterFinished: 5 } }) });
  const condition = await finished(ns, 'ttl');
  t.equal(condition.type, 'Complete');
  const pods = await jobPods(ns, 'ttl');
  t.equal(pods.length, 1, 'the Job had its Pod when it completed');
  await waitFor(async () => {
    try {
      await batch.readNamespacedJob({ name: 'ttl', namespace: ns });
      return undefined;
    } catch (e) {
      return isNotFound(e) ? true : undefined;
    }
  }, { what: 'the TTL controller to delete the Job', timeoutMs: WAIT_MS });
  await waitFor(async () => ((await jobPods(ns, 'ttl')).length === 0 ? true : undefined), { what: 'the Pods to be collected', timeoutMs: WAIT_MS });
  t.same(await jobPods(ns, 'ttl'), [], 'no Pod of the Job is left');
});

t.test('a container whose Secret is missing waits with CreateContainerConfigError, then starts once it exists', async (t) => {
  const ns = await testNamespace(t);
  await core.createNamespacedPod({
    namespace: ns,
    body: podOf('late-secret', {
      name: 'main', image: SH_IMAGE, args: ['echo "value=$LATE"'],
      env: [{ name: 'LATE', valueFrom: { secretKeyRef: { name: 'late', key: 'value' } } }],
    }),
  });
  const waiting = await podWhere(ns, 'late-secret', 'to report its config error', (p) => p.status?.containerStatuses?.[0]?.state?.waiting !== undefined);
  t.equal(waiting.status?.phase, 'Pending');
  t.match(waiting.status?.containerStatuses?.[0]?.state?.waiting, { reason: 'CreateContainerConfigError', message: 'secret "late" not found' });
  await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'late' }, stringData: { value: 'arrived' } } });
  const done = await podWhere(ns, 'late-secret', 'to finish', (p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed');
  t.equal(done.status?.phase, 'Succeeded');
  t.equal(await core.readNamespacedPodLog({ name: 'late-secret', namespace: ns }), 'value=arrived\n');
});

t.test('an image the fake kubelet does not know fails the Pod and says which images it knows', async (t) => {
  const ns = await testNamespace(t);
  await core.createNamespacedPod({ namespace: ns, body: podOf('unknown', { name: 'main', image: 'registry.example/nope:1' }) });
  const pod = await podWhere(ns, 'unknown', 'to fail', (p) => p.status?.phase === 'Failed');
  t.equal(pod.status?.reason, 'UnknownImage');
  t.match(pod.status?.message, /no local command for image "registry\.example\/nope:1".*known images: .*ptah-runner:dev/);
});
