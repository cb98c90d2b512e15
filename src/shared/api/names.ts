// The API's names: group, version, kinds and their resource names, finalizers, annotation and label keys, and
// where the manager is installed. Everything that spells one of these imports it from here.

export const GROUP = 'operator.ptah.run';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;

interface KindNames {
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  /** Whether the kind has a status subresource. */
  status: boolean;
  /** False for a cluster-scoped kind. */
  namespaced: boolean;
}

function kindNames<K extends string>(kind: K, plural: string, shortName: string, status = true, namespaced = true): KindNames & { kind: K } {
  return { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), shortNames: [shortName], status, namespaced };
}

export const KINDS = {
  PtahSchema: kindNames('PtahSchema', 'ptahschemas', 'ptahs'),
  PtahSchemaPlan: kindNames('PtahSchemaPlan', 'ptahschemaplans', 'ptahplan'),
  PtahSchemaPlanChunk: kindNames('PtahSchemaPlanChunk', 'ptahschemaplanchunks', 'ptahchunk', false),
  PtahSchemaApproval: kindNames('PtahSchemaApproval', 'ptahschemaapprovals', 'ptahapprove'),
  PtahSchemaRunAcknowledgment: kindNames('PtahSchemaRunAcknowledgment', 'ptahschemarunacknowledgments', 'ptahsack'),
  PtahMigration: kindNames('PtahMigration', 'ptahmigrations', 'ptahm'),
  PtahMigrationPlan: kindNames('PtahMigrationPlan', 'ptahmigrationplans', 'ptahmplan'),
  PtahMigrationApproval: kindNames('PtahMigrationApproval', 'ptahmigrationapprovals', 'ptahmapprove'),
  PtahMigrationRunAcknowledgment: kindNames('PtahMigrationRunAcknowledgment', 'ptahmigrationrunacknowledgments', 'ptahmack'),
  // Cluster-scoped, without status: which namespaces may share one realm; only cluster administrators write it.
  PtahRealm: kindNames('PtahRealm', 'ptahrealms', 'ptahr', false, false),
} as const;

export type KindName = keyof typeof KINDS;
export const KIND_NAMES = Object.keys(KINDS) as KindName[];

/** The kinds a person creates to decide something; admission stamps who did. */
export const DECISION_KINDS = ['PtahSchemaApproval', 'PtahSchemaRunAcknowledgment', 'PtahMigrationApproval', 'PtahMigrationRunAcknowledgment'] as const satisfies readonly KindName[];

export const FINALIZERS = {
  /** Held by a PtahSchema while a claim or a proof is outstanding. */
  schema: `${GROUP}/active-operation`,
  /** Held by a PtahMigration while a claim is outstanding. */
  migration: `${GROUP}/migration-operation`,
} as const;

export const ANNOTATIONS = {
  /** JSON copy of a PtahMigration's status.unresolvedRun, so a restore that drops status keeps the record. */
  unresolvedRun: `${GROUP}/unresolved-run`,
} as const;

export const LABELS = {
  /** On a PtahSchemaPlan and its chunks: the owning PtahSchema's name. */
  schema: `${GROUP}/schema`,
  /** On a PtahSchemaPlanChunk and a plan projection ConfigMap: the owning PtahSchemaPlan's name. */
  plan: `${GROUP}/plan`,
  /** On a PtahMigrationPlan: the owning PtahMigration's name. */
  migration: `${GROUP}/migration`,
} as const;

/** Where manifests/ installs the manager. */
export const INSTALL = {
  namespace: 'ptah-system',
  serviceAccount: 'ptah-manager',
  deployment: 'ptah-manager',
  webhookService: 'ptah-webhook',
  /** Secret holding the webhook serving certificate (tls.crt, tls.key), mounted by the Deployment. */
  tlsSecret: 'ptah-webhook-tls',
  approverRole: 'ptah-approver',
} as const;

/** The username the API server gives a ServiceAccount's requests. */
export function serviceAccountUsername(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

export const MANAGER_USERNAME = serviceAccountUsername(INSTALL.namespace, INSTALL.serviceAccount);
