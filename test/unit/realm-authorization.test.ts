// The shared realm's contract without a cluster: its digest, who a PtahRealm authorizes, its sharing rule, the
// overlap rule, which Lease namespace a resource's realm uses, and how the census counts resources of several
// namespaces. The controller's functions run on a pass whose client serves fixed lists.
import { createHash } from 'node:crypto';
import t from 'tap';
import { pino } from 'pino';
import type { PtahRealm } from '../../src/shared/api/realm-kinds.js';
import { isDigest } from '../../src/shared/canonical.js';
import type { KubeClient, KubeObject } from '../../src/shared/kube-client.js';
import { coordinationDigest, realmAuthorizes, realmDigestOf, RealmError, realmOverlap, sharedRealmDigest } from '../../src/shared/realm.js';
import type { TargetLock } from '../../src/shared/targetlock.js';
import { OwnerPass, type OwnerDeps, type OwnerResource } from '../../src/controller/pass.js';
import { claims, realmNotAuthorizedMessage, realmRefusal, sharingConflict } from '../../src/controller/realm-authorization.js';
import { realmConflicts } from '../../src/controller/realm-census.js';

const API = 'operator.ptah.run/v1alpha1';
const URL_TEXT = /postgres(ql)?:\/\//;

function realm(name: string, namespaces: string[], sharing: 'Exclusive' | 'Shared' = 'Shared', engine = 'PostgreSQL'): PtahRealm {
  return { apiVersion: API, kind: 'PtahRealm', metadata: { name }, spec: { engine, namespaces, sharing } };
}

interface Fixture {
  kind?: 'PtahSchema' | 'PtahMigration';
  ns: string;
  name: string;
  realm?: string;
  key?: string;
  shared?: boolean;
  engine?: string;
  identity?: string;
  suspend?: boolean;
  deleting?: boolean;
  claim?: boolean;
}

type Resource = OwnerResource & { kind: string; spec: OwnerResource['spec'] & { suspend?: boolean }; status?: Record<string, unknown> };

function resource(f: Fixture): Resource {
  const kind = f.kind ?? 'PtahMigration';
  const target = {
    engine: f.engine ?? 'PostgreSQL',
    ...(f.realm ? { realmRef: { name: f.realm } } : { coordinationKey: f.key ?? 'orders-db' }),
    ...(f.shared ? { sharedRealm: true } : {}),
  };
  const status: Record<string, unknown> = {};
  if (f.identity) Object.assign(status, kind === 'PtahSchema' ? { target: { physicalIdentityDigest: f.identity } } : { history: { physicalIdentityDigest: f.identity } });
  if (f.claim) status.activeOperation = { type: 'Apply' };
  return {
    apiVersion: API,
    kind,
    metadata: { namespace: f.ns, name: f.name, uid: `${f.ns}/${f.name}`, ...(f.deleting ? { deletionTimestamp: new Date() } : {}) },
    spec: { target, ...(f.suspend ? { suspend: true } : {}) },
    status,
  } as unknown as Resource;
}

/** A pass over `self` whose client lists `objects` (realms and resources); the Lease namespaces it asked for are kept. */
function passOver(self: Resource, objects: KubeObject[]) {
  const locks: string[] = [];
  const client = {
    list: async (_apiVersion: string, kind: string) => objects.filter((o) => o.kind === kind).map((o) => structuredClone(o)),
  } as unknown as KubeClient;
  const deps: OwnerDeps = {
    client,
    events: { record: () => undefined },
    manager: { controllerImage: 'c', controllerRevision: 'r', runnerImage: 'i', executorIdentity: `sha256:${'e'.repeat(64)}`, controllerStateVersion: 1, runnerProtocolVersion: 1 },
    clock: { now: () => new Date(), monotonicMs: () => 0 },
    lockFor: (ns) => (locks.push(ns), { namespace: ns } as unknown as TargetLock),
    coordinationNamespace: 'ptah-system',
    log: pino({ level: 'silent' }),
    readFailures: new Map(),
  };
  return { pass: new OwnerPass(deps, self, self.kind), locks };
}

