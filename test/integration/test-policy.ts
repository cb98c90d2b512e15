// A ValidatingAdmissionPolicy the test installs for its own namespace only: the API server itself refuses the
// UPDATEs of one resource for which `allowed` (CEL over object and oldObject) is false, as an API server incident
// or a stricter cluster policy would. Returns the function that removes it (also run at teardown).
import type { Test } from 'tap';
import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { sleep } from '../../tools/stack/wait.js';

export interface RefusedUpdates {
  apiGroup: string;
  /** The resource (or subresource, `ptahmigrations/status`) whose UPDATEs are judged. */
  resource: string;
  allowed: string;
}

export async function refuseUpdates(t: Test, namespace: string, name: string, rule: RefusedUpdates): Promise<() => Promise<void>> {
  const api = KubernetesObjectApi.makeApiClient(sharedCluster().kubeConfig('admin'));
  const policyName = `${name}-${namespace}`;
  const objects: KubernetesObject[] = [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: policyName },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: { resourceRules: [{ apiGroups: [rule.apiGroup], apiVersions: ['*'], operations: ['UPDATE'], resources: [rule.resource] }] },
        validations: [{ expression: rule.allowed, message: `the test's ${name} policy refuses this update` }],
      },
    } as KubernetesObject,
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: policyName },
      spec: { policyName, validationActions: ['Deny'], matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } },
    } as KubernetesObject,
  ];
  for (const object of objects) await api.create(object);
  let removed = false;
  const remove = async () => {
    if (removed) return;
    removed = true;
    for (const object of [...objects].reverse()) await api.delete(object).catch(() => undefined);
    // The API server's policy cache follows its watch; give it a moment to drop the policy.
    await sleep(2_000);
  };
  t.teardown(remove);
  await sleep(2_000);
  return remove;
}
