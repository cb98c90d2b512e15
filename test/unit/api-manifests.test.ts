import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1PolicyRule } from '@kubernetes/client-node';
import t from 'tap';
import YAML from 'yaml';
import { customResourceDefinitions, KIND_DEFINITIONS, type CustomResourceDefinition } from '../../src/shared/api/crd.js';
import { DURATION_PATTERN } from '../../src/shared/api/duration.js';
import { renderChart, valuesTable } from '../../src/shared/api/chart.js';
import { renderManifests } from '../../src/shared/api/manifests.js';
import { DECISION_KINDS, GROUP, INSTALL, KIND_NAMES, KINDS, MANAGER_USERNAME } from '../../src/shared/api/names.js';
import { APPROVER_RULES, MANAGER_RULES } from '../../src/shared/api/rbac.js';
import type { OpenApiSchema } from '../../src/shared/api/schema.js';
import { statusWritePolicies } from '../../src/shared/api/status-policy.js';
import { WEBHOOK_PATHS, webhookConfigurations } from '../../src/shared/api/webhooks.js';

const manifestsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../manifests');
const rendered = renderManifests();
const crds = customResourceDefinitions();
const crdFor = (kind: string): CustomResourceDefinition => {
  const crd = crds.find((c) => c.spec.names.kind === kind);
  if (!crd) throw new Error(`no CRD for ${kind}`);
  return crd;
};
const rootOf = (kind: string): OpenApiSchema => crdFor(kind).spec.versions[0]!.schema.openAPIV3Schema;
const at = (schema: OpenApiSchema, dotted: string): OpenApiSchema => {
  let node = schema;
  for (const part of dotted.split('.')) {
    const next = part === '[]' ? node.items : node.properties?.[part];
    if (!next) throw new Error(`no ${part} in ${dotted}`);
    node = next;
  }
  return node;
};
const rulesAt = (kind: string, dotted: string) => (at(rootOf(kind), dotted)['x-kubernetes-validations'] ?? []).map((r) => r.rule);

t.test('manifests/ is what `npm run generate` renders now', async (t) => {
  for (const [name, text] of rendered) {
    const onDisk = await readFile(path.join(manifestsDir, name), 'utf8').catch(() => undefined);
    t.ok(onDisk !== undefined, `${name} exists (run npm run generate)`);
    if (onDisk !== undefined) t.ok(onDisk === text, `${name} is current (run npm run generate)`);
  }
  const crdFiles = (await readdir(path.join(manifestsDir, 'crds'))).map((f) => `crds/${f}`);
  t.strictSame(crdFiles.filter((f) => !rendered.has(f)), [], 'no CRD file that no kind produces');
  const yamls = (await readdir(manifestsDir)).filter((f) => f.endsWith('.yaml'));
  t.strictSame(yamls.filter((f) => !rendered.has(f)), [], 'no stray top-level manifest');
});

t.test('charts/ptah/ is what `npm run generate` renders now, and docs/helm.md lists every value', async (t) => {
  const repo = path.dirname(manifestsDir);
  const { version } = JSON.parse(await readFile(path.join(repo, 'package.json'), 'utf8')) as { version: string };
  const chart = renderChart(version);
  const chartDir = path.join(repo, 'charts/ptah');
  for (const [name, text] of chart) {
    const onDisk = await readFile(path.join(chartDir, name), 'utf8').catch(() => undefined);
    t.ok(onDisk === text, `charts/ptah/${name} is current (run npm run generate)`);
    t.notMatch(text, /__PTAH_[A-Z_]+__/, `charts/ptah/${name}: every sentinel became a template action`);
  }
  const onDisk = async (dir: string): Promise<string[]> => (await readdir(path.join(chartDir, dir), { withFileTypes: true }))
    .flatMap((e) => (e.isFile() ? [path.join(dir, e.name)] : []));
  const files = [...await onDisk('.'), ...await onDisk('templates'), ...await onDisk('templates/crds')].map((f) => path.normalize(f));
  t.strictSame(files.filter((f) => !chart.has(f)), [], 'no chart file that the generator does not write');
  const docs = await readFile(path.join(repo, 'docs/helm.md'), 'utf8');
  for (const row of valuesTable()) t.ok(docs.includes(row), `docs/helm.md lists ${row.split(' | ')[0]!.slice(2)}`);
});

