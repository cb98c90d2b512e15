// A schema's approvals: the shared approval rules (src/controller/approval.ts) for PtahSchemaApproval, which names
// its schema under spec.schemaRef.
import { KINDS } from '../../shared/api/names.js';
import type { PtahSchemaApproval, PtahSchemaPlan } from '../../shared/api/schema-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { approvalStillAuthorizes, consumeApproval, findApproval, markPlanApprovalsStale, type ApprovalKind, type ApprovalObject, type ApprovedPlan } from '../approval.js';
import type { SchemaPass } from './context.js';

export const SCHEMA_APPROVAL: ApprovalKind = { kind: KINDS.PtahSchemaApproval.kind, refField: 'schemaRef' };

const approvedPlan = (plan: PtahSchemaPlan): ApprovedPlan => ({ name: plan.metadata.name!, uid: plan.metadata.uid!, fingerprint: plan.spec.fingerprint });

/** The oldest unspent, not-stale approval of exactly this plan (the seed's findApproval). */
export function findSchemaApproval(pass: SchemaPass, plan: PtahSchemaPlan): Promise<PtahSchemaApproval | undefined> {
  return findApproval<PtahSchemaApproval & ApprovalObject>(pass, SCHEMA_APPROVAL, approvedPlan(plan));
}

/** The approval the claim names still authorizes it (the seed's ensureCurrentApproval without consuming). */
export function schemaApprovalStillAuthorizes(pass: SchemaPass, claim: ActiveOperation, plan: PtahSchemaPlan): Promise<string | undefined> {
  return approvalStillAuthorizes(pass, SCHEMA_APPROVAL, claim, approvedPlan(plan));
}

/** Spends the claim's approval before the dispatch marker (the seed's markApprovalConsumed). */
export function consumeSchemaApproval(pass: SchemaPass, claim: ActiveOperation): Promise<void> {
  return consumeApproval(pass, SCHEMA_APPROVAL, claim);
}

/** Every approval of a plan that no longer authorizes anything goes Stale (the seed's markPlanApprovalsStaleWithReason). */
export function markSchemaPlanApprovalsStale(pass: SchemaPass, plan: { name: string; uid: string }, reason: string, message: string): Promise<number> {
  return markPlanApprovalsStale(pass, SCHEMA_APPROVAL, plan, reason, message);
}