t.test('a realm digest is sha256 over (normalized engine, realm name), the same from every namespace', async (t) => {
  const got = sharedRealmDigest({ engine: 'PostgreSQL', realm: 'orders' });
  t.ok(isDigest(got));
  t.equal(got, `sha256:${createHash('sha256').update('["ptah-realm-ref/v1","postgresql","orders"]').digest('hex')}`, 'sha256 of the canonical versioned tuple');
  t.equal(sharedRealmDigest({ engine: 'POSTGRESQL', realm: 'orders' }), got, 'the engine is normalized');
  t.not(sharedRealmDigest({ engine: 'PostgreSQL', realm: 'orders-2' }), got, 'another realm, another digest');
  t.not(sharedRealmDigest({ engine: 'MySQL', realm: 'orders' }), got, 'another engine, another digest');
  const target = { engine: 'PostgreSQL', realmRef: { name: 'orders' } };
  t.equal(realmDigestOf(target, 'shop'), got, 'from namespace shop');
  t.equal(realmDigestOf(target, 'billing'), got, 'and from namespace billing: one Lease');
  t.not(realmDigestOf({ engine: 'PostgreSQL', coordinationKey: 'orders' }, 'shop'), got, 'a coordination key spelled like the realm is another realm');
  t.equal(realmDigestOf({ engine: 'PostgreSQL', coordinationKey: 'orders-db' }, 'shop'), coordinationDigest({ engine: 'PostgreSQL', namespace: 'shop', coordinationKey: 'orders-db' }),
    'a coordination key keeps its namespace digest');
  t.throws(() => realmDigestOf({ engine: 'PostgreSQL' }, 'shop'), RealmError, 'a target naming neither is refused');
  for (const bad of ['', 'Orders', 'a_b', `${'a'.repeat(254)}`, '-a']) t.throws(() => sharedRealmDigest({ engine: 'PostgreSQL', realm: bad }), RealmError, JSON.stringify(bad));
  t.throws(() => sharedRealmDigest({ engine: '1pg', realm: 'orders' }), RealmError, 'a bad engine');
});

t.test('a realmRef resource keeps its Leases in the coordination namespace; a coordination key in its own', async (t) => {
  const shared = passOver(resource({ ns: 'shop', name: 'a', realm: 'orders' }), []);
  t.equal((shared.pass.lock as unknown as { namespace: string }).namespace, 'ptah-system');
  const local = passOver(resource({ ns: 'shop', name: 'a', key: 'orders-db' }), []);
  t.equal((local.pass.lock as unknown as { namespace: string }).namespace, 'shop');
  t.strictSame([shared.locks, local.locks], [['ptah-system'], ['shop']]);
});

t.test('who a PtahRealm authorizes: listed namespace and same engine, nothing else', async (t) => {
  const grant = realm('orders', ['shop', 'billing']).spec;
  t.ok(realmAuthorizes(grant, 'shop', 'PostgreSQL'));
  t.ok(realmAuthorizes(grant, 'billing', 'postgresql'), 'engines compare normalized');
  t.notOk(realmAuthorizes(grant, 'other', 'PostgreSQL'), 'an unlisted namespace');
  t.notOk(realmAuthorizes(grant, 'shop', 'MySQL'), 'another engine');
  t.notOk(realmAuthorizes(undefined, 'shop', 'PostgreSQL'), 'no realm');
});

t.test('RealmNotAuthorized: one message for a missing realm, an unlisted namespace and another engine, never a URL', async (t) => {
  const cases: [string, Fixture, KubeObject[]][] = [
    ['missing', { ns: 'shop', name: 'a', realm: 'orders' }, []],
    ['unlisted namespace', { ns: 'other', name: 'a', realm: 'orders' }, [realm('orders', ['shop'])]],
    ['another engine', { ns: 'shop', name: 'a', realm: 'orders', engine: 'MySQL' }, [realm('orders', ['shop'])]],
  ];
  const messages = new Set<string>();
  for (const [what, self, objects] of cases) {
    const refusal = await realmRefusal(passOver(resource(self), objects).pass);
    t.equal(refusal?.reason, 'RealmNotAuthorized', what);
    messages.add(refusal?.message ?? '');
    t.notMatch(refusal?.message ?? '', URL_TEXT, `${what}: no URL`);
  }
  t.strictSame([...messages], [realmNotAuthorizedMessage('orders')], 'the same message in all three cases');
  t.equal(await realmRefusal(passOver(resource({ ns: 'shop', name: 'a', realm: 'orders' }), [realm('orders', ['shop'])]).pass), undefined,
    'negative: a listed namespace of the same engine is authorized');
  t.equal(await realmRefusal(passOver(resource({ ns: 'shop', name: 'a', key: 'k' }), []).pass), undefined, 'a coordination key is outside the rule');
});

