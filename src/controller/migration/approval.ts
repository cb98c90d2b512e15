// A migration's approvals: the shared approval rules (src/controller/approval.ts) for PtahMigrationApproval, which
// names its migration under spec.migrationRef.
import type { PtahMigrationApproval, PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { KINDS } from '../../shared/api/names.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { approvalStillAuthorizes as stillAuthorizes, consumeApproval, findApproval, type ApprovalKind, type ApprovalObject, type ApprovedPlan } from '../approval.js';
import type { MigrationPass } from './context.js';

export { ApprovalGoneError } from '../approval.js';

const MIGRATION_APPROVAL: ApprovalKind = { kind: KINDS.PtahMigrationApproval.kind, refField: 'migrationRef' };

const approvedPlan = (plan: PtahMigrationPlan): ApprovedPlan => ({ name: plan.metadata.name!, uid: plan.metadata.uid!, fingerprint: plan.spec.fingerprint });

/** The oldest unspent, not-stale approval of exactly this plan, read uncached (the seed's findMigrationApproval). */
export function findMigrationApproval(pass: MigrationPass, plan: PtahMigrationPlan): Promise<PtahMigrationApproval | undefined> {
  return findApproval<PtahMigrationApproval & ApprovalObject>(pass, MIGRATION_APPROVAL, approvedPlan(plan));
}

export function approvalStillAuthorizes(pass: MigrationPass, claim: ActiveOperation, plan: PtahMigrationPlan): Promise<string | undefined> {
  return stillAuthorizes(pass, MIGRATION_APPROVAL, claim, approvedPlan(plan));
}

/** Spends the claim's approval before the dispatch marker (the seed's consumeMigrationApproval). */
export function consumeMigrationApproval(pass: MigrationPass, claim: ActiveOperation): Promise<void> {
  return consumeApproval(pass, MIGRATION_APPROVAL, claim);
}
