// Approvals: a person's one-shot decision for exactly one plan, bound to it by name, UID and fingerprint and
// stamped by admission with who made it. One is spent (Consumed) before the dispatch marker; a spent approval is
// evidence that a decision was used, not permission, so a claim looking for an approval skips it. The claim
// holds its approval by reference, so a claim that spent its approval and stopped before the marker dispatches
// under it on the next pass.
import type { PtahMigrationApproval, PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { ActiveOperation, Condition } from '../../shared/api/shapes.js';
import type { MigrationPass } from './context.js';
import { withCondition } from './status.js';

const approvalRef = (pass: MigrationPass, name: string) => ({ apiVersion: API_VERSION, kind: KINDS.PtahMigrationApproval.kind, namespace: pass.namespace, name });

function condition(approval: PtahMigrationApproval, type: string): Condition | undefined {
  return approval.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** The approval names this migration and exactly this plan, and admission stamped its author. */
function approves(pass: MigrationPass, approval: PtahMigrationApproval, plan: PtahMigrationPlan): boolean {
  const { spec } = approval;
  return spec.migrationRef.name === pass.name && spec.migrationRef.uid === pass.uid &&
    spec.planRef.name === plan.metadata.name && spec.planRef.uid === plan.metadata.uid && spec.planFingerprint === plan.spec.fingerprint &&
    Boolean(spec.approver?.username && spec.approvedAt && spec.mutationRequestUID);
}

/** Spent by this very claim: read from status.consumedBy, which the spending write sets with the condition. */
const consumedBy = (approval: PtahMigrationApproval, claimId: string): boolean => approval.status?.consumedBy?.operationID === claimId;

/** The oldest unspent, not-stale approval of exactly this plan, read uncached. */
export async function findMigrationApproval(pass: MigrationPass, plan: PtahMigrationPlan): Promise<PtahMigrationApproval | undefined> {
  const approvals = await pass.deps.client.list<PtahMigrationApproval>(API_VERSION, KINDS.PtahMigrationApproval.kind, pass.namespace);
  return approvals
    .filter((a) => approves(pass, a, plan) && !condition(a, 'Consumed') && !condition(a, 'Stale'))
    .sort((a, b) => String(a.metadata.creationTimestamp ?? '').localeCompare(String(b.metadata.creationTimestamp ?? '')) || (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''))[0];
}

/**
 * The approval the claim names still authorizes it: the same object (UID), approving exactly the claim's plan,
 * not stale, and unspent or spent by this very claim. Undefined when it does; otherwise why not.
 */
export async function approvalStillAuthorizes(pass: MigrationPass, claim: ActiveOperation, plan: PtahMigrationPlan): Promise<string | undefined> {
  const ref = claim.approvalRef;
  if (!ref) return 'the Apply claim names no approval';
  const approval = await pass.deps.client.tryGet<PtahMigrationApproval>(approvalRef(pass, ref.name));
  if (!approval) return `approval ${ref.name} was deleted`;
  if (approval.metadata.uid !== ref.uid) return `approval ${ref.name} was replaced`;
  if (!approves(pass, approval, plan)) return `approval ${ref.name} does not approve plan ${plan.metadata.name}`;
  if (condition(approval, 'Stale')) return `approval ${ref.name} is stale`;
  if (condition(approval, 'Consumed') && !consumedBy(approval, claim.id)) return `approval ${ref.name} was spent by another operation`;
  return undefined;
}

export class ApprovalGoneError extends Error {
  override name = 'ApprovalGoneError';
}

/**
 * Spends the claim's approval (Consumed=True, naming the operation), before the dispatch marker. Idempotent for
 * this claim. Throws ApprovalGoneError when the approval was deleted, replaced or spent by another claim.
 */
export async function consumeMigrationApproval(pass: MigrationPass, claim: ActiveOperation): Promise<void> {
  const ref = claim.approvalRef;
  if (!ref) return;
  const approval = await pass.deps.client.tryGet<PtahMigrationApproval>(approvalRef(pass, ref.name));
  if (!approval || approval.metadata.uid !== ref.uid) throw new ApprovalGoneError(`approval ${ref.name} was deleted or replaced before it was spent`);
  if (condition(approval, 'Consumed')) {
    if (consumedBy(approval, claim.id)) return;
    throw new ApprovalGoneError(`approval ${ref.name} was spent by another operation`);
  }
  const now = pass.nowIso();
  const conditions = withCondition(approval.status?.conditions, 'Consumed', 'True', 'DispatchCommitted', `spent by operation ${claim.id}`, approval.metadata.generation ?? 0, now);
  const status = { ...approval.status, observedGeneration: approval.metadata.generation, conditions, consumedBy: { operationID: claim.id, consumedAt: now } };
  await pass.deps.client.update<PtahMigrationApproval>({ ...approval, status }, { subresource: 'status' });
  pass.event('Normal', 'ApprovalConsumed', `approval ${ref.name} by ${approval.spec.approver?.username ?? 'unknown'} was spent on operation ${claim.id}`, 'Dispatch');
}
