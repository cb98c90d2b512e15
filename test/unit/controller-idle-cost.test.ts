// What a suspended resource costs, in both families, through each family's real reconcile against a fake API server
// that counts requests: the sweep that takes a new resource to its Suspended report is one uncached read and one
// status write (the execution binding, status.observedGeneration with a reading due, and the report together),
// a pass that finds nothing to change writes nothing, and an edit is one write again. bench/scale.ts measured
// 3 reads and 3 writes per resource before these were folded into one (bench/README.md, `scale.ts`).
import { pino } from 'pino';
import t from 'tap';
import { reconcileMigration } from '../../src/controller/migration/reconcile.js';
import { reconcileSchema } from '../../src/controller/schema/reconcile.js';
import type { ManagerIdentity, OwnerDeps, PassEnd } from '../../src/controller/pass.js';
import type { Condition, ExecutionBinding } from '../../src/shared/api/shapes.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { KubeClient, KubeObject } from '../../src/shared/kube-client.js';

const NOW = new Date('2030-01-01T00:00:00.000Z');
/** Longer than any "go on at once" requeue (1 ms), shorter than the interval: the pass waits for the next interval. */
const SETTLED_MS = 60_000;

const MANAGER: ManagerIdentity = {
  controllerImage: 'ptah/controller:1', controllerRevision: 'r1', runnerImage: 'ptah/runner:1', executorIdentity: `sha256:${'e'.repeat(64)}`,
  controllerStateVersion: 1, runnerProtocolVersion: 1,
};

interface Stored extends KubeObject {
  metadata: NonNullable<KubeObject['metadata']>;
  spec: Record<string, unknown>;
  status?: { phase?: string; observedGeneration?: number; nextReconciliationTime?: string; executionBinding?: ExecutionBinding; conditions?: Condition[] };
}

/** One stored resource and the requests made of it. */
function apiServer(resource: Stored) {
  let stored = structuredClone(resource);
  const calls = { gets: 0, statusWrites: 0, other: 0 };
  const client = {
    tryGet: async () => {
      calls.gets++;
      return structuredClone(stored);
    },
    update: async <T extends KubeObject>(object: T, options?: { subresource?: string }) => {
      if (options?.subresource !== 'status') throw new Error('only status writes are expected');
      calls.statusWrites++;
      const next = object as unknown as Stored;
      stored = { ...stored, status: structuredClone(next.status), metadata: { ...stored.metadata, resourceVersion: String(Number(stored.metadata.resourceVersion) + 1) } };
      return structuredClone(stored) as unknown as T;
    },
    list: async () => {
      calls.other++;
      return [];
    },
    patch: async () => {
      calls.other++;
      throw new Error('no metadata patch is expected');
    },
  };
  const edit = (spec: Record<string, unknown>) => {
    stored = { ...stored, spec: { ...stored.spec, ...spec }, metadata: { ...stored.metadata, generation: (stored.metadata.generation ?? 0) + 1 } };
  };
  return { client: client as unknown as KubeClient, calls, edit, stored: () => stored };
}

function depsFor(client: KubeClient, manager: ManagerIdentity = MANAGER): OwnerDeps {
  return {
    client,
    events: { record: () => undefined },
    manager,
    clock: { now: () => NOW, monotonicMs: () => 0 },
    lockFor: () => {
      throw new Error('a suspended resource takes no Lease');
    },
    coordinationNamespace: 'ptah-system',
    log: pino({ level: 'silent' }),
    readFailures: new Map(),
    // The manager's whole-kind caches, empty: nothing (an acknowledgment, say) waits to be read.
    cached: () => [],
  } as unknown as OwnerDeps;
}

const target = { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'db', key: 'url' } };

const families = [
  {
    kind: KINDS.PtahMigration.kind,
    reconcile: reconcileMigration,
    spec: { target, interval: '5m', suspend: true, policy: { apply: 'Always' }, artifact: { configMapRef: { name: 'orders-r1' } } },
  },
  {
    kind: KINDS.PtahSchema.kind,
    reconcile: reconcileSchema,
    spec: { target, interval: '5m', suspend: true, policy: { apply: 'Always' }, desired: { configMapRef: { name: 'catalog-r1' } } },
  },
];

