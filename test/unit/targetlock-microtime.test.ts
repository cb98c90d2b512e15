// The realm Lease's timestamps go over the wire as Kubernetes MicroTime (RFC 3339, six fraction digits), as they did
// with client-node's V1MicroTime: restClient sends JSON.stringify of the Lease, and the API server refuses three.
import t from 'tap';
import type { V1Lease } from '@kubernetes/client-node';
import { ApiError, type KubeClient, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import { TargetLock } from '../../src/shared/targetlock.js';

/** Stores what restClient would send: the JSON text of each write, and reads it back parsed, as the server answers. */
function jsonStore() {
  const stored = new Map<string, string>();
  const sent: string[] = [];
  const keep = <T extends KubeObject>(object: T): T => {
    const text = JSON.stringify({ ...object, metadata: { ...object.metadata, resourceVersion: String(sent.length + 1) } });
    sent.push(JSON.stringify(object));
    stored.set(object.metadata!.name!, text);
    return JSON.parse(text) as T;
  };
  const read = <T>(name: string): T | undefined => {
    const text = stored.get(name);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  };
  const unused = () => Promise.reject(new Error('not used by TargetLock'));
  const client: KubeClient = {
    get: async <T extends KubeObject>(ref: ResourceRef) => read<T>(ref.name) ?? Promise.reject(new ApiError({ code: 404, reason: 'NotFound' }, `GET ${ref.name}`)),
    tryGet: async <T extends KubeObject>(ref: ResourceRef) => read<T>(ref.name),
    list: unused,
    create: async (object) => keep(object),
    update: async (object) => keep(object),
    patch: unused,
    delete: unused,
    readPodLog: unused,
  };
  return { client, sent: () => sent.map((text) => JSON.parse(text) as V1Lease & { spec: { acquireTime?: string; renewTime?: string } }) };
}

const HOLDER = { resourceUid: '5e7f2c1a-0000-4000-8000-000000000001', operationId: 'op-1' };
const DIGEST = `sha256:${'a'.repeat(64)}`;

t.test('acquire, renew and release write MicroTime timestamps that never move backwards', async (t) => {
  const { client, sent } = jsonStore();
  let now = new Date('2026-12-01T22:00:00.123Z');
  const lock = new TargetLock(client, 'ptah-system', { now: () => now, monotonicMs: () => 0 });

  const acquired = await lock.acquire({ coordinationDigest: DIGEST, holder: HOLDER, durationSeconds: 60 });
  t.equal(acquired.kind, 'acquired');
  t.same([sent()[0]!.spec.acquireTime, sent()[0]!.spec.renewTime], ['2026-12-01T22:00:00.123000Z', '2026-12-01T22:00:00.123000Z'], 'create: six fraction digits');

  now = new Date('2026-12-01T22:00:30.456Z');
  await lock.acquire({ coordinationDigest: DIGEST, holder: HOLDER, durationSeconds: 60, expectedEpoch: acquired.kind === 'acquired' ? acquired.epoch : undefined });
  t.same([sent()[1]!.spec.acquireTime, sent()[1]!.spec.renewTime], ['2026-12-01T22:00:00.123000Z', '2026-12-01T22:00:30.456000Z'], 'renew: the stored acquireTime kept, renewTime now');

  now = new Date('2026-12-01T21:59:00.000Z');
  t.equal(await lock.release({ coordinationDigest: DIGEST, holder: HOLDER, epoch: acquired.kind === 'acquired' ? acquired.epoch : '' }), 'released');
  t.equal(sent()[2]!.spec.renewTime, '2026-12-01T22:00:30.456000Z', 'release under a clock that went back: the stored renewTime, not an earlier one');
  t.equal(sent()[2]!.spec.holderIdentity, undefined);
});
