// The seed: "Proof that completes after its plan's epoch was retired sweeps that plan's approvals once more in the
// same pass, for an approval admitted before the Apply claim that committed after the rotation's sweep." On the real
// stack: an approval of the plan is admitted (the schema waits for approval, no Apply claimed) and held between
// admission and storage by a validating webhook of this test; meanwhile another approval authorizes the Apply, which
// runs and waits on a table lock, and the execution binding rotates and sweeps the plan's approvals. The held
// approval is then stored, fresh, after that sweep; the proof of the Apply, completing under the new epoch, marks it
// Stale.
import { createServer, type Server } from 'node:https';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import t from 'tap';
import type { PtahSchemaApproval } from '../../src/shared/api/schema-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import { RUNNER_IMAGE_OTHER_EXECUTOR } from '../../tools/stack/kubelet/images.js';
import { variantExecutorIdentity } from '../../tools/stack/variants.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';
import { approvalConditionOf, approvalNamed, MANAGER, schemaWorld, switchDesired, WAIT_MS, watchSchemas } from './schema-world.js';
import { holdTable, PROOF_WAIT_MS, R1, R2, waitingWriters } from './schema-slow-apply.js';

/** A release that changes the executor, so the binding rotates (as in schema-binding.test.ts). */
const NEXT_MANAGER = { ...MANAGER, runnerImage: RUNNER_IMAGE_OTHER_EXECUTOR, executorIdentity: variantExecutorIdentity('executor') };

/**
 * A validating webhook for PtahSchemaApproval creates in `ns` that allows each, holding the one named `held` until
 * released; `probe` makes an admissible create (a dry run) and the registration counts as live once one reached it.
 */