t.test('the rendered YAML reads back as the objects it was made from', async (t) => {
  for (const crd of crds) {
    const text = rendered.get(`crds/${crd.spec.names.plural}.yaml`)!;
    t.strictSame(YAML.parse(text), JSON.parse(JSON.stringify(crd)), crd.metadata.name);
  }
  const docs = YAML.parseAllDocuments(rendered.get('status-write-policy.yaml')!).map((d) => d.toJS());
  t.strictSame(docs, JSON.parse(JSON.stringify(statusWritePolicies())));
});

t.test('one CRD per kind, with the sketch’s names', async (t) => {
  const shortNames: Record<string, string> = {
    PtahSchema: 'ptahs',
    PtahSchemaPlan: 'ptahplan',
    PtahSchemaPlanChunk: 'ptahchunk',
    PtahSchemaApproval: 'ptahapprove',
    PtahMigration: 'ptahm',
    PtahMigrationPlan: 'ptahmplan',
    PtahMigrationApproval: 'ptahmapprove',
    PtahMigrationRunAcknowledgment: 'ptahmack',
    PtahSchemaRunAcknowledgment: 'ptahsack',
    PtahRealm: 'ptahr',
  };
  // Kinds without a status subresource: the chunk (data only) and the realm (an administrator's grant).
  const statusless = new Set(['PtahSchemaPlanChunk', 'PtahRealm']);
  t.strictSame(crds.map((c) => c.spec.names.kind).sort(), Object.keys(shortNames).sort());
  for (const crd of crds) {
    const kind = crd.spec.names.kind;
    t.equal(crd.metadata.name, `${crd.spec.names.plural}.${GROUP}`);
    t.equal(crd.spec.scope, kind === 'PtahRealm' ? 'Cluster' : 'Namespaced', `${kind} is ${kind === 'PtahRealm' ? 'cluster-scoped' : 'namespaced'}`);
    t.strictSame(crd.spec.names.shortNames, [shortNames[kind]], `${kind} short name`);
    t.equal(crd.spec.versions.length, 1);
    const version = crd.spec.versions[0]!;
    t.equal(version.subresources !== undefined, !statusless.has(kind), `${kind}: status subresource unless it is the chunk or the realm`);
    t.equal(version.schema.openAPIV3Schema.properties?.status !== undefined, !statusless.has(kind), `${kind}: status schema`);
    t.strictSame(version.schema.openAPIV3Schema.required, ['spec'], `${kind}: spec required`);
    t.equal(version.additionalPrinterColumns.at(-1)?.name, 'Age');
  }
  t.strictSame(
    crdFor('PtahMigration').spec.versions[0]!.additionalPrinterColumns.filter((c) => !c.priority).map((c) => c.name),
    ['Phase', 'Current', 'Pending', 'Outcome', 'Reason', 'Age'],
  );
  t.strictSame(crdFor('PtahRealm').spec.versions[0]!.additionalPrinterColumns.map((c) => c.name), ['Engine', 'Sharing', 'Namespaces', 'Age']);
});

t.test('PtahRealm: an immutable engine, a bounded set of namespaces, a closed sharing; targets name a key or a realm', async (t) => {
  t.strictSame(rulesAt('PtahRealm', 'spec.engine'), ['self == oldSelf'], 'engine immutable');
  const namespaces = at(rootOf('PtahRealm'), 'spec.namespaces');
  t.strictSame([namespaces.minItems, namespaces.maxItems, namespaces['x-kubernetes-list-type']], [1, 256, 'set']);
  t.strictSame(at(rootOf('PtahRealm'), 'spec.sharing').enum, ['Exclusive', 'Shared']);
  t.strictSame(at(rootOf('PtahRealm'), 'spec').required, ['engine', 'namespaces', 'sharing']);
  for (const kind of ['PtahSchema', 'PtahMigration']) {
    t.strictSame(rulesAt(kind, 'spec.target'), [
      'has(self.coordinationKey) != has(self.realmRef)',
      '!has(self.sharedRealm) || !self.sharedRealm || has(self.realmRef)',
      'has(self.realmRef) == has(oldSelf.realmRef)',
    ], `${kind}: exactly one of coordinationKey and realmRef, sharedRealm only with a realm, no switch between them`);
    t.strictSame(at(rootOf(kind), 'spec.target').required, ['engine', 'urlFrom'], `${kind}: neither realm field is required alone`);
  }
});

