import t from 'tap';
import type { V1Container, V1Job, V1Pod } from '@kubernetes/client-node';
import { buildOperationJob } from '../../src/shared/job/index.js';
import { podEnvelopeVerdict, type PodAdmission } from '../../src/shared/pod-envelope.js';
import { CASES, d, inputFor, JOB_UID, snapshotted, stored, type Case } from './job-fixtures.js';
import type { OperationJobInput } from '../../src/shared/job/build.js';

interface Fixture {
  job: V1Job;
  pod: V1Pod;
  snapshot: PodAdmission;
}

/** The Job as stored, and its Pod as the Job controller creates it and the API server and admission extend it. */
function fixture(input: OperationJobInput): Fixture {
  const snapshotIn = snapshotted(input);
  const job = stored(buildOperationJob(snapshotIn));
  const template = structuredClone(job.spec!.template);
  const spec = template.spec!;
  spec.nodeName = 'node-1';
  spec.tolerations = [
    ...(spec.tolerations ?? []),
    { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
    { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
  ];
  spec.priority = 0;
  spec.preemptionPolicy = 'PreemptLowerPriority';
  spec.enableServiceLinks = false;
  // LimitRanger's default and the Pod-only default of requests from limits; quantities as the API server spells them.
  const resources = spec.containers[0]!.resources!;
  resources.limits = { ...resources.limits, cpu: '1' };
  resources.requests = { ...resources.requests, memory: '0.25Gi' };
  const pod: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${job.metadata!.name}-x7k2p`,
      generateName: `${job.metadata!.name}-`,
      namespace: job.metadata!.namespace,
      uid: 'pod-uid-1',
      labels: { ...template.metadata!.labels },
      annotations: { ...template.metadata!.annotations },
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: job.metadata!.name!, uid: JOB_UID, controller: true, blockOwnerDeletion: true }],
      finalizers: ['batch.kubernetes.io/job-tracking'],
    },
    spec,
    status: { phase: 'Succeeded' },
  };
  return { job, pod, snapshot: snapshotIn.claim.admissionSnapshot as PodAdmission };
}

const caseFixture = (c: Case): Fixture => fixture(inputFor(c));
const runner = (pod: V1Pod): V1Container => pod.spec!.containers[0]!;
const env = (pod: V1Pod, name: string) => runner(pod).env!.find((e) => e.name === name)!;
const ANNOTATION = {
  operationId: 'operator.ptah.run/operation-id',
  snapshot: 'operator.ptah.run/admission-snapshot-digest',
};

t.test('the Pod the Job controller makes from the template is inside the envelope, with what the API server and admission add', async (t) => {
  for (const c of CASES) {
    const f = caseFixture(c);
    t.same(podEnvelopeVerdict(f.pod, f.job, f.snapshot), { ok: true }, `${c.family} ${c.type}`);
    const asJson = JSON.parse(JSON.stringify(f.pod)) as V1Pod;
    t.same(podEnvelopeVerdict(asJson, f.job, f.snapshot), { ok: true }, `${c.family} ${c.type}: read as plain JSON`);
    const spelled = structuredClone(f.pod);
    runner(spelled).resources!.requests!.cpu = '250m';
    t.same(podEnvelopeVerdict(spelled, f.job, f.snapshot), { ok: true }, `${c.family} ${c.type}: a quantity spelled another way`);
  }
});

t.test('a RuntimeClass and a PriorityClass the snapshot records, and the scheduling a RuntimeClass adds', async (t) => {
  const base = inputFor(CASES[4]!);
  const input: OperationJobInput = {
    ...base,
    execution: { ...base.execution, runtimeClassName: 'gvisor', priorityClassName: 'migrations', nodeSelector: { pool: 'db' }, serviceAccountName: 'migrator' },
  };
  const f = fixture(input);
  t.match(f.snapshot, { runtimeClass: 'gvisor', priorityClass: 'migrations', serviceAccount: 'migrator' }, 'fixture: the snapshot records them');
  const scheduled = structuredClone(f.pod);
  scheduled.spec!.nodeSelector = { ...scheduled.spec!.nodeSelector, 'runtime.example/sandbox': 'gvisor' };
  scheduled.spec!.overhead = { cpu: '10m' };
  t.same(podEnvelopeVerdict(scheduled, f.job, f.snapshot), { ok: true }, 'a node selector entry and overhead added by RuntimeClass admission');

  const rows: [string, (pod: V1Pod) => void, RegExp][] = [
    ['no RuntimeClass', (p) => void delete p.spec!.runtimeClassName, /names no RuntimeClass, where the admission snapshot recorded one/],
    ['another RuntimeClass', (p) => void (p.spec!.runtimeClassName = 'runc'), /another RuntimeClass/],
    ['another PriorityClass', (p) => void (p.spec!.priorityClassName = 'system-cluster-critical'), /another PriorityClass/],
    ['no PriorityClass', (p) => void delete p.spec!.priorityClassName, /names no PriorityClass/],
    ['another ServiceAccount', (p) => void (p.spec!.serviceAccountName = 'default'), /another ServiceAccount/],
    ['a node selector entry of the template changed', (p) => void (p.spec!.nodeSelector = { pool: 'web' }), /spec\.nodeSelector\.pool/],
    ['a node selector entry of the template dropped', (p) => void (p.spec!.nodeSelector = { other: 'x' }), /spec\.nodeSelector\.pool/],
  ];
  for (const [name, mutate, reason] of rows) {
    const pod = structuredClone(f.pod);
    mutate(pod);
    t.match(podEnvelopeVerdict(pod, f.job, f.snapshot), { ok: false, reason }, name);
  }
});

type Mutation = [name: string, mutate: (pod: V1Pod) => void, reason: RegExp];

const mutations: Mutation[] = [
  // Whose Pod it is.
  ['no controller', (p) => void (p.metadata!.ownerReferences![0]!.controller = false), /does not have exactly one controller/],
  ['no owner at all', (p) => void delete p.metadata!.ownerReferences, /does not have exactly one controller/],
  ['a second controller', (p) => void p.metadata!.ownerReferences!.push({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'r', uid: 'r-uid', controller: true }), /exactly one controller/],
  ['a controller Job of another UID', (p) => void (p.metadata!.ownerReferences![0]!.uid = 'someone-else'), /controller is not Job/],
  ['a controller of another kind with the Job\'s UID', (p) => void (p.metadata!.ownerReferences![0]!.kind = 'ReplicaSet'), /controller is not Job/],
  ['a controller Job of another name', (p) => void (p.metadata!.ownerReferences![0]!.name = 'other'), /controller is not Job/],
  ['another namespace', (p) => void (p.metadata!.namespace = 'team-b'), /not in its Job's namespace/],
  // The template's metadata.
  ['a template label missing', (p) => void delete p.metadata!.labels!['app.kubernetes.io/managed-by'], /labels do not include the template's "app\.kubernetes\.io\/managed-by"/],
  ['a template label changed', (p) => void (p.metadata!.labels!['operator.ptah.run/operation'] = 'other'), /labels do not include/],
  ['the Job identity label of another Job', (p) => void (p.metadata!.labels!['batch.kubernetes.io/controller-uid'] = 'other'), /labels do not include the template's "batch\.kubernetes\.io\/controller-uid"/],
  ['a declared label changed', (p) => void (p.metadata!.labels!['team'] = 'other'), /labels do not include the template's "team"/],
  ['a template annotation missing', (p) => void delete p.metadata!.annotations!['operator.ptah.run/input-fingerprint'], /annotations do not include/],
  ['another operation ID', (p) => void (p.metadata!.annotations![ANNOTATION.operationId] = d('x')), /annotations do not include the template's "operator\.ptah\.run\/operation-id"/],
  ['another snapshot digest', (p) => void (p.metadata!.annotations![ANNOTATION.snapshot] = d('x')), /annotations do not include/],
  // What runs and what it reads.
  ['another image', (p) => void (runner(p).image = 'ptah-fixture/sh:test'), /containers entry "runner" is not the template's \(first at spec\.containers\["runner"\]\.image\)/],
  ['another command', (p) => void (runner(p).command = ['/bin/sh', '-c']), /containers\["runner"\]\.command/],
  ['other arguments', (p) => void runner(p).args!.push('--verbose'), /containers\["runner"\]\.args/],
  ['a changed env value', (p) => void (env(p, 'PTAH_OPERATION_ID').value = d('other')), /containers\["runner"\]\.env/],
  ['the database URL from another Secret', (p) => void (env(p, 'PTAH_DB_URL').valueFrom!.secretKeyRef!.name = 'other'), /containers\["runner"\]\.env/],
  ['an added env var', (p) => void runner(p).env!.push({ name: 'NODE_OPTIONS', value: '--require /tmp/x.js' }), /containers\["runner"\]\.env/],
  ['a removed env var', (p) => void runner(p).env!.pop(), /containers\["runner"\]\.env/],
  ['env from a ConfigMap', (p) => void (runner(p).envFrom = [{ configMapRef: { name: 'extra' } }]), /containers\["runner"\]\.envFrom/],
  ['a volume mount made writable', (p) => void (runner(p).volumeMounts![0]!.readOnly = false), /containers\["runner"\]\.volumeMounts/],
  ['an added volume mount', (p) => void runner(p).volumeMounts!.push({ name: 'work', mountPath: '/opt/ptah-operator' }), /containers\["runner"\]\.volumeMounts/],
  ['the container run as root', (p) => void (runner(p).securityContext!.runAsUser = 0), /containers\["runner"\]\.securityContext/],
  ['capabilities kept', (p) => void delete runner(p).securityContext!.capabilities, /containers\["runner"\]\.securityContext/],
  ['another working directory', (p) => void (runner(p).workingDir = '/'), /containers\["runner"\]\.workingDir/],
  ['a postStart hook', (p) => void (runner(p).lifecycle = { postStart: { exec: { command: ['sh', '-c', 'echo forged'] } } }), /containers\["runner"\]\.lifecycle/],
  ['an exec probe', (p) => void (runner(p).livenessProbe = { exec: { command: ['true'] } }), /containers\["runner"\]\.livenessProbe/],
  ['another termination message path', (p) => void (runner(p).terminationMessagePath = '/tmp/message'), /containers\["runner"\]\.terminationMessagePath/],
  ['the termination message from the log', (p) => void (runner(p).terminationMessagePolicy = 'FallbackToLogsOnError'), /containers\["runner"\]\.terminationMessagePolicy/],
  ['a changed resource request', (p) => void (runner(p).resources!.requests!.cpu = '2'), /does not hold its template's spec\.containers\["runner"\]\.resources\.requests\.cpu/],
  ['a changed resource limit', (p) => void (runner(p).resources!.limits!.memory = '1Gi'), /resources\.limits\.memory/],
  ['no resources', (p) => void delete runner(p).resources, /resources/],
  ['a sidecar', (p) => void p.spec!.containers.push({ name: 'sidecar', image: 'x' }), /adds the containers entry "sidecar"/],
  ['the runner renamed', (p) => void (runner(p).name = 'other'), /lacks the containers entry "runner"/],
  ['two containers of one name', (p) => void p.spec!.containers.push(structuredClone(runner(p))), /containers are not named uniquely/],
  ['an init container', (p) => void (p.spec!.initContainers = [{ name: 'init', image: 'x' }]), /adds the initContainers entry "init"/],
  ['an ephemeral container', (p) => void (p.spec!.ephemeralContainers = [{ name: 'debug', image: 'busybox', targetContainerName: 'runner' }]), /ephemeral container/],
  ['another artifact ConfigMap', (p) => void (p.spec!.volumes![0]!.configMap!.name = 'other'), /volume "artifact" is not the template's/],
  ['a service account token volume', (p) => void p.spec!.volumes!.push({ name: 'kube-api-access-x', projected: { sources: [] } }), /volume "kube-api-access-x"/],
  ['the work volume dropped', (p) => void (p.spec!.volumes = p.spec!.volumes!.filter((v) => v.name !== 'work')), /volume "work"/],
  ['the work volume on disk', (p) => void (p.spec!.volumes!.find((v) => v.name === 'work')!.emptyDir = {}), /volume "work"/],
  ['the Pod run as root', (p) => void (p.spec!.securityContext!.runAsUser = 0), /security context is not the template's \(first at spec\.securityContext\.runAsUser\)/],
  ['no fsGroup', (p) => void delete p.spec!.securityContext!.fsGroup, /spec\.securityContext\.fsGroup/],
  ['another ServiceAccount', (p) => void (p.spec!.serviceAccountName = 'admin'), /another ServiceAccount than the admission snapshot recorded/],
  ['a deprecated serviceAccount naming another', (p) => void (p.spec!.serviceAccount = 'admin'), /deprecated serviceAccount/],
  ['a RuntimeClass the snapshot does not record', (p) => void (p.spec!.runtimeClassName = 'gvisor'), /another RuntimeClass/],
  ['a default PriorityClass the snapshot does not record', (p) => void (p.spec!.priorityClassName = 'cluster-default'), /another PriorityClass/],
  ['a template toleration dropped', (p) => void p.spec!.tolerations!.shift(), /every toleration of its template/],
  ['a template toleration changed', (p) => void (p.spec!.tolerations![0]!.value = 'web'), /every toleration of its template/],
  ['a longer deadline', (p) => void (p.spec!.activeDeadlineSeconds = 86400), /does not hold its template's spec\.activeDeadlineSeconds/],
  ['restarted on failure', (p) => void (p.spec!.restartPolicy = 'OnFailure'), /spec\.restartPolicy/],
  ['a service account token mounted', (p) => void (p.spec!.automountServiceAccountToken = true), /spec\.automountServiceAccountToken/],
  ['a longer grace period', (p) => void (p.spec!.terminationGracePeriodSeconds = 3600), /spec\.terminationGracePeriodSeconds/],
  ['service links', (p) => void (p.spec!.enableServiceLinks = true), /spec\.enableServiceLinks/],
  ['another scheduler', (p) => void (p.spec!.schedulerName = 'other'), /spec\.schedulerName/],
];

t.test('any single change to what the template sets is refused, for every operation', async (t) => {
  for (const c of CASES) {
    const f = caseFixture(c);
    for (const [name, mutate, reason] of mutations) {
      const pod = structuredClone(f.pod);
      mutate(pod);
      t.match(podEnvelopeVerdict(pod, f.job, f.snapshot), { ok: false, reason }, `${c.family} ${c.type}: ${name}`);
    }
  }
});

t.test('the Job is held to the snapshot, and the snapshot must verify', async (t) => {
  const f = caseFixture(CASES[4]!);
  const moved = structuredClone(f.job);
  moved.spec!.template.spec!.containers[0]!.image = 'registry.example/other:1';
  const pod = structuredClone(f.pod);
  pod.spec!.containers[0]!.image = 'registry.example/other:1';
  t.match(podEnvelopeVerdict(pod, moved, f.snapshot), { ok: false, reason: /the Job's Pod template is not the one the admission snapshot recorded/ },
    'a Pod that is its Job\'s template, when the template is not the snapshot\'s');

  // The snapshot annotation is left out of the template digest, so it is held to the snapshot on its own.
  const relabelled = structuredClone(f.job);
  relabelled.spec!.template.metadata!.annotations![ANNOTATION.snapshot] = d('other-snapshot');
  const relabelledPod = structuredClone(f.pod);
  relabelledPod.metadata!.annotations![ANNOTATION.snapshot] = d('other-snapshot');
  t.match(podEnvelopeVerdict(relabelledPod, relabelled, f.snapshot), { ok: false, reason: /admission-snapshot-digest annotation is not the claim's snapshot/ },
    'template and Pod naming another snapshot');

  t.match(podEnvelopeVerdict(f.pod, f.job, { ...f.snapshot, serviceAccount: 'admin' }), { ok: false, reason: /does not hash to its recorded digest/ }, 'an edited snapshot');
  t.match(podEnvelopeVerdict(f.pod, f.job, { ...f.snapshot, version: 'v2' as 'v1' }), { ok: false, reason: /version/ }, 'a snapshot of another version');
  const noUid = structuredClone(f.job);
  delete noUid.metadata!.uid;
  t.match(podEnvelopeVerdict(f.pod, noUid, f.snapshot), { ok: false, reason: /controller is not Job/ }, 'a Job without a UID owns no Pod');
});
