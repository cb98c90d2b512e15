// Reading what a terminal schema Job did and retiring its claim with the record it leaves. An Apply's account is
// its frame, never the Job's exit, and every Apply leaves the proof it owes; an Observe records what it saw
// (categories and counts only); a Plan publishes its plan. A reading that carries out a proof is held to the
// pending snapshot: only a matching fresh Plan settles the proof, in the one write that also stages its release.
import type { V1Job } from '@kubernetes/client-node';
import { parseDuration } from '../../shared/api/duration.js';
import type { PendingObservation, PtahSchemaStatus, SchemaTargetStatus } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { ApiError } from '../../shared/kube-client.js';
import { isSchemaReadingRefusal } from '../../shared/executor-report.js';
import type { RunnerResult } from '../../shared/runner-protocol.js';
import { readOperationFrame } from '../evidence.js';
import { refusalMessage, refusedReadingOf } from '../refused-reading.js';
import { markSchemaPlanApprovalsStale } from './approval.js';
import { retrySchemaReading } from './claim.js';
import { endPass, servesProof, type PassEnd, type SchemaPass } from './context.js';
import { currentPlanStatus, PlanError, publishSchemaPlan } from './plan.js';
import { finishUncertainSchemaApply, recordApplyAccount } from './proof.js';
import { planPolicyReport } from './policy.js';
import { retireSchemaClaim } from './retire.js';
import { isDeleting } from './unreadable.js';

const MAX_MESSAGE = 1024;

/** A 4xx other than a conflict or a throttle: the request itself was refused. */
const refusedOutright = (e: ApiError): boolean => e.code !== undefined && e.code >= 400 && e.code < 500 && e.code !== 409 && e.code !== 429;

const errorOf = (result: { error?: { code: string; message: string } }): string | undefined => result.error && `${result.error.code}: ${result.error.message}`.slice(0, MAX_MESSAGE);

function nextReading(pass: SchemaPass, from: string): string {
  return new Date(Date.parse(from) + parseDuration(pass.s.spec.interval)).toISOString();
}

/**
 * An ordinary reading refused what it was given in a way no quick retry mends (SCHEMA_READING_REFUSALS). A proof's
 * reading is retried as ever: the proof must finish, or a person ends it.
 */
function refusedForGood(pass: SchemaPass, claim: ActiveOperation, result: RunnerResult): result is RunnerResult & { error: { code: string; message: string } } {
  return result.error !== undefined && isSchemaReadingRefusal(result.error.code) && !servesProof(pass, claim);
}

/**
 * Records the refusal and reports Blocked; the database is read again at spec.interval (a person may add the role or
 * extension a desired schema lacks, or drop an unsupported object), or at once when the artifact, the spec or the
 * binding changes, instead of a scratch database built every retry interval.
 */
async function recordRefusedReading(pass: SchemaPass, claim: ActiveOperation, job: V1Job, refusal: { code: string; message: string }): Promise<PassEnd> {
  const refused = refusedReadingOf(pass, claim, refusal);
  if (!refused) return retrySchemaReading(pass, `the reading was refused, but it pins no artifact: ${refusal.message}`);
  const next = nextReading(pass, refused.refusedAt);
  await retireSchemaClaim(pass, {
    disposition: 'accounted',
    why: 'ReadingRefused',
    job,
    record: (status) => {
      status.refusedReading = refused;
      status.nextReconciliationTime = next;
    },
    report: { phase: 'Blocked', reason: 'ReadingRefused', message: refusalMessage(refused) },
  });
  pass.event('Warning', 'ReadingRefused', `${claim.type} attempt ${claim.attempt} was refused (${refused.code}); the database is read again at ${next}, or when the desired schema or the spec changes`);
  return endPass('reading refused');
}

