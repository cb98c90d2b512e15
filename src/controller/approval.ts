// Approvals, for both families: a person's one-shot decision for exactly one plan, bound to it by name, UID and
// fingerprint and stamped by admission with who made it. One is spent (Consumed) before the dispatch marker; a
// spent approval is evidence that a decision was used, not permission, so a claim looking for an approval skips
// it. The claim holds its approval by reference, so a claim that spent its approval and stopped before the marker
// dispatches under it on the next pass. A Stale approval may never be reserved again.
import { API_VERSION } from '../shared/api/names.js';
import type { ActiveOperation, Condition, Identity } from '../shared/api/shapes.js';
import type { KubeObject } from '../shared/kube-client.js';
import type { OwnerPass, OwnerResource } from './pass.js';
import { withCondition } from './conditions.js';

type AnyPass = OwnerPass<OwnerResource>;

/** An approval of either family, as far as its decision is read. */
export interface ApprovalObject extends KubeObject {
  metadata: NonNullable<KubeObject['metadata']>;
  spec: {
    planRef: { name: string; uid: string };
    planFingerprint: string;
    approver?: Identity;
    approvedAt?: string;
    mutationRequestUID?: string;
  } & Record<string, unknown>;
  status?: { observedGeneration?: number; conditions?: Condition[]; consumedBy?: { operationID: string; consumedAt: string } };
}

/** Which approval kind a family uses, and the spec field naming the resource. */
export interface ApprovalKind {
  kind: string;
  refField: 'schemaRef' | 'migrationRef';
}

/** The plan an approval must name: by name, UID and fingerprint. */
export interface ApprovedPlan {
  name: string;
  uid: string;
  fingerprint: string;
}

const approvalRef = (pass: AnyPass, kind: ApprovalKind, name: string) => ({ apiVersion: API_VERSION, kind: kind.kind, namespace: pass.namespace, name });

