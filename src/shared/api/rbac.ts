// The manager's identity and permissions, and the role a person needs to approve and acknowledge.
// The manager has no Secret permission at all: only the operation Pod reads the database URL.
import type { V1ClusterRole, V1ClusterRoleBinding, V1Namespace, V1PolicyRule, V1ServiceAccount } from '@kubernetes/client-node';
import { DECISION_KINDS, GROUP, INSTALL, KIND_NAMES, KINDS } from './names.js';

const ALL = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
const READ = ['get', 'list', 'watch'];

// A PtahRealm grants namespaces a shared database: only cluster administrators write it, the manager only reads it.
const adminWritten: readonly string[] = [KINDS.PtahRealm.plural];
const plurals = KIND_NAMES.map((kind) => KINDS[kind].plural);
const managerWritten = plurals.filter((p) => !adminWritten.includes(p));
const withStatus = KIND_NAMES.filter((kind) => KINDS[kind].status).map((kind) => `${KINDS[kind].plural}/status`);

export const MANAGER_RULES: readonly V1PolicyRule[] = [
  { apiGroups: [GROUP], resources: managerWritten, verbs: ALL },
  { apiGroups: [GROUP], resources: [...adminWritten], verbs: READ },
  { apiGroups: [GROUP], resources: withStatus, verbs: ['get', 'update', 'patch'] },
  // Owner references with blockOwnerDeletion need update on the owner's finalizers subresource.
  { apiGroups: [GROUP], resources: [KINDS.PtahSchema, KINDS.PtahSchemaPlan, KINDS.PtahMigration].map((k) => `${k.plural}/finalizers`), verbs: ['update'] },
  { apiGroups: ['batch'], resources: ['jobs'], verbs: ALL },
  { apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'get', 'list', 'watch', 'delete'] },
  { apiGroups: [''], resources: ['pods', 'pods/log'], verbs: READ },
  // Only to take the run-evidence finalizer off a migration Apply Pod once its outcome is recorded.
  { apiGroups: [''], resources: ['pods'], verbs: ['patch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ALL },
  // The admission snapshot records the PriorityClass Priority admission will give an operation Pod that names none.
  { apiGroups: ['scheduling.k8s.io'], resources: ['priorityclasses'], verbs: ['get', 'list'] },
  { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
];

const decisionPlurals = DECISION_KINDS.map((kind) => KINDS[kind].plural);

export const APPROVER_RULES: readonly V1PolicyRule[] = [
  { apiGroups: [GROUP], resources: decisionPlurals, verbs: ['create', ...READ] },
  { apiGroups: [GROUP], resources: plurals.filter((p) => !decisionPlurals.includes(p)), verbs: READ },
];

export function rbacObjects(): [V1Namespace, V1ServiceAccount, V1ClusterRole, V1ClusterRoleBinding, V1ClusterRole] {
  const managerRole = INSTALL.serviceAccount;
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: INSTALL.namespace } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: INSTALL.serviceAccount, namespace: INSTALL.namespace } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: managerRole }, rules: [...MANAGER_RULES] },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: managerRole },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: managerRole },
      subjects: [{ kind: 'ServiceAccount', name: INSTALL.serviceAccount, namespace: INSTALL.namespace }],
    },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: INSTALL.approverRole }, rules: [...APPROVER_RULES] },
  ];
}