/** Harvests a terminal Apply Job whose claim's inputs still hold: every outcome leaves the proof it owes. */
export async function harvestSchemaApply(pass: SchemaPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  const read = await readOperationFrame(pass, claim, job, 'apply');
  if (read.kind === 'wait') return endPass(read.why, read.ms);
  if (read.kind === 'none') {
    await finishUncertainSchemaApply(pass, { reason: 'NoResult', message: read.why, job });
    return endPass('Apply without a result: proof owed, outcome unknown');
  }
  const result = read.result;
  const uncertain = async (reason: string, message: string) => {
    await finishUncertainSchemaApply(pass, { reason, message, job });
    return endPass(`Apply outcome unknown (${reason})`);
  };
  if (claim.leaseContinuityLost) return uncertain('LeaseContinuityLost', 'the realm Lease changed hands while the run was dispatched, so its result cannot be trusted');
  // A run that never started the executor opened no database: what it does not report is no sign it reached another.
  const neverStarted = result.childExitCode === -1 && result.mutationStarted !== true;
  if (!neverStarted && result.coordinationDigest !== claim.coordinationDigest) return uncertain('TargetMismatch', 'the run does not report the realm its plan was computed for');
  if (!neverStarted && result.targetIdentityDigest !== claim.targetIdentityDigest) return uncertain('TargetMismatch', 'the run does not report the database its plan was computed for');
  if (!neverStarted && claim.physicalIdentityDigest && result.physicalIdentityDigest !== claim.physicalIdentityDigest) {
    return uncertain('TargetMismatch', 'the run does not report the physical database its plan was computed for');
  }
  const error = errorOf(result);
  if (result.mutationStarted !== true && error) {
    // The run reports it changed nothing: accounted for, and still proven by a fresh reading before anything else.
    await recordApplyAccount(pass, { outcome: 'ApplyRefused', job, waitForWindow: false }, 'ApplyRefused', `Apply ${claim.id} changed nothing: ${error}`);
    pass.event('Warning', 'ApplyRefused', `operation ${claim.id} (Job ${claim.jobName}) changed nothing: ${error}`);
    return endPass('Apply refused: proof owed');
  }
  if (result.mutationStarted === true && result.uncertain !== true && !error && result.planContentDigest === pass.status.plan?.contentDigest) {
    await recordApplyAccount(pass, { outcome: 'ApplySucceeded', job, waitForWindow: false }, 'ApplySucceeded',
      `Apply ${claim.id} ran ${result.statementsExecuted ?? '?'} statement(s) of plan ${claim.planRef?.name}`);
    pass.event('Normal', 'ApplySucceeded', `operation ${claim.id} (Job ${claim.jobName}) applied plan ${claim.planRef?.name}; proving convergence`);
    return endPass('Apply succeeded: proof owed');
  }
  return uncertain('ApplyOutcomeUnknown', error ?? 'the run could not establish what it changed');
}

/**
 * Whether a proof reading reached another database than the Apply ran against: another URL's database, or the same
 * URL leading to another physical one (a database dropped and created again, a restore, a failover to a copy).
 */
function anotherDatabase(pending: PendingObservation, result: RunnerResult<'observe'> | RunnerResult<'plan'>): string | undefined {
  if (result.targetIdentityDigest !== pending.targetIdentityDigest) return 'another database';
  if (pending.physicalIdentityDigest && result.physicalIdentityDigest !== pending.physicalIdentityDigest) return 'another physical database under the same URL';
  return undefined;
}

/** What an observation saw, for status (categories and counts only). */
function targetStatusOf(result: RunnerResult<'observe'>, observedAt: string): SchemaTargetStatus {
  return {
    coordinationDigest: result.coordinationDigest!,
    ...(result.targetIdentityDigest ? { identityDigest: result.targetIdentityDigest } : {}),
    ...(result.physicalIdentityDigest ? { physicalIdentityDigest: result.physicalIdentityDigest } : {}),
    drift: result.drift === true,
    ...(result.driftDigest ? { driftDigest: result.driftDigest } : {}),
    driftFindings: (result.findings ?? []).slice(0, 64),
    lastObservedAt: observedAt,
  };
}

