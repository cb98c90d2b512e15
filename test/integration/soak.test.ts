// A short chaos soak through bench/soak-run.ts, the code `npm run soak` runs: every safety count must be 0, and the
// chaos must really have happened (a soak that injected nothing proves nothing, so it fails too).
import t from 'tap';
import { soakMarkdown } from '../../bench/soak-report.js';
import { runSoak, SOAK_DEFAULTS } from '../../bench/soak-run.js';

t.test('a short soak: no operation applied twice, no overlap, no Lease released under a running Pod; chaos injected', async (tt) => {
  const report = await runSoak(tt, {
    ...SOAK_DEFAULTS,
    minutes: 1.25, chaosUntil: { podKills: 1, executions: 2, revisions: 1, atMostMinutes: 5 }, resources: 4, databases: 2, drainMinutes: 1.25, seed: 9,
    killEveryMs: [15_000, 30_000], downMs: [1_000, 4_000], podKillEveryMs: [10_000, 20_000], reviseEveryMs: [40_000, 60_000], acknowledgeAfterMs: 30_000,
    log: (line) => tt.comment(line),
  });
  tt.comment(soakMarkdown(report));
  tt.equal(report.safety.operationsAppliedTwice, 0, 'no operation ID applied twice', { evidence: report.evidence.appliedTwice });
  tt.equal(report.safety.overlappingExecutions, 0, 'no two executions overlap on one database', { evidence: report.evidence.overlaps });
  tt.equal(report.safety.leasesReleasedUnderRunningPod, 0, 'no realm Lease released while a Pod of its claim ran', { evidence: report.evidence.releasesUnderRunningPod });
  tt.equal(report.executions.schemaStartsMissing, 0, 'every schema Apply recorded when it started, so its span is judged whole');
  const faults = Object.values(report.injected.faults).reduce((a, b) => a + b, 0);
  tt.ok(report.injected.managerKills >= 1, `the manager was SIGKILLed (${report.injected.managerKills})`);
  tt.ok(faults >= 1, `API faults were injected (${faults})`);
  tt.ok(report.injected.podKills.graceZero + report.injected.podKills.graceful >= 1, `Apply Pods were deleted (${JSON.stringify(report.injected.podKills)})`);
  tt.ok(report.injected.revisions >= 1, `new revisions were published (${report.injected.revisions})`);
  // A schema's first Apply waits for an observation and a Plan Job; on a loaded two-core machine some runs end
  // before it, so the floor is two Applies of any family (chaos goes on, up to 5 min, until they are recorded, a Pod
  // was deleted and a revision was published).
  tt.ok(report.executions.total >= 2, `the databases recorded Applies (${JSON.stringify(report.executions.byFamily)})`);
  tt.ok(report.leases.releases >= 1 && report.leases.claimPods >= 1,
    `realm Leases were released and Pods were tied to their claims, so the Lease count had something to judge (${report.leases.releases} releases, ${report.leases.claimPods} Pods)`);
});
