// Registers the manager's admission webhooks (src/shared/api/webhooks.ts) with the test API server by URL and CA
// bundle, as envtest does, and waits until the API server really calls them: registration reaches the admission
// plugin through an informer, so a created configuration is not yet an active one.
import {
  AdmissionregistrationV1Api, CoreV1Api, type V1MutatingWebhookConfiguration, type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { MANAGER_NAMESPACE } from './controlplane.js';
import { sharedCluster, type SharedCluster } from './cluster.js';
import { waitFor } from './wait.js';
import { webhookConfigurations } from '../../src/shared/api/webhooks.js';

/**
 * A cluster-scoped object (a PtahRealm) has no namespace to select by, so with `namespace` set it reaches a test's
 * webhooks only when it carries this label with the namespace as its value: tests side by side never judge, or
 * fail closed on, each other's realms.
 */
export const CLUSTER_OBJECT_SCOPE_LABEL = 'ptah.test/webhook-namespace';

export interface RegisterWebhooksOptions {
  /** How many admission requests the webhook server under test has received so far; the wait ends when it grows. */
  answered(): number;
  /**
   * Only requests for objects in this namespace reach the webhooks, so test files that run side by side, each with
   * its own webhook server, do not intercept each other. Without it the webhooks see the whole cluster.
   */
  namespace?: string;
  /** Name of both configuration objects (default: derived from the namespace). */
  name?: string;
  /**
   * A dry-run request the webhooks intercept. Default: creating a ConfigMap as the manager (the controller-write
   * webhook's rule), which needs manifests/rbac.yaml applied so the request passes authorization first.
   */
  probe?: () => Promise<unknown>;
  cluster?: SharedCluster;
  timeoutMs?: number;
}

export interface RegisteredWebhooks {
  mutating: V1MutatingWebhookConfiguration;
  validating: V1ValidatingWebhookConfiguration;
  unregister(): Promise<void>;
}

/** `url` is the webhook server's base URL (https://127.0.0.1:<port>); `caBundlePem` the CA that signed its certificate. */
export async function registerWebhooks(url: string, caBundlePem: string, options: RegisterWebhooksOptions): Promise<RegisteredWebhooks> {
  const cluster = options.cluster ?? sharedCluster();
  const admission = cluster.kubeConfig('admin').makeApiClient(AdmissionregistrationV1Api);
  const name = options.name ?? `ptah-test-${options.namespace ?? randomBytes(4).toString('hex')}`;
  const caBundle = Buffer.from(caBundlePem).toString('base64');
  const { mutating, validating } = webhookConfigurations((path) => ({ url: new URL(path, url).toString(), caBundle }), { name });
  if (options.namespace) {
    const namespaceSelector = { matchLabels: { 'kubernetes.io/metadata.name': options.namespace } };
    for (const hook of [...(mutating.webhooks ?? []), ...(validating.webhooks ?? [])]) {
      hook.namespaceSelector = namespaceSelector;
      if (hook.rules?.every((rule) => rule.scope === 'Cluster')) hook.objectSelector = { matchLabels: { [CLUSTER_OBJECT_SCOPE_LABEL]: options.namespace } };
    }
  }
  await admission.createMutatingWebhookConfiguration({ body: mutating });
  await admission.createValidatingWebhookConfiguration({ body: validating });
  const unregister = async () => {
    await Promise.all([
      admission.deleteMutatingWebhookConfiguration({ name }).catch(ignoreNotFound),
      admission.deleteValidatingWebhookConfiguration({ name }).catch(ignoreNotFound),
    ]);
  };

  const probe = options.probe ?? (() => {
    const core = cluster.kubeConfig('manager').makeApiClient(CoreV1Api);
    return core.createNamespacedConfigMap({ namespace: options.namespace ?? MANAGER_NAMESPACE, body: { metadata: { generateName: 'ptah-webhook-probe-' } }, dryRun: 'All' });
  });
  try {
    await waitFor(async () => {
      const before = options.answered();
      let outcome = 'admitted without calling the webhook';
      // A denial is fine: what matters is whether the webhook server saw the request.
      await probe().catch((e: Error) => { outcome = e.message; });
      if (options.answered() > before) return true;
      throw new Error(outcome);
    }, {
      what: `the API server to call the webhooks at ${url} (if the probe is refused before admission, apply manifests/rbac.yaml or pass a probe)`,
      timeoutMs: options.timeoutMs ?? 30_000,
    });
  } catch (e) {
    await unregister();
    throw e;
  }
  return { mutating, validating, unregister };
}

function ignoreNotFound(e: { code?: number }): void {
  if (e.code !== 404) throw e;
}
