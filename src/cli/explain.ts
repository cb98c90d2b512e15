// What `kubectl ptah status` and `kubectl ptah explain` say about a resource, computed from the object alone (no
// further reads), so the same words can be unit-tested on hand-written status objects and a person reading them
// sees exactly what the controller's next pass will find. The order of the checks in nextPass follows the order a
// reconcile pass meets the obligations: an owed release first, then a binding retirement, the claim in flight, the
// pending observation (schema) or the unresolved run (migration), and only then the idle decisions.
import { ADOPTION_REFUSED } from '../shared/executor-report.js';
import type { PtahMigration } from '../shared/api/migration-kinds.js';
import type { PtahSchema } from '../shared/api/schema-kinds.js';
import type { Condition } from '../shared/api/shapes.js';
import { leaseNameFor } from '../shared/realm.js';

export type ResourceKind = 'PtahSchema' | 'PtahMigration';

/** A PtahSchema or a PtahMigration as read from the API server; status may be absent before the first pass. */
export type PtahResource = (PtahSchema & { kind: 'PtahSchema' }) | (PtahMigration & { kind: 'PtahMigration' });

export interface StatusRow {
  namespace: string;
  kind: ResourceKind;
  name: string;
  phase: string;
  ready: string;
  reason: string;
  waitingFor: string;
}

export interface Explanation {
  /** One sentence per obligation the status shows, each naming the seed's term and the field. */
  obligations: string[];
  /** Other facts a person needs (awaiting an approval, a stale observedGeneration). */
  notes: string[];
  /** What the next pass does, derived from the status alone. */
  nextPass: string;
}

const readyCondition = (conditions: readonly Condition[] | undefined): Condition | undefined => conditions?.find((c) => c.type === 'Ready');

/** Whether `at` (an RFC 3339 time) is later than `now`; an unparsable time counts as not in the future. */
function inFuture(at: string | undefined, now: Date): at is string {
  if (!at) return false;
  const t = Date.parse(at);
  return Number.isFinite(t) && t > now.getTime();
}

/** The realm Lease a coordination digest names; an ill-formed digest is shown as the digest, never thrown on. */
function leaseName(digest: string): string {
  try {
    return leaseNameFor(digest);
  } catch {
    return `for realm ${digest}`;
  }
}

/** Every obligation the resource owes now, one sentence each, in the order a pass meets them. */
export function obligationsOf(resource: PtahResource): string[] {
  const status = resource.status;
  if (!status) return [];
  const out: string[] = [];
  if (status.pendingLockRelease) {
    const r = status.pendingLockRelease;
    out.push(`An owed release (status.pendingLockRelease): operation ${r.operationID} retired its claim and still owes the hand-back of realm Lease ${leaseName(r.coordinationDigest)} (epoch ${r.leaseEpoch}).`);
  }
  if (resource.kind === 'PtahSchema' && resource.status?.pendingBindingRetirement) {
    const b = resource.status.pendingBindingRetirement;
    const owed = [b.plan && `marking the approvals of plan ${b.plan.name} stale`, b.job && `adopting ${b.job.operation} Job ${b.job.name} with its cleanup TTL`].filter(Boolean);
    out.push(`A binding retirement (status.pendingBindingRetirement): execution binding ${b.retiredEpoch} was rotated out and still owes ${owed.length ? owed.join(' and ') : 'its bookkeeping'}.`);
  }
  const claim = status.activeOperation;
  if (claim) {
    out.push(`A claim in flight (status.activeOperation): ${claim.type} operation ${claim.id}, attempt ${claim.attempt}, Job ${claim.jobName}${claim.jobUID ? ` (UID ${claim.jobUID})` : ''}, claimed at ${claim.startedAt}.`);
    if (claim.dispatchStarted) {
      out.push(`A dispatch marker (status.activeOperation.dispatchStarted): Job ${claim.jobName} may exist from the moment it was written, so a missing Job is an outcome nobody established, never a reason to create it again.`);
    }
  }
  if (resource.kind === 'PtahSchema' && resource.status?.pendingObservation) {
    const p = resource.status.pendingObservation;
    const when = p.observeAfter ? `, no proof before ${p.observeAfter}` : '';
    out.push(`A pending observation (status.pendingObservation): Apply ${p.applyOperationID} (Job ${p.applyJobName}) ended ${p.outcome}; a fresh reading of the same database under its Lease owes the proof${p.planRequired ? ', and the raw reading is done so the Plan that settles it is owed' : ''}${when}; nothing is planned or run while it stands.`);
  }
  const refused = resource.status?.refusedReading;
  if (refused && resource.kind === 'PtahMigration' && refused.code === ADOPTION_REFUSED) {
    out.push(`A refused adoption (status.refusedReading): a History reading refused spec.adoption (${refused.code}: ${refused.message}); the other tool's history is read again at ${resource.status?.nextReconciliationTime ?? 'spec.interval'}, or at once when the artifact or the spec changes.`);
  } else if (refused && resource.kind === 'PtahMigration') {
    out.push(`A refused artifact (status.refusedReading): a History reading refused artifact ${refused.artifactDigest} as generation ${refused.generation} reads it (${refused.code}: ${refused.message}); it is not read again until the artifact, the spec or the execution binding changes.`);
  } else if (refused) {
    out.push(`A refused reading (status.refusedReading): a reading of desired schema ${refused.artifactDigest} under generation ${refused.generation} was refused (${refused.code}: ${refused.message}); the database is read again at ${resource.status?.nextReconciliationTime ?? 'spec.interval'}, or at once when the desired schema or the spec changes.`);
  }
  if (resource.kind === 'PtahMigration' && resource.status?.unresolvedRun) {
    const u = resource.status.unresolvedRun;
    out.push(`An unresolved run (status.unresolvedRun): Apply ${u.operationID}${u.jobName ? ` (Job ${u.jobName})` : ''} ended ${u.outcome}; nobody established what it did, so nothing is planned or run while it stands.`);
  }
  return out;
}

