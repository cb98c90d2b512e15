// PtahRealm: the cluster-scoped grant that lets resources of several namespaces reach one database under one realm
// (one coordination digest, one Lease). It names no database: which physical database a realm reaches is learned from
// its resources' readings, and the census and the executor's database writer lock refuse a second realm on one.
import { defineKind, type ResourceOf } from './kind.js';
import { array, object, oneOf, string, type Static } from './schema.js';
import { dnsLabel, ENGINE_PATTERN } from './shapes.js';

export const REALM_SHARING = ['Exclusive', 'Shared'] as const;
export type RealmSharing = (typeof REALM_SHARING)[number];

/** Most namespaces one realm may list. */
export const MAX_REALM_NAMESPACES = 256;

export const ptahRealmSpec = object(
  {
    engine: string({
      description: 'The database engine of every resource that names this realm; immutable.',
      maxLength: 63,
      pattern: ENGINE_PATTERN,
      rules: [{ rule: 'self == oldSelf', message: 'spec.engine is immutable; create a new PtahRealm instead' }],
    }),
    namespaces: array(dnsLabel('A namespace whose PtahSchemas and PtahMigrations may name this realm.'), {
      minItems: 1,
      maxItems: MAX_REALM_NAMESPACES,
      listType: 'set',
      description: 'The namespaces allowed, by name.',
    }),
    sharing: oneOf(REALM_SHARING, {
      description: 'Exclusive: one resource at a time may claim the realm. Shared: several may, and every one must set spec.target.sharedRealm.',
    }),
  },
  { description: 'Which namespaces may reach one database through this realm, and how.' },
);
export type PtahRealmSpec = Static<typeof ptahRealmSpec>;

export const ptahRealmKind = defineKind('PtahRealm', {
  description: 'A realm several namespaces share: their resources that name it serialize on one Lease. Written by cluster administrators only.',
  spec: ptahRealmSpec,
  status: undefined,
  printerColumns: [
    { name: 'Engine', type: 'string', jsonPath: '.spec.engine' },
    { name: 'Sharing', type: 'string', jsonPath: '.spec.sharing' },
    { name: 'Namespaces', type: 'string', jsonPath: '.spec.namespaces' },
  ],
});
export type PtahRealm = ResourceOf<typeof ptahRealmKind>;
