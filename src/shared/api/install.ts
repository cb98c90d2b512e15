// What makes manifests/ one installation (`kubectl apply -k manifests/`): the manager's PodDisruptionBudget and
// NetworkPolicy, the kustomizations, the NetworkPolicy for operation Job Pods (applied per namespace), and the two
// ways the webhooks get their CA bundle: the cert-manager overlay and the ca-bundle overlay.
import type {
  V1NetworkPolicy, V1NetworkPolicyPeer, V1NetworkPolicyPort, V1NetworkPolicySpec, V1PodDisruptionBudget,
} from '@kubernetes/client-node';
import { JOB_LABELS, MANAGED_BY } from '../job/metadata.js';
import { MANAGER_LABELS, MANAGER_PORT, METRICS_PORT } from './deployment.js';
import { INSTALL } from './names.js';

/** Where the API server's webhook calls may come from by default: the private ranges (RFC 1918) control planes use. */
export const API_SERVER_SOURCE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'] as const;
/** Where scrapes of /metrics may come from by default: the same private ranges, where in-cluster Prometheus runs. */
export const METRICS_SCRAPER_RANGES = API_SERVER_SOURCE_RANGES;
/** The database port operation Pods may reach by default: PostgreSQL's. */
export const DATABASE_PORTS = [5432] as const;
/** Name of both webhook configurations in manifests/webhooks.yaml. */
const WEBHOOK_CONFIGURATION = 'ptah-operator';
const WEBHOOK_KINDS = ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'] as const;
const CERTIFICATE = INSTALL.webhookService;
/** The Secret of the ca-bundle overlay; kustomize reads it and never applies it. */
const CA_SECRET = 'ptah-webhook-ca';

/** V1NetworkPolicy as written in YAML: client-node spells an ingress rule's `from` as `_from`. */
export type NetworkPolicyManifest = Omit<V1NetworkPolicy, 'spec'> & {
  spec: Omit<V1NetworkPolicySpec, 'ingress'> & { ingress?: { from: V1NetworkPolicyPeer[]; ports: V1NetworkPolicyPort[] }[] };
};

interface Kustomization {
  apiVersion: string;
  kind: 'Kustomization' | 'Component';
  [field: string]: unknown;
}
const kustomization = (fields: Record<string, unknown>): Kustomization => ({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', ...fields });
// A variant of the installation an installer's own kustomization adds beside it (`components:`): kustomize refuses
// an overlay inside the directory it builds on, so manifests/cert-manager cannot itself list `..`.
const component = (fields: Record<string, unknown>): Kustomization => ({ apiVersion: 'kustomize.config.k8s.io/v1alpha1', kind: 'Component', ...fields });

/** Voluntary disruptions (a node drain) leave one manager serving admission. */
export function managerDisruptionBudget(): V1PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: INSTALL.deployment, namespace: INSTALL.namespace, labels: MANAGER_LABELS },
    spec: { minAvailable: 1, selector: { matchLabels: MANAGER_LABELS } },
  };
}

/**
 * Only the API server reaches the manager's admission port, and only scrapers its metrics port: two rules, so each is
 * narrowed on its own. Their source addresses are installation-specific; the defaults admit the private ranges and
 * nothing else, and an installation narrows them with a patch (README, Install).
 */
export function managerNetworkPolicy(): NetworkPolicyManifest {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: INSTALL.deployment, namespace: INSTALL.namespace, labels: MANAGER_LABELS },
    spec: {
      podSelector: { matchLabels: MANAGER_LABELS },
      policyTypes: ['Ingress'],
      ingress: [
        { from: API_SERVER_SOURCE_RANGES.map((cidr) => ({ ipBlock: { cidr } })), ports: [{ protocol: 'TCP', port: MANAGER_PORT }] },
        { from: METRICS_SCRAPER_RANGES.map((cidr) => ({ ipBlock: { cidr } })), ports: [{ protocol: 'TCP', port: METRICS_PORT }] },
      ],
    },
  };
}