function awaitedPlanName(resource: PtahResource): string | undefined {
  return resource.status?.phase === 'AwaitingApproval' ? resource.status.plan?.name : undefined;
}

/** What the next reconcile pass will do, derived from status (and spec.suspend) alone. */
export function nextPass(resource: PtahResource, now: Date = new Date()): string {
  const status = resource.status;
  if (!status || !status.phase) return 'takes the resource up for the first time: pins the artifact, then claims the first reading';
  if (status.pendingLockRelease) return `releases the realm Lease ${leaseName(status.pendingLockRelease.coordinationDigest)} before anything else`;
  if (resource.kind === 'PtahSchema' && resource.status?.pendingBindingRetirement) {
    return `finishes the binding retirement of epoch ${resource.status.pendingBindingRetirement.retiredEpoch} before it claims anything`;
  }
  const claim = status.activeOperation;
  if (claim) {
    if (claim.dispatchStarted) return `supervises Job ${claim.jobName}; it is never created again`;
    // Which steps a claim takes (a Lease, a staged plan, an approval) depends on its operation; the end is the same.
    return `continues the dispatch sequence of the ${claim.type} claim, up to the one create of Job ${claim.jobName}`;
  }
  if (resource.kind === 'PtahSchema' && resource.status?.pendingObservation) {
    const p = resource.status.pendingObservation;
    const op = p.planRequired ? 'the Plan' : 'the Observe';
    // Suspension does not hold a proof up: it runs first, and the schema rests suspended afterwards.
    const settles = `; a PtahSchemaRunAcknowledgment naming Apply ${p.applyOperationID} ends it instead, should no reading finish it`;
    if (inFuture(p.observeAfter, now)) return `waits until ${p.observeAfter}, then claims ${op}${settles}`;
    return `claims ${op} that proves Apply ${p.applyOperationID}${settles}`;
  }
  if (resource.kind === 'PtahMigration' && resource.status?.unresolvedRun) {
    return `nothing is planned until a History reading of the same database finds nothing pending or a PtahMigrationRunAcknowledgment names operation ${resource.status.unresolvedRun.operationID}`;
  }
  if (resource.spec?.suspend) return 'reads and runs nothing while spec.suspend is true';
  const awaited = awaitedPlanName(resource);
  if (awaited) return `waits for an approval of plan ${awaited}`;
  const reason = readyCondition(status.conditions)?.reason;
  // A refusal mended outside the cluster (a role, an extension, the other tool's history table) is read again in time.
  const readAgain = (reason === 'AdoptionRefused' || reason === 'ReadingRefused') && status.nextReconciliationTime;
  if (status.phase === 'Blocked' && readAgain) return `stays Blocked (${reason}) until ${readAgain}, then reads the database again (at once when the spec or what it names changes)`;
  if (status.phase === 'Blocked' && reason === 'HistoryDirty') {
    return 'stays Blocked (HistoryDirty) until spec.repair names the dirty row (kubectl ptah repair, once the database is mended); ' +
      'then it reads the history again and publishes a repair plan, which runs only once approved';
  }
  if (status.phase === 'Blocked') return `stays Blocked (${reason ?? 'no reason recorded'}) until the spec or what it names changes`;
  if (status.phase === 'Failed') return `retries after spec.execution.failureRetryInterval${status.nextReconciliationTime ? ` (not before ${status.nextReconciliationTime})` : ''}`;
  if (resource.kind === 'PtahSchema' && resource.status?.phase === 'ReadyToApply') return `claims the Apply of plan ${resource.status.plan?.name ?? '(none named)'}`;
  if (status.nextReconciliationTime && inFuture(status.nextReconciliationTime, now)) return `reads the database again at ${status.nextReconciliationTime}`;
  return `reconciles from phase ${status.phase}`;
}

