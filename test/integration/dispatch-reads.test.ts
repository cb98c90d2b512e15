// What the dispatch passes of a claim ask of the API server, counted request by request, in both families:
// - the authorize step reads an Apply's plan once per pass, and holds that one uncached reading to the claim (its
//   inputs still hold) and to status.plan (currentMigrationPlan, currentSchemaPlan); the stage step and the Job's
//   build use the plan it authorized (it used to read the same plan three times in a row);
// - the resource is read once per pass: the pass's own uncached read at its start, kept current by every write of
//   the pass, is what the authorize step holds the claim to (it used to read it again);
// - the write that records the Job's UID tells a person the Job runs, so the first pass that finds it running
//   writes no status (it used to rewrite the report to name the Job);
// - a schema proof reading's dispatch passes renew the realm Lease once (the proof's renewal; the dispatch
//   sequence's lease step renewed it a second time), and only the pass that can create the proof's Job looks for
//   an Apply Pod that may still run.
// Each family's resource (policy OnApproval, as the dispatch-order tests set it up) is taken to an undispatched
// Apply claim, then its passes run on a client that counts what they ask, the Leases included.
import t, { type Test } from 'tap';
import { KINDS } from '../../src/shared/api/names.js';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { systemClock } from '../../src/shared/clock.js';
import { restClient, type KubeClient, type ResourceRef } from '../../src/shared/kube-client.js';
import { TargetLock } from '../../src/shared/targetlock.js';
import type { OwnerDeps, OwnerResource, PassEnd } from '../../src/controller/pass.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { inProcessWorld, MIGRATION, SCHEMA } from './dispatch-order-world.js';
import { manualReconciler, WAIT_MS, type MigrationWorld } from './migration-world.js';

/** The real client, counting every request as "verb Kind" ("update Kind/status" for a status write). */
function counting(client: KubeClient): { client: KubeClient; counts: Map<string, number>; n(what: string): number } {
  const counts = new Map<string, number>();
  const count = (verb: string, kind: string) => counts.set(`${verb} ${kind}`, (counts.get(`${verb} ${kind}`) ?? 0) + 1);
  const kindOf = (o: { kind?: string }) => o.kind ?? '?';
  return {
    counts,
    n: (what) => counts.get(what) ?? 0,
    client: {
      ...client,
      get: (ref: ResourceRef) => (count('get', ref.kind), client.get(ref)),
      tryGet: (ref: ResourceRef) => (count('get', ref.kind), client.tryGet(ref)),
      list: (apiVersion, kind, namespace, options) => (count('list', kind), client.list(apiVersion, kind, namespace, options)),
      create: (object, options) => (count('create', kindOf(object)), client.create(object, options)),
      update: (object, options) => (count('update', `${kindOf(object)}${options?.subresource ? `/${options.subresource}` : ''}`), client.update(object, options)),
      patch: (ref, patch, type, options) => (count('patch', `${ref.kind}${options?.subresource ? `/${options.subresource}` : ''}`), client.patch(ref, patch, type, options)),
      delete: (ref, options) => (count('delete', ref.kind), client.delete(ref, options)),
    } as KubeClient,
  };
}

interface Counted {
  end?: PassEnd;
  n(what: string): number;
}

type Family = typeof MIGRATION | typeof SCHEMA;
type Owner = OwnerResource & { status?: { phase?: string; plan?: unknown; activeOperation?: ActiveOperation; conditions?: { type: string; reason?: string; message?: string }[] } };

interface Driver {
  get(): Promise<Owner>;
  /** One pass on a counting client, its Leases counted too. */
  counted(label: string): Promise<Counted>;
  /** Passes on the plain client until `ready` holds. */
  until(what: string, ready: (o: Owner) => boolean): Promise<Owner>;
}

