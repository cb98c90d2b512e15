// The part of a family's side of the shared dispatch sequence that both families build alike: the claim re-read
// from the pass on every step (so a later step never acts on a claim that moved), the withdrawal of a claim whose
// authorization moved (Event and all), spending the approval with "gone" turned into a withdrawal, the report that
// the Job runs carried by the write that records its UID, and the Events the driver asks for. Each family supplies
// how it authorizes, what it stages, how it builds its Job, what it reports while the Job runs, and where its claim
// and records live.
import type { V1Job } from '@kubernetes/client-node';
import { API_VERSION } from '../shared/api/names.js';
import type { ActiveOperation } from '../shared/api/shapes.js';
import type { AdmissionSnapshot } from '../shared/podintent.js';
import { DispatchRefused, type Authorization, type ClaimWrite, type DispatchFamily } from '../shared/lifecycle/dispatch.js';
import { renewHolding } from '../shared/lifecycle/leases.js';
import type { OperationAnswers } from '../shared/lifecycle/operations.js';
import { ApprovalGoneError } from './approval.js';
import type { OwnerPass, OwnerResource } from './pass.js';
import type { Report } from './status.js';

export interface FamilyDispatchSpec<P extends string> {
  family: 'schema' | 'migration';
  operation: OperationAnswers;
  /** Step 1 for the claim as it now stands. */
  authorize(claim: ActiveOperation): Promise<Authorization>;
  /** Step 3; the default stages nothing. */
  stage?(claim: ActiveOperation): Promise<boolean>;
  buildJob(claim: ActiveOperation, snapshot: AdmissionSnapshot | undefined): Promise<V1Job>;
  /** Spends the claim's approval; throws ApprovalGoneError when it can no longer be spent. */
  consume(claim: ActiveOperation): Promise<void>;
  /** Retires the undispatched claim (disposition discard), writing `reason` and `message` as its report. */
  withdraw(reason: string, message: string): Promise<void>;
  writeClaim(claimId: string, fields: ClaimWrite, report?: Report<P>): Promise<void>;
  /** What supervision reports while the claim's Job runs; the write that records the Job's UID publishes it. */
  running(claim: ActiveOperation): Report<P>;
  finishUncertain(reason: string, message: string): Promise<void>;
  retryReadOnly(why: string): Promise<unknown>;
}

export function familyDispatch<P extends string>(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, spec: FamilyDispatchSpec<P>): DispatchFamily {
  const id = claim.id;
  const current = (): ActiveOperation => {
    const now = pass.claim;
    if (!now || now.id !== id) throw new DispatchRefused(`the claim ${id} is no longer in flight`);
    return now;
  };
  const withdraw = async (reason: string, message: string) => {
    await spec.withdraw(reason, message);
    pass.event('Warning', 'ClaimWithdrawn', `operation ${id} (${claim.type}) is withdrawn before dispatch: ${message}`, 'Dispatch');
  };
  return {
    family: spec.family,
    owner: { apiVersion: API_VERSION, kind: pass.kind, namespace: pass.namespace, name: pass.name, uid: pass.uid },
    get claim() {
      return current();
    },
    operation: spec.operation,
    authorize: () => spec.authorize(current()),
    retireUnauthorized: ({ reason, message }) => withdraw(reason, message),
    stage: () => (spec.stage ? spec.stage(current()) : Promise.resolve(true)),
    buildJob: (snapshot) => spec.buildJob(current(), snapshot),
    consumeApproval: async () => {
      try {
        await spec.consume(current());
        return true;
      } catch (e) {
        if (!(e instanceof ApprovalGoneError)) throw e;
        await withdraw('ApprovalWithdrawn', e.message);
        return false;
      }
    },
    // The record step's write: the Job was created and read back, so the report says it runs, and the first
    // supervision pass, finding it running, has nothing to write.
    writeClaim: (fields) => spec.writeClaim(id, fields, fields.jobUID ? spec.running(current()) : undefined),
    finishUncertain: (reason, message) => spec.finishUncertain(reason, message),
    retryReadOnly: async (why) => {
      await spec.retryReadOnly(why);
    },
    announceStarted: (job) => {
      pass.event('Normal', 'OperationStarted', `${claim.type} operation ${id} dispatched as Job ${job.metadata?.name} (uid ${job.metadata?.uid})`, 'Dispatch');
    },
    warn: (reason, message) => pass.event('Warning', reason, message, 'Dispatch'),
  };
}

/**
 * Every pass of a dispatched Apply takes its Lease again under the epoch the claim recorded (the seed's
 * acquireApplyLock and acquireMigrationApplyLock once dispatched; before that, the dispatch sequence's lease step
 * takes it). An epoch that changed, or a realm someone else holds, is continuity loss: latched, and the run is then
 * unreadable rather than retryable. Returns the end of the pass's reason when it wrote.
 */
export async function renewDispatchedApplyLock(pass: OwnerPass<OwnerResource>, claim: ActiveOperation, writeClaim: (fields: Partial<ActiveOperation>) => Promise<void>): Promise<string | undefined> {
  if (!claim.coordinationDigest || !claim.leaseDurationSeconds) {
    // A dispatched Apply that records no realm or Lease duration cannot show it held the realm throughout.
    if (claim.leaseContinuityLost) return undefined;
    await writeClaim({ leaseContinuityLost: true });
    pass.event('Warning', 'LeaseContinuityLost', `operation ${claim.id} was dispatched without a realm or Lease duration on record; its result will not be trusted`);
    return 'Lease continuity lost';
  }
  const renewal = await renewHolding(pass.lock, {
    coordinationDigest: claim.coordinationDigest,
    resourceUid: pass.uid,
    operationId: claim.id,
    durationSeconds: claim.leaseDurationSeconds,
    epoch: claim.leaseEpoch,
  });
  if (renewal.kept) return undefined;
  if (renewal.epoch) {
    // Hold the new epoch so the eventual release hands back what this resource holds now.
    await writeClaim({ leaseEpoch: renewal.epoch, leaseContinuityLost: true });
  } else if (claim.leaseContinuityLost) {
    return undefined;
  } else {
    await writeClaim({ leaseContinuityLost: true });
  }
  pass.event('Warning', 'LeaseContinuityLost', `the realm Lease of operation ${claim.id} changed hands while its Job was dispatched; its result will not be trusted`);
  return 'Lease continuity lost';
}
