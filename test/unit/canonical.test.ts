// Canonical JSON (RFC 8785) and digests: the byte-exact serialization every binding in the project hashes.
import t from 'tap';
import { createHash } from 'node:crypto';
import { CanonicalJsonError, MAX_CANONICAL_DEPTH, canonicalJson, digest, isDigest, sha256Digest } from '../../src/shared/canonical.js';
import { artifactDigest } from '../../src/shared/artifact.js';

t.test('serialization', async (t) => {
  const cases: [string, unknown, string][] = [
    ['literals', [null, true, false], '[null,true,false]'],
    ['keys sorted by UTF-16 code units, not by locale', { b: 1, a: 2, B: 3, é: 4, '\u20ac': 5, '\ud83d\ude00': 6 }, '{"B":3,"a":2,"b":1,"é":4,"€":5,"😀":6}'],
    ['nested objects sorted at every level', { z: { y: 1, x: [{ b: 1, a: 2 }] }, a: [] }, '{"a":[],"z":{"x":[{"a":2,"b":1}],"y":1}}'],
    ['numbers as ECMAScript prints them', [0, -0, 1, -1.5, 0.1, 1e21, 1e-7, 123456789012345680000, 5e-324], '[0,0,1,-1.5,0.1,1e+21,1e-7,123456789012345680000,5e-324]'],
    ['strings escape only what JSON requires', ['"\\\b\f\n\r\t', '\u0001\u001f', '/<>&\u2028', 'ü'], '["\\"\\\\\\b\\f\\n\\r\\t","\\u0001\\u001f","/<>&\u2028","ü"]'],
    ['properties whose value is undefined are absent', { a: undefined, b: 1 }, '{"b":1}'],
    ['an object with a null prototype is plain data', Object.assign(Object.create(null) as object, { k: 'v' }), '{"k":"v"}'],
    ['no whitespace anywhere', { a: [1, { b: 'c d' }] }, '{"a":[1,{"b":"c d"}]}'],
  ];
  for (const [name, value, expected] of cases) t.equal(canonicalJson(value), expected, name);
});

t.test('values with no canonical form are refused with the path that holds them', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['NaN', { a: NaN }, /\$\.a: NaN/],
    ['Infinity', [1, Infinity], /\$\[1\]: Infinity/],
    ['undefined in an array', [undefined], /\$\[0\]: undefined/],
    ['a bigint', { n: 1n }, /\$\.n: a bigint/],
    ['a function', { f: () => 1 }, /\$\.f: a function/],
    ['a Date (not plain data)', { d: new Date(0) }, /\$\.d: Date is not plain JSON data/],
    ['a Map', new Map(), /Map is not plain JSON data/],
    ['a lone high surrogate in a string', ['\ud800'], /lone UTF-16 surrogate/],
    ['a lone low surrogate in a key', { '\udc00x': 1 }, /property name holds a lone UTF-16 surrogate/],
  ];
  for (const [name, value, message] of cases) t.throws(() => canonicalJson(value), { name: 'CanonicalJsonError', message }, name);
  t.ok(new CanonicalJsonError('x') instanceof Error);
});

t.test('digests', async (t) => {
  const value = { b: [1, 2], a: 'x' };
  const expected = `sha256:${createHash('sha256').update('{"a":"x","b":[1,2]}').digest('hex')}`;
  t.equal(digest(value), expected, 'sha256 of the canonical bytes, lowercase hex');
  t.equal(digest({ a: 'x', b: [1, 2] }), expected, 'property order does not change the digest');
  t.not(digest({ a: 'x', b: [2, 1] }), expected, 'array order does');
  t.equal(sha256Digest('abc'), 'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', 'the FIPS 180-2 "abc" vector');
  t.equal(sha256Digest(new TextEncoder().encode('abc')), sha256Digest('abc'), 'bytes and their UTF-8 string agree');
  for (const [v, ok] of [[expected, true], ['sha256:' + 'A'.repeat(64), false], ['sha256:' + 'a'.repeat(63), false], ['md5:' + 'a'.repeat(64), false], [42, false]] as const) {
    t.equal(isDigest(v), ok, `isDigest(${String(v).slice(0, 20)}…) is ${ok}`);
  }
});

