// Reading what a terminal Job did and retiring its claim with the record it leaves. An Apply's account is the
// run report its frame carries (or its termination summary), never the Job's exit: Applied, Failed and UpToDate
// are accounted for and followed by a History reading; Partial, Unknown and anything unreadable become an
// unresolved run. A History reading becomes status.history, may settle an unresolved run, and publishes the plan.
import type { V1Job } from '@kubernetes/client-node';
import type { LastRunOutcome, MigrationHistoryStatus, PtahMigrationPlan, PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import { parseDuration } from '../../shared/api/duration.js';
import type { ActiveOperation, ObjectRef, RefusedReading } from '../../shared/api/shapes.js';
import { ADOPTION_REFUSED, isMigrationArtifactRefusal, type MigrationHistory, type MigrationRunOutcome } from '../../shared/executor-report.js';
import { RUNNER_ERROR, type RunnerResult, type RunnerSummary } from '../../shared/runner-protocol.js';
import type { RunnerOperation } from '../../shared/runner-env.js';
import { refusalMessage, refusedReadingOf } from '../refused-reading.js';
import { retryMigrationReading } from './claim.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { readOperationFrame, type FrameRead } from '../evidence.js';
import { terminationSummaryStandIn } from './evidence.js';
import { currentVersionOf, migrationPlanFor, migrationRepairPlanFor, publishMigrationPlan, PlanError, versionsText } from './plan.js';
import { repairText, type MigrationRepair } from '../../shared/migration-repair.js';
import { retireMigrationClaim } from './retire.js';
import type { Report } from './status.js';
import { dispatchedBy } from '../evidence.js';
import { finishUncertainMigrationApply } from './uncertain.js';
import { migrationUnresolvedRunSettledBy, unresolvedMessage } from './unresolved.js';

const MAX_MESSAGE = 1024;

type ResultRead<O extends RunnerOperation> = FrameRead<O> | { kind: 'summary'; summary: RunnerSummary };

/** The operation's result: its frame, or for an Apply whose log holds none, its runner's termination summary. */
async function readOperationResult<O extends RunnerOperation>(pass: MigrationPass, claim: ActiveOperation, job: V1Job, operation: O): Promise<ResultRead<O>> {
  const read = await readOperationFrame(pass, claim, job, operation);
  if (read.kind !== 'none' || !read.terminated) return read;
  const summary = terminationSummaryStandIn(pass, claim, read.terminated, read.log);
  return summary ? { kind: 'summary', summary } : read;
}

/** What an Apply run says it did, from its frame or its summary. */
interface RunAccount {
  /** The run itself proves the executor never started, so it opened no database (see executorNeverStarted). */
  executorNeverStarted: boolean;
  mutationStarted: boolean;
  uncertain: boolean;
  outcome?: MigrationRunOutcome;
  appliedVersions: string[];
  /** An applied repair sequence's repair. */
  repaired?: MigrationRepair;
  coordinationDigest?: string;
  targetIdentityDigest?: string;
  physicalIdentityDigest?: string;
  error?: string;
}

/**
 * Refusals the runner frames only before it starts the executor (RUNNER_ERROR's first group in
 * src/shared/runner-protocol.ts; runner_terminated and internal_error are framed on either side of the start, so
 * they are not here). A code added to the protocol later is not here either, and so proves nothing.
 */
const PRE_START_REFUSALS: ReadonlySet<string> = new Set([
  RUNNER_ERROR.protocolMismatch, RUNNER_ERROR.missingInput, RUNNER_ERROR.invalidInput, RUNNER_ERROR.invalidTarget,
  RUNNER_ERROR.coordinationBindingMismatch, RUNNER_ERROR.targetBindingMismatch, RUNNER_ERROR.dispatchDeadlineExpired,
  RUNNER_ERROR.executionDeadlineExpired, RUNNER_ERROR.invalidPlan, RUNNER_ERROR.planDigestMismatch, RUNNER_ERROR.invalidArtifact,
  RUNNER_ERROR.artifactDigestMismatch, RUNNER_ERROR.invalidMigrationSequence, RUNNER_ERROR.migrationSequenceDigestMismatch,
  RUNNER_ERROR.preparationFailed, RUNNER_ERROR.executorStartFailed,
]);

/**
 * Whether the run proves it never started the executor. Only the executor opens a database (the runner derives the
 * target identity from the URL without connecting), so such a run reached no database, and a realm or identity it
 * does not report (a refusal framed before it could read them) is no sign that it reached another. A frame says
 * so by childExitCode -1, which the protocol allows only without mutationStarted and without a run report. A
 * summary carries no exit code: it proves it only by a refusal code framed nowhere but before the start, with
 * neither mutationStarted nor a run report, so it never proves more than its frame would.
 */
function executorNeverStarted(report: RunnerResult<'migration-apply'> | RunnerSummary): boolean {
  if ('childExitCode' in report) return report.childExitCode === -1 && report.mutationStarted !== true && report.migrationRun === undefined;
  return report.errorCode !== undefined && PRE_START_REFUSALS.has(report.errorCode) && report.mutationStarted !== true && report.migration === undefined;
}

function accountOfFrame(result: RunnerResult<'migration-apply'>): RunAccount {
  return {
    executorNeverStarted: executorNeverStarted(result),
    mutationStarted: result.mutationStarted === true,
    uncertain: result.uncertain === true,
    outcome: result.migrationRun?.outcome,
    appliedVersions: result.migrationRun?.applied.map((file) => file.version) ?? [],
    ...(result.migrationRun?.repaired ? { repaired: result.migrationRun.repaired } : {}),
    coordinationDigest: result.coordinationDigest,
    targetIdentityDigest: result.targetIdentityDigest,
    physicalIdentityDigest: result.physicalIdentityDigest,
    error: result.error && `${result.error.code}: ${result.error.message}`,
  };
}

/** A summary names only the count and the first and last version: the plan's prefix, when it agrees with them. */
function accountOfSummary(summary: RunnerSummary, plan: PtahMigrationPlan | undefined): RunAccount {
  const run = summary.migration;
  const count = run?.appliedCount ?? 0;
  const prefix = plan?.spec.migrations.slice(0, count).map((m) => m.version) ?? [];
  const agrees = prefix.length === count && (count === 0 || (prefix[0] === run?.firstApplied && prefix[count - 1] === run?.lastApplied));
  return {
    executorNeverStarted: executorNeverStarted(summary),
    mutationStarted: summary.mutationStarted === true,
    uncertain: summary.uncertain === true,
    outcome: run?.outcome,
    appliedVersions: agrees ? prefix : [],
    // A repair sequence's only applied outcome is its repair (runner-protocol.ts).
    ...(run?.outcome === 'applied' && plan?.spec.repair ? { repaired: { version: plan.spec.repair.version, resolution: plan.spec.repair.resolution } } : {}),
    coordinationDigest: summary.coordinationDigest,
    targetIdentityDigest: summary.targetIdentityDigest,
    physicalIdentityDigest: summary.physicalIdentityDigest,
    error: summary.errorCode && `${summary.errorCode} (from the runner's termination summary)`,
  };
}

/**
 * Why the run's own report does not show it ran against the database and realm its claim was planned for, if it
 * does not: compared before the account is accepted. A report naming another is a mismatch; one naming none is
 * unconfirmed, because a run that omits them is no evidence it ran against the planned database, unless it proves
 * it never started the executor (executorNeverStarted).
 */
function reportedTargetProblem(account: RunAccount, claim: ActiveOperation): { reason: string; message: string } | undefined {
  const reported: [string, string | undefined, string | undefined][] = [
    ['database', account.targetIdentityDigest, claim.targetIdentityDigest],
    ['realm', account.coordinationDigest, claim.coordinationDigest],
    // Compared only for a claim whose reading recorded one (a claim made before the census knew none).
    ...(claim.physicalIdentityDigest ? [['physical database', account.physicalIdentityDigest, claim.physicalIdentityDigest] as [string, string | undefined, string | undefined]] : []),
  ];
  for (const [what, digest, planned] of reported) {
    if (digest === undefined) {
      if (account.executorNeverStarted) continue;
      return { reason: 'TargetUnconfirmed', message: `the run does not report which ${what} it opened, so it is not known to have run against the one its plan was computed for` };
    }
    if (digest !== planned) return { reason: 'TargetMismatch', message: `the run reports another ${what} than the one its plan was computed for` };
  }
  return undefined;
}

/** Accounted outcomes; undefined when the run is one nobody can account for. */
function accountedOutcome(account: RunAccount): Exclude<LastRunOutcome, 'Partial' | 'Unknown'> | undefined {
  if (account.uncertain) return undefined;
  if (!account.mutationStarted) return account.outcome === 'up-to-date' ? 'UpToDate' : 'Failed';
  return account.outcome === 'applied' ? 'Applied' : undefined;
}

/** Harvests a terminal Apply Job whose claim's inputs still hold. */
export async function harvestMigrationApply(pass: MigrationPass, claim: ActiveOperation, job: V1Job, plan: PtahMigrationPlan | undefined): Promise<PassEnd> {
  const read = await readOperationResult(pass, claim, job, 'migration-apply');
  if (read.kind === 'wait') return endPass(read.why, read.ms);
  if (read.kind === 'none') {
    await finishUncertainMigrationApply(pass, { reason: 'NoResult', message: read.why, job });
    return endPass('Apply without a result recorded unresolved');
  }
  const account = read.kind === 'frame' ? accountOfFrame(read.result) : accountOfSummary(read.summary, plan);
  const uncertain = (reason: string, message: string, outcome: 'Partial' | 'Unknown' = 'Unknown') =>
    finishUncertainMigrationApply(pass, { reason, message, outcome, job, reportedTargetIdentityDigest: account.targetIdentityDigest, appliedVersions: account.appliedVersions });

  if (claim.leaseContinuityLost) {
    await uncertain('LeaseContinuityLost', 'the realm Lease changed hands while the run was dispatched, so its result cannot be trusted');
    return endPass('Apply under a lost Lease recorded unresolved');
  }
  const target = reportedTargetProblem(account, claim);
  if (target) {
    await uncertain(target.reason, target.message);
    return endPass(`Apply recorded unresolved (${target.reason})`);
  }
  const outcome = accountedOutcome(account);
  if (!outcome) {
    await uncertain(account.outcome === 'partial' ? 'ApplyPartial' : 'ApplyOutcomeUnknown', account.error ?? 'the run could not establish what it changed', account.outcome === 'partial' ? 'Partial' : 'Unknown');
    return endPass('Apply recorded unresolved');
  }
  const finishedAt = pass.nowIso();
  const repaired = outcome === 'Applied' ? account.repaired : undefined;
  const approvedBy = claim.approvalRef ? ` under approval ${claim.approvalRef.name}` : '';
  const message = outcome === 'Failed' ? (account.error ?? 'the run changed nothing')
    : repaired ? `${outcome}: the repair ${repairText(repaired)}${approvedBy}, recorded in ptah_migrations.repairs`
      : `${outcome}: ${account.appliedVersions.length} migration(s) applied`;
  const done = repaired ? repairText(repaired) : outcome === 'Applied' ? `applied ${versionsText(account.appliedVersions)}` : 'found nothing to apply';
  const report: Report = outcome === 'Failed'
    ? { phase: 'Failed', reason: 'ApplyFailed', message: `operation ${claim.id} changed nothing: ${message}` }
    : { phase: 'VerifyingHistory', reason: 'VerifyingHistory', message: `operation ${claim.id} ${done}${approvedBy}; reading the history back` };
  await retireMigrationClaim(pass, {
    disposition: 'accounted',
    why: outcome,
    job,
    record: (status) => {
      status.lastRun = {
        outcome,
        operationID: claim.id,
        jobName: claim.jobName,
        ...(claim.jobUID ? { jobUID: claim.jobUID } : {}),
        startedAt: claim.startedAt,
        finishedAt,
        appliedVersions: account.appliedVersions,
        message: message.slice(0, MAX_MESSAGE),
        ...dispatchedBy(job),
      };
      // The plan is spent; a History reading confirms what the run reported (VerifyingHistory).
      status.plan = undefined;
      status.nextReconciliationTime = finishedAt;
    },
    report,
  });
  pass.event(outcome === 'Failed' ? 'Warning' : 'Normal', 'MigrationRunFinished', `operation ${claim.id} (Job ${claim.jobName}) ended ${outcome}: ${message}`);
  return endPass(`Apply ${outcome}`);
}

/** Why a history cannot be continued by this artifact, if it cannot. */
function historyBlock(history: MigrationHistory): { reason: string; message: string } | undefined {
  const list = (versions: string[]) => versions.slice(0, 10).join(', ') + (versions.length > 10 ? ', …' : '');
  if (history.dirty.length > 0) {
    return { reason: 'HistoryDirty', message: `migration ${list(history.dirty)} started without finishing; mend the database, then say what it holds ` +
      'with kubectl ptah repair (spec.repair), whose plan needs an approval (docs/executor.md, "Recovering a dirty row")' };
  }
  if (history.modified.length > 0) return { reason: 'HistoryModified', message: `applied migration ${list(history.modified)} no longer has the checksum it was applied with; restore the original file` };
  if (history.missing.length > 0) return { reason: 'HistoryAhead', message: `applied migration ${list(history.missing)} is not in the artifact; the database is ahead of it` };
  if (history.outOfOrder.length > 0) return { reason: 'HistoryOutOfOrder', message: `pending migration ${list(history.outOfOrder)} sorts before the highest applied version` };
  return undefined;
}

function historyStatusOf(history: MigrationHistory, targetIdentityDigest: string, physicalIdentityDigest: string | undefined, observedAt: string): MigrationHistoryStatus {
  return {
    observedAt,
    currentVersion: currentVersionOf(history),
    appliedCount: history.applied.length,
    pendingCount: history.pending.length,
    fingerprint: history.fingerprint,
    targetIdentityDigest,
    ...(physicalIdentityDigest ? { physicalIdentityDigest } : {}),
    dirty: history.dirty.length > 0,
    modifiedVersions: history.modified.slice(0, 256),
    outOfOrderVersions: history.outOfOrder.slice(0, 256),
    ...(history.adoptable ? { adoptable: adoptedSummary(history.adoptable) } : {}),
  };
}

function adoptedSummary({ from, files }: NonNullable<MigrationHistory['adoptable']>): NonNullable<MigrationHistoryStatus['adoptable']> {
  return { from, count: files.length, firstVersion: files[0]!.version, lastVersion: files[files.length - 1]!.version };
}

/** What the reading counts as applied besides the history, for a message: "; 240 file(s) (1 … 240) count as applied by goose, …". */
function adoptionText(pass: MigrationPass, history: MigrationHistoryStatus): string {
  const adopted = history.adoptable;
  if (adopted) {
    return `; ${adopted.count} file(s) (${adopted.firstVersion} … ${adopted.lastVersion}) count as applied by ${adopted.from === 'baseline' ? 'the baseline' : adopted.from}, ` +
      'recorded by the first approved Apply, never run';
  }
  return pass.m.spec.adoption && history.appliedCount > 0 ? '; spec.adoption is not read: the history already records migrations' : '';
}

/** A repair spec.repair asks for that this reading does not plan, for a message: "; spec.repair is not read: …". */
function repairNote(pass: MigrationPass, history: MigrationHistory): string {
  const repair = pass.m.spec.repair;
  if (!repair) return '';
  const dirty = history.dirty.length === 0 ? 'no history row is dirty' : `the dirty row is ${history.dirty.join(', ')}`;
  return `; spec.repair (migration ${repair.version}) is not read: ${dirty}${history.dirty.length === 0 ? '; remove it' : ''}`;
}

/** The dirty row spec.repair names, when it is the history's only dirty row. */
function rowToRepair(pass: MigrationPass, history: MigrationHistory): MigrationHistory['applied'][number] | undefined {
  const repair = pass.m.spec.repair;
  if (!repair || history.dirty.length !== 1 || BigInt(history.dirty[0]!) !== BigInt(repair.version)) return undefined;
  return history.applied.find((row) => row.version === history.dirty[0]);
}

/** Publishes the plan and reports it; a plan that cannot be made is Blocked with why. */
async function publishPlan(pass: MigrationPass, planFor: () => PtahMigrationPlan, message: (ref: ObjectRef, plan: PtahMigrationPlan) => string): Promise<{ planRef?: ObjectRef; report: Report }> {
  try {
    const plan = planFor();
    const planRef = await publishMigrationPlan(pass, plan);
    const report: Report = { phase: 'Planning', reason: 'PlanPublished', message: message(planRef, plan) };
    if (pass.status.plan?.uid !== planRef.uid) pass.event('Normal', 'PlanPublished', report.message);
    return { planRef, report };
  } catch (e) {
    if (!(e instanceof PlanError)) throw e;
    return { report: { phase: 'Blocked', reason: 'PlanRefused', message: e.message } };
  }
}

/** Harvests a terminal History Job whose claim's inputs still hold. */
export async function harvestMigrationHistory(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  const read = await readOperationResult(pass, claim, job, 'migration-history');
  if (read.kind === 'wait') return endPass(read.why, read.ms);
  if (read.kind !== 'frame') return retryMigrationReading(pass, read.kind === 'none' ? read.why : 'the reading left no frame');
  const { result } = read;
  if (result.error && isMigrationArtifactRefusal(result.error.code)) return recordRefusedReading(pass, claim, job, result.error, REFUSED_ARTIFACT);
  if (result.error?.code === ADOPTION_REFUSED) return recordRefusedReading(pass, claim, job, result.error, REFUSED_ADOPTION);
  if (result.error || !result.migrationHistory || !result.targetIdentityDigest) {
    const why = result.error ? `${result.error.code}: ${result.error.message}` : 'the frame carries no history';
    pass.event('Warning', 'HistoryReadFailed', `History attempt ${claim.attempt} failed: ${why}`);
    return retryMigrationReading(pass, `the history could not be read: ${why}`);
  }
  if (result.coordinationDigest !== pass.realm()) return retryMigrationReading(pass, 'the reading reports another realm than this resource\'s');

  const history = result.migrationHistory;
  const observedAt = pass.nowIso();
  const reading = { targetIdentityDigest: result.targetIdentityDigest, history };
  const historyStatus = historyStatusOf(history, result.targetIdentityDigest, result.physicalIdentityDigest, observedAt);
  const unresolved = pass.status.unresolvedRun;
  const settles = unresolved !== undefined && migrationUnresolvedRunSettledBy(unresolved, reading);
  const block = historyBlock(history);

  let planRef: PtahMigrationStatus['plan'];
  let report: Report;
  const repairRow = rowToRepair(pass, history);
  if (unresolved && !settles) {
    report = { phase: 'Blocked', reason: 'ApplyOutcomeUnknown', message: unresolvedMessage(unresolved) };
  } else if (repairRow) {
    ({ planRef, report } = await publishPlan(pass, () => migrationRepairPlanFor(pass, historyStatus, repairRow, pass.m.spec.repair!),
      (ref) => `repair plan ${ref.name} ${repairText(pass.m.spec.repair!)}; it runs only once a PtahMigrationApproval names it, whatever spec.policy.apply says`));
  } else if (block) {
    report = { phase: 'Blocked', ...block, message: block.message + repairNote(pass, history) };
  } else if (history.pending.length === 0) {
    report = { phase: 'InSync', reason: 'HistoryMatched', message: `every migration of the artifact is applied (current version ${historyStatus.currentVersion || 'none'})` +
      adoptionText(pass, historyStatus) + repairNote(pass, history) };
  } else {
    ({ planRef, report } = await publishPlan(pass, () => migrationPlanFor(pass, historyStatus, history.pending)!, (ref, plan) => {
      const planned = plan.spec.migrations.map((m) => m.version);
      const rest = history.pending.length - planned.length;
      return `plan ${ref.name} applies ${versionsText(planned)}` +
        (rest > 0 ? `, the first ${planned.length} of ${history.pending.length} pending; the other ${rest} are planned once these are applied` : '') +
        adoptionText(pass, historyStatus) + repairNote(pass, history);
    }));
  }
  await retireMigrationClaim(pass, {
    disposition: 'accounted',
    why: 'HistoryRead',
    job,
    record: (status) => {
      status.history = historyStatus;
      // The reading reflects this generation's spec: the claim's inputs, generation included, held to its end.
      status.observedGeneration = pass.generation;
      status.plan = planRef;
      status.nextReconciliationTime = new Date(Date.parse(observedAt) + parseDuration(pass.m.spec.interval)).toISOString();
      status.refusedReading = undefined;
      if (settles) {
        status.unresolvedRun = undefined;
        status.resolvedRun = { operationID: unresolved!.operationID, outcome: unresolved!.outcome, resolution: 'ResolvedByHistoryRead', resolvedAt: observedAt };
      }
    },
    report,
  });
  if (settles) {
    pass.event('Normal', 'UnresolvedRunResolved', `a History reading of the same database finds nothing pending; unresolved operation ${unresolved!.operationID} is settled`);
  }
  return endPass('history read');
}

/** How a refused reading is reported, and when it is read again. */
interface RefusedKind {
  reason: 'ArtifactRefused' | 'AdoptionRefused';
  /** Whether it is read again at spec.interval, or only once the artifact, the spec or the binding changes. */
  readAgainAtInterval: boolean;
  event: (refused: RefusedReading, pass: MigrationPass) => string;
}

/**
 * The artifact's own files as this spec reads them (their names, markers, directives): the same artifact, spec and
 * executor get the same answer, so nothing is read again until one of them changes, where retrying would only run
 * the same Job again.
 */
const REFUSED_ARTIFACT: RefusedKind = {
  reason: 'ArtifactRefused',
  readAgainAtInterval: false,
  event: (refused) => `refused artifact ${refused.artifactDigest}; it is not read again until the artifact or the spec changes: ${refused.message}`,
};

/** The other tool's history the adoption reads: a person mends it in the database, so it is read again at spec.interval. */
const REFUSED_ADOPTION: RefusedKind = {
  reason: 'AdoptionRefused',
  readAgainAtInterval: true,
  event: (refused, pass) => `refused the adoption (spec.adoption); it is read again in ${pass.m.spec.interval} or when the artifact or the spec changes: ${refused.message}`,
};

/** Records the reading's refusal and reports it Blocked (reconcileIdleMigration holds it until it is read again). */
async function recordRefusedReading(pass: MigrationPass, claim: ActiveOperation, job: V1Job, refusal: { code: string; message: string }, kind: RefusedKind): Promise<PassEnd> {
  const refused = refusedReadingOf(pass, claim, refusal);
  if (!refused) return retryMigrationReading(pass, `the reading was refused, but it pins no artifact: ${refusal.message}`);
  await retireMigrationClaim(pass, {
    disposition: 'accounted',
    why: kind.reason,
    job,
    record: (status) => {
      status.refusedReading = refused;
      if (kind.readAgainAtInterval) status.nextReconciliationTime = new Date(pass.now().getTime() + parseDuration(pass.m.spec.interval)).toISOString();
    },
    report: { phase: 'Blocked', reason: kind.reason, message: refusalMessage(refused) },
  });
  pass.event('Warning', kind.reason, `History attempt ${claim.attempt} ${kind.event(refused, pass)}`);
  return endPass(`${kind.reason} by the reading`);
}
