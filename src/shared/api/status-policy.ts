// ValidatingAdmissionPolicies that keep the manager's records the manager's, beside the status-write webhook:
// a policy runs inside the API server, so it holds while the manager is down. Cluster admins are refused too;
// a person settles an unresolved migration run with a PtahMigrationRunAcknowledgment, never by editing status.
import type { V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding } from '@kubernetes/client-node';
import { celString } from './cel.js';
import { ANNOTATIONS, GROUP, KINDS, MANAGER_USERNAME } from './names.js';

export interface StatusPolicyOptions {
  managerUsername?: string;
}

export const STATUS_WRITE_POLICY = 'ptah-status-write-guard';
export const UNRESOLVED_RUN_POLICY = 'ptah-unresolved-run-guard';

export function statusWritePolicies(
  opts: StatusPolicyOptions = {},
): [V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding, V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding] {
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
              'Ptah status is written only by the operator’s manager; settle an unresolved migration run with a PtahMigrationRunAcknowledgment',
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
  ];
}

function binding(policyName: string): V1ValidatingAdmissionPolicyBinding {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: policyName },
    spec: { policyName, validationActions: ['Deny'] },
  };
}
