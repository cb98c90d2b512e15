// The failing-release path on the real control plane: a release the API server keeps refusing stays recorded in
// status.pendingLockRelease, is announced, and is tried again with the work queue's per-key backoff, not on every
// millisecond; once the API server accepts it, the release is made and the record cleared.
import t from 'tap';
import { leaseNameFor } from '../../src/shared/realm.js';
import { registry } from '../../src/shared/metrics.js';
import { MIGRATION_CONTROLLER } from '../../src/controller/migration/register.js';
import { sleep, waitFor } from '../../tools/stack/wait.js';
import { eventsAbout, leaseHolding, migrationWorld } from './migration-world.js';
import { refuseUpdates } from './test-policy.js';

/** Passes the migration controller has made so far, by its own reconcile counter. */
async function passes(): Promise<number> {
  const metric = await registry.getSingleMetric('controller_runtime_reconcile_total')?.get();
  return (metric?.values ?? []).filter((v) => v.labels.controller === MIGRATION_CONTROLLER).reduce((sum, v) => sum + v.value, 0);
}

t.test('a release the API server refuses stays recorded and is retried with backoff until it is accepted', async (t) => {
  const w = await migrationWorld(t);
  const db = await w.database('release_backoff');
  const secret = await w.installSample(db);
  await w.sampleArtifact();

  // Refuses, in this namespace only, every Lease update that hands a realm back (clears its holder).
  const removePolicy = await refuseUpdates(t, w.ns, 'no-release', {
    apiGroup: 'coordination.k8s.io', resource: 'leases', allowed: '!has(oldObject.spec.holderIdentity) || has(object.spec.holderIdentity)',
  });

  await w.startController();
  await w.createMigration({ name: 'orders', artifact: 'orders-migrations-r1', secret, apply: 'Always' });
  const owed = await w.waitFor('orders', 'the Apply accounted for, its release owed', (m) =>
    (m.status?.lastRun?.outcome === 'Applied' && m.status.pendingLockRelease ? m : undefined), 180_000);
  const release = owed.status!.pendingLockRelease!;
  // Events are written in the background: wait for it.
  await waitFor(async () => ((await eventsAbout(w, owed.metadata.uid!, 'TargetLockReleaseOwed')).length > 0 ? true : undefined),
    { what: 'the refused release to be announced', timeoutMs: 30_000 });

  // While the API server refuses: the record stands, the realm is still held, and the passes back off.
  const before = await passes();
  await sleep(20_000);
  const during = (await passes()) - before;
  t.ok(during <= 40, `the key was reconciled ${during} times in 20 s of refusals (a pass every millisecond would be thousands)`);
  const still = await w.get('orders');
  t.same(still.status?.pendingLockRelease, release, 'the release stays recorded');
  t.equal((await leaseHolding(w, leaseNameFor(release.coordinationDigest)))[1], release.leaseEpoch, 'the realm is still held under the claim\'s Lease epoch');

  await removePolicy();
  const handedBack = await w.waitFor('orders', 'the release made and its record cleared', (m) => (!m.status?.pendingLockRelease ? m : undefined), 120_000);
  t.equal(handedBack.status?.lastRun?.outcome, 'Applied', 'the run\'s account is untouched');
  t.notOk((await leaseHolding(w, leaseNameFor(release.coordinationDigest)))[0], 'the realm is handed back');
  t.same((await w.history(db)).map((h) => h.version), ['0001', '0002', '0003'], 'each version applied once');
});
