// The refusals create-refusals.test.ts provokes, each a real part of the API server's admission chain scoped to one
// test namespace (and, where it can be, to Jobs carrying given labels): a validating webhook of the test's own
// whose answer the test sets per request, a fail-closed webhook registered at a port nobody listens on, a
// ValidatingAdmissionPolicy with its binding, and an exhausted ResourceQuota. Each waits until the API server
// really applies it (registration reaches admission through an informer) and is removed in teardown.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { AdmissionregistrationV1Api, CoreV1Api, type V1Job, type V1ValidatingWebhook } from '@kubernetes/client-node';
import Fastify from 'fastify';
import { ApiError, restClient, type KubeClient } from '../../src/shared/kube-client.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';

const cluster = sharedCluster();
const ACTIVE_MS = 30_000;

export type Labels = Record<string, string>;

/** What the test's webhook answers: allow (after a delay, to outlast a client's timeout), or deny with a code. */
export type WebhookAnswer = { allow: true; delayMs?: number } | { allow: false; code: number; reason?: string; message: string };

export interface TestWebhook {
  /** The name the API server quotes in its messages. */
  readonly name: string;
  /** The answer to the next requests; the test changes it at will. */
  answer: WebhookAnswer;
  /** Admission requests received, dry-run probes included. */
  readonly received: { name: string; dryRun: boolean; labels: Labels }[];
}

/** A Job that would run a shell's `true` if it were ever stored; suspended so that a stored one runs nothing. */
export function jobNamed(namespace: string, name: string, labels: Labels = {}): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, labels },
    spec: {
      suspend: true,
      template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'ptah-fixture/sh:test', args: ['true'] }] } },
    },
  };
}

const admin = () => restClient(cluster.kubeConfig('admin'));
const admission = () => cluster.kubeConfig('admin').makeApiClient(AdmissionregistrationV1Api);
const scopedTo = (namespace: string) => ({ matchLabels: { 'kubernetes.io/metadata.name': namespace } });
const uniqueName = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;

/**
 * Waits until a dry-run create of a Job with `labels` in `namespace` meets `active` (given the refusal, or
 * undefined when the create was admitted): the refusal is in force from then on.
 */
async function untilInForce(client: KubeClient, namespace: string, labels: Labels, what: string, active: (refusal: ApiError | undefined) => boolean): Promise<void> {
  await waitFor(async () => {
    const refusal = await client.create(jobNamed(namespace, uniqueName('probe'), labels), { dryRun: true }).then(() => undefined, (e: unknown) => {
      if (e instanceof ApiError) return e;
      throw e;
    });
    if (active(refusal)) return true;
    throw new Error(refusal ? refusal.message : 'the probe was admitted');
  }, { what, timeoutMs: ACTIVE_MS });
}

function ignoreNotFound(e: { code?: number }): void {
  if (e.code !== 404) throw e;
}

/** Registers one fail-closed validating webhook for batch/v1 Job creates in `namespace` with `labels`, at `url`. */
async function registerJobWebhook(t: Test, namespace: string, labels: Labels, url: string, caPem: string): Promise<string> {
  const name = `${uniqueName('refuse')}.create-refusals.test`;
  const webhook: V1ValidatingWebhook = {
    name,
    clientConfig: { url, caBundle: Buffer.from(caPem).toString('base64') },
    rules: [{ apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['jobs'], scope: 'Namespaced' }],
    namespaceSelector: scopedTo(namespace),
    objectSelector: { matchLabels: labels },
    failurePolicy: 'Fail',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 10,
  };
  const configuration = uniqueName('create-refusals');
  await admission().createValidatingWebhookConfiguration({ body: { metadata: { name: configuration }, webhooks: [webhook] } });
  t.teardown(() => admission().deleteValidatingWebhookConfiguration({ name: configuration }).catch(ignoreNotFound));
  return name;
}

/**
 * The test's own webhook: a Fastify HTTPS server on a serving certificate the test CA issued, answering every Job
 * create in `namespace` that carries `labels` as `answer` says. Returns once the API server calls it.
 */
