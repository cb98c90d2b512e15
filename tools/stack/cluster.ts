// How a test file reaches the stack test/run.ts started for the whole run: sharedCluster() reads the state file named
// by PTAH_TEST_STACK, and testNamespace(t) gives each test a fresh namespace that is deleted when the test ends.
// bindApprovers and waitForCrdsEstablished do the installation steps several test worlds share.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ApiextensionsV1Api, CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { INSTALL } from '../../src/shared/api/names.js';
import type { IdentityName } from './controlplane.js';
import { openPki, type Pki } from './pki.js';
import { STACK_ENV, type StackState } from './stack.js';
import { waitFor } from './wait.js';

export interface SharedCluster {
  state: StackState;
  /** A fresh KubeConfig for the identity (admin: system:masters; manager: the manager's ServiceAccount name; approver: alice). */
  kubeConfig(identity: IdentityName): KubeConfig;
  /** The test CA, to issue e.g. a webhook serving certificate the API server trusts. */
  pki(): Promise<Pki>;
}

let shared: SharedCluster | undefined;

/** The run's shared control plane. Throws, never skips, when the suite was not started through test/run.ts. */
export function sharedCluster(): SharedCluster {
  if (shared) return shared;
  const file = process.env[STACK_ENV.state];
  if (!file) {
    throw new Error(`${STACK_ENV.state} is not set: this test needs the shared control plane. Run it through the suite's runner, ` +
      '`npm test` or `npx tsx test/run.ts <test files>`, which starts PostgreSQL, the control plane and the fake kubelet.');
  }
  let state: StackState;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as StackState;
  } catch (e) {
    throw new Error(`${STACK_ENV.state}=${file} cannot be read (${(e as Error).message}); has the run that wrote it ended?`);
  }
  shared = {
    state,
    kubeConfig: (identity) => {
      const kc = new KubeConfig();
      kc.loadFromFile(state.kubeconfigs[identity]);
      return kc;
    },
    pki: () => openPki(state.pkiDir),
  };
  return shared;
}

/** The part of a tap Test that testNamespace uses. */
export interface NamespaceOwner {
  readonly name: string;
  teardown(fn: () => unknown): void;
}

const NAMESPACE_READY_MS = 30_000;
const CRD_ESTABLISHED_MS = 30_000;

/**
 * Creates a namespace for one test (named after it), waits until its `default` ServiceAccount exists (Pods are
 * refused before that) and deletes it, contents and all, when the test ends.
 */
export async function testNamespace(t: NamespaceOwner, cluster: SharedCluster = sharedCluster()): Promise<string> {
  const core = cluster.kubeConfig('admin').makeApiClient(CoreV1Api);
  const slug = t.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 48).replace(/-+$/, '');
  const name = `t-${slug || 'test'}-${randomBytes(3).toString('hex')}`;
  await core.createNamespace({ body: { metadata: { name, labels: { 'ptah.run/test-namespace': 'true' } } } });
  t.teardown(async () => {
    await core.deleteNamespace({ name }).catch((e: { code?: number }) => {
      if (e.code !== 404) throw e;
    });
  });
  await waitFor(async () => ((await core.readNamespacedServiceAccount({ name: 'default', namespace: name })) ? true : undefined), {
    what: `the default ServiceAccount in namespace ${name}`, timeoutMs: NAMESPACE_READY_MS,
  });
  return name;
}

/**
 * What an installation asks of whoever grants approvals: binds the approver role, for the approver identity's
 * group, in the namespace where it approves.
 */
export async function bindApprovers(namespace: string, cluster: SharedCluster = sharedCluster()): Promise<void> {
  await cluster.kubeConfig('admin').makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'approvers' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: INSTALL.approverRole },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'ptah-approvers' }],
    },
  });
}

/** Waits until every named CRD is Established: before that the API server refuses objects of its kind. */
export async function waitForCrdsEstablished(names: readonly string[], cluster: SharedCluster = sharedCluster()): Promise<void> {
  const api = cluster.kubeConfig('admin').makeApiClient(ApiextensionsV1Api);
  for (const name of names) {
    await waitFor(async () => {
      const crd = await api.readCustomResourceDefinition({ name });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
    }, { what: `CRD ${name} to be Established`, timeoutMs: CRD_ESTABLISHED_MS });
  }
}
