// How a test file reaches the stack test/run.ts started for the whole run: sharedCluster() reads the state file named
// by PTAH_TEST_STACK, and testNamespace(t) gives each test a fresh namespace that is deleted when the test ends.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
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