/**
 * Operation Job Pods (in the namespaces of the resources they serve, hence no namespace here) reach their database
 * port and DNS and nothing else; nothing reaches them. They need no API server: they run without a token.
 */
export function operationPodNetworkPolicy(): NetworkPolicyManifest {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'ptah-operation-pods' },
    spec: {
      podSelector: { matchLabels: { [JOB_LABELS.managedBy]: MANAGED_BY } },
      policyTypes: ['Ingress', 'Egress'],
      egress: [
        { ports: DATABASE_PORTS.map((port) => ({ protocol: 'TCP', port })) },
        { ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] },
      ],
    },
  };
}

/** manifests/kustomization.yaml: every file of the installation, CRDs first. */
export function installKustomization(): Kustomization {
  return kustomization({
    resources: ['crds', 'rbac.yaml', 'deployment.yaml', 'pdb.yaml', 'networkpolicy.yaml', 'webhooks.yaml', 'status-write-policy.yaml'],
  });
}

/** manifests/crds/kustomization.yaml: one entry per CRD file. */
export function crdKustomization(files: readonly string[]): Kustomization {
  return kustomization({ resources: [...files].sort() });
}

/** manifests/operation-pods/: the operation Pods' NetworkPolicy, for `kubectl apply -n <namespace> -k`. */
export function operationPodKustomization(): Kustomization {
  return kustomization({ resources: ['networkpolicy.yaml'] });
}

/** The serving certificate cert-manager issues into the Secret the Deployment mounts, from a self-signed Issuer. */
export function certManagerObjects(): object[] {
  const service = `${INSTALL.webhookService}.${INSTALL.namespace}.svc`;
  return [
    { apiVersion: 'cert-manager.io/v1', kind: 'Issuer', metadata: { name: 'ptah-selfsigned', namespace: INSTALL.namespace }, spec: { selfSigned: {} } },
    {
      apiVersion: 'cert-manager.io/v1',
      kind: 'Certificate',
      metadata: { name: CERTIFICATE, namespace: INSTALL.namespace },
      spec: {
        secretName: INSTALL.tlsSecret,
        dnsNames: [service, `${service}.cluster.local`],
        issuerRef: { kind: 'Issuer', name: 'ptah-selfsigned' },
        privateKey: { algorithm: 'ECDSA', size: 256, rotationPolicy: 'Always' },
        duration: '2160h',
        renewBefore: '360h',
      },
    },
  ];
}

/** manifests/cert-manager/: the Certificate, and cert-manager's CA injection into the webhooks. */
export function certManagerKustomization(): Kustomization {
  const annotation = { 'cert-manager.io/inject-ca-from': `${INSTALL.namespace}/${CERTIFICATE}` };
  return component({
    resources: ['certificate.yaml'],
    patches: WEBHOOK_KINDS.map((kind) => ({
      target: { group: 'admissionregistration.k8s.io', kind, name: WEBHOOK_CONFIGURATION },
      patch: JSON.stringify([{ op: 'add', path: '/metadata/annotations', value: annotation }]),
    })),
  });
}

/**
 * manifests/ca-bundle/: every webhook's caBundle set from ca.crt beside it (the PEM of the CA that signed the
 * ptah-webhook-tls certificate). A Secret generated from the file carries it base64-encoded, which is what caBundle
 * holds; it is marked local, so kustomize copies it and never emits it.
 */
export function caBundleKustomization(): Kustomization {
  return component({
    secretGenerator: [{
      name: CA_SECRET,
      namespace: INSTALL.namespace,
      files: ['caBundle=ca.crt'],
      options: { disableNameSuffixHash: true, annotations: { 'config.kubernetes.io/local-config': 'true' } },
    }],
    replacements: [{
      source: { kind: 'Secret', name: CA_SECRET, namespace: INSTALL.namespace, fieldPath: 'data.caBundle' },
      targets: WEBHOOK_KINDS.map((kind) => ({
        select: { kind, name: WEBHOOK_CONFIGURATION },
        fieldPaths: ['webhooks.*.clientConfig.caBundle'],
        options: { create: true },
      })),
    }],
  });
}
