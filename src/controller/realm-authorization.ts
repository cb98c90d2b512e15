// Whether a resource may use the PtahRealm its spec.target.realmRef names, decided before anything is read, planned
// or claimed: the realm must exist, list the resource's namespace and be for its engine (RealmNotAuthorized, one
// message for all three, so a namespace learns nothing about realms that do not grant it), and its claimants must
// keep its sharing rule (RealmConflict): an Exclusive realm has one claimant at a time, a Shared one only claimants
// that all set spec.target.sharedRealm. Everything is read uncached; a claim already dispatched is never disturbed.
import { API_VERSION, KINDS } from '../shared/api/names.js';
import type { PtahMigration } from '../shared/api/migration-kinds.js';
import type { PtahRealm } from '../shared/api/realm-kinds.js';
import type { PtahSchema } from '../shared/api/schema-kinds.js';
import { realmAuthorizes } from '../shared/realm.js';
import type { OwnerPass, OwnerResource } from './pass.js';

/** Why the realm census or the realm's grant holds a resource Blocked. */
export interface RealmRefusal {
  reason: 'RealmNotAuthorized' | 'RealmConflict';
  message: string;
}

type Claimant = Pick<OwnerResource, 'kind' | 'metadata' | 'spec' | 'status'> & { spec: { suspend?: boolean } };

export function realmNotAuthorizedMessage(realm: string): string {
  return `spec.target.realmRef names PtahRealm ${JSON.stringify(realm)}, which does not authorize this resource: it must exist, list this ` +
    'namespace and be for this engine; only a cluster administrator writes PtahRealms';
}

/** Whether `resource` names a realm that exists and grants it; a resource naming none is outside this rule. */
export function authorizedBy(realms: ReadonlyMap<string, PtahRealm>, resource: Claimant): boolean {
  const ref = resource.spec.target.realmRef;
  return !ref || realmAuthorizes(realms.get(ref.name)?.spec, resource.metadata.namespace ?? '', resource.spec.target.engine);
}

/** Suspended or deleted resources claim nothing, unless a claim of theirs is still in flight. */
export function claims(resource: Claimant): boolean {
  return (!resource.spec.suspend && !resource.metadata.deletionTimestamp) || resource.status?.activeOperation !== undefined;
}

const named = (r: Claimant) => `${r.kind} ${r.metadata.namespace}/${r.metadata.name}`;

/** The realm's sharing rule over its claimants (`self` first, then the others); undefined when it holds. */
export function sharingConflict(realm: PtahRealm, self: Claimant, others: readonly Claimant[]): RealmRefusal | undefined {
  if (others.length === 0) return undefined;
  const name = JSON.stringify(realm.metadata.name);
  if (realm.spec.sharing === 'Exclusive') {
    return { reason: 'RealmConflict', message: `PtahRealm ${name} is Exclusive and is also claimed by ${list(others.map(named))}; nothing is applied until one resource names it` };
  }
  const unshared = [self, ...others].filter((r) => r.spec.target.sharedRealm !== true);
  if (unshared.length === 0) return undefined;
  return {
    reason: 'RealmConflict',
    message: `PtahRealm ${name} is Shared by several resources, and every one must set spec.target.sharedRealm; ${list(unshared.map(named))} do not`,
  };
}

/** At most five names, then a count. */
export function list(names: readonly string[]): string {
  const sorted = [...names].sort();
  return sorted.slice(0, 5).join(', ') + (sorted.length > 5 ? `, and ${sorted.length - 5} more` : '');
}

/** Every PtahRealm by name, read uncached. */
export async function readRealms(pass: OwnerPass<OwnerResource>): Promise<Map<string, PtahRealm>> {
  const realms = await pass.deps.client.list<PtahRealm>(API_VERSION, KINDS.PtahRealm.kind, undefined);
  return new Map(realms.map((r) => [r.metadata.name ?? '', r]));
}

/** Every PtahSchema and PtahMigration of the cluster, read uncached. */
export async function readRealmResources(pass: OwnerPass<OwnerResource>): Promise<(PtahSchema | PtahMigration)[]> {
  const [schemas, migrations] = await Promise.all([
    pass.deps.client.list<PtahSchema>(API_VERSION, KINDS.PtahSchema.kind, undefined),
    pass.deps.client.list<PtahMigration>(API_VERSION, KINDS.PtahMigration.kind, undefined),
  ]);
  return [...schemas, ...migrations];
}

/** The refusal that holds this resource before it reads or claims anything, if its realmRef is refused. */
export async function realmRefusal(pass: OwnerPass<OwnerResource>): Promise<RealmRefusal | undefined> {
  const ref = pass.obj.spec.target.realmRef;
  if (!ref) return undefined;
  const realms = await readRealms(pass);
  const realm = realms.get(ref.name);
  if (!realm || !authorizedBy(realms, pass.obj)) return { reason: 'RealmNotAuthorized', message: realmNotAuthorizedMessage(ref.name) };
  const others = (await readRealmResources(pass)).filter((other) =>
    other.metadata.uid !== pass.uid && other.spec.target.realmRef?.name === ref.name && authorizedBy(realms, other) && claims(other));
  return sharingConflict(realm, { ...pass.obj, kind: pass.kind }, others);
}