t.test('sharing: Exclusive takes one claimant, Shared only claimants that all set sharedRealm', async (t) => {
  const self = resource({ ns: 'shop', name: 'a', realm: 'orders', shared: true });
  const other = resource({ kind: 'PtahSchema', ns: 'billing', name: 'b', realm: 'orders', shared: true });
  t.equal(sharingConflict(realm('orders', ['shop'], 'Exclusive'), self, []), undefined, 'Exclusive, alone');
  t.match(sharingConflict(realm('orders', ['shop', 'billing'], 'Exclusive'), self, [other]), { reason: 'RealmConflict', message: /Exclusive.*PtahSchema billing\/b/ }, 'Exclusive, a second claimant');
  t.equal(sharingConflict(realm('orders', ['shop', 'billing']), self, [other]), undefined, 'Shared, every claimant sets sharedRealm');
  const unshared = resource({ ns: 'billing', name: 'c', realm: 'orders' });
  t.match(sharingConflict(realm('orders', ['shop', 'billing']), self, [other, unshared]), { reason: 'RealmConflict', message: /PtahMigration billing\/c do not/ }, 'Shared, one without it');
  t.equal(sharingConflict(realm('orders', ['shop']), resource({ ns: 'shop', name: 'a', realm: 'orders' }), []), undefined, 'Shared, a single claimant needs no flag');

  // Through realmRefusal: only authorized claimants of the same realm count.
  const objects = [realm('orders', ['shop', 'billing'], 'Exclusive'), other, resource({ ns: 'elsewhere', name: 'x', realm: 'orders' }), resource({ ns: 'billing', name: 'y', realm: 'other' })];
  t.match(await realmRefusal(passOver(self, objects).pass), { reason: 'RealmConflict', message: /PtahSchema billing\/b$|PtahSchema billing\/b;/ });
  t.notMatch((await realmRefusal(passOver(self, objects).pass))?.message ?? '', /elsewhere|billing\/y/, 'unauthorized and other-realm resources are no claimants');
  t.equal(await realmRefusal(passOver(self, [realm('orders', ['shop', 'billing'], 'Exclusive'), resource({ ns: 'billing', name: 'b', realm: 'orders', suspend: true })]).pass), undefined,
    'a suspended resource with no claim in flight claims nothing');
});

t.test('claims: suspended or deleted resources claim nothing unless a claim is in flight', async (t) => {
  t.ok(claims(resource({ ns: 'a', name: 'a' })));
  t.notOk(claims(resource({ ns: 'a', name: 'a', suspend: true })));
  t.notOk(claims(resource({ ns: 'a', name: 'a', deleting: true })));
  t.ok(claims(resource({ ns: 'a', name: 'a', suspend: true, claim: true })));
  t.ok(claims(resource({ ns: 'a', name: 'a', deleting: true, claim: true })));
});

t.test('the census: one realm from several namespaces is one realm; unauthorized resources count for nothing', async (t) => {
  const identity = `sha256:${'1'.repeat(64)}`;
  const grant = realm('orders', ['shop', 'billing']);
  const self = resource({ ns: 'shop', name: 'a', realm: 'orders', shared: true, identity });
  const sameRealm = resource({ kind: 'PtahSchema', ns: 'billing', name: 'b', realm: 'orders', shared: true, identity });
  t.strictSame(await realmConflicts(passOver(self, [grant, self, sameRealm]).pass, identity), [], 'another namespace through the same realm is accepted');
  const keyed = resource({ ns: 'billing', name: 'c', key: 'orders-db', identity });
  t.strictSame(await realmConflicts(passOver(self, [grant, self, sameRealm, keyed]).pass, identity), ['PtahMigration billing/c'], 'negative: another digest on the database still conflicts');
  const unauthorized = resource({ ns: 'elsewhere', name: 'd', realm: 'ghost', identity });
  t.strictSame(await realmConflicts(passOver(self, [grant, self, unauthorized]).pass, identity), [], 'a resource its realm does not authorize is excluded');
  t.strictSame(await realmConflicts(passOver(keyed, [grant, self, keyed]).pass, identity), ['PtahMigration shop/a'], 'and the keyed resource sees the realm as a conflict');
});

t.test('the overlap rule: one engine, a namespace in common', async (t) => {
  t.strictSame(realmOverlap(realm('a', ['shop', 'billing']).spec, realm('b', ['billing', 'shop', 'x']).spec), ['billing', 'shop']);
  t.strictSame(realmOverlap(realm('a', ['shop']).spec, realm('b', ['shop'], 'Shared', 'postgresql').spec), ['shop'], 'engines compare normalized');
  t.strictSame(realmOverlap(realm('a', ['shop']).spec, realm('b', ['billing']).spec), [], 'no namespace in common');
  t.strictSame(realmOverlap(realm('a', ['shop']).spec, realm('b', ['shop'], 'Shared', 'MySQL').spec), [], 'another engine');
});
