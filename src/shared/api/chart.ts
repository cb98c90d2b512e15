// charts/ptah/: the Helm chart, rendered from the same objects as manifests/. Each object is serialized as it is for
// manifests/ and then made a template by replacing sentinel values and the install namespace with Helm actions, so
// with default values `helm template` holds manifests/' objects. The values, their schema and docs/helm.md come from
// one table (CHART_VALUES).
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { customResourceDefinitions } from './crd.js';
import { managerDeployment } from './deployment.js';
import { API_SERVER_SOURCE_RANGES, METRICS_SCRAPER_RANGES, certManagerObjects, managerDisruptionBudget, managerNetworkPolicy } from './install.js';
import { toYaml } from './manifests.js';
import { INSTALL } from './names.js';
import { rbacObjects } from './rbac.js';
import { statusWritePolicies } from './status-policy.js';
import { serviceClientConfig, webhookConfigurations } from './webhooks.js';

type JsonSchema = Record<string, unknown>;
interface Leaf { doc: string; default: unknown; schema: JsonSchema }
interface Group { doc: string; children: Record<string, ValueNode> }
type ValueNode = Leaf | Group;
const isGroup = (node: ValueNode): node is Group => 'children' in node;

const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [{ type: 'null' }, schema] });
const DNS_LABEL = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';
const IMAGE_REPOSITORY = { type: 'string', pattern: '^[a-z0-9][A-Za-z0-9._/:-]{0,254}$' };
const IMAGE_TAG = { type: 'string', pattern: '^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$' };
const DIGEST = { type: 'string', pattern: '^sha256:[a-f0-9]{64}$' };
const CIDRS = { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[0-9a-fA-F.:]+/[0-9]{1,3}$' } };
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const [manager] = managerDeployment();
const managerPod = manager.spec!.template.spec!;
const managerContainer = managerPod.containers[0]!;
const [defaultRepository, defaultTag] = managerContainer.image!.split(':') as [string, string];
// Kubernetes objects passed through as written (resources, affinity, tolerations): the API server validates them.
const OBJECT = { type: 'object' };

/** Every value of the chart: its documentation (values.yaml, docs/helm.md), default and schema. */
export const CHART_VALUES: Record<string, ValueNode> = {
  image: {
    doc: 'The manager image; the operation Jobs run it too unless runnerImage names another.',
    children: {
      repository: { doc: 'Image repository.', default: defaultRepository, schema: IMAGE_REPOSITORY },
      tag: { doc: 'Image tag (ignored when a digest is given).', default: defaultTag, schema: IMAGE_TAG },
      digest: { doc: 'Image digest (sha256:…); pins the image by content instead of the tag.', default: null, schema: nullable(DIGEST) },
      pullPolicy: { doc: 'imagePullPolicy of the manager container.', default: managerContainer.imagePullPolicy, schema: { enum: ['Always', 'IfNotPresent', 'Never'] } },
    },
  },
  runnerImage: {
    doc: 'The image operation Jobs run (PTAH_RUNNER_IMAGE); it must carry this release\'s executor. Null fields take image\'s.',
    children: {
      repository: { doc: 'Runner image repository; null: image.repository.', default: null, schema: nullable(IMAGE_REPOSITORY) },
      tag: { doc: 'Runner image tag; null: image.tag.', default: null, schema: nullable(IMAGE_TAG) },
      digest: { doc: 'Runner image digest; null: image.digest when the repository is image\'s too.', default: null, schema: nullable(DIGEST) },
    },
  },
  replicas: { doc: 'Manager replicas: one leads the controllers, every one serves admission.', default: manager.spec!.replicas, schema: { type: 'integer', minimum: 1 } },
  leaderElection: {
    doc: 'Leader election (PTAH_LEADER_ELECTION). Off, a replica serves admission only and no controller runs.',
    default: true, schema: { type: 'boolean' },
  },
  watchNamespace: {
    doc: 'Reconcile the resources of this one namespace only (PTAH_WATCH_NAMESPACE); null: every namespace.',
    default: null, schema: nullable({ type: 'string', pattern: DNS_LABEL }),
  },
  logLevel: { doc: 'pino log level (PTAH_LOG_LEVEL); null: the manager\'s default, info.', default: null, schema: nullable({ enum: LOG_LEVELS }) },
  readTimeoutMs: {
    doc: 'Bound in ms on each uncached read the webhooks make (PTAH_READ_TIMEOUT_MS); null: the manager\'s default, 8000.',
    default: null, schema: nullable({ type: 'integer', minimum: 100, maximum: 30000 }),
  },
  resources: { doc: 'The manager container\'s resources.', default: managerContainer.resources, schema: OBJECT },
  nodeSelector: { doc: 'The manager Pods\' nodeSelector.', default: {}, schema: { type: 'object', additionalProperties: { type: 'string' } } },
  tolerations: { doc: 'The manager Pods\' tolerations.', default: [], schema: { type: 'array', items: OBJECT } },
  affinity: { doc: 'The manager Pods\' affinity.', default: {}, schema: OBJECT },
  podSecurityContext: {
    doc: 'The manager Pods\' securityContext (the container\'s own, non-root and read-only, is fixed).',
    default: managerPod.securityContext, schema: OBJECT,
  },
  webhook: {
    doc: 'The webhooks\' serving certificate.',
    children: {
      certificate: {
        doc: 'Where the certificate comes from.',
        children: {
          source: {
            doc: 'secret: a Secret you create (tls.crt, tls.key); cert-manager: a self-signed Issuer and a Certificate, the CA injected into the webhooks; generate: the chart generates a CA and certificate once and keeps them across upgrades.',
            default: 'secret', schema: { enum: ['secret', 'cert-manager', 'generate'] },
          },
          secretName: { doc: 'The Secret the manager mounts (and cert-manager or the chart writes).', default: INSTALL.tlsSecret, schema: { type: 'string', pattern: DNS_LABEL } },
          caBundle: {
            doc: 'With source secret: the base64 PEM of the CA that signed it, set as every webhook\'s caBundle.',
            default: null, schema: nullable({ type: 'string', pattern: '^[A-Za-z0-9+/=]+$' }),
          },
        },
      },
    },
  },
  networkPolicy: {
    doc: 'The manager\'s NetworkPolicy: only the API server reaches the webhook port, only scrapers the metrics port.',
    children: {
      enabled: { doc: 'Install it.', default: true, schema: { type: 'boolean' } },
      apiServerCidrs: {
        doc: 'Where the API server\'s webhook calls come from; the default, the private ranges, is only "the API server" once narrowed.',
        default: [...API_SERVER_SOURCE_RANGES], schema: CIDRS,
      },
      metricsCidrs: {
        doc: 'Where scrapes of /metrics (port 8443) come from: your Prometheus Pods\' addresses, once narrowed.',
        default: [...METRICS_SCRAPER_RANGES], schema: CIDRS,
      },
    },
  },
  podDisruptionBudget: {
    doc: 'The manager\'s PodDisruptionBudget.',
    children: {
      enabled: { doc: 'Install it.', default: true, schema: { type: 'boolean' } },
      minAvailable: { doc: 'Manager Pods kept through voluntary disruptions.', default: managerDisruptionBudget().spec!.minAvailable, schema: { type: 'integer', minimum: 0 } },
    },
  },
  serviceMonitor: {
    doc: 'A Prometheus Operator ServiceMonitor for /metrics (manifests/monitoring/servicemonitor.yaml).',
    children: { enabled: { doc: 'Install it (needs the Prometheus Operator\'s CRDs).', default: false, schema: { type: 'boolean' } } },
  },
  prometheusRule: {
    doc: 'The alerts of manifests/monitoring/prometheusrule.yaml as a PrometheusRule.',
    children: { enabled: { doc: 'Install it (needs the Prometheus Operator\'s CRDs).', default: false, schema: { type: 'boolean' } } },
  },
};

function valuesYaml(nodes: Record<string, ValueNode>, indent = ''): string {
  return Object.entries(nodes).map(([key, node]) => {
    const comment = `${indent}# ${node.doc}\n`;
    if (isGroup(node)) return `${comment}${indent}${key}:\n${valuesYaml(node.children, `${indent}  `)}`;
    const text = YAML.stringify({ [key]: node.default }, { version: '1.1', lineWidth: 0 });
    return comment + text.trimEnd().split('\n').map((line) => indent + line).join('\n') + '\n';
  }).join('');
}

function valuesSchema(nodes: Record<string, ValueNode>): JsonSchema {
  return {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(Object.entries(nodes).map(([key, node]) => [key, isGroup(node) ? valuesSchema(node.children) : node.schema])),
  };
}

/** docs/helm.md's table: every value, its default and meaning. */
export function valuesTable(nodes: Record<string, ValueNode> = CHART_VALUES, prefix = ''): string[] {
  return Object.entries(nodes).flatMap(([key, node]) => isGroup(node)
    ? valuesTable(node.children, `${prefix}${key}.`)
    : [`| \`${prefix}${key}\` | \`${JSON.stringify(node.default)}\` | ${node.doc} |`]);
}

// Sentinels put into the objects where a value goes, then replaced by template actions.
const S = {
  image: '__PTAH_IMAGE__',
  runnerImage: '__PTAH_RUNNER_IMAGE__',
  replicas: '__PTAH_REPLICAS__',
  resources: '__PTAH_RESOURCES__',
  podSecurityContext: '__PTAH_POD_SECURITY_CONTEXT__',
  caBundle: '__PTAH_CA_BUNDLE__',
  cidrs: '__PTAH_CIDRS__',
  metricsCidrs: '__PTAH_METRICS_CIDRS__',
  minAvailable: '__PTAH_MIN_AVAILABLE__',
  pullPolicy: '__PTAH_PULL_POLICY__',
} as const;
const NAMESPACE = '{{ .Release.Namespace }}';
const SECRET = '{{ .Values.webhook.certificate.secretName }}';

/** Text copied into a template: its own `{{` printed literally. */
const literal = (text: string): string => text.replaceAll('{{', '{{ "{{" }}');
/** `key: SENTINEL` → `key:` followed by the value as YAML at the next indentation. */
const block = (text: string, sentinel: string, expr: string): string =>
  text.replace(new RegExp(`^( *)([A-Za-z]+): ${sentinel}$`, 'm'), (_m, indent: string, key: string) => `${indent}${key}: {{- toYaml ${expr} | nindent ${indent.length + 2} }}`);
/** The install's namespace and Secret name become the release's. */
const placed = (text: string): string => literal(text).replaceAll(INSTALL.namespace, NAMESPACE).replaceAll(INSTALL.tlsSecret, SECRET);
const when = (condition: string, text: string): string => `{{- if ${condition} }}\n${text}{{- end }}\n`;

function deploymentTemplate(): string {
  const [deployment, service] = managerDeployment({ image: S.image });
  const pod = deployment.spec!.template.spec!;
  const container = pod.containers[0]!;
  // Sentinels where the objects' types want numbers and objects: the text is all that is kept.
  Object.assign(deployment.spec!, { replicas: S.replicas });
  Object.assign(container, { resources: S.resources, imagePullPolicy: S.pullPolicy });
  Object.assign(pod, { securityContext: S.podSecurityContext });
  const runner = container.env!.find((e) => e.name === 'PTAH_RUNNER_IMAGE')!;
  runner.value = S.runnerImage;
  let text = placed(toYaml([deployment, service]));
  text = block(text, S.resources, '.Values.resources');
  text = block(text, S.podSecurityContext, '.Values.podSecurityContext');
  text = text.replace(S.pullPolicy, '{{ .Values.image.pullPolicy }}');
  text = text.replaceAll(S.image, '{{ include "ptah.image" . }}').replace(S.replicas, '{{ .Values.replicas }}');
  // Settings the manager reads from its environment, present only when a value departs from its default.
  const settings = [
    ['not .Values.leaderElection', 'PTAH_LEADER_ELECTION', '"false"'],
    ['.Values.watchNamespace', 'PTAH_WATCH_NAMESPACE', '{{ .Values.watchNamespace | quote }}'],
    ['.Values.logLevel', 'PTAH_LOG_LEVEL', '{{ .Values.logLevel | quote }}'],
    ['.Values.readTimeoutMs', 'PTAH_READ_TIMEOUT_MS', '{{ .Values.readTimeoutMs | quote }}'],
    // The manager's default identity names the install namespace; elsewhere it is told its own.
    [`ne .Release.Namespace "${INSTALL.namespace}"`, 'PTAH_MANAGER_USERNAME', `"system:serviceaccount:{{ .Release.Namespace }}:${INSTALL.serviceAccount}"`],
  ];
  text = text.replace(new RegExp(`^( *)value: ${S.runnerImage}$`, 'm'), (_m, indent: string) => {
    const item = indent.slice(2);
    return [`${indent}value: {{ include "ptah.runnerImage" . }}`, ...settings.map(([condition, name, value]) =>
      `{{- if ${condition} }}\n${item}- name: ${name}\n${indent}value: ${value}\n{{- end }}`)].join('\n');
  });
  // Scheduling, only when given: manifests/ sets none.
  return text.replace(/^( *)serviceAccountName: (.*)$/m, (_m, indent: string, account: string) => [
    `${indent}serviceAccountName: ${account}`,
    ...['nodeSelector', 'tolerations', 'affinity'].map((key) =>
      `${indent}{{- with .Values.${key} }}\n${indent}${key}: {{- toYaml . | nindent ${indent.length + 2} }}\n${indent}{{- end }}`),
  ].join('\n'));
}

const HELPERS = `{{/* The manager image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "ptah.image" -}}
{{- with .Values.image -}}
{{- if .digest }}{{ .repository }}@{{ .digest }}{{ else }}{{ .repository }}:{{ .tag }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* The runner image: runnerImage's fields, each defaulting to image's. */}}
{{- define "ptah.runnerImage" -}}
{{- $repository := .Values.runnerImage.repository | default .Values.image.repository -}}
{{- $digest := .Values.runnerImage.digest -}}
{{- if and (not $digest) (eq $repository .Values.image.repository) }}{{ $digest = .Values.image.digest }}{{ end -}}
{{- if $digest }}{{ $repository }}@{{ $digest }}{{ else }}{{ $repository }}:{{ .Values.runnerImage.tag | default .Values.image.tag }}{{ end -}}
{{- end -}}

{{/*
The generated serving certificate as YAML (ca, crt, key; base64): the one already in the Secret when the chart wrote
it before, so an upgrade keeps it, else a new CA (10 years) and a certificate it signs for the Service.
*/}}
{{- define "ptah.generatedCertificate" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.webhook.certificate.secretName -}}
{{- if and $secret (index ($secret.data | default dict) "ca.crt") -}}
ca: {{ index $secret.data "ca.crt" }}
crt: {{ index $secret.data "tls.crt" }}
key: {{ index $secret.data "tls.key" }}
{{- else -}}
{{- $service := printf "${INSTALL.webhookService}.%s.svc" .Release.Namespace -}}
{{- $ca := genCA "ptah-webhook-ca" 3650 -}}
{{- $cert := genSignedCert $service nil (list $service (printf "%s.cluster.local" $service)) 3650 $ca -}}
ca: {{ $ca.Cert | b64enc }}
crt: {{ $cert.Cert | b64enc }}
key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}
`;

function webhooksTemplate(): string {
  const { mutating, validating } = webhookConfigurations((path) => ({ ...serviceClientConfig(path), caBundle: S.caBundle }));
  const cm = 'eq .Values.webhook.certificate.source "cert-manager"';
  const generate = 'eq .Values.webhook.certificate.source "generate"';
  const injected = certManagerObjects()[1] as { metadata: { namespace: string; name: string } };
  let text = placed(toYaml([mutating, validating]));
  text = text.replace(new RegExp(`^( *)caBundle: ${S.caBundle}$`, 'gm'), (_m, indent: string) =>
    `${indent}{{- with $caBundle }}\n${indent}caBundle: {{ . }}\n${indent}{{- end }}`);
  // cert-manager's injection, as manifests/cert-manager adds it.
  text = text.replace(/^metadata:\n  name: (.*)$/gm, (_m, name: string) => [
    'metadata:', `  name: ${name}`,
    `{{- if ${cm} }}`, '  annotations:', `    cert-manager.io/inject-ca-from: ${NAMESPACE}/${injected.metadata.name}`, '{{- end }}',
  ].join('\n'));
  const secret = {
    apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls',
    metadata: { name: INSTALL.tlsSecret, namespace: INSTALL.namespace },
    data: { 'ca.crt': '__PTAH_CA__', 'tls.crt': '__PTAH_CRT__', 'tls.key': '__PTAH_KEY__' },
  };
  const secretText = placed(toYaml([secret])).replace('__PTAH_CA__', '{{ $cert.ca }}').replace('__PTAH_CRT__', '{{ $cert.crt }}').replace('__PTAH_KEY__', '{{ $cert.key }}');
  return [
    '{{- $caBundle := .Values.webhook.certificate.caBundle }}',
    `{{- if ${generate} }}`,
    '{{- $cert := include "ptah.generatedCertificate" . | fromYaml }}',
    '{{- $caBundle = $cert.ca }}',
    secretText.trimEnd(),
    '---',
    '{{- end }}',
    `{{- if ${cm} }}`,
    placed(toYaml(certManagerObjects())).trimEnd(),
    '---',
    '{{- end }}',
    text,
  ].join('\n');
}

/** The `from:` holding `sentinel` as one ipBlock per CIDR of `.Values.networkPolicy.<value>`. */
function rangeOfCidrs(template: string, sentinel: string, value: string): string {
  return template.replace(new RegExp(`^( *)(- )?from: ${sentinel}$`, 'm'), (_m, indent: string, dash = '') => {
    const inner = ' '.repeat(indent.length + dash.length);
    return `${indent}${dash}from:\n${inner}{{- range .Values.networkPolicy.${value} }}\n${inner}  - ipBlock:\n${inner}      cidr: {{ . | quote }}\n${inner}{{- end }}`;
  });
}

function monitoring(file: string): string {
  return placed(readFileSync(new URL(`../../../manifests/monitoring/${file}`, import.meta.url), 'utf8'));
}

function chartYaml(version: string): string {
  return toYaml([{
    apiVersion: 'v2',
    name: 'ptah',
    description: 'A Kubernetes operator that applies PostgreSQL schema changes safely',
    type: 'application',
    version,
    appVersion: version,
    // ValidatingAdmissionPolicy is GA from 1.30.
    kubeVersion: '>=1.30.0-0',
  }]);
}

/** Path (relative to charts/ptah/) → content. */
export function renderChart(version: string): Map<string, string> {
  const files = new Map<string, string>();
  files.set('Chart.yaml', chartYaml(version));
  files.set('values.yaml', `# Generated by \`npm run generate\` from src/shared/api/chart.ts. Do not edit by hand; docs/helm.md lists the same.\n${valuesYaml(CHART_VALUES)}`);
  files.set('values.schema.json', `${JSON.stringify({ $schema: 'https://json-schema.org/draft/2020-12/schema', ...valuesSchema(CHART_VALUES) }, null, 2)}\n`);
  files.set('templates/_helpers.tpl', HELPERS);
  // Templates, not crds/: Helm applies crds/ only on the first install, and these must follow upgrades. keep: an
  // uninstall leaves them, and with them every resource and record.
  for (const crd of customResourceDefinitions()) {
    const kept = { ...crd, metadata: { ...crd.metadata, annotations: { 'helm.sh/resource-policy': 'keep' } } };
    files.set(`templates/crds/${crd.spec.names.plural}.yaml`, literal(toYaml([kept])));
  }
  // The Namespace is the release's (helm install --namespace … --create-namespace).
  files.set('templates/rbac.yaml', placed(toYaml(rbacObjects().slice(1))));
  files.set('templates/deployment.yaml', deploymentTemplate());
  const pdb = managerDisruptionBudget();
  Object.assign(pdb.spec!, { minAvailable: S.minAvailable });
  files.set('templates/pdb.yaml', when('.Values.podDisruptionBudget.enabled', placed(toYaml([pdb])).replace(S.minAvailable, '{{ .Values.podDisruptionBudget.minAvailable }}')));
  const policy = managerNetworkPolicy();
  Object.assign(policy.spec.ingress![0]!, { from: S.cidrs });
  Object.assign(policy.spec.ingress![1]!, { from: S.metricsCidrs });
  files.set('templates/networkpolicy.yaml', when('.Values.networkPolicy.enabled',
    rangeOfCidrs(rangeOfCidrs(placed(toYaml([policy])), S.cidrs, 'apiServerCidrs'), S.metricsCidrs, 'metricsCidrs')));
  files.set('templates/webhooks.yaml', webhooksTemplate());
  files.set('templates/status-write-policy.yaml', placed(toYaml(statusWritePolicies())));
  files.set('templates/servicemonitor.yaml', when('.Values.serviceMonitor.enabled', monitoring('servicemonitor.yaml')));
  files.set('templates/prometheusrule.yaml', when('.Values.prometheusRule.enabled', monitoring('prometheusrule.yaml')));
  return files;
}