async function drive(t: Test, family: Family): Promise<Driver> {
  const NAME = family.name;
  const { world } = family === MIGRATION ? await inProcessWorld(t, MIGRATION) : await inProcessWorld(t, SCHEMA);
  const managerClient = await restClient(sharedCluster().kubeConfig('manager'), { fieldManager: 'ptah-dispatch-reads-test' });
  const deps: OwnerDeps = manualReconciler(world as unknown as MigrationWorld, managerClient).deps;
  const get = () => world.get(NAME) as Promise<Owner>;
  const driver: Driver = {
    get,
    async counted(label) {
      const c = counting(managerClient);
      const end = await family.reconcile({ ...deps, client: c.client, lockFor: (ns) => new TargetLock(c.client, ns, systemClock) }, world.ns, NAME);
      t.comment(`${label}: ${end?.why}; ${JSON.stringify(Object.fromEntries(c.counts))}`);
      return { end, n: c.n };
    },
    async until(what, ready) {
      return waitFor(async () => {
        const o = await get();
        if (ready(o)) return o;
        await family.reconcile(deps, world.ns, NAME);
        await sleep(200);
        return undefined;
      }, { what, timeoutMs: WAIT_MS, intervalMs: 1 });
    },
  };
  await driver.until(`the ${family.kind} to wait for approval`, (o) => o.status?.phase === 'AwaitingApproval' && Boolean(o.status.plan));
  await world.approve(NAME);
  await driver.until('the Apply claim', (o) => o.status?.activeOperation?.type === 'Apply');
  return driver;
}

/** Counted passes until the claim in flight records its Job's UID (at most six). */
async function dispatchPasses(d: Driver, label: string): Promise<Counted[]> {
  const passes: Counted[] = [];
  for (let i = 0; i < 6 && !(await d.get()).status?.activeOperation?.jobUID; i++) passes.push(await d.counted(`${label} dispatch pass ${i + 1}`));
  return passes;
}

for (const family of [MIGRATION, SCHEMA]) {
  const planKind = family === MIGRATION ? KINDS.PtahMigrationPlan.kind : KINDS.PtahSchemaPlan.kind;
  void t.test(`${family.kind}: the dispatch passes of an Apply, and the first pass that finds its Job running`, async (t) => {
    const d = await drive(t, family);
    const claim = (await d.get()).status!.activeOperation!;
    t.notOk(claim.admissionSnapshot || claim.dispatchStarted || claim.jobUID, 'fixture: the Apply claim has not begun its dispatch');

    const passes = await dispatchPasses(d, 'Apply');
    const dispatched = (await d.get()).status?.activeOperation;
    t.ok(dispatched?.jobUID, 'the dispatch passes recorded the Job\'s UID');
    t.ok(passes.length >= 2, `the dispatch took ${passes.length} passes (the snapshot's, then the create's)`);
    t.same(passes.map((p) => p.n(`get ${planKind}`)), passes.map(() => 1), 'each dispatch pass reads the plan once');
    t.same(passes.map((p) => p.n(`get ${family.kind}`)), passes.map(() => 1), 'each dispatch pass reads the resource once');

    const ready = (await d.get()).status?.conditions?.find((c) => c.type === 'Ready');
    t.match(ready?.message, dispatched!.jobName, 'the write that recorded the Job\'s UID names the Job in the report');
    const running = await d.counted('the first look at the running Job');
    t.equal(running.end?.why, 'Job running', 'fixture: the Job is still running');
    t.equal(running.n(`update ${family.kind}/status`), 0, 'a pass that finds the Job running, as the status says, writes no status');
  });
}

void t.test('PtahSchema: a proof reading\'s dispatch passes renew the Lease once, and look for Apply Pods only where the Job can be created', async (t) => {
  const d = await drive(t, SCHEMA);
  await dispatchPasses(d, 'Apply');
  const proof = await d.until('the proof\'s Observe claimed', (o) => Boolean(o.status?.activeOperation?.proofOf));
  const claim = proof.status!.activeOperation!;
  t.notOk(claim.admissionSnapshot || claim.dispatchStarted || claim.jobUID, 'fixture: the proof reading has not begun its dispatch');

  const passes = await dispatchPasses(d, 'proof Observe');
  t.ok((await d.get()).status?.activeOperation?.jobUID, 'the proof reading\'s Job was created and its UID recorded');
  t.equal(passes.length, 2, 'in two passes (the snapshot\'s, then the create\'s)');
  t.same(passes.map((p) => [p.n('get Lease'), p.n('update Lease')]), passes.map(() => [1, 1]), 'each renews the realm Lease once: one GET, one PUT');
  t.same(passes.map((p) => p.n(`get ${SCHEMA.kind}`)), passes.map(() => 1), 'each reads the resource once');
  t.same(passes.map((p) => p.n('list Pod')), [0, 1], 'only the pass that creates the Job looks for an Apply Pod that may still run');
});