t.test('every schema is structural and every rule has a bounded cost', async (t) => {
  // Pass-through core shapes, by path; nothing else may keep unknown fields.
  const passThrough = new Set(['spec.execution.resources', 'spec.execution.tolerations.[]', 'spec.execution.affinity']);
  for (const crd of crds) {
    const problems: string[] = [];
    const walk = (node: OpenApiSchema, where: string, root = false) => {
      if (node['x-kubernetes-preserve-unknown-fields']) {
        if (!passThrough.has(where)) problems.push(`${where} keeps unknown fields`);
        if (node.type !== 'object') problems.push(`${where} keeps unknown fields without being an object`);
        return;
      }
      if (!node.type) problems.push(`${where} has no type`);
      // apiVersion and kind at the root are the API server's; no rule reads them.
      if (node.type === 'string' && !root && node.maxLength === undefined && node.enum === undefined) problems.push(`${where} is an unbounded string`);
      if (node.type === 'array') {
        if (node.maxItems === undefined) problems.push(`${where} is an unbounded array`);
        if (node['x-kubernetes-list-type'] === 'map') {
          for (const key of node['x-kubernetes-list-map-keys'] ?? []) {
            if (!node.items?.required?.includes(key)) problems.push(`${where}: list-map key ${key} is not required`);
          }
        }
        if (!node.items) problems.push(`${where} has no items`);
        else walk(node.items, `${where}.[]`);
      }
      if (node.additionalProperties) {
        if (node.maxProperties === undefined) problems.push(`${where} is an unbounded map`);
        walk(node.additionalProperties, `${where}.{}`);
      }
      for (const req of node.required ?? []) if (!node.properties?.[req]) problems.push(`${where}: required ${req} is not a property`);
      for (const [name, child] of Object.entries(node.properties ?? {})) {
        if (child.default !== undefined && node.required?.includes(name)) problems.push(`${where}.${name} is required and defaulted`);
        walk(child, where ? `${where}.${name}` : name, where === '' && (name === 'apiVersion' || name === 'kind'));
      }
    };
    walk(crd.spec.versions[0]!.schema.openAPIV3Schema, '');
    t.strictSame(problems, [], crd.metadata.name);
  }
});

