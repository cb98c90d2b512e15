// The admission webhooks the manager serves: their routes, and the Mutating/ValidatingWebhookConfiguration
// objects that register them. manifests/webhooks.yaml is this output with the in-cluster Service; the test
// harness registers the same objects by URL and CA bundle.
import type {
  V1MutatingWebhookConfiguration,
  V1RuleWithOperations,
  V1ValidatingWebhook,
  V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { celString } from './cel.js';
import { DECISION_KINDS, GROUP, INSTALL, KINDS, MANAGER_USERNAME, VERSION } from './names.js';

export const WEBHOOK_PATHS = {
  /** Mutating: stamps who decided, when, and in which admission request, on CREATE of a decision kind. */
  stamp: '/mutate/stamp',
  /** Validating: CREATE/UPDATE of the decision kinds. */
  decision: '/validate/decision',
  /** Validating: the manager's own Job, ConfigMap, plan and chunk writes. */
  controllerWrite: '/validate/controller-write',
  /** Validating: status writes of every Ptah kind, and PtahMigration updates (the unresolved-run copy). */
  statusWrite: '/validate/status-write',
  /** Validating: CREATE/UPDATE of a PtahRealm (its spec, and no overlap with another realm). */
  realm: '/validate/realm',
} as const;

export type WebhookPath = (typeof WEBHOOK_PATHS)[keyof typeof WEBHOOK_PATHS];

export interface WebhookClientConfig {
  url?: string;
  service?: { namespace: string; name: string; port?: number; path?: string };
  /** Base64 PEM bundle of the CA that signed the serving certificate. */
  caBundle?: string;
}

export interface WebhookOptions {
  /** Name of both configuration objects. */
  name?: string;
  /** The manager's username; the controller-write webhook is called only for its requests. */
  managerUsername?: string;
}

export const WEBHOOK_TIMEOUT_SECONDS = 10;

/** Reaches the webhooks through the in-cluster Service. */
export function serviceClientConfig(path: string): WebhookClientConfig {
  return { service: { namespace: INSTALL.namespace, name: INSTALL.webhookService, port: 443, path } };
}

const decisionPlurals = DECISION_KINDS.map((kind) => KINDS[kind].plural);
const ptahRule = (operations: string[], resources: string[]): V1RuleWithOperations => ({
  apiGroups: [GROUP],
  apiVersions: [VERSION],
  operations,
  resources,
  scope: 'Namespaced',
});

// Shared by every entry: fail closed, no side effects, one AdmissionReview version.
const common = (): Pick<V1ValidatingWebhook, 'failurePolicy' | 'matchPolicy' | 'sideEffects' | 'admissionReviewVersions' | 'timeoutSeconds'> => ({
  failurePolicy: 'Fail',
  matchPolicy: 'Equivalent',
  sideEffects: 'None',
  admissionReviewVersions: ['v1'],
  timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
});

export function webhookConfigurations(
  clientConfigFor: (path: string) => WebhookClientConfig,
  opts: WebhookOptions = {},
): { mutating: V1MutatingWebhookConfiguration; validating: V1ValidatingWebhookConfiguration } {
  const name = opts.name ?? 'ptah-operator';
  const managerUsername = opts.managerUsername ?? MANAGER_USERNAME;
  const mutating: V1MutatingWebhookConfiguration = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name },
    webhooks: [
      {
        name: `stamp.${GROUP}`,
        clientConfig: clientConfigFor(WEBHOOK_PATHS.stamp),
        rules: [ptahRule(['CREATE'], decisionPlurals)],
        reinvocationPolicy: 'Never',
        ...common(),
      },
    ],
  };
  const validating: V1ValidatingWebhookConfiguration = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name },
    webhooks: [
      {
        name: `decision.${GROUP}`,
        clientConfig: clientConfigFor(WEBHOOK_PATHS.decision),
        rules: [ptahRule(['CREATE', 'UPDATE'], decisionPlurals)],
        ...common(),
      },
      {
        name: `controller-write.${GROUP}`,
        clientConfig: clientConfigFor(WEBHOOK_PATHS.controllerWrite),
        rules: [
          { apiGroups: ['batch'], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['jobs'], scope: 'Namespaced' },
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'], scope: 'Namespaced' },
          ptahRule(['CREATE'], [KINDS.PtahSchemaPlan.plural, KINDS.PtahSchemaPlanChunk.plural]),
        ],
        // Everyone else's Jobs and ConfigMaps never wait on this webhook, so the cluster does not depend on it.
        matchConditions: [{ name: 'manager-only', expression: `request.userInfo.username == ${celString(managerUsername)}` }],
        ...common(),
      },
      {
        name: `realm.${GROUP}`,
        clientConfig: clientConfigFor(WEBHOOK_PATHS.realm),
        rules: [{ ...ptahRule(['CREATE', 'UPDATE'], [KINDS.PtahRealm.plural]), scope: 'Cluster' }],
        ...common(),
      },
      {
        name: `status-write.${GROUP}`,
        clientConfig: clientConfigFor(WEBHOOK_PATHS.statusWrite),
        rules: [ptahRule(['UPDATE'], ['*/status', KINDS.PtahMigration.plural])],
        ...common(),
      },
    ],
  };
  return { mutating, validating };
}