/** Harvests a terminal Observe Job: an ordinary one records what it saw; a proof's asks for the Plan that settles it. */
export async function harvestSchemaObserve(pass: SchemaPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  const read = await readOperationFrame(pass, claim, job, 'observe');
  if (read.kind === 'wait') return endPass(read.why, read.ms);
  if (read.kind !== 'frame') return retrySchemaReading(pass, read.why);
  const { result } = read;
  if (refusedForGood(pass, claim, result)) return recordRefusedReading(pass, claim, job, result.error);
  const error = errorOf(result);
  if (error || !result.targetIdentityDigest) return retrySchemaReading(pass, `the observation failed: ${error ?? 'it reports no database'}`);
  const proving = servesProof(pass, claim);
  const pending = pass.status.pendingObservation;
  const expectedRealm = proving ? pending!.coordinationDigest : pass.realm();
  if (result.coordinationDigest !== expectedRealm) return retrySchemaReading(pass, 'the observation reports another realm than the claim\'s');
  const elsewhere = proving ? anotherDatabase(pending!, result) : undefined;
  if (elsewhere) return retrySchemaReading(pass, `the observation reached ${elsewhere} than the Apply it proves`);
  const observedAt = pass.nowIso();
  const target = targetStatusOf(result, observedAt);
  const findings = target.driftFindings!.map((f) => `${f.category} ${f.count}`).join(', ');
  if (proving) {
    await retireSchemaClaim(pass, {
      disposition: 'accounted',
      why: 'ProofObserved',
      job,
      record: (status) => {
        status.target = target;
        status.plan = undefined;
        status.pendingObservation = { ...pending!, planRequired: true };
      },
      report: { phase: 'VerifyingConvergence', reason: 'Observed', message: `the database after Apply ${pending!.applyOperationID} was read${findings ? ` (drift: ${findings})` : ''}; planning against it settles the proof` },
    });
    return endPass('proof observed');
  }
  await retireSchemaClaim(pass, {
    disposition: 'accounted',
    why: 'Observed',
    job,
    record: (status) => {
      status.target = target;
      status.observedGeneration = pass.generation;
      status.nextReconciliationTime = nextReading(pass, observedAt);
      status.refusedReading = undefined;
    },
    report: target.drift
      ? { phase: 'Planning', reason: 'DriftDetected', message: `the database differs from the desired schema (${findings || 'changes'}); a plan is computed` }
      : { phase: 'InSync', reason: 'InSync', message: 'the database matches the desired schema' },
  });
  return endPass('observed');
}

/**
 * Harvests a terminal Plan Job. An ordinary Plan publishes its plan (or finds nothing to change). A proof's Plan
 * settles the proof when it read the database the Apply ran against: no changes proves convergence (with no Apply
 * attributed after an unknown outcome); changes account the Apply as not converged and publish a new plan that needs
 * its own approval, never a replay (none while the resource is being deleted). Either way the record goes, and the
 * same write stages the proof's release.
 */