export function approvalCondition(approval: ApprovalObject, type: string): Condition | undefined {
  return approval.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** The approval names this resource and exactly this plan, and admission stamped its author. */
export function approves(pass: AnyPass, kind: ApprovalKind, approval: ApprovalObject, plan: ApprovedPlan): boolean {
  const { spec } = approval;
  const owner = spec[kind.refField] as { name?: string; uid?: string } | undefined;
  return owner?.name === pass.name && owner.uid === pass.uid &&
    spec.planRef.name === plan.name && spec.planRef.uid === plan.uid && spec.planFingerprint === plan.fingerprint &&
    Boolean(spec.approver?.username && spec.approvedAt && spec.mutationRequestUID);
}

/** Spent by this very claim: read from status.consumedBy, which the spending write sets with the condition. */
const consumedBy = (approval: ApprovalObject, claimId: string): boolean => approval.status?.consumedBy?.operationID === claimId;

const byAge = (a: ApprovalObject, b: ApprovalObject) =>
  String(a.metadata.creationTimestamp ?? '').localeCompare(String(b.metadata.creationTimestamp ?? '')) || (a.metadata.name ?? '').localeCompare(b.metadata.name ?? '');

/** Every approval of this resource's kind in its namespace, read uncached. */
export async function listApprovals<A extends ApprovalObject>(pass: AnyPass, kind: ApprovalKind): Promise<A[]> {
  return pass.deps.client.list<A>(API_VERSION, kind.kind, pass.namespace);
}

/** The oldest unspent, not-stale approval of exactly this plan, read uncached. */
export async function findApproval<A extends ApprovalObject>(pass: AnyPass, kind: ApprovalKind, plan: ApprovedPlan): Promise<A | undefined> {
  const approvals = await listApprovals<A>(pass, kind);
  return approvals
    .filter((a) => approves(pass, kind, a, plan) && !approvalCondition(a, 'Consumed') && !approvalCondition(a, 'Stale') && !a.metadata.deletionTimestamp)
    .sort(byAge)[0];
}

/**
 * The approval the claim names still authorizes it: the same object (UID), approving exactly the claim's plan,
 * not stale, and unspent or spent by this very claim. Undefined when it does; otherwise why not.
 */
export async function approvalStillAuthorizes(pass: AnyPass, kind: ApprovalKind, claim: ActiveOperation, plan: ApprovedPlan): Promise<string | undefined> {
  const ref = claim.approvalRef;
  if (!ref) return 'the Apply claim names no approval';
  const approval = await pass.deps.client.tryGet<ApprovalObject>(approvalRef(pass, kind, ref.name));
  if (!approval) return `approval ${ref.name} was deleted`;
  if (approval.metadata.uid !== ref.uid) return `approval ${ref.name} was replaced`;
  if (!approves(pass, kind, approval, plan)) return `approval ${ref.name} does not approve plan ${plan.name}`;
  if (approvalCondition(approval, 'Stale')) return `approval ${ref.name} is stale`;
  if (approvalCondition(approval, 'Consumed') && !consumedBy(approval, claim.id)) return `approval ${ref.name} was spent by another operation`;
  return undefined;
}

export class ApprovalGoneError extends Error {
  override name = 'ApprovalGoneError';
}

async function writeApprovalStatus(pass: AnyPass, approval: ApprovalObject, status: NonNullable<ApprovalObject['status']>): Promise<void> {
  await pass.deps.client.update<ApprovalObject>({ ...approval, status: { ...status, observedGeneration: approval.metadata.generation } }, { subresource: 'status' });
}

/**
 * Spends the claim's approval (Consumed=True, naming the operation), before the dispatch marker. Idempotent for
 * this claim. Throws ApprovalGoneError when the approval was deleted, replaced, made stale or spent by another claim.
 */
export async function consumeApproval(pass: AnyPass, kind: ApprovalKind, claim: ActiveOperation): Promise<void> {
  const ref = claim.approvalRef;
  if (!ref) return;
  const approval = await pass.deps.client.tryGet<ApprovalObject>(approvalRef(pass, kind, ref.name));
  if (!approval || approval.metadata.uid !== ref.uid) throw new ApprovalGoneError(`approval ${ref.name} was deleted or replaced before it was spent`);
  if (approvalCondition(approval, 'Consumed')) {
    if (consumedBy(approval, claim.id)) return;
    throw new ApprovalGoneError(`approval ${ref.name} was spent by another operation`);
  }
  if (approvalCondition(approval, 'Stale')) throw new ApprovalGoneError(`approval ${ref.name} went stale before it was spent`);
  const now = pass.nowIso();
  const conditions = withCondition(approval.status?.conditions, 'Consumed', 'True', 'DispatchCommitted', `spent by operation ${claim.id}`, approval.metadata.generation ?? 0, now);
  await writeApprovalStatus(pass, approval, { ...approval.status, conditions, consumedBy: { operationID: claim.id, consumedAt: now } });
  pass.event('Normal', 'ApprovalConsumed', `approval ${ref.name} by ${approval.spec.approver?.username ?? 'unknown'} was spent on operation ${claim.id}`, 'Dispatch');
}

/**
 * Marks every approval of `plan` that is neither spent, stale nor being deleted Stale (the seed's
 * markPlanApprovalsStaleWithReason): the plan no longer authorizes anything, so no approval of it may be reserved.
 * Read uncached; each mark is its own status write, so an interrupted sweep is finished by the next one.
 */
export async function markPlanApprovalsStale(pass: AnyPass, kind: ApprovalKind, plan: { name: string; uid: string }, reason: string, message: string): Promise<number> {
  let marked = 0;
  for (const approval of await listApprovals(pass, kind)) {
    const owner = approval.spec[kind.refField] as { uid?: string } | undefined;
    if (owner?.uid !== pass.uid || approval.spec.planRef.uid !== plan.uid || approval.spec.planRef.name !== plan.name) continue;
    if (approvalCondition(approval, 'Stale') || approval.metadata.deletionTimestamp) continue;
    const now = pass.nowIso();
    const generation = approval.metadata.generation ?? 0;
    const conditions = withCondition(approval.status?.conditions, 'Stale', 'True', reason, message, generation, now);
    await writeApprovalStatus(pass, approval, { ...approval.status, conditions });
    pass.deps.events.record(approval, { type: 'Warning', reason: 'ApprovalStale', note: `approval ${approval.metadata.name} of plan ${plan.name} no longer authorizes anything: ${message}` });
    marked++;
  }
  return marked;
}