async function holdingWebhook(ns: string, held: string, probe: () => Promise<unknown>): Promise<{ reached: Promise<void>; release(): void; close(): Promise<void> }> {
  const cluster = sharedCluster();
  const pki = await cluster.pki();
  const serving = await pki.issueServing(`hold-${ns}`, { ips: ['127.0.0.1'] });
  const [cert, key] = await Promise.all([readFile(serving.cert), readFile(serving.key)]);
  let reach: () => void = () => undefined;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let seen = 0;
  const server: Server = createServer({ cert, key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: { uid: string; name?: string; object?: { metadata?: { name?: string } } } };
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } }));
      };
      seen += 1;
      if ((review.request.name ?? review.request.object?.metadata?.name) !== held) return answer();
      reach();
      void released.then(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const name = `ptah-test-hold-${ns}`;
  const admission = cluster.kubeConfig('admin').makeApiClient(AdmissionregistrationV1Api);
  await admission.createValidatingWebhookConfiguration({ body: {
    metadata: { name },
    webhooks: [{
      name: 'hold.ptah.test', admissionReviewVersions: ['v1'], sideEffects: 'None', failurePolicy: 'Fail', timeoutSeconds: 30,
      clientConfig: { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/`, caBundle: Buffer.from(pki.caPem).toString('base64') },
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
      rules: [{ apiGroups: [API_VERSION.split('/')[0]!], apiVersions: [API_VERSION.split('/')[1]!], operations: ['CREATE'], resources: [KINDS.PtahSchemaApproval.plural], scope: 'Namespaced' }],
    }],
  } });
  const close = async () => {
    release();
    await admission.deleteValidatingWebhookConfiguration({ name }).catch(() => undefined);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  try {
    await waitFor(async () => {
      const before = seen;
      await probe();
      return seen > before ? true : undefined;
    }, { what: 'the API server to call the holding webhook', timeoutMs: 30_000 });
  } catch (e) {
    await close();
    throw e;
  }
  return {
    reached,
    release: () => release(),
    close,
  };
}

t.test('an approval admitted before the Apply claim and stored after the rotation\'s sweep goes Stale when the Apply\'s proof completes', async (t) => {
  const w = await schemaWorld(t);
  const db = await w.database('schema_late_approval');
  const secret = await w.installSample(db);
  await w.desired('catalog-r1', R1);
  await w.desired('catalog-r2', R2);
  await w.startController();
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval', activeDeadlineSeconds: 120, lockTimeout: '100s' });
  await w.waitFor('catalog', 'r1 waiting for approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  await w.approve('catalog');
  await w.waitFor('catalog', 'r1 in sync', (s) => (s.status?.phase === 'InSync' && s.status.applied && !s.status.pendingObservation && !s.status.pendingLockRelease ? s : undefined));
  const lock = await holdTable(db, 'products');
  t.teardown(() => lock.release());
  await switchDesired(w, 'catalog', 'catalog-r2');
  const waiting = await w.waitFor('catalog', 'the r2 plan waiting for approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined));
  const plan = waiting.status!.plan!;
  const states = await watchSchemas(t, w, 'catalog');

  // The late approval: admitted now (a plan waiting for approval, no Apply claimed), stored only when released.
  const approval = (name: string) => ({
    apiVersion: API_VERSION, kind: KINDS.PtahSchemaApproval.kind, metadata: { name, namespace: w.ns },
    spec: { schemaRef: { name: 'catalog', uid: waiting.metadata.uid! }, planRef: { name: plan.name, uid: plan.uid }, planFingerprint: plan.fingerprint },
  } as PtahSchemaApproval);
  const lateName = `catalog-late-${randomBytes(3).toString('hex')}`;
  const hold = await holdingWebhook(w.ns, lateName, () => w.approver.create(approval(`catalog-probe-${randomBytes(3).toString('hex')}`), { dryRun: true }));
  t.teardown(() => hold.close());
  const late = w.approver.create<PtahSchemaApproval>(approval(lateName));
  late.catch(() => undefined);
  await hold.reached;

  // Another approval authorizes the Apply, which waits on the table lock.
  const spent = await w.approve('catalog');
  const running = await w.waitFor('catalog', 'the r2 Apply dispatched', (s) => (s.status?.activeOperation?.type === 'Apply' && s.status.activeOperation.jobUID ? s : undefined));
  const apply = running.status!.activeOperation!;
  await waitFor(async () => ((await waitingWriters(w, db)) > 0 ? true : undefined), { what: 'the Apply to wait on the table lock', timeoutMs: WAIT_MS });

  // The rotation, and its sweep of the retired plan's approvals.
  await w.stopController();
  await w.startController(undefined, NEXT_MANAGER);
  await w.waitFor('catalog', 'the rotation to work off the retired plan', (s) =>
    (s.status?.executionBinding?.epoch !== apply.executionBindingID && !s.status?.pendingBindingRetirement?.plan ? s : undefined));
  t.ok(states.some((s) => s.status?.pendingBindingRetirement?.plan?.uid === plan.uid), 'the rotation recorded the retired plan to sweep');

  // The held approval is stored now, after that sweep: nothing has marked it.
  hold.release();
  const stored = await late;
  const fresh = await approvalNamed(w, stored.metadata.name!);
  t.notOk(approvalConditionOf(fresh, 'Stale'), 'stored after the rotation\'s sweep, the late approval is not Stale');
  t.notOk(approvalConditionOf(fresh, 'Consumed'), 'nor spent');
  t.ok(states.some((s) => s.status?.pendingObservation?.applyOperationID === apply.id) || (await w.get('catalog')).status?.activeOperation?.id === apply.id,
    'fixture: the Apply is still to be proven');

  // The Apply runs to its end; its proof completes under the new epoch and sweeps the plan's approvals again.
  await lock.release();
  await w.waitFor('catalog', 'the proof settled', (s) => (!s.status?.pendingObservation && !s.status?.activeOperation && !s.status?.pendingLockRelease && !s.status?.pendingBindingRetirement ? s : undefined), PROOF_WAIT_MS);
  const swept = await approvalNamed(w, stored.metadata.name!);
  t.equal(approvalConditionOf(swept, 'Stale')?.status, 'True', 'the proof swept the late approval: Stale');
  t.equal(approvalConditionOf(swept, 'Stale')?.reason, 'ExecutionBindingChanged', 'because the plan\'s epoch was retired');
  t.match(approvalConditionOf(swept, 'Stale')?.message, /belongs to a retired execution epoch/, 'by the proof\'s sweep, not the rotation\'s');
  t.notOk(approvalConditionOf(swept, 'Consumed'), 'and it authorized nothing');
  t.equal(approvalConditionOf(await approvalNamed(w, spent.metadata.name!), 'Consumed')?.status, 'True', 'the approval that authorized the Apply was spent');
  t.equal((await w.applies(db)).filter((a) => a.operationId === apply.id).length, 1, 'the Apply ran once');
});