t.test('patterns are RE2 (as the API server compiles them) and JavaScript alike', async (t) => {
  const patterns = new Set<string>();
  const collect = (node: OpenApiSchema) => {
    if (node.pattern) patterns.add(node.pattern);
    for (const child of [node.items, node.additionalProperties, ...Object.values(node.properties ?? {})]) if (child) collect(child);
  };
  for (const crd of crds) collect(crd.spec.versions[0]!.schema.openAPIV3Schema);
  t.ok(patterns.size > 5, `${patterns.size} patterns`);
  for (const p of patterns) {
    t.notMatch(p, /\(\?[=!<]|\\[1-9]/, `${p}: no lookaround or back-reference`);
    t.ok(p.startsWith('^') && p.endsWith('$'), `${p} is anchored`);
    t.doesNotThrow(() => new RegExp(p, 'u'), p);
  }
});

t.test('durations: pattern and CEL range on every duration field', async (t) => {
  const fields: [string, string, string, string][] = [
    ['PtahSchema', 'spec.interval', '10s', '24h'],
    ['PtahSchema', 'spec.policy.lockTimeout', '1s', '10m'],
    ['PtahSchema', 'spec.execution.failureRetryInterval', '5s', '1h'],
    ['PtahSchema', 'spec.execution.connectTimeout', '1s', '10m'],
    ['PtahMigration', 'spec.interval', '10s', '24h'],
    ['PtahMigration', 'spec.policy.lockTimeout', '1s', '1h'],
    ['PtahMigration', 'spec.execution.failureRetryInterval', '5s', '1h'],
  ];
  for (const [kind, field, min, max] of fields) {
    const node = at(rootOf(kind), field);
    t.equal(node.pattern, DURATION_PATTERN, `${kind} ${field} pattern`);
    t.strictSame(rulesAt(kind, field), [`duration(self) >= duration('${min}') && duration(self) <= duration('${max}')`], `${kind} ${field} range`);
  }
  t.equal(at(rootOf('PtahSchema'), 'spec.policy.lockTimeout').default, '30s');
  t.equal(at(rootOf('PtahMigration'), 'spec.policy.lockTimeout').default, '5m');
  t.equal(at(rootOf('PtahMigration'), 'spec.interval').default, '10m');
  t.equal(at(rootOf('PtahMigration'), 'spec.execution.activeDeadlineSeconds').default, 900);
  t.strictSame(at(rootOf('PtahMigration'), 'spec.execution').default, {}, 'execution defaults to {} so its own defaults apply');
  t.strictSame(at(rootOf('PtahSchema'), 'spec.policy').default, {});
  for (const kind of ['PtahSchema', 'PtahMigration']) {
    t.match(rulesAt(kind, 'spec').join('\n'), /policy\.lockTimeout.*activeDeadlineSeconds/, `${kind}: lockTimeout bounded by the deadline`);
    t.match(rulesAt(kind, 'spec').join('\n'), /connectTimeout.*activeDeadlineSeconds/, `${kind}: connectTimeout bounded by the deadline`);
  }
});

t.test('metadata.name at most 63 for PtahSchema and PtahMigration only', async (t) => {
  for (const definition of KIND_DEFINITIONS) {
    const kind = definition.names.kind;
    const rules = (rootOf(kind)['x-kubernetes-validations'] ?? []).map((r) => r.rule);
    t.strictSame(rules, kind === 'PtahSchema' || kind === 'PtahMigration' ? ['self.metadata.name.size() <= 63'] : [], kind);
  }
});

t.test('spec immutability exactly where the sketch asks for it', async (t) => {
  const immutable = new Set([
    'PtahSchemaPlan',
    'PtahSchemaPlanChunk',
    'PtahSchemaApproval',
    'PtahMigrationPlan',
    'PtahMigrationApproval',
    'PtahMigrationRunAcknowledgment',
    'PtahSchemaRunAcknowledgment',
  ]);
  for (const kind of KIND_NAMES) {
    t.equal(rulesAt(kind, 'spec').includes('self == oldSelf'), immutable.has(kind), `${kind}: spec ${immutable.has(kind) ? 'is' : 'is not'} immutable`);
  }
});

t.test('references and identities refuse empty parts', async (t) => {
  for (const [kind, field] of [
    ['PtahSchema', 'spec.target.urlFrom'],
    ['PtahSchema', 'spec.desired.verificationPolicyRef'],
    ['PtahSchema', 'spec.dev.urlFrom'],
    ['PtahMigration', 'spec.target.urlFrom'],
    ['PtahMigration', 'spec.artifact.verificationPolicyRef'],
  ] as const) {
    const node = at(rootOf(kind), field);
    t.strictSame(node.required, ['name', 'key'], `${kind} ${field}: name and key required`);
    t.strictSame(Object.keys(node.properties ?? {}), ['name', 'key'], `${kind} ${field}: no optional flag`);
    for (const part of ['name', 'key']) t.notOk(new RegExp(at(node, part).pattern!).test(''), `${kind} ${field}.${part} refuses ""`);
  }
  t.strictSame(rulesAt('PtahSchemaApproval', 'spec.approver'), ['self.groups.isSorted()']);
  t.equal(at(rootOf('PtahSchemaApproval'), 'spec.approver.groups')['x-kubernetes-list-type'], 'set', 'groups unique');
});

t.test('pod metadata refuses reserved keys by CEL', async (t) => {
  for (const field of ['labels', 'annotations']) {
    const rules = rulesAt('PtahSchema', `spec.execution.podMetadata.${field}`).join('\n');
    for (const reserved of ['ptah\\.run', 'kubernetes\\.io', 'k8s\\.io', "'controller-uid'", "'job-name'"]) t.ok(rules.includes(reserved), `${field}: ${reserved}`);
    t.equal(at(rootOf('PtahSchema'), `spec.execution.podMetadata.${field}`).maxProperties, 16);
  }
});

t.test('the manager’s RBAC', async (t) => {
  const all = [...MANAGER_RULES, ...APPROVER_RULES];
  for (const rule of all) {
    t.notOk(rule.resources?.some((r) => r === 'secrets' || r.startsWith('secrets/') || r.includes('*')), `no Secret or wildcard resource in ${JSON.stringify(rule)}`);
    t.notOk(rule.verbs.includes('*'), 'no wildcard verb');
  }
  const can = (rules: readonly V1PolicyRule[], group: string, resource: string, verb: string) =>
    rules.some((r) => r.apiGroups?.includes(group) && r.resources?.includes(resource) && r.verbs.includes(verb));
  for (const kind of KIND_NAMES) {
    // Only cluster administrators write a PtahRealm; the manager reads it.
    const writes = kind !== 'PtahRealm';
    for (const verb of ['get', 'list', 'watch']) t.ok(can(MANAGER_RULES, GROUP, KINDS[kind].plural, verb), `manager ${verb} ${kind}`);
    for (const verb of ['create', 'update', 'patch', 'delete']) t.equal(can(MANAGER_RULES, GROUP, KINDS[kind].plural, verb), writes, `manager ${writes ? 'may' : 'may not'} ${verb} ${kind}`);
    if (KINDS[kind].status) t.ok(can(MANAGER_RULES, GROUP, `${KINDS[kind].plural}/status`, 'patch'), `manager patches ${kind} status`);
  }
  t.ok(can(MANAGER_RULES, 'batch', 'jobs', 'create'));
  t.ok(can(MANAGER_RULES, '', 'configmaps', 'create'));
  t.notOk(can(MANAGER_RULES, '', 'configmaps', 'update'), 'projections are immutable: no ConfigMap update');
  t.ok(can(MANAGER_RULES, '', 'pods/log', 'get'));
  t.notOk(can(MANAGER_RULES, '', 'pods', 'create'));
  t.ok(can(MANAGER_RULES, 'coordination.k8s.io', 'leases', 'update'));
  t.ok(can(MANAGER_RULES, '', 'events', 'create'));
  for (const kind of KIND_NAMES) {
    const decision = (DECISION_KINDS as readonly string[]).includes(kind);
    t.equal(can(APPROVER_RULES, GROUP, KINDS[kind].plural, 'create'), decision, `approver ${decision ? 'creates' : 'does not create'} ${kind}`);
    t.ok(can(APPROVER_RULES, GROUP, KINDS[kind].plural, 'get'), `approver reads ${kind}`);
    t.notOk(can(APPROVER_RULES, GROUP, KINDS[kind].plural, 'delete'), `approver does not delete ${kind}`);
  }
  t.notOk(APPROVER_RULES.some((r) => r.resources?.some((res) => res.endsWith('/status'))), 'approver never touches status');
});

t.test('webhook configurations', async (t) => {
  const { mutating, validating } = webhookConfigurations((p) => ({ url: `https://127.0.0.1:9443${p}`, caBundle: 'Q0E=' }), {
    name: 'test-hooks',
    managerUsername: 'manager"x',
  });
  t.equal(mutating.metadata?.name, 'test-hooks');
  const hooks = [...(mutating.webhooks ?? []), ...(validating.webhooks ?? [])];
  t.strictSame(hooks.map((h) => h.clientConfig.url).sort(), Object.values(WEBHOOK_PATHS).map((p) => `https://127.0.0.1:9443${p}`).sort(), 'one entry per route');
  for (const hook of hooks) {
    t.equal(hook.failurePolicy, 'Fail', `${hook.name} fails closed`);
    t.equal(hook.sideEffects, 'None');
    t.strictSame(hook.admissionReviewVersions, ['v1']);
    t.equal(hook.timeoutSeconds, 10);
    t.equal(hook.clientConfig.caBundle, 'Q0E=');
    t.equal(hook.objectSelector, undefined, `${hook.name}: no object selector a user could label around`);
  }
  const byPath = (p: string) => hooks.find((h) => h.clientConfig.url?.endsWith(p))!;
  t.strictSame(byPath(WEBHOOK_PATHS.stamp).rules?.[0]?.operations, ['CREATE']);
  t.strictSame(byPath(WEBHOOK_PATHS.stamp).rules?.[0]?.resources, DECISION_KINDS.map((k) => KINDS[k].plural));
  t.strictSame(byPath(WEBHOOK_PATHS.decision).rules?.[0]?.operations, ['CREATE', 'UPDATE']);
  t.strictSame(byPath(WEBHOOK_PATHS.statusWrite).rules?.[0]?.resources, ['*/status', 'ptahmigrations']);
  t.strictSame(
    byPath(WEBHOOK_PATHS.controllerWrite).rules?.map((r) => `${r.apiGroups?.[0]}/${r.resources?.join('+')}:${r.operations?.join('+')}`),
    ['batch/jobs:CREATE+UPDATE', '/configmaps:CREATE', `${GROUP}/ptahschemaplans+ptahschemaplanchunks:CREATE`],
  );
  t.strictSame(byPath(WEBHOOK_PATHS.controllerWrite).matchConditions, [
    { name: 'manager-only', expression: 'request.userInfo.username == "manager\\"x"' },
  ], 'only the manager’s writes reach it; the username is quoted as a CEL string');
  t.equal(hooks.filter((h) => h.matchConditions).length, 1, 'the other routes judge everyone');

  const yaml = YAML.parseAllDocuments(rendered.get('webhooks.yaml')!).map((d) => d.toJS());
  for (const hook of yaml.flatMap((d) => d.webhooks)) {
    t.strictSame(hook.clientConfig.service, { namespace: INSTALL.namespace, name: INSTALL.webhookService, port: 443, path: hook.clientConfig.service.path }, hook.name);
  }
});

t.test('status-write admission policy', async (t) => {
  const [policy, binding, annotationPolicy, annotationBinding] = statusWritePolicies({ managerUsername: 'system:serviceaccount:x:y' });
  t.strictSame(policy.spec?.matchConstraints?.resourceRules, [{ apiGroups: [GROUP], apiVersions: ['*'], operations: ['UPDATE'], resources: ['*/status'] }]);
  t.equal(policy.spec?.failurePolicy, 'Fail');
  t.strictSame(policy.spec?.validations?.map((v) => v.expression), ['request.userInfo.username == "system:serviceaccount:x:y"']);
  t.equal(binding.spec?.policyName, policy.metadata?.name);
  t.strictSame(binding.spec?.validationActions, ['Deny']);
  t.strictSame(annotationPolicy.spec?.matchConstraints?.resourceRules?.[0]?.resources, ['ptahmigrations']);
  t.match(annotationPolicy.spec?.validations?.[0]?.expression, /operator\.ptah\.run\/unresolved-run/);
  t.equal(annotationBinding.spec?.policyName, annotationPolicy.metadata?.name);
  t.match(rendered.get('status-write-policy.yaml'), MANAGER_USERNAME, 'the manifests name the installed manager');
});

t.test('the manager Deployment is locked down', async (t) => {
  const docs = YAML.parseAllDocuments(rendered.get('deployment.yaml')!).map((d) => d.toJS());
  const deployment = docs.find((d) => d.kind === 'Deployment');
  const service = docs.find((d) => d.kind === 'Service');
  const pod = deployment.spec.template.spec;
  t.equal(pod.serviceAccountName, INSTALL.serviceAccount);
  const [container] = pod.containers;
  t.match(container.securityContext, {
    runAsNonRoot: true,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
  });
  t.match(container.livenessProbe.httpGet, { path: '/healthz', scheme: 'HTTPS' });
  t.match(container.readinessProbe.httpGet, { path: '/readyz', scheme: 'HTTPS' });
  t.ok(pod.volumes.some((v: { secret?: { secretName: string } }) => v.secret?.secretName === INSTALL.tlsSecret), 'serving certificate mounted');
  t.strictSame(service.metadata, { name: INSTALL.webhookService, namespace: INSTALL.namespace, labels: deployment.metadata.labels });
  t.equal(service.spec.ports[0].port, 443);
  t.strictSame(service.spec.selector, deployment.spec.selector.matchLabels);
});
