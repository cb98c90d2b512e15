// The manager killed while Applies of different databases run: a new manager (the real src/main.ts) adopts every
// one of them — the same Job, the same Pods, the same Lease epoch — and each database applies its plan once.
import t from 'tap';
import type { ActiveOperation } from '../../src/shared/api/shapes.js';
import { LEADING } from '../harness/manager-process.js';
import { applyClaim, crashWorld, outcomeOf, podsOf, sleepingApply } from './crash-world.js';
import { jobsOf, WAIT_MS } from './migration-world.js';
import { slowFiles } from './slow-apply.js';

const TARGETS = ['alpha', 'beta'] as const;

t.test('killed while Applies of two databases run, the new manager adopts both with the same Job, Pods and Lease epochs', async (tt) => {
  const cw = await crashWorld(tt);
  const { w } = cw;
  await w.artifact('slow-r1', slowFiles(20));
  await cw.startManager();
  // Their own realms, so both Applies run at once.
  const running = await Promise.all(TARGETS.map((name) => sleepingApply(cw, name, name)));
  const killedAt = await cw.killNow();
  const next = await cw.startManager();
  tt.comment(`the new manager led ${(await next.waitForLog(LEADING, 60_000)) - killedAt} ms after the kill`);

  for (const r of running) {
    const after = await w.waitFor(r.name, 'its claim to be settled', (m) => (m.status?.activeOperation?.id !== r.claim.id ? m : undefined), WAIT_MS);
    tt.equal(outcomeOf(after, r.claim.id), 'Applied', `${r.name}: applied`);
    tt.equal(after.status?.lastRun?.jobUID, r.claim.jobUID, `${r.name}: the run is settled from the Job dispatched before the kill`);
    tt.same(jobsOf(w, 'apply', r.name).map((j) => j.metadata?.uid), [r.claim.jobUID], `${r.name}: no other Apply Job was ever created`);
    tt.same(await podsOf(cw, r.claim.jobName), r.pods, `${r.name}: the same Pods`);
    tt.ok(r.pods.length === 1, `${r.name}: one Pod ran the Apply`);
    const claims = r.states.map((m) => applyClaim(m.status)).filter((c): c is ActiveOperation => c?.id === r.claim.id && Boolean(c.jobUID));
    tt.same([...new Set(claims.map((c) => c.leaseEpoch))], [r.epoch], `${r.name}: every stored version of the claim names the Lease epoch it held before the kill`);
    tt.notOk(claims.some((c) => c.leaseContinuityLost), `${r.name}: no continuity loss`);
    const rows = (await w.history(r.db)).filter((h) => h.operationId === r.claim.id).map((h) => h.version);
    tt.same(rows, ['0001', '0002', '0003'], `${r.name}: each version applied once, under the claim`);
  }
});