export async function testWebhook(t: Test, namespace: string, labels: Labels, answer: WebhookAnswer): Promise<TestWebhook> {
  const pki = await cluster.pki();
  const serving = await pki.issueServing('create-refusals-webhook', { ips: ['127.0.0.1'] });
  const app = Fastify({ https: { cert: await readFile(serving.cert), key: await readFile(serving.key) } });
  const state = { name: '', answer, received: [] as TestWebhook['received'] };
  app.post('/validate', async (request) => {
    const review = request.body as { request: { uid: string; dryRun?: boolean; object?: V1Job } };
    const { uid, dryRun, object } = review.request;
    state.received.push({ name: object?.metadata?.name ?? '', dryRun: dryRun === true, labels: object?.metadata?.labels ?? {} });
    const now = state.answer;
    if (now.allow && now.delayMs) await new Promise((resolve) => setTimeout(resolve, now.delayMs));
    const response = now.allow ? { uid, allowed: true } : { uid, allowed: false, status: { code: now.code, reason: now.reason, message: now.message } };
    return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  state.name = await registerJobWebhook(t, namespace, labels, `${url}/validate`, pki.caPem);
  const seen = state.received.length;
  await untilInForce(await admin(), namespace, labels, `the API server to call webhook ${state.name}`, () => state.received.length > seen);
  return state;
}

/** A port on 127.0.0.1 that nothing listens on: bound once to learn a free one, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A fail-closed webhook the API server cannot call (nothing listens at its URL); returns its name. */
export async function unreachableWebhook(t: Test, namespace: string, labels: Labels): Promise<string> {
  const pki = await cluster.pki();
  const name = await registerJobWebhook(t, namespace, labels, `https://127.0.0.1:${await closedPort()}/validate`, pki.caPem);
  await untilInForce(await admin(), namespace, labels, `webhook ${name} to be in force`, (refusal) => refusal?.code === 500);
  return name;
}

export interface PolicyOptions {
  /** The reason the policy denies with, which decides the code (Invalid: 422, RequestEntityTooLarge: 413, …). */
  reason?: 'Forbidden' | 'Invalid' | 'RequestEntityTooLarge' | 'Unauthorized';
  message: string;
}

/** A ValidatingAdmissionPolicy and its binding denying every Job create in `namespace` that carries `labels`. */
export async function denyingPolicy(t: Test, namespace: string, labels: Labels, options: PolicyOptions): Promise<{ policy: string; binding: string; lift(): Promise<void> }> {
  const policy = uniqueName('create-refusals');
  const binding = policy;
  await admission().createValidatingAdmissionPolicy({
    body: {
      metadata: { name: policy },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: { resourceRules: [{ apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['jobs'] }] },
        validations: [{ expression: 'false', message: options.message, ...(options.reason ? { reason: options.reason } : {}) }],
      },
    },
  });
  await admission().createValidatingAdmissionPolicyBinding({
    body: {
      metadata: { name: binding },
      spec: { policyName: policy, validationActions: ['Deny'], matchResources: { namespaceSelector: scopedTo(namespace), objectSelector: { matchLabels: labels } } },
    },
  });
  const lift = async () => {
    await admission().deleteValidatingAdmissionPolicyBinding({ name: binding }).catch(ignoreNotFound);
    await admission().deleteValidatingAdmissionPolicy({ name: policy }).catch(ignoreNotFound);
  };
  t.teardown(lift);
  await untilInForce(await admin(), namespace, labels, `policy ${policy} to be in force`, (refusal) => refusal?.message.includes(`'${policy}'`) === true);
  return { policy, binding, lift };
}

/**
 * A ResourceQuota allowing no Jobs in `namespace`, with the status the quota controller would write (this control
 * plane runs none, and admission charges only a quota whose status is known). `lift` deletes it.
 */
export async function exhaustedJobQuota(t: Test, namespace: string): Promise<{ name: string; lift(): Promise<void> }> {
  const core = cluster.kubeConfig('admin').makeApiClient(CoreV1Api);
  const name = uniqueName('no-jobs');
  const hard = { 'count/jobs.batch': '0' };
  const created = await core.createNamespacedResourceQuota({ namespace, body: { metadata: { name }, spec: { hard } } });
  await core.replaceNamespacedResourceQuotaStatus({ name, namespace, body: { ...created, status: { hard, used: { 'count/jobs.batch': '0' } } } });
  const lift = async () => {
    await core.deleteNamespacedResourceQuota({ name, namespace }).catch(ignoreNotFound);
    await untilInForce(await admin(), namespace, {}, `quota ${name} to be lifted`, (refusal) => refusal === undefined);
  };
  t.teardown(() => core.deleteNamespacedResourceQuota({ name, namespace }).catch(ignoreNotFound));
  await untilInForce(await admin(), namespace, {}, `quota ${name} to be in force`, (refusal) => refusal?.message.includes('exceeded quota') === true);
  return { name, lift };
}
