// A run nobody accounted for (Partial or Unknown) is durable and independent of phase and conditions: it lives in
// status.unresolvedRun, written by one function, and in the operator.ptah.run/unresolved-run annotation, a copy
// that a restore dropping status would keep. The copy is written before the status write that stores the record
// and removed after the status write that settles it; status.resolvedRun names the attempt that was settled, so
// a copy left by an interrupted removal is told apart from one a restore brought back.
import type { V1Job } from '@kubernetes/client-node';
import { UNRESOLVED_OUTCOMES, type PtahMigrationStatus, type UnresolvedRun } from '../../shared/api/migration-kinds.js';
import { ANNOTATIONS } from '../../shared/api/names.js';
import { canonicalJson, isDigest } from '../../shared/canonical.js';
import type { MigrationHistory } from '../../shared/executor-report.js';
import { migrationOperation } from '../../shared/lifecycle/operations.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { retireMigrationClaim } from './retire.js';
import { patchAnnotation, writeMigrationStatus } from './status.js';

const MAX_MESSAGE = 1024;

export interface UnresolvedRecord {
  run: UnresolvedRun;
  appliedVersions: string[];
  message: string;
  mayStillWrite: boolean;
  job?: V1Job;
}

/**
 * The one writer of status.unresolvedRun: the annotation copy first, then the claim's retirement, whose single
 * status patch swaps the claim for the record (and the last run), so a crash on either side leaves either a
 * live claim or a retained record.
 */
export async function recordUnresolvedMigrationRun(pass: MigrationPass, record: UnresolvedRecord): Promise<void> {
  const claim = pass.claim;
  if (!claim || claim.id !== record.run.operationID) throw new Error('recordUnresolvedMigrationRun: the run is not the claim in flight');
  if (pass.status.unresolvedRun && pass.status.unresolvedRun.operationID !== record.run.operationID) {
    throw new Error(`recordUnresolvedMigrationRun: run ${pass.status.unresolvedRun.operationID} is still unresolved; no Apply may have been claimed beside it`);
  }
  await patchAnnotation(pass, ANNOTATIONS.unresolvedRun, canonicalJson(record.run));
  const { run } = record;
  await retireMigrationClaim(pass, {
    disposition: 'unaccounted',
    why: run.outcome,
    mayStillWrite: record.mayStillWrite,
    job: record.job,
    record: (status) => {
      status.unresolvedRun = run;
      status.lastRun = {
        outcome: run.outcome,
        operationID: run.operationID,
        jobName: claim.jobName,
        ...(claim.jobUID ? { jobUID: claim.jobUID } : {}),
        startedAt: claim.startedAt,
        finishedAt: run.recordedAt,
        appliedVersions: record.appliedVersions,
        message: record.message.slice(0, MAX_MESSAGE),
        ...(run.dispatchedBy ? { dispatchedBy: run.dispatchedBy } : {}),
      };
      // Nothing is planned while the record stands; a fresh reading may settle it.
      status.plan = undefined;
      status.nextReconciliationTime = run.recordedAt;
    },
    report: { phase: 'Blocked', reason: 'ApplyOutcomeUnknown', message: unresolvedMessage(run) },
  });
}

export function unresolvedMessage(run: UnresolvedRun): string {
  return `Apply operation ${run.operationID} ended ${run.outcome}: what it changed is not established. Nothing is planned or run until a History ` +
    `reading of the same database finds nothing pending, or a PtahMigrationRunAcknowledgment names operation ${run.operationID}`;
}

/** The copy, read back; undefined when absent, 'malformed' when it is not a record. */
function readCopy(pass: MigrationPass): UnresolvedRun | 'malformed' | undefined {
  const text = pass.m.metadata.annotations?.[ANNOTATIONS.unresolvedRun];
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as UnresolvedRun;
    const ok = typeof value === 'object' && value !== null && (UNRESOLVED_OUTCOMES as readonly string[]).includes(value.outcome) &&
      isDigest(value.operationID) && typeof value.recordedAt === 'string';
    return ok ? value : 'malformed';
  } catch {
    return 'malformed';
  }
}

/**
 * Keeps the copy and the record in step, before anything else reads either. Returns the end of the pass when it
 * wrote; undefined when they agree.
 */
export async function reconcileUnresolvedRunCopy(pass: MigrationPass): Promise<PassEnd | undefined> {
  const recorded = pass.status.unresolvedRun;
  const copy = readCopy(pass);
  if (recorded) {
    if (copy !== 'malformed' && copy !== undefined && canonicalJson(copy) === canonicalJson(recorded)) return undefined;
    await patchAnnotation(pass, ANNOTATIONS.unresolvedRun, canonicalJson(recorded));
    return endPass('unresolved-run copy written');
  }
  if (copy === undefined) return undefined;
  if (copy === 'malformed') {
    pass.event('Warning', 'UnresolvedRunCopyMalformed', `the ${ANNOTATIONS.unresolvedRun} annotation does not hold an unresolved run; it is left for a person to inspect`);
    return undefined;
  }
  const claim = pass.claim;
  if (pass.status.resolvedRun?.operationID === copy.operationID || claim?.id === copy.operationID) {
    // Left by an interrupted removal, or written ahead of a record the claim in flight has not stored yet (the
    // claim itself is the durable account of that run until then; its retirement writes the copy again).
    await patchAnnotation(pass, ANNOTATIONS.unresolvedRun, null);
    return endPass('stale unresolved-run copy removed');
  }
  if (claim && !migrationOperation(claim.type).readOnly) return undefined;
  // Status came back without the record (a restore that dropped status): put it back.
  const restored: PtahMigrationStatus = { ...pass.status, unresolvedRun: copy, plan: undefined, nextReconciliationTime: pass.nowIso() };
  await writeMigrationStatus(pass, restored, { phase: 'Blocked', reason: 'ApplyOutcomeUnknown', message: unresolvedMessage(copy) });
  pass.event('Warning', 'UnresolvedRunRestored', `status.unresolvedRun was missing; it was restored from the ${ANNOTATIONS.unresolvedRun} annotation (operation ${copy.operationID})`);
  return endPass('unresolved run restored from its copy');
}

/** A History reading, as far as settling a record goes. */
export interface HistoryReading {
  targetIdentityDigest: string;
  history: MigrationHistory;
}

/**
 * Whether a History reading settles the unresolved run on its own: it reached the same database the run was
 * recorded against and finds nothing pending, dirty, modified, out of order or missing.
 */
export function migrationUnresolvedRunSettledBy(run: UnresolvedRun, reading: HistoryReading): boolean {
  const { history } = reading;
  return run.targetIdentityDigest !== undefined && run.targetIdentityDigest === reading.targetIdentityDigest &&
    history.pending.length === 0 && history.dirty.length === 0 && history.modified.length === 0 &&
    history.outOfOrder.length === 0 && history.missing.length === 0;
}
