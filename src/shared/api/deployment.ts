// The manager's Deployment and the Service its webhooks are reached through. Settings reach the manager as the
// PTAH_* environment src/config.ts reads.
import type { V1Container, V1Deployment, V1Service } from '@kubernetes/client-node';
import { INSTALL } from './names.js';

export const MANAGER_IMAGE = 'localhost/ptah-operator:dev';
export const MANAGER_PORT = 9443;
/** /metrics, on a listener of its own (src/webhook/server.ts). */
export const METRICS_PORT = 8443;
const CERT_DIR = '/etc/ptah/tls';
const UID = 65532;
/** The manager's Pods: the Deployment, its Service, PodDisruptionBudget and NetworkPolicy select them by these. */
export const MANAGER_LABELS = { 'app.kubernetes.io/name': 'ptah-operator', 'app.kubernetes.io/component': 'manager' };

export interface DeploymentOptions {
  image?: string;
  replicas?: number;
}

export function managerDeployment(opts: DeploymentOptions = {}): [V1Deployment, V1Service] {
  const image = opts.image ?? MANAGER_IMAGE;
  const probe = (path: string) => ({ httpGet: { path, port: 'https', scheme: 'HTTPS' }, periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 });
  const container: V1Container = {
    name: 'manager',
    image,
    imagePullPolicy: 'IfNotPresent',
    env: [
      { name: 'PTAH_PORT', value: String(MANAGER_PORT) },
      { name: 'PTAH_METRICS_PORT', value: String(METRICS_PORT) },
      { name: 'PTAH_CERT_DIR', value: CERT_DIR },
      { name: 'PTAH_LEASE_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'PTAH_CONTROLLER_IMAGE', value: image },
      { name: 'PTAH_RUNNER_IMAGE', value: image },
    ],
    ports: [
      { name: 'https', containerPort: MANAGER_PORT, protocol: 'TCP' },
      { name: 'metrics', containerPort: METRICS_PORT, protocol: 'TCP' },
    ],
    livenessProbe: probe('/healthz'),
    readinessProbe: probe('/readyz'),
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } },
    securityContext: {
      runAsNonRoot: true,
      runAsUser: UID,
      runAsGroup: UID,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    volumeMounts: [
      { name: 'tls', mountPath: CERT_DIR, readOnly: true },
      { name: 'tmp', mountPath: '/tmp' },
    ],
  };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: INSTALL.deployment, namespace: INSTALL.namespace, labels: MANAGER_LABELS },
    spec: {
      replicas: opts.replicas ?? 2,
      // An old and a new manager never serve admission side by side.
      strategy: { type: 'Recreate' },
      selector: { matchLabels: MANAGER_LABELS },
      template: {
        metadata: { labels: MANAGER_LABELS },
        spec: {
          serviceAccountName: INSTALL.serviceAccount,
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [container],
          volumes: [
            { name: 'tls', secret: { secretName: INSTALL.tlsSecret } },
            { name: 'tmp', emptyDir: {} },
          ],
        },
      },
    },
  };
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: INSTALL.webhookService, namespace: INSTALL.namespace, labels: MANAGER_LABELS },
    spec: {
      selector: MANAGER_LABELS,
      ports: [
        { name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' },
        { name: 'metrics', port: METRICS_PORT, targetPort: 'metrics', protocol: 'TCP' },
      ],
    },
  };
  return [deployment, service];
}