function resourceOf(kind: string, spec: Record<string, unknown>): Stored {
  return { apiVersion: API_VERSION, kind, metadata: { name: 'orders', namespace: 'ns', uid: `${kind}-uid`, generation: 1, resourceVersion: '1' }, spec };
}

/** Passes as the work queue runs them (a short requeue runs the next at once) until one waits; at most ten. */
async function sweep(reconcile: (deps: OwnerDeps, ns: string, name: string) => Promise<PassEnd | undefined>, deps: OwnerDeps): Promise<PassEnd[]> {
  const ends: PassEnd[] = [];
  for (let i = 0; i < 10; i++) {
    const end = await reconcile(deps, 'ns', 'orders');
    if (!end) break;
    ends.push(end);
    if (end.requeueAfterMs >= SETTLED_MS) break;
  }
  return ends;
}

for (const family of families) {
  t.test(`a suspended ${family.kind}: one read and one status write to its Suspended report, none when nothing changed`, async (t) => {
    const api = apiServer(resourceOf(family.kind, family.spec));
    const deps = depsFor(api.client);

    const created = await sweep(family.reconcile, deps);
    t.same(api.calls, { gets: 1, statusWrites: 1, other: 0 }, `the sweep: 1 GET, 1 status write (passes: ${created.map((e) => e.why).join('; ')})`);
    const status = api.stored().status;
    t.equal(status?.phase, 'Suspended');
    t.equal(status?.observedGeneration, 1, 'status.observedGeneration is the generation the report is of');
    t.equal(status?.nextReconciliationTime, NOW.toISOString(), 'a reading is due once the resource is resumed');
    t.ok(status?.executionBinding?.epoch, 'the execution binding is installed in the same write');
    const ready = status?.conditions?.find((c) => c.type === 'Ready');
    t.match(ready, { status: 'False', reason: 'Suspended', observedGeneration: 1 });

    const before = { ...api.calls };
    const idle = await sweep(family.reconcile, deps);
    t.same(api.calls, { ...before, gets: before.gets + 1 }, 'the next interval\'s pass reads once and writes nothing');
    t.ok(idle[0]!.requeueAfterMs >= SETTLED_MS, 'and waits for the next interval');

    api.edit({ interval: '10m' });
    const edited = { ...api.calls };
    await sweep(family.reconcile, deps);
    t.same(api.calls, { ...edited, gets: edited.gets + 1, statusWrites: edited.statusWrites + 1 }, 'an edit: 1 GET, 1 status write');
    t.equal(api.stored().status?.observedGeneration, 2, 'status.observedGeneration follows the edit');
    t.match(api.stored().status?.conditions?.find((c) => c.type === 'Ready'), { reason: 'Suspended', observedGeneration: 2 });
    t.equal(api.stored().status?.executionBinding?.epoch, status?.executionBinding?.epoch, 'the epoch is kept');
  });

  t.test(`a suspended ${family.kind} under a manager with a new identity: the binding record is updated in one write, its epoch kept`, async (t) => {
    const api = apiServer(resourceOf(family.kind, family.spec));
    await sweep(family.reconcile, depsFor(api.client));
    const epoch = api.stored().status?.executionBinding?.epoch;
    const before = { ...api.calls };
    await sweep(family.reconcile, depsFor(api.client, { ...MANAGER, controllerImage: 'ptah/controller:2', controllerRevision: 'r2' }));
    t.same(api.calls, { ...before, gets: before.gets + 1, statusWrites: before.statusWrites + 1 }, '1 GET, 1 status write');
    t.match(api.stored().status?.executionBinding, { epoch, controllerImage: 'ptah/controller:2', controllerRevision: 'r2' });
    t.equal(api.stored().status?.phase, 'Suspended');
  });

  t.test(`a new ${family.kind} that is not suspended: the binding and the generation in one write, and the pass ends there`, async (t) => {
    const api = apiServer(resourceOf(family.kind, { ...family.spec, suspend: false }));
    const end = await family.reconcile(depsFor(api.client), 'ns', 'orders');
    t.same(api.calls, { gets: 1, statusWrites: 1, other: 0 }, '1 GET, 1 status write');
    t.equal(end?.requeueAfterMs, 1, 'the next pass goes on at once, from the stored binding and generation');
    t.match(api.stored().status, { observedGeneration: 1, nextReconciliationTime: NOW.toISOString(), executionBinding: { epoch: String } });
  });
}
