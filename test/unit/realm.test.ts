import { createHash } from 'node:crypto';
import t from 'tap';
import { isDigest } from '../../src/shared/canonical.js';
import { base32, coordinationDigest, holderIdentityFor, leaseNameFor, RealmError } from '../../src/shared/realm.js';

// Base32 by bit string, written independently of the implementation.
function base32ByBits(bytes: Uint8Array): string {
  const bits = [...bytes].map((b) => b.toString(2).padStart(8, '0')).join('');
  const groups = bits.match(/.{1,5}/g) ?? [];
  return groups.map((g) => 'abcdefghijklmnopqrstuvwxyz234567'[parseInt(g.padEnd(5, '0'), 2)]).join('');
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

t.test('base32 matches the RFC 4648 test vectors, lower case, unpadded', async (t) => {
  const vectors: [string, string][] = [
    ['', ''],
    ['f', 'my'],
    ['fo', 'mzxq'],
    ['foo', 'mzxw6'],
    ['foob', 'mzxw6yq'],
    ['fooba', 'mzxw6ytb'],
    ['foobar', 'mzxw6ytboi'],
  ];
  for (const [input, want] of vectors) t.equal(base32(Buffer.from(input)), want, JSON.stringify(input));
  for (const len of [1, 2, 3, 4, 5, 31, 32, 33]) {
    const bytes = createHash('sha512').update(String(len)).digest().subarray(0, len);
    t.equal(base32(bytes), base32ByBits(bytes), `${len} bytes`);
  }
  t.equal(base32(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff])), '77777777', 'all ones');
});

t.test('coordinationDigest', async (t) => {
  const base = { engine: 'PostgreSQL', namespace: 'shop', coordinationKey: 'orders-db' };
  const got = coordinationDigest(base);
  t.ok(isDigest(got), 'a sha256: digest');
  const golden = `sha256:${createHash('sha256').update('["ptah-realm/v1","postgresql","shop","orders-db"]').digest('hex')}`;
  t.equal(got, golden, 'sha256 of the canonical versioned tuple');
  t.equal(coordinationDigest({ ...base, engine: 'postgresql' }), got, 'the engine is normalized to lower case');
  t.equal(coordinationDigest({ ...base, engine: 'POSTGRESQL' }), got);
  t.not(coordinationDigest({ ...base, namespace: 'other' }), got, 'the namespace scopes the key');
  t.not(coordinationDigest({ ...base, coordinationKey: 'orders-db2' }), got);
  t.not(coordinationDigest({ ...base, engine: 'MySQL' }), got, 'the engine is part of the realm');
  t.not(
    coordinationDigest({ engine: 'PostgreSQL', namespace: 'ab', coordinationKey: 'c' }),
    coordinationDigest({ engine: 'PostgreSQL', namespace: 'a', coordinationKey: 'bc' }),
    'components cannot run into each other',
  );
});

t.test('coordinationDigest refuses what the API would refuse, naming it', async (t) => {
  const base = { engine: 'PostgreSQL', namespace: 'shop', coordinationKey: 'orders-db' };
  const bad: [string, object, RegExp][] = [
    ['engine starting with a digit', { engine: '9sql' }, /engine "9sql"/],
    ['empty engine', { engine: '' }, /engine ""/],
    ['engine of 64 characters', { engine: 'P'.repeat(64) }, /engine/],
    ['namespace with upper case', { namespace: 'Shop' }, /namespace "Shop"/],
    ['empty namespace', { namespace: '' }, /namespace/],
    ['namespace of 64 characters', { namespace: 'a'.repeat(64) }, /namespace/],
    ['key with upper case', { coordinationKey: 'Orders' }, /coordination key "Orders"/],
    ['key ending in a dash', { coordinationKey: 'orders-' }, /coordination key/],
    ['key of 254 characters', { coordinationKey: 'a'.repeat(254) }, /coordination key/],
    ['empty key', { coordinationKey: '' }, /coordination key/],
    ['key that is not a string', { coordinationKey: 7 }, /coordination key 7/],
  ];
  for (const [name, change, message] of bad) {
    t.throws(() => coordinationDigest({ ...base, ...change } as typeof base), { name: 'RealmError', message }, name);
  }
  t.doesNotThrow(() => coordinationDigest({ ...base, coordinationKey: 'a'.repeat(253) }), 'a key of 253 characters');
  t.doesNotThrow(() => coordinationDigest({ ...base, coordinationKey: 'pg.example.com:5432/orders' }), 'a key shaped like a route');
});

t.test('leaseNameFor', async (t) => {
  const zero = `sha256:${'00'.repeat(32)}`;
  t.equal(leaseNameFor(zero), `ptah-t-${'a'.repeat(52)}`, '32 zero bytes');
  const realm = coordinationDigest({ engine: 'PostgreSQL', namespace: 'shop', coordinationKey: 'orders-db' });
  const name = leaseNameFor(realm);
  t.equal(name, `ptah-t-${base32ByBits(Buffer.from(realm.slice(7), 'hex'))}`);
  t.ok(name.length <= 63, `${name.length} characters`);
  t.match(name, DNS_LABEL, 'a valid object name');
  t.not(leaseNameFor(`sha256:${'00'.repeat(31)}01`), leaseNameFor(zero), 'one bit apart, different names');
  for (const bad of ['', 'orders-db', `sha256:${'AB'.repeat(32)}`, `sha256:${'0'.repeat(63)}`, `sha512:${'0'.repeat(64)}`, `${'0'.repeat(64)}`]) {
    t.throws(() => leaseNameFor(bad), RealmError, JSON.stringify(bad));
  }
});

t.test('holderIdentityFor', async (t) => {
  const uid = '3f1c2a9e-5b7d-4c1e-9f0a-1b2c3d4e5f60';
  const op = `sha256:${'ab'.repeat(32)}`;
  const got = holderIdentityFor(uid, op);
  t.equal(got, `ptah-h-${base32ByBits(createHash('sha256').update(`${uid}\u0000${op}`).digest())}`, 'base32 of sha256(uid NUL opId)');
  t.ok(got.length <= 63, `${got.length} characters`);
  t.match(got, DNS_LABEL);
  t.equal(holderIdentityFor(uid, op), got, 'deterministic');
  t.not(holderIdentityFor(uid, `sha256:${'cd'.repeat(32)}`), got, 'another operation, another holder');
  t.not(holderIdentityFor(`${uid}x`, op), got, 'another resource, another holder');
  t.not(holderIdentityFor('a', 'bc'), holderIdentityFor('ab', 'c'), 'the NUL separates the two parts');
  t.throws(() => holderIdentityFor('', op), { message: 'resource UID is empty' });
  t.throws(() => holderIdentityFor(uid, ''), { message: 'operation ID is empty' });
  t.throws(() => holderIdentityFor('a\u0000b', op), { message: 'resource UID holds a NUL byte' });
  t.throws(() => holderIdentityFor(uid, 'x\u0000'), { message: 'operation ID holds a NUL byte' });
});