export async function harvestSchemaPlan(pass: SchemaPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  const read = await readOperationFrame(pass, claim, job, 'plan');
  if (read.kind === 'wait') return endPass(read.why, read.ms);
  if (read.kind !== 'frame') return retrySchemaReading(pass, read.why);
  const { result } = read;
  if (refusedForGood(pass, claim, result)) return recordRefusedReading(pass, claim, job, result.error);
  const error = errorOf(result);
  if (error || !result.targetIdentityDigest || !result.planOutcome) return retrySchemaReading(pass, `the plan could not be computed: ${error ?? 'the frame carries no plan outcome'}`);
  const proving = servesProof(pass, claim);
  const pending = pass.status.pendingObservation;
  if (proving && (result.coordinationDigest !== pending!.coordinationDigest || anotherDatabase(pending!, result))) {
    // The reading is of another database than the Apply's: it proves nothing, and the raw observation starts over.
    await retireSchemaClaim(pass, {
      disposition: 'accounted',
      why: 'PlanStale',
      job,
      record: (status) => {
        status.pendingObservation = { ...pending!, planRequired: false };
      },
      report: { phase: 'VerifyingConvergence', reason: 'StaleObservation', message: `the proof's plan read another database than Apply ${pending!.applyOperationID} ran against; it is read again` },
    });
    pass.event('Warning', 'PlanStale', `the proof plan of Apply ${pending!.applyOperationID} read another database; the database is observed again`);
    return endPass('proof plan of another database');
  }
  if (!proving && result.coordinationDigest !== pass.realm()) return retrySchemaReading(pass, 'the plan reports another realm than the claim\'s');

  const plannedAt = pass.nowIso();
  const previous = pass.status.plan;
  let settle: (status: PtahSchemaStatus) => void = () => {};
  let report;
  let published: ReturnType<typeof currentPlanStatus> | undefined;
  if (result.planOutcome === 'Changes' && isDeleting(pass)) {
    // Nothing can approve or apply a plan of a resource being deleted (admission refuses an approval of it), so none
    // is published: the reading settles the proof all the same, as not converged.
    report = { phase: 'Pending' as const, reason: 'PlanWithheld', message: `the database differs from the desired schema (${result.plan!.statementCount} statement(s)); no plan is published for a resource being deleted` };
    settle = (status) => {
      status.plan = undefined;
      if (status.target) status.target = { ...status.target, drift: true };
    };
  } else if (result.planOutcome === 'Changes') {
    let plan;
    try {
      plan = await publishSchemaPlan(pass, claim, result.plan!, result.planContentDigest!, result.targetIdentityDigest);
    } catch (e) {
      // A publication the API server refuses outright (admission, validation) is not cured by waiting: the reading
      // runs again, and its new attempt publishes a plan of its own.
      if (!(e instanceof PlanError) && !(e instanceof ApiError && refusedOutright(e))) throw e;
      return retrySchemaReading(pass, `the plan could not be published: ${e.message}`);
    }
    published = currentPlanStatus(plan, proving ? 'NotConverged' : undefined);
    report = planPolicyReport(pass, published);
    settle = (status) => {
      status.plan = published;
      if (status.target) status.target = { ...status.target, drift: true };
    };
    if (previous?.uid !== published.uid) pass.event('Normal', 'PlanPublished', `plan ${published.name}: ${published.statementCount} statement(s)${published.destructive ? ', destructive' : ''}${published.privilegeChanging ? ', changes privileges' : ''}`);
  } else {
    report = { phase: 'InSync' as const, reason: 'NoChanges', message: 'the database matches the desired schema' };
    settle = (status) => {
      status.plan = undefined;
      if (status.target) status.target = { ...status.target, drift: false };
    };
  }
  if (proving) {
    const p = pending!;
    const converged = result.planOutcome === 'NoChanges';
    const attributed = converged && p.outcome === 'ApplySucceeded';
    if (converged) {
      const reason = p.outcome === 'ApplySucceeded' ? 'ScopedConverged' : p.outcome === 'OutcomeUnknown' ? 'ConvergedAfterUnknownOutcome' : 'ConvergedAfterRefusedApply';
      report = { phase: 'InSync' as const, reason, message: attributed ? `Apply ${p.applyOperationID} of plan ${p.plan.name} is proven converged` : `the database is proven to match the desired schema; no Apply is attributed (Apply ${p.applyOperationID} ended ${p.outcome})` };
    } else {
      report = { ...report, message: `Apply ${p.applyOperationID} did not converge the database (it ended ${p.outcome}); ${report.message}` };
    }
    const before = settle;
    settle = (status) => {
      before(status);
      status.pendingObservation = undefined;
      if (attributed) {
        status.applied = {
          artifactDigest: p.artifact.digest,
          planRef: { name: p.plan.name, uid: p.plan.uid },
          planFingerprint: p.plan.fingerprint,
          coordinationDigest: p.coordinationDigest,
          targetIdentityDigest: p.targetIdentityDigest,
          executionBindingID: p.executionBindingID,
          operationID: p.applyOperationID,
          ...(p.dispatchedBy ? { dispatchedBy: p.dispatchedBy } : {}),
          completedAt: plannedAt,
        };
      }
    };
    if (p.executionBindingID !== pass.status.executionBinding?.epoch) {
      // An approval admitted before the Apply claim that committed after the rotation's sweep: swept once more.
      await markSchemaPlanApprovalsStale(pass, p.plan, 'ExecutionBindingChanged', `plan ${p.plan.name} belongs to a retired execution epoch`);
    }
  }
  const final = report;
  await retireSchemaClaim(pass, {
    disposition: 'accounted',
    why: proving ? 'ProofPlanned' : 'Planned',
    job,
    record: (status) => {
      settle(status);
      if (!proving) status.observedGeneration = pass.generation;
      status.nextReconciliationTime = nextReading(pass, plannedAt);
    },
    report: final,
  });
  if (proving && isDeleting(pass)) {
    pass.event('Warning', 'ProofReadOnDeletion', `the resource is deleted with the proof of Apply ${pending!.applyOperationID} owed, and it was read: ${final.message}; its realm is handed back`);
  } else if (proving) {
    pass.event(result.planOutcome === 'NoChanges' ? 'Normal' : 'Warning', result.planOutcome === 'NoChanges' ? 'ConvergenceProven' : 'ApplyNotConverged', final.message);
  }
  if (previous && previous.uid !== published?.uid) {
    await markSchemaPlanApprovalsStale(pass, previous, 'PlanNoLongerCurrent', `plan ${previous.name} was replaced by a newer reading`);
  }
  return endPass(proving ? 'proof settled' : 'planned');
}
