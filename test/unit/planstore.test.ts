import t from 'tap';
import type { V1ConfigMap } from '@kubernetes/client-node';
import {
  chunkNamesFor,
  PLAN_CHUNK_MAX_BYTES,
  PLAN_MAX_BYTES,
  planContentDigest,
  projectionConfigMaps,
  projectionMatches,
  reconstructPlanBytes,
  splitPlan,
  type PlanChunkObject,
  type PlanContent,
} from '../../src/shared/planstore.js';

const PLAN = { metadata: { name: 'ptah-plan-0123456789abcdef01234567', namespace: 'team-a', uid: 'plan-uid-1' } };

function bytes(length: number, seed = 7): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

function planOf(whole: Uint8Array) {
  const chunks = splitPlan(whole);
  return { chunks, spec: { chunks: chunkNamesFor(PLAN.metadata.name, chunks.length), contentDigest: planContentDigest(whole), size: whole.length } };
}

t.test('splitting respects the chunk, count and size limits', async (t) => {
  const rows: [number, number][] = [
    [1, 1],
    [PLAN_CHUNK_MAX_BYTES, 1],
    [PLAN_CHUNK_MAX_BYTES + 1, 2],
    [PLAN_MAX_BYTES, 16],
  ];
  for (const [length, count] of rows) {
    const chunks = splitPlan(bytes(length));
    t.equal(chunks.length, count, `${length} bytes -> ${count} chunks`);
    t.ok(chunks.every((c) => c.length > 0 && c.length <= PLAN_CHUNK_MAX_BYTES), 'each chunk within bounds');
  }
  t.throws(() => splitPlan(new Uint8Array(0)), { name: 'PlanStoreError', message: /empty/ });
  t.throws(() => splitPlan(bytes(PLAN_MAX_BYTES + 1)), { name: 'PlanStoreError', message: /at most/ });
});

t.test('chunk names derive from the plan name', async (t) => {
  t.same(chunkNamesFor('ptah-plan-abc', 3), ['ptah-plan-abc-000', 'ptah-plan-abc-001', 'ptah-plan-abc-002']);
  for (const [name, count] of [['Bad_Name', 1], ['x'.repeat(64), 1], ['ok', 0], ['ok', 17], ['ok', 1.5]] as const) {
    t.throws(() => chunkNamesFor(name, count), { name: 'PlanStoreError' }, `${name} x ${count}`);
  }
});