export function explain(resource: PtahResource, now: Date = new Date()): Explanation {
  const notes: string[] = [];
  const status = resource.status;
  const awaited = awaitedPlanName(resource);
  if (awaited) notes.push(`It awaits an approval (phase AwaitingApproval, status.plan): plan ${awaited} is published and nothing runs until a person approves exactly it.`);
  const generation = resource.metadata?.generation;
  if (status && generation !== undefined && status.observedGeneration !== undefined && status.observedGeneration !== generation) {
    notes.push(`The spec changed (metadata.generation ${generation}, status.observedGeneration ${status.observedGeneration}): the status describes an earlier spec.`);
  }
  const ready = readyCondition(status?.conditions);
  if (ready) notes.push(`Ready is ${ready.status} (${ready.reason}): ${ready.message}`);
  const pin = status?.artifact;
  if (pin?.oci) {
    const keys = pin.oci.verifiedKeys.length > 0 ? `signed with ${pin.oci.verifiedKeys.join(', ')}` : 'no signature required';
    notes.push(`The artifact (status.artifact): ${pin.oci.reference} resolved to ${pin.oci.pinnedReference} at ${pin.resolvedAt} (${pin.oci.artifactType}, ${keys}); every plan, approval and Job binds that digest and content ${pin.digest}.`);
  } else if (pin?.configMapName) {
    notes.push(`The artifact (status.artifact): ConfigMap ${pin.configMapName} (uid ${pin.configMapUID ?? '?'}), content ${pin.digest}.`);
  }
  return { obligations: obligationsOf(resource), notes, nextPass: nextPass(resource, now) };
}

/** The lines `kubectl ptah explain` prints. */
export function formatExplanation(resource: PtahResource, now: Date = new Date()): string[] {
  const e = explain(resource, now);
  const head = `${resource.kind.toLowerCase()}/${resource.metadata?.name ?? '?'} (namespace ${resource.metadata?.namespace ?? '?'}): phase ${resource.status?.phase ?? '(none yet)'}`;
  const owes = e.obligations.length ? e.obligations.map((o) => `- ${o}`) : ['- It owes no obligation of the mutation lifecycle now.'];
  return [head, ...owes, ...e.notes, `next pass: ${e.nextPass}`];
}

/** What the resource waits for, in a few words, for the WAITING-FOR column. */
export function waitingFor(resource: PtahResource, now: Date = new Date()): string {
  const status = resource.status;
  if (!status?.phase) return 'first pass';
  if (status.pendingLockRelease) return 'realm Lease release';
  if (resource.kind === 'PtahSchema' && resource.status?.pendingBindingRetirement) return 'binding retirement';
  const claim = status.activeOperation;
  if (claim) return claim.dispatchStarted ? `Job ${claim.jobName}` : `dispatch of ${claim.type}`;
  if (resource.kind === 'PtahSchema' && resource.status?.pendingObservation) {
    const p = resource.status.pendingObservation;
    return inFuture(p.observeAfter, now) ? `proof after ${p.observeAfter}` : `proof (${p.planRequired ? 'Plan' : 'Observe'})`;
  }
  if (resource.kind === 'PtahMigration' && resource.status?.unresolvedRun) return `acknowledgment of ${resource.status.unresolvedRun.operationID.slice(0, 19)}…`;
  if (resource.spec?.suspend) return 'spec.suspend=false';
  const awaited = awaitedPlanName(resource);
  if (awaited) return `approval of ${awaited}`;
  if (status.phase === 'Blocked') return 'a spec change';
  if (status.nextReconciliationTime && inFuture(status.nextReconciliationTime, now)) return `next reading ${status.nextReconciliationTime}`;
  return '-';
}

export function statusRow(resource: PtahResource, now: Date = new Date()): StatusRow {
  const ready = readyCondition(resource.status?.conditions);
  return {
    namespace: resource.metadata?.namespace ?? '',
    kind: resource.kind,
    name: resource.metadata?.name ?? '',
    phase: resource.status?.phase ?? '-',
    ready: ready?.status ?? '-',
    reason: ready?.reason ?? '-',
    waitingFor: waitingFor(resource, now),
  };
}

/** A plain aligned table, as kubectl prints one. */
export function formatTable(rows: readonly StatusRow[], withNamespace: boolean): string[] {
  const header = [...(withNamespace ? ['NAMESPACE'] : []), 'KIND', 'NAME', 'PHASE', 'READY', 'REASON', 'WAITING-FOR'];
  const cells = rows.map((r) => [...(withNamespace ? [r.namespace] : []), r.kind, r.name, r.phase, r.ready, r.reason, r.waitingFor]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: readonly string[]) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!))).join('   ');
  return [line(header), ...cells.map(line)];
}
