// The soak's report as JSON (everything, evidence included) and as a short Markdown summary beside it.
import { writeFile } from 'node:fs/promises';
import { safetyFailures, type SoakReport } from './soak-run.js';

export function soakMarkdown(r: SoakReport): string {
  const o = r.options;
  const f = r.injected.faults;
  const jobs = Object.entries(r.jobsCreated).map(([op, n]) => `${op} ${n}`).join(', ') || 'none';
  const settled = new Map<string, number>();
  for (const u of r.unresolved) settled.set(`${u.outcome} → ${u.settled}`, (settled.get(`${u.outcome} → ${u.settled}`) ?? 0) + 1);
  const lines = [
    `# Soak report (${r.startedAt})`,
    '',
    `${o.resources} resources on ${o.databases} databases, ${o.minutes} min of chaos (${r.chaosSeconds} s), drain ${r.drainSeconds} s of at most ${o.drainMinutes} min, seed ${o.seed}.`,
    `Verdict: **${safetyFailures(r) === 0 ? 'every safety count is 0' : `${safetyFailures(r)} safety count(s) non-zero`}**.`,
    '',
    '## Safety (counted from the databases\' tables and the API server\'s history)',
    '',
    '| count | value |',
    '| --- | ---: |',
    `| operation IDs applied twice | ${r.safety.operationsAppliedTwice} |`,
    `| overlapping executions on one database (one realm each) | ${r.safety.overlappingExecutions} |`,
    `| realm Leases released while a Pod of their claim ran | ${r.safety.leasesReleasedUnderRunningPod} |`,
    '',
    `Executions recorded in the databases: ${r.executions.total} (migration ${r.executions.byFamily.migration}, schema ${r.executions.byFamily.schema}; ` +
      `schema rows without a recorded start: ${r.executions.schemaStartsMissing}). ` +
      `Realm Lease releases ${r.leases.releases}, takeovers ${r.leases.takeovers} (under a running Pod of the previous holder: ${r.leases.takeoversUnderRunningPod}), ` +
      `judged against ${r.leases.claimPods} Pods of claims.`,
    '',
    '## Unresolved runs and how each settled',
    '',
    r.unresolved.length === 0 ? 'None recorded.' : [...settled].map(([k, n]) => `- ${k}: ${n}`).join('\n'),
    '',
    '## Convergence at the end',
    '',
    `${r.converged.count} of ${r.converged.of} converged.`,
    ...r.converged.not.map((e) => `- ${e.resource} (${e.family}, ${e.database}): ${e.why}`),
    '',
    '## Injected',
    '',
    `- manager SIGKILLs ${r.injected.managerKills}, managers that exited on their own (and were restarted) ${r.injected.managerSelfExits}`,
    `- API faults: 503 ${f.error}, reset connections ${f.reset}, added latency ${f.latency}, dropped watches ${f.watchDrop}`,
    `- Apply Pods deleted: grace 0 ${r.injected.podKills.graceZero}, graceful ${r.injected.podKills.graceful}`,
    `- revisions published ${r.injected.revisions}, approvals ${r.injected.approvals} (refused ${r.injected.approvalsRefused}), acknowledgments ${r.injected.acknowledgments}`,
    `- Jobs created: ${jobs}`,
    '',
    `Manager logs: ${r.logs}.`,
    '',
  ];
  return lines.join('\n');
}

export async function writeSoakReport(r: SoakReport, base: string): Promise<void> {
  await writeFile(`${base}.json`, `${JSON.stringify(r, null, 2)}\n`);
  await writeFile(`${base}.md`, soakMarkdown(r));
}