t.test('artifact digest: canonical JSON of each key’s own sha256 digest', async (t) => {
  const files = { '0002_b.up.sql': 'SELECT 2;', '0001_a.up.sql': 'SELECT 1;' };
  const expected = digest({ '0001_a.up.sql': sha256Digest('SELECT 1;'), '0002_b.up.sql': sha256Digest('SELECT 2;') });
  t.equal(artifactDigest(files), expected, 'from a record');
  t.equal(artifactDigest(new Map(Object.entries(files).reverse())), expected, 'from a Map, in any order');
  t.not(artifactDigest({ ...files, '0001_a.up.sql': 'SELECT 1; ' }), expected, 'one changed byte changes it');
  t.not(artifactDigest({ '0001_a.up.sql': 'SELECT 1;' }), expected, 'a missing file changes it');
  t.not(artifactDigest({ '0001_A.up.sql': 'SELECT 1;', '0002_b.up.sql': 'SELECT 2;' }), expected, 'a renamed file changes it');
});

t.test('nesting deeper than any Kubernetes object is a typed refusal, not a stack overflow', async (t) => {
  const nested = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`);
  for (const depth of [MAX_CANONICAL_DEPTH + 1, 5000, 100_000]) {
    t.throws(() => canonicalJson(nested(depth)), { name: 'CanonicalJsonError', message: new RegExp(`^\\$(\\[0\\]){${MAX_CANONICAL_DEPTH}}: nests more than ${MAX_CANONICAL_DEPTH} levels deep$`) }, `${depth} levels`);
  }
  const objects = JSON.parse(`${'{"a":'.repeat(MAX_CANONICAL_DEPTH + 1)}1${'}'.repeat(MAX_CANONICAL_DEPTH + 1)}`) as unknown;
  t.throws(() => canonicalJson(objects), { name: 'CanonicalJsonError', message: /^\$(\.a)+: nests more than/ }, 'objects as well as arrays');
  const atLimit = `${'['.repeat(MAX_CANONICAL_DEPTH)}${']'.repeat(MAX_CANONICAL_DEPTH)}`;
  t.equal(canonicalJson(nested(MAX_CANONICAL_DEPTH)), atLimit, 'the limit itself is serialized, byte for byte');
  t.equal(digest(nested(MAX_CANONICAL_DEPTH)), sha256Digest(atLimit), 'and digested as before');
});

t.test('a refusal names its place under the root the caller gives', async (t) => {
  t.throws(() => canonicalJson({ a: [Infinity] }, 'object.spec'), { name: 'CanonicalJsonError', message: 'object.spec.a[0]: Infinity has no JSON representation' });
  t.equal(canonicalJson({ b: 1, a: 2 }, 'object.spec'), '{"a":2,"b":1}', 'the root changes no output');
});

t.test('a value budget refuses a value wider than it, naming where it ran out; at the budget the output is unchanged', async (t) => {
  const value = { a: [1, [2, 3]], b: 'x' };
  // The object, a's array, 1, the inner array, 2, 3 and 'x': 7 values (keys are not values).
  t.equal(canonicalJson(value, '$', { maxValues: 7 }), canonicalJson(value), 'exactly at the budget');
  t.throws(() => canonicalJson(value, 'object.spec', { maxValues: 6 }), { name: 'CanonicalJsonError', message: 'object.spec.b: more than 6 values' }, 'one value over it');
  t.throws(() => canonicalJson({ a: new Array(500_000).fill(0) }, '$', { maxValues: 1000 }), { name: 'CanonicalJsonError', message: '$.a[998]: more than 1000 values' }, 'a wide array is refused after the budget, not read to its end');
  t.equal(canonicalJson(new Array(3000).fill(0)).length, 6001, 'no budget by default');
});

t.test('a refusal spells the path of nested arrays and objects as before', async (t) => {
  t.throws(() => canonicalJson({ a: [{ b: [0, { c: NaN }] }] }), { name: 'CanonicalJsonError', message: '$.a[0].b[1].c: NaN has no JSON representation' });
  t.throws(() => canonicalJson([[undefined]]), { name: 'CanonicalJsonError', message: '$[0][0]: undefined has no JSON representation' });
});
