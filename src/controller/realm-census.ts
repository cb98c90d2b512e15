// The realm census, for both families (issue #14, its cluster half): the physical database each resource's last
// reading opened (the executor reports its identity digest in every frame) is compared across every PtahSchema and
// PtahMigration. Two resources that reach one physical database under different coordination digests would take two
// Leases and could write at once, so both are held Blocked (RealmConflict) before any Apply is claimed, until a
// person makes their realms agree: one namespace's coordination key, or one PtahRealm whose namespaces are all
// allowed (the same digest from every namespace, so one Lease). A resource its PtahRealm does not authorize counts
// for nothing here; it is held Blocked itself (realm-authorization.ts). A claim already dispatched is never disturbed
// here; the executor's database writer lock covers that window.
import { KINDS } from '../shared/api/names.js';
import type { PtahMigration } from '../shared/api/migration-kinds.js';
import type { PtahSchema } from '../shared/api/schema-kinds.js';
import { realmDigestOf } from '../shared/realm.js';
import { authorizedBy, list, readRealmResources, readRealms, type RealmRefusal } from './realm-authorization.js';
import { endPass, type OwnerPass, type OwnerResource, type PassEnd } from './pass.js';
import type { Report } from './status.js';

/** The physical database a resource's last reading opened, as its status records it. */
function physicalIdentityOf(resource: PtahSchema | PtahMigration): string | undefined {
  return resource.kind === KINDS.PtahSchema.kind
    ? (resource as PtahSchema).status?.target?.physicalIdentityDigest
    : (resource as PtahMigration).status?.history?.physicalIdentityDigest;
}

/**
 * The resources, of either kind and any namespace, whose last reading opened the physical database `identity` under
 * another realm than this resource's; read uncached. Named by kind, namespace and name, never by URL.
 */
export async function realmConflicts(pass: OwnerPass<OwnerResource>, identity: string | undefined): Promise<string[]> {
  if (!identity) return [];
  const [resources, realms] = await Promise.all([readRealmResources(pass), readRealms(pass)]);
  const realm = pass.realm();
  return resources
    .filter((other) => other.metadata.uid !== pass.uid && physicalIdentityOf(other) === identity && authorizedBy(realms, other) &&
      realmDigestOf(other.spec.target, other.metadata.namespace ?? '') !== realm)
    .map((other) => `${other.kind} ${other.metadata.namespace}/${other.metadata.name}`)
    .sort();
}

/** The census's refusal of a resource whose last reading opened `identity`, if another realm reaches it too. */
export async function realmCensus(pass: OwnerPass<OwnerResource>, identity: string | undefined): Promise<RealmRefusal | undefined> {
  const conflicts = await realmConflicts(pass, identity);
  return conflicts.length > 0 ? { reason: 'RealmConflict', message: realmConflictMessage(conflicts) } : undefined;
}

/** What a resource held by the census tells a person. */
export function realmConflictMessage(conflicts: readonly string[]): string {
  return `the database this resource reaches is also reached by ${list(conflicts)} under another realm; nothing is applied until one realm ` +
    'reaches it (one namespace\'s spec.target.coordinationKey, or one PtahRealm naming every namespace, which serialize on one Lease) or the others point elsewhere';
}

/**
 * Holds a resource Blocked for its realm, in either family: the report, a Warning Event when the report changes, and
 * a re-check within a minute (a contested realm is re-checked every min(interval, 1 min)).
 */
export async function holdForRealm<P extends OwnerPass<OwnerResource>>(
  pass: P,
  publish: (pass: P, report: Report<'Blocked'>) => Promise<boolean>,
  refusal: RealmRefusal,
  nextCheckMs: number,
): Promise<PassEnd> {
  if (await publish(pass, { phase: 'Blocked', reason: refusal.reason, message: refusal.message })) pass.event('Warning', refusal.reason, refusal.message, 'RealmCensus');
  return endPass(refusal.reason === 'RealmConflict' ? 'realm conflict' : 'realm not authorized', Math.min(nextCheckMs, 60_000));
}