t.test('projection ConfigMaps are immutable, owned by the plan and round-trip the bytes', async (t) => {
  const whole = bytes(PLAN_CHUNK_MAX_BYTES * 2 + 10);
  const { chunks, spec } = planOf(whole);
  const maps = projectionConfigMaps(PLAN, chunks);
  t.equal(maps.length, 3);
  t.same(maps.map((m) => m.metadata!.name), spec.chunks);
  for (const map of maps) {
    t.equal(map.immutable, true);
    t.equal(map.metadata!.namespace, 'team-a');
    t.same(map.metadata!.ownerReferences, [
      { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchemaPlan', name: PLAN.metadata.name, uid: 'plan-uid-1', controller: true, blockOwnerDeletion: true },
    ]);
    t.same(map.metadata!.labels, { 'app.kubernetes.io/managed-by': 'ptah-operator', 'operator.ptah.run/plan': PLAN.metadata.name });
    t.same(Object.keys(map.binaryData!), ['chunk']);
    t.equal(map.data, undefined);
  }
  // Buffer.equals: tap's deep comparison of megabyte arrays takes tens of seconds.
  const same = (got: Uint8Array) => Buffer.from(got).equals(Buffer.from(whole));
  t.ok(same(reconstructPlanBytes([...maps].reverse(), spec)), 'from ConfigMaps in any order');
  const chunkObjects: PlanChunkObject[] = chunks.map((c, i) => ({ metadata: { name: spec.chunks[i]! }, spec: { data: Buffer.from(c).toString('base64') } }));
  t.ok(same(reconstructPlanBytes(chunkObjects, spec)), 'from PtahSchemaPlanChunks');
  t.ok(same(reconstructPlanBytes(chunkObjects, { chunks: spec.chunks, contentDigest: spec.contentDigest })), 'size is optional');
  t.notOk(same(reconstructPlanBytes(chunkObjects, spec).subarray(1)), 'the comparison can fail');
  t.throws(() => projectionConfigMaps({ metadata: { name: PLAN.metadata.name, namespace: 'team-a' } }, chunks), { message: /no name, namespace or UID/ });
  t.throws(() => projectionConfigMaps(PLAN, [bytes(PLAN_CHUNK_MAX_BYTES + 1)]), { message: /a chunk holds/ });
});

t.test('reconstruction refuses anything but the plan\'s exact bytes', async (t) => {
  const whole = bytes(PLAN_CHUNK_MAX_BYTES + 100);
  const { chunks, spec } = planOf(whole);
  const maps = projectionConfigMaps(PLAN, chunks);
  const edit = (i: number, change: (m: V1ConfigMap) => void) => maps.map((m, j) => {
    const copy = structuredClone(m);
    if (j === i) change(copy);
    return copy;
  });
  const flipped = Buffer.from(chunks[1]!);
  flipped[0] = flipped[0]! ^ 1;
  const rows: [string, (V1ConfigMap | PlanChunkObject)[], PlanContent, RegExp][] = [
    ['a missing chunk', [maps[0]!], spec, /missing/],
    ['an extra chunk', [...maps, { ...maps[0]!, metadata: { name: `${PLAN.metadata.name}-002` } }], spec, /not one the plan lists/],
    ['a chunk given twice', [maps[0]!, maps[0]!, maps[1]!], spec, /given twice/],
    ['a flipped bit', edit(1, (m) => void (m.binaryData!['chunk'] = flipped.toString('base64'))), { ...spec, size: undefined }, /do not hash/],
    ['chunks exchanged', edit(0, (m) => void (m.binaryData!['chunk'] = maps[1]!.binaryData!['chunk']!)), spec, /the plan says/],
    ['another size', maps, { ...spec, size: spec.size + 1 }, /the plan says/],
    ['another content digest', maps, { ...spec, contentDigest: planContentDigest(bytes(3)) }, /do not hash/],
    ['a malformed content digest', maps, { ...spec, contentDigest: 'sha256:nope' }, /content digest/],
    ['no chunks listed', maps, { ...spec, chunks: [] }, /1 to 16/],
    ['non-canonical base64', edit(0, (m) => void (m.binaryData!['chunk'] = m.binaryData!['chunk'] + '!')), spec, /canonical base64/],
    ['no chunk key', edit(0, (m) => void (m.binaryData = { other: m.binaryData!['chunk']! })), spec, /holds no chunk data/],
    ['text data', edit(0, (m) => void (m.data = { chunk: 'x' })), spec, /holds text data/],
    ['an empty chunk', edit(0, (m) => void (m.binaryData!['chunk'] = '')), spec, /holds 0 bytes/],
  ];
  for (const [name, parts, plan, message] of rows) t.throws(() => reconstructPlanBytes(parts, plan), { name: 'PlanStoreError', message }, name);
});

t.test('projectionMatches holds an existing or submitted ConfigMap to the wanted projection', async (t) => {
  const [wanted] = projectionConfigMaps(PLAN, splitPlan(bytes(1000)));
  const asStored: V1ConfigMap = JSON.parse(JSON.stringify({ ...wanted, metadata: { ...wanted!.metadata, uid: 'cm-uid', resourceVersion: '12', creationTimestamp: '2030-01-01T00:00:00Z' } }));
  t.same(projectionMatches(asStored, wanted!), { ok: true }, 'server-assigned metadata does not count');
  const rows: [string, (m: V1ConfigMap) => void, RegExp][] = [
    ['not immutable', (m) => void (m.immutable = false), /not immutable/],
    ['another owner', (m) => void (m.metadata!.ownerReferences![0]!.uid = 'other'), /owned by its plan alone/],
    ['a second owner', (m) => void m.metadata!.ownerReferences!.push({ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: 'u' }), /owned by its plan alone/],
    ['another label', (m) => void (m.metadata!.labels!['x'] = 'y'), /other labels/],
    ['other bytes', (m) => void (m.binaryData!['chunk'] = Buffer.from('other').toString('base64')), /other bytes/],
    ['text data beside', (m) => void (m.data = { x: 'y' }), /other bytes/],
    ['another name', (m) => void (m.metadata!.name = 'x'), /is not the projection/],
    ['another namespace', (m) => void (m.metadata!.namespace = 'team-b'), /is not the projection/],
  ];
  for (const [name, change, reason] of rows) {
    const existing = structuredClone(asStored);
    change(existing);
    t.match(projectionMatches(existing, wanted!), { ok: false, reason }, name);
  }
});
