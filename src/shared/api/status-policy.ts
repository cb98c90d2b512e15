// ValidatingAdmissionPolicies that keep the manager's records the manager's, beside the status-write webhook:
// a policy runs inside the API server, so it holds while the manager is down. Cluster admins are refused too;
// a person settles an unresolved migration run with a PtahMigrationRunAcknowledgment, and a schema proof no reading
// can finish with a PtahSchemaRunAcknowledgment, never by editing status.
// And one that keeps the manager's own Pod right narrow: it may patch a Pod only to take off the run-evidence
// finalizer it keeps on a migration Apply's Pod, never to change what the Pod runs.
import type { V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding } from '@kubernetes/client-node';
import { celString } from './cel.js';
import { EVIDENCE_FINALIZER } from '../job/metadata.js';
import { ANNOTATIONS, GROUP, KINDS, MANAGER_USERNAME } from './names.js';

export interface StatusPolicyOptions {
  managerUsername?: string;
}

export const STATUS_WRITE_POLICY = 'ptah-status-write-guard';
export const UNRESOLVED_RUN_POLICY = 'ptah-unresolved-run-guard';
export const MANAGER_POD_POLICY = 'ptah-manager-pod-guard';

export function statusWritePolicies(
  opts: StatusPolicyOptions = {},
): [
  V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding, V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding,
  V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding,
] {
  const byManager = `request.userInfo.username == ${celString(opts.managerUsername ?? MANAGER_USERNAME)}`;
  const copy = (obj: string) => `${obj}.metadata.?annotations[?${celString(ANNOTATIONS.unresolvedRun)}]`;
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: STATUS_WRITE_POLICY },
      spec: {
        failurePolicy: 'Fail',
        // Every status subresource of the group, so a kind added later is covered without an edit here.
        matchConstraints: {
          matchPolicy: 'Equivalent',
          resourceRules: [{ apiGroups: [GROUP], apiVersions: ['*'], operations: ['UPDATE'], resources: ['*/status'] }],
        },
        validations: [
          {
            expression: byManager,
            reason: 'Forbidden',
            message:
              'Ptah status is written only by the operator’s manager; settle an unresolved migration run with a PtahMigrationRunAcknowledgment, and a schema proof no reading can finish with a PtahSchemaRunAcknowledgment',
          },
        ],
      },
    },
    binding(STATUS_WRITE_POLICY),
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: UNRESOLVED_RUN_POLICY },
      spec: {
        failurePolicy: 'Fail',
        // UPDATE only: a restore must be able to create a PtahMigration that already carries the copy.
        matchConstraints: {
          matchPolicy: 'Equivalent',
          resourceRules: [{ apiGroups: [GROUP], apiVersions: ['*'], operations: ['UPDATE'], resources: [KINDS.PtahMigration.plural] }],
        },
        validations: [
          {
            expression: `${byManager} || ${copy('object')} == ${copy('oldObject')}`,
            reason: 'Forbidden',
            message: `The ${ANNOTATIONS.unresolvedRun} annotation is the manager’s copy of an unresolved run; only the manager changes it, and a PtahMigrationRunAcknowledgment is how a person settles the run`,
          },
        ],
      },
    },
    binding(UNRESOLVED_RUN_POLICY),
    managerPodPolicy(byManager),
    binding(MANAGER_POD_POLICY),
  ];
}

/**
 * The manager's `patch` on Pods exists for one write: removing the run-evidence finalizer once a run's outcome is
 * recorded. Anything else (an image, a command, a label the webhook's judgement reads, another finalizer) would let
 * the manager change what a judged Job runs, so the API server refuses it whether or not the manager is up.
 */
function managerPodPolicy(byManager: string): V1ValidatingAdmissionPolicy {
  const finalizers = (obj: string) => `${obj}.metadata.?finalizers.orValue([])`;
  const same = (field: string) => `object.${field} == oldObject.${field}`;
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: MANAGER_POD_POLICY },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        matchPolicy: 'Equivalent',
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['pods'] }],
      },
      // Only the manager's writes are judged: the kubelet, controllers and people keep their usual rights.
      matchConditions: [{ name: 'by-the-manager', expression: byManager }],
      validations: [
        {
          expression: [
            same('spec'),
            'object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({})',
            'object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({})',
            'object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([])',
            `${finalizers('object')}.all(f, f in ${finalizers('oldObject')})`,
            `${finalizers('oldObject')}.all(f, f in ${finalizers('object')} || f == ${celString(EVIDENCE_FINALIZER)})`,
          ].join(' && '),
          reason: 'Forbidden',
          message: `The operator's manager may change a Pod only to remove its ${EVIDENCE_FINALIZER} finalizer`,
        },
      ],
    },
  };
}

function binding(policyName: string): V1ValidatingAdmissionPolicyBinding {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: policyName },
    spec: { policyName, validationActions: ['Deny'] },
  };
}
