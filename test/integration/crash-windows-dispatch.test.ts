// The seed's crash-window rows around the one create, each proved by killing a real manager process right after
// the row's first write is stored, then asking a new manager (the real src/main.ts) what it makes of it; each is
// also run against a manager with a deliberately wrong dispatch order, where the same verdict must find a problem.
import t from 'tap';
import type { PtahMigrationApproval } from '../../src/shared/api/migration-kinds.js';
import {
  applyClaim, appliedOnce, applyJobs, historyOf, outcomeOf, settled, statusWrite, writeTo, testRows, type CrashRow,
} from './crash-world.js';

type Approval = Pick<PtahMigrationApproval, 'status'>;
const consumed = (a: Approval | undefined): boolean => a?.status?.conditions?.some((c) => c.type === 'Consumed' && c.status === 'True') ?? false;

/**
 * approval Consumed → dispatchStarted: "an approval spent with nothing marked. The same claim dispatches on the
 * next pass under the approval it spent".
 */
const CONSUME_THEN_MARK: CrashRow = {
  armAt: 'approval',
  trigger: writeTo('the approval\'s Consumed condition', 'PUT', /\/ptahmigrationapprovals\/[^/]+\/status$/, (body) => consumed(body as Approval)),
  async verdict(run) {
    const claim = run.claim;
    if (!claim?.approvalRef) return ['no approved Apply claim stood at the kill'];
    const problems: string[] = [];
    if (claim.dispatchStarted) problems.push('the claim was marked at the kill');
    problems.push(...(await appliedOnce(run, claim)));
    const approval = await run.cw.w.admin.get<PtahMigrationApproval>(run.cw.w.ref('PtahMigrationApproval', claim.approvalRef.name));
    if (!consumed(approval) || approval.status?.consumedBy?.operationID !== claim.id) problems.push(`the approval is spent by ${approval.status?.consumedBy?.operationID}, not the claim that dispatched`);
    return problems;
  },
};

/** dispatchStarted → create: "the next pass adopts the Job it finds, or declares the outcome unknown; it never creates again". */
const MARK_THEN_CREATE: CrashRow = {
  armAt: 'approval',
  trigger: statusWrite('the dispatch marker', (s) => applyClaim(s)?.dispatchStarted === true && !applyClaim(s)?.jobUID),
  async verdict(run) {
    const claim = run.claim;
    if (!claim) return ['no Apply claim stood at the kill'];
    const problems: string[] = [];
    if (claim.dispatchStarted !== true || claim.jobUID) problems.push('at the kill the claim was not marked without a Job UID');
    if (run.jobAtKill) problems.push(`a Job stood under the reserved name ${claim.jobName} at the kill`);
    const outcome = outcomeOf(await settled(run, claim.id), claim.id);
    if (outcome !== 'Unknown') problems.push(`the new manager recorded ${outcome}, not Unknown`);
    const { seen, creates } = applyJobs(run, claim.jobName);
    if (seen.length > 0 || creates > 0) problems.push(`${seen.length} Apply Jobs were seen and ${creates} creates stored, not zero`);
    const applied = await historyOf(run, claim.id);
    if (applied.length > 0) problems.push(`the database recorded ${applied.length} migrations under the claim`);
    return problems;
  },
};

/** create → jobUID: "the next pass finds the Job under the reserved name and adopts its UID once jobclaim.Match holds it". */
const CREATE_THEN_RECORD: CrashRow = {
  armAt: 'approval',
  trigger: writeTo('the Apply Job\'s create', 'POST', /\/namespaces\/[^/]+\/jobs$/,
    (body) => (body as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels?.['operator.ptah.run/operation'] === 'apply'),
  async verdict(run) {
    const claim = run.claim;
    if (!claim) return ['no Apply claim stood at the kill'];
    const problems: string[] = [];
    if (!run.jobAtKill?.metadata?.uid) problems.push('no Job stood under the reserved name at the kill');
    if (claim.jobUID) problems.push('the claim already named the Job UID at the kill');
    if (claim.dispatchStarted !== true) problems.push('the claim was not marked at the kill: the Job is not covered by the marker');
    problems.push(...(await appliedOnce(run, claim)));
    const adopted = (await settled(run, claim.id)).status?.lastRun?.jobUID;
    if (adopted !== run.jobAtKill?.metadata?.uid) problems.push(`the run records Job UID ${adopted}, not the UID of the Job created before the kill`);
    return problems;
  },
};

/** jobUID → Event: "covered by the marker above": the Job recorded before the kill is the one the run is settled from. */
const RECORD_THEN_EVENT: CrashRow = {
  armAt: 'approval',
  trigger: statusWrite('the Job UID', (s) => applyClaim(s)?.jobUID !== undefined),
  async verdict(run) {
    const claim = run.claim;
    if (!claim?.jobUID) return ['no Apply claim with a Job UID stood at the kill'];
    const problems = await appliedOnce(run, claim);
    const settledUid = (await settled(run, claim.id)).status?.lastRun?.jobUID;
    if (settledUid !== claim.jobUID) problems.push(`the run records Job UID ${settledUid}, not the one recorded before the kill (${claim.jobUID})`);
    return problems;
  },
};

testRows(t, [
  {
    title: 'approval Consumed → dispatchStarted: killed after the approval is spent, the same claim dispatches under it', row: CONSUME_THEN_MARK,
    wrongOrder: { swap: ['consume', 'mark'], against: 'marks before it spends the approval', caught: 'not Applied' },
  },
  {
    title: 'dispatchStarted → create: killed after the marker, the new manager records Unknown and no Job is ever created', row: MARK_THEN_CREATE,
    wrongOrder: { swap: ['mark', 'create'], against: 'creates before it marks', caught: 'not Unknown' },
  },
  {
    title: 'create → jobUID: killed after the create, the new manager adopts the Job it finds and applies once', row: CREATE_THEN_RECORD,
    // The next pass adopts a Job under the reserved name whether or not the claim was marked, so a wrong order is
    // seen in what the API server holds at the kill, not in the recovery.
    wrongOrder: { swap: ['mark', 'create'], against: 'creates before it marks', caught: 'not covered by the marker' },
  },
  { title: 'jobUID → Event: killed after the Job UID is recorded, the new manager settles the run from that Job', row: RECORD_THEN_EVENT },
]);
