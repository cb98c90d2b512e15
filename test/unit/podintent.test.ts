import t from 'tap';
import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import { digest } from '../../src/shared/canonical.js';
import { quantityValue } from '../../src/shared/job/quantity.js';
import { resolveSnapshot, snapshotProblem, templateDigestOf, verifySnapshot, type AdmissionSnapshot } from '../../src/shared/podintent.js';

function template(): V1PodTemplateSpec {
  return {
    metadata: {
      labels: { 'app.kubernetes.io/managed-by': 'ptah-operator', team: 'payments' },
      annotations: { 'operator.ptah.run/operation-id': 'sha256:' + '1'.repeat(64) },
    },
    spec: {
      serviceAccountName: 'ops',
      restartPolicy: 'Never',
      containers: [{ name: 'runner', image: 'runner:1', resources: { requests: { cpu: '0.5', memory: '1Gi' } } }],
      volumes: [{ name: 'work', emptyDir: { sizeLimit: '128Mi' } }],
    },
  };
}

t.test('quantities are compared by value', async (t) => {
  const rows: [string | number, string | number][] = [
    ['0.5', '500m'],
    ['1Gi', '1024Mi'],
    ['1', '1000m'],
    [1, '1'],
    ['1e3', '1k'],
    ['1.5Ki', '1536'],
    ['0', '0m'],
    ['-1', '-1000m'],
    ['.5', '0.5'],
    ['2E', '2e18'],
  ];
  for (const [a, b] of rows) t.equal(quantityValue(a), quantityValue(b), `${a} = ${b}`);
  const different: [string, string][] = [
    ['1Gi', '1G'],
    ['1m', '1'],
    ['1Mi', '1M'],
  ];
  for (const [a, b] of different) t.not(quantityValue(a), quantityValue(b), `${a} != ${b}`);
  for (const bad of ['', 'one', '1 Gi', '1KiB', '1e', '--1', '1.2.3']) t.equal(quantityValue(bad), undefined, `${JSON.stringify(bad)} is no quantity`);
});

t.test('the template digest leaves out what the API server generates and the snapshot digest itself', async (t) => {
  const base = templateDigestOf(template());
  const identical = template();
  identical.metadata!.labels = {
    ...identical.metadata!.labels,
    'batch.kubernetes.io/controller-uid': 'u',
    'batch.kubernetes.io/job-name': 'j',
    'controller-uid': 'u',
    'job-name': 'j',
  };
  identical.metadata!.annotations!['operator.ptah.run/admission-snapshot-digest'] = 'sha256:' + '2'.repeat(64);
  identical.spec!.serviceAccount = 'ops';
  identical.spec!.containers[0]!.resources = { requests: { cpu: '500m', memory: '1024Mi' } };
  identical.spec!.volumes![0]!.emptyDir!.sizeLimit = '0.125Gi';
  t.equal(templateDigestOf(identical), base, 'identity labels, snapshot annotation, SA alias and quantity spelling do not count');
  t.equal(templateDigestOf(JSON.parse(JSON.stringify(template()))), base, 'plain JSON and typed objects digest alike');

  const changes: [string, (tpl: V1PodTemplateSpec) => void][] = [
    ['another image', (tpl) => void (tpl.spec!.containers[0]!.image = 'runner:2')],
    ['another cpu request', (tpl) => void (tpl.spec!.containers[0]!.resources!.requests!['cpu'] = '0.6')],
    ['another label', (tpl) => void (tpl.metadata!.labels!['team'] = 'other')],
    ['another annotation', (tpl) => void (tpl.metadata!.annotations!['x'] = 'y')],
    ['a different alias', (tpl) => void (tpl.spec!.serviceAccount = 'other')],
    ['an empty list where there was none', (tpl) => void (tpl.spec!.tolerations = [])],
    ['another service account', (tpl) => void (tpl.spec!.serviceAccountName = 'default')],
  ];
  for (const [name, change] of changes) {
    const tpl = template();
    change(tpl);
    t.not(templateDigestOf(tpl), base, name);
  }
});

t.test('resolveSnapshot records the template and its admission context', async (t) => {
  const snapshot = resolveSnapshot(template());
  t.same(snapshot, {
    version: 'v1',
    templateDigest: templateDigestOf(template()),
    serviceAccount: 'ops',
    digest: digest({ version: 'v1', templateDigest: templateDigestOf(template()), serviceAccount: 'ops' }),
  });
  t.equal(verifySnapshot(snapshot), true);

  const scheduled = template();
  scheduled.spec!.runtimeClassName = 'gvisor';
  t.match(resolveSnapshot(scheduled, { globalDefaultPriorityClass: 'cluster-default' }), { runtimeClass: 'gvisor', priorityClass: 'cluster-default' }, 'the global default applies when the template names no class');
  scheduled.spec!.priorityClassName = 'maintenance';
  t.match(resolveSnapshot(scheduled, { globalDefaultPriorityClass: 'cluster-default' }), { priorityClass: 'maintenance' }, 'the template\'s class wins');
  t.equal(resolveSnapshot(template()).priorityClass, undefined, 'no class, no global default');

  const anonymous = template();
  delete anonymous.spec!.serviceAccountName;
  t.throws(() => resolveSnapshot(anonymous), { name: 'PodIntentError', message: /names no ServiceAccount/ });
  t.throws(() => resolveSnapshot({ metadata: {} }), { name: 'PodIntentError', message: /no spec/ });
});

t.test('verifySnapshot refuses any snapshot whose digest does not recompute', async (t) => {
  const snapshot = resolveSnapshot(template(), { globalDefaultPriorityClass: 'p' });
  const rows: [string, Partial<AdmissionSnapshot> & Record<string, unknown>, RegExp][] = [
    ['another template digest', { templateDigest: 'sha256:' + '3'.repeat(64) }, /does not hash/],
    ['another service account', { serviceAccount: 'default' }, /does not hash/],
    ['another priority class', { priorityClass: 'q' }, /does not hash/],
    ['an added field', { runtimeClass: 'gvisor' }, /does not hash/],
    ['another digest', { digest: 'sha256:' + '4'.repeat(64) }, /does not hash/],
    ['a malformed digest', { digest: 'sha256:xyz' }, /malformed digest/],
    ['another version', { version: 'v2' as 'v1' }, /version/],
    ['no service account', { serviceAccount: '' }, /names no ServiceAccount/],
  ];
  for (const [name, change, reason] of rows) {
    const tampered = { ...snapshot, ...change };
    t.equal(verifySnapshot(tampered), false, name);
    t.match(snapshotProblem(tampered), reason, `${name}: reason`);
  }
  t.equal(verifySnapshot(undefined), false, 'no snapshot');
  t.equal(snapshotProblem(snapshot), undefined);
});
