// The realm census, for both families (issue #14, its cluster half): the physical database each resource's last
// reading opened (the executor reports its identity digest in every frame) is compared across every PtahSchema and
// PtahMigration. Two resources that reach one physical database under different coordination digests would take two
// Leases and could write at once, so both are held Blocked (RealmConflict) before any Apply is claimed, until a
// person makes their realms agree. A claim already dispatched is never disturbed here; the executor's database
// writer lock covers that window.
import { API_VERSION, KINDS } from '../shared/api/names.js';
import type { PtahMigration } from '../shared/api/migration-kinds.js';
import type { PtahSchema } from '../shared/api/schema-kinds.js';
import { coordinationDigest } from '../shared/realm.js';
import type { OwnerPass, OwnerResource } from './pass.js';

/** The physical database a resource's last reading opened, as its status records it. */
function physicalIdentityOf(resource: PtahSchema | PtahMigration): string | undefined {
  return resource.kind === KINDS.PtahSchema.kind
    ? (resource as PtahSchema).status?.target?.physicalIdentityDigest
    : (resource as PtahMigration).status?.history?.physicalIdentityDigest;
}

function realmOf(resource: PtahSchema | PtahMigration): string {
  const { engine, coordinationKey } = resource.spec.target;
  return coordinationDigest({ engine, namespace: resource.metadata.namespace ?? '', coordinationKey });
}

/**
 * The resources, of either kind and any namespace, whose last reading opened the physical database `identity` under
 * another realm than this resource's; read uncached. Named by kind, namespace and name, never by URL.
 */
export async function realmConflicts(pass: OwnerPass<OwnerResource>, identity: string | undefined): Promise<string[]> {
  if (!identity) return [];
  const [schemas, migrations] = await Promise.all([
    pass.deps.client.list<PtahSchema>(API_VERSION, KINDS.PtahSchema.kind, undefined),
    pass.deps.client.list<PtahMigration>(API_VERSION, KINDS.PtahMigration.kind, undefined),
  ]);
  const realm = pass.realm();
  return [...schemas, ...migrations]
    .filter((other) => other.metadata.uid !== pass.uid && physicalIdentityOf(other) === identity && realmOf(other) !== realm)
    .map((other) => `${other.kind} ${other.metadata.namespace}/${other.metadata.name}`)
    .sort();
}

/** What a resource held by the census tells a person. */
export function realmConflictMessage(conflicts: readonly string[]): string {
  const shown = conflicts.slice(0, 5).join(', ') + (conflicts.length > 5 ? `, and ${conflicts.length - 5} more` : '');
  return `the database this resource reaches is also reached by ${shown} under another realm; nothing is applied until one realm ` +
    'reaches it (the same namespace and spec.target.coordinationKey, which serialize on one Lease) or the others point elsewhere';
}
