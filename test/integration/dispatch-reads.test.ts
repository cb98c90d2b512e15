// The dispatch sequence's authorize step reads an Apply's plan once per pass, in both families, and holds that one
// uncached reading to the claim (its inputs still hold) and to status.plan (currentMigrationPlan, currentSchemaPlan);
// the stage step and the Job's build use the plan it authorized. It used to read the same plan three times in a row.
// Each family's resource (policy OnApproval, as the dispatch-order tests set it up) is taken to an undispatched
// Apply claim, then its dispatch passes run on a client that counts what they read, until the Job's UID is recorded.
import t, { type Test } from 'tap';
import { KINDS } from '../../src/shared/api/names.js';
import { restClient, type KubeClient, type ResourceRef } from '../../src/shared/kube-client.js';
import type { OwnerDeps } from '../../src/controller/pass.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';
import { MIGRATION, SCHEMA } from './dispatch-order-world.js';
import { manualReconciler, type MigrationWorld } from './migration-world.js';

/** The real client, counting the GETs of each kind it was asked for. */
function countingGets(client: KubeClient): { client: KubeClient; gets: Map<string, number> } {
  const gets = new Map<string, number>();
  const count = (ref: ResourceRef) => gets.set(ref.kind, (gets.get(ref.kind) ?? 0) + 1);
  return {
    gets,
    client: {
      ...client,
      get: (ref) => {
        count(ref);
        return client.get(ref);
      },
      tryGet: (ref) => {
        count(ref);
        return client.tryGet(ref);
      },
    },
  };
}

async function dispatchPassPlanReads(t: Test, family: typeof MIGRATION | typeof SCHEMA, planKind: string): Promise<number[]> {
  const NAME = family.name;
  const { world } = await family.setup(t);
  const managerClient = await restClient(sharedCluster().kubeConfig('manager'), { fieldManager: 'ptah-dispatch-reads-test' });
  const deps: OwnerDeps = manualReconciler(world as unknown as MigrationWorld, managerClient).deps;
  await waitFor(async () => {
    await family.reconcile(deps, world.ns, NAME);
    const o = await world.get(NAME);
    return o.status?.phase === 'AwaitingApproval' && o.status.plan ? true : undefined;
  }, { what: `the ${family.kind} to wait for approval`, timeoutMs: 120_000, intervalMs: 500 });
  await world.approve(NAME);
  await waitFor(async () => {
    if ((await world.get(NAME)).status?.activeOperation?.type === 'Apply') return true;
    await family.reconcile(deps, world.ns, NAME);
    return undefined;
  }, { what: 'the Apply claim', timeoutMs: 60_000, intervalMs: 200 });
  const claim = (await world.get(NAME)).status!.activeOperation!;
  t.notOk(claim.admissionSnapshot || claim.dispatchStarted || claim.jobUID, 'fixture: the Apply claim has not begun its dispatch');

  const reads: number[] = [];
  for (let i = 0; i < 6 && !(await world.get(NAME)).status?.activeOperation?.jobUID; i++) {
    const counting = countingGets(managerClient);
    const end = await family.reconcile({ ...deps, client: counting.client }, world.ns, NAME);
    t.comment(`dispatch pass ${i + 1}: ${end?.why}; GETs ${JSON.stringify(Object.fromEntries(counting.gets))}`);
    reads.push(counting.gets.get(planKind) ?? 0);
  }
  t.ok((await world.get(NAME)).status?.activeOperation?.jobUID, 'the dispatch passes recorded the Job\'s UID');
  return reads;
}

for (const [family, planKind] of [[MIGRATION, KINDS.PtahMigrationPlan.kind], [SCHEMA, KINDS.PtahSchemaPlan.kind]] as const) {
  void t.test(`${family.kind}: each dispatch pass of an Apply reads its plan once`, async (tt) => {
    const reads = await dispatchPassPlanReads(tt, family, planKind);
    tt.ok(reads.length >= 2, `the dispatch took ${reads.length} passes (the snapshot's, then the create's)`);
    tt.same(reads, reads.map(() => 1), `plan reads per dispatch pass: ${reads.join(', ')}`);
  });
}
