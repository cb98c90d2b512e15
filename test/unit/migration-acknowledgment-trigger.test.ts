// settleUnresolvedRunByAcknowledgment lists the acknowledgments uncached only when the informer's cache shows one that
// is open for this migration: on every other idle pass the LIST found nothing to do (and an acknowledgment the cache
// does not hold yet wakes the migration once it does). Without a cache (no manager) it always lists.
import { pino } from 'pino';
import t from 'tap';
import { MigrationPass, type MigrationDeps } from '../../src/controller/migration/context.js';
import { settleUnresolvedRunByAcknowledgment } from '../../src/controller/migration/acknowledgment.js';
import type { PtahMigration, PtahMigrationRunAcknowledgment } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { KubeClient, KubeObject } from '../../src/shared/kube-client.js';

const NOW = new Date('2030-01-01T00:00:00.000Z');
const ACK = KINDS.PtahMigrationRunAcknowledgment.kind;

function migration(): PtahMigration {
  return {
    apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind,
    metadata: { name: 'orders', namespace: 'ns', uid: 'm-uid', generation: 1, resourceVersion: '1' },
    spec: { target: { engine: 'PostgreSQL', coordinationKey: 'k', urlFrom: { name: 's', key: 'url' } } },
    status: {},
  } as unknown as PtahMigration;
}

function ack(name: string, migrationUid: string, settled = false): PtahMigrationRunAcknowledgment {
  return {
    apiVersion: API_VERSION, kind: ACK,
    metadata: { name, namespace: 'ns', uid: `${name}-uid`, generation: 1, creationTimestamp: NOW },
    spec: { migrationRef: { name: 'orders', uid: migrationUid }, operationID: 'op', acknowledgedBy: { username: 'p' }, acknowledgedAt: NOW.toISOString(), mutationRequestUID: 'r' },
    ...(settled ? { status: { conditions: [{ type: 'Consumed', status: 'True', reason: 'RunAcknowledged', message: '', lastTransitionTime: NOW.toISOString() }] } } : {}),
  } as unknown as PtahMigrationRunAcknowledgment;
}

/** The stored acknowledgments, the LISTs made of them and the status writes. */
function world(stored: PtahMigrationRunAcknowledgment[], cached: readonly KubeObject[] | undefined) {
  const calls = { lists: 0, updates: 0 };
  const client = {
    list: async () => {
      calls.lists++;
      return structuredClone(stored);
    },
    update: async <T>(object: T) => {
      calls.updates++;
      return object;
    },
  } as unknown as KubeClient;
  const deps = {
    client,
    events: { record: () => undefined },
    clock: { now: () => NOW, monotonicMs: () => 0 },
    log: pino({ level: 'silent' }),
    readFailures: new Map(),
    ...(cached ? { cached: (apiVersion: string, kind: string) => (apiVersion === API_VERSION && kind === ACK ? cached : undefined) } : {}),
  } as unknown as MigrationDeps;
  return { pass: new MigrationPass(deps, migration()), calls };
}

t.test('the cache holds no open acknowledgment of this migration: no LIST', async (t) => {
  const cases: [string, KubeObject[]][] = [
    ['none at all', []],
    ['one of another migration (same name, another UID)', [ack('a1', 'other-uid')]],
    ['one already consumed', [ack('a1', 'm-uid', true)]],
  ];
  for (const [what, cached] of cases) {
    const { pass, calls } = world([ack('a1', 'm-uid')], cached);
    t.equal(await settleUnresolvedRunByAcknowledgment(pass), undefined, `${what}: nothing settled`);
    t.same(calls, { lists: 0, updates: 0 }, `${what}: no request`);
  }
});

t.test('the cache holds one: the LIST decides, as without a cache', async (t) => {
  for (const cached of [[ack('a1', 'm-uid')], undefined]) {
    const { pass, calls } = world([ack('a1', 'm-uid')], cached);
    const end = await settleUnresolvedRunByAcknowledgment(pass);
    t.match(end?.why, /names no run this PtahMigration waits on/, 'the acknowledgment naming no unresolved run is marked Stale');
    t.same(calls, { lists: 1, updates: 1 }, cached ? 'one LIST, one status write' : 'without a cache: the LIST as always');
  }
});
