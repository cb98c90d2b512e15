// The webhook tests' in-memory uncached reader: every read is a fresh copy of what was stored, by JSON.parse for an
// object JSON carries exactly and by structuredClone for any other, so a caller never shares a mutable object with
// the store or with another read, and what a test stored reads back as it was stored.
import t from 'tap';
import { ApiError } from '../../src/shared/kube-client.js';
import { MemoryReader, type StoredObject } from '../harness/webhook.js';

const ref = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'team-a', name });
const object = (name: string, fields: Record<string, unknown> = {}): StoredObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'team-a' }, ...fields });

t.test('a read is a fresh copy of what was stored, never shared with the store, the caller or another read', async (t) => {
  const reader = new MemoryReader();
  const stored = object('plain', { data: { a: '1', list: [1, 'two', { three: true }] } });
  reader.put(stored);
  (stored.data as Record<string, unknown>).a = 'changed after put';
  const first = await reader.get<StoredObject>(ref('plain'));
  t.same(first, object('plain', { data: { a: '1', list: [1, 'two', { three: true }] } }), 'reads what was stored, not what the caller changed later');
  (first.data as Record<string, unknown>).a = 'changed by a reader';
  ((first.data as Record<string, unknown>).list as unknown[]).push('more');
  const second = await reader.get<StoredObject>(ref('plain'));
  t.same(second.data, { a: '1', list: [1, 'two', { three: true }] }, 'a reader\'s change reaches no later read');
  t.not(second, first);
  const [listed] = await reader.list<StoredObject>('v1', 'ConfigMap', 'team-a');
  t.same(listed, second, 'a list reads the same copy');
  t.not(listed, second);
  t.same(reader.reads, ['v1/ConfigMap/team-a/plain', 'v1/ConfigMap/team-a/plain', 'v1/ConfigMap/team-a/'], 'every read is counted');
});

t.test('an object JSON does not carry exactly reads back as structuredClone gives it', async (t) => {
  const reader = new MemoryReader();
  const at = new Date(0);
  // Each field is one JSON would change: a Date to a string, undefined dropped, -0 to 0, NaN to null, a Map to {}.
  const cases: [string, Record<string, unknown>][] = [
    ['date', { metadata: { name: 'date', namespace: 'team-a', deletionTimestamp: at } }],
    ['undefined', { status: { jobUID: undefined } }],
    ['negative-zero', { spec: { n: -0 } }],
    ['nan', { spec: { n: Number.NaN } }],
    ['map', { spec: { m: new Map([['k', 'v']]) } }],
  ];
  for (const [name, fields] of cases) {
    const stored = { ...object(name), ...fields } as StoredObject;
    reader.put(stored);
    const read = await reader.get(ref(name));
    t.same(read, structuredClone(stored), `${name}: as structuredClone gives it`);
    t.strictSame(Object.keys(read), Object.keys(stored), `${name}: the same fields`);
  }
  const date = await reader.get<StoredObject>(ref('date'));
  t.ok(date.metadata.deletionTimestamp instanceof Date, 'a Date stays a Date');
  t.not(date.metadata.deletionTimestamp, at, 'and is a copy');
  t.ok('jobUID' in ((await reader.get<StoredObject>(ref('undefined'))).status as object), 'an undefined field stays present');
  t.ok(Object.is(((await reader.get<StoredObject>(ref('negative-zero'))).spec as { n: number }).n, -0), '-0 stays -0');
});

t.test('removed objects and planted failures are answered as before', async (t) => {
  const reader = new MemoryReader();
  reader.put(object('gone'));
  reader.objects.clear();
  await t.rejects(reader.get(ref('gone')), { code: 404 }, 'a cleared object is not found');
  reader.put(object('gone'));
  t.same((await reader.get<StoredObject>(ref('gone'))).metadata, { name: 'gone', namespace: 'team-a' }, 'stored again, it reads again');
  reader.put(object('gone', { data: { v: '2' } }));
  t.same((await reader.get<StoredObject>(ref('gone'))).data, { v: '2' }, 'a second put replaces the first');
  reader.fail(ref('gone'), 403);
  const error = await reader.get(ref('gone')).catch((e: unknown) => e);
  t.ok(error instanceof ApiError && error.code === 403, 'a planted failure answers');
});
