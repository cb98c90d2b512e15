// A dispatched Apply whose outcome nobody can establish: it is recorded as an unresolved run and never run again,
// and the realm goes back only when nothing the claim dispatched can still write.
import type { V1Job } from '@kubernetes/client-node';
import type { UnresolvedOutcome } from '../../shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import type { MigrationPass } from './context.js';
import { applyMayStillRun, applyPodsOf, dispatchedBy } from '../evidence.js';
import { recordUnresolvedMigrationRun } from './unresolved.js';

/**
 * Whether anything the claim dispatched may still write: a Job under its name that is not terminal, a Pod of it
 * (by operation ID or by its Job's UID) that has not stopped, or a read that could not say.
 */
export async function dispatchedApplyMayStillWrite(pass: MigrationPass, claim: ActiveOperation): Promise<boolean> {
  try {
    const job = await pass.readJob(claim.jobName);
    return applyMayStillRun(job, await applyPodsOf(pass, claim.id, [claim.jobUID, job?.metadata?.uid]));
  } catch (err) {
    pass.deps.log.warn({ err, operationID: claim.id }, 'cannot tell whether the dispatched Apply may still write; assuming it may');
    return true;
  }
}

export interface UncertainApply {
  reason: string;
  message: string;
  /** Partial when the run reported it stopped partway; otherwise Unknown. */
  outcome?: UnresolvedOutcome;
  /** The database the run reported it opened, when it reported one. */
  reportedTargetIdentityDigest?: string;
  job?: V1Job;
  appliedVersions?: string[];
}

/**
 * A dispatched Apply whose outcome nobody can establish (the seed's finishUncertainMigrationApply): recorded as an
 * unresolved run, never run again. The Lease is handed back only when nothing the claim dispatched can still
 * write; otherwise it is left to expire after the executor stopped.
 */
export async function finishUncertainMigrationApply(pass: MigrationPass, uncertain: UncertainApply): Promise<void> {
  const claim = pass.claim;
  if (!claim) throw new Error('finishUncertainMigrationApply: there is no claim');
  const mayStillWrite = await dispatchedApplyMayStillWrite(pass, claim);
  // Only the Job the claim recorded speaks for the run (who dispatched it, whether it gets its cleanup TTL).
  const found = uncertain.job ?? (await pass.readJob(claim.jobName).catch(() => undefined));
  const job = claim.jobUID && found?.metadata?.uid === claim.jobUID ? found : undefined;
  const outcome = uncertain.outcome ?? 'Unknown';
  await recordUnresolvedMigrationRun(pass, {
    run: {
      outcome,
      operationID: claim.id,
      jobName: claim.jobName,
      ...(claim.jobUID ? { jobUID: claim.jobUID } : {}),
      ...(claim.planRef ? { planRef: claim.planRef } : {}),
      targetIdentityDigest: uncertain.reportedTargetIdentityDigest ?? claim.targetIdentityDigest,
      recordedAt: pass.nowIso(),
      ...dispatchedBy(job),
    },
    appliedVersions: uncertain.appliedVersions ?? [],
    message: `${uncertain.reason}: ${uncertain.message}`,
    mayStillWrite,
    job,
  });
  pass.event('Warning', 'MigrationRunUncertain', `operation ${claim.id} (Job ${claim.jobName}) ended ${outcome}: ${uncertain.message}. ` +
    'It is never run again; a History reading of the same database with nothing pending, or a PtahMigrationRunAcknowledgment naming the operation, settles it');
  if (mayStillWrite) {
    pass.event('Warning', 'TargetLockReleaseOwed', `Job ${claim.jobName} or its Pod may still be writing, so the realm Lease is left to expire (${claim.leaseDurationSeconds ?? '?'} s after its last renewal) instead of being released`);
  }
}
