// What a published plan may do under the schema's policy (the seed's setPlanPolicyStatus and
// planRequiresApproval): a destructive plan is Blocked unless allowDestructive, and then always needs an approval;
// Never blocks every plan; a plan that changes privileges, and a plan published after an Apply that did not
// converge, need an approval whatever spec.policy.apply says.
import type { CurrentPlan } from '../../shared/api/schema-kinds.js';
import type { SchemaPass } from './context.js';
import type { Report } from './status.js';

export type PlanPolicy =
  | { kind: 'blocked'; reason: 'DestructiveChangesDisabled' | 'ApplyDisabled'; message: string }
  | { kind: 'approval'; reason: string; message: string }
  | { kind: 'ready' };

export function planPolicy(pass: SchemaPass, plan: CurrentPlan): PlanPolicy {
  const { policy } = pass.s.spec;
  if (plan.destructive && !policy.allowDestructive) {
    return { kind: 'blocked', reason: 'DestructiveChangesDisabled', message: `plan ${plan.name} is destructive and spec.policy.allowDestructive is false; nothing runs and the database is untouched` };
  }
  if (policy.apply === 'Never') return { kind: 'blocked', reason: 'ApplyDisabled', message: `plan ${plan.name} is published; spec.policy.apply is Never, so nothing runs` };
  const approve = `create a PtahSchemaApproval naming plan ${plan.name} (uid ${plan.uid}, fingerprint ${plan.fingerprint})`;
  if (plan.approvalRequiredBecause) return { kind: 'approval', reason: plan.approvalRequiredBecause, message: `plan ${plan.name} follows an Apply that did not converge and needs its own approval: ${approve}` };
  if (plan.destructive) return { kind: 'approval', reason: 'DestructivePlan', message: `plan ${plan.name} is destructive; allowDestructive permits it only with an approval: ${approve}` };
  if (plan.privilegeChanging) return { kind: 'approval', reason: 'PrivilegeChanges', message: `plan ${plan.name} changes privileges; it always needs an approval: ${approve}` };
  if (policy.apply !== 'Always') {
    const locking = plan.lockingStatementCount ? `; ${plan.lockingStatementCount} statement(s) rewrite, scan or lock a table (see the plan)` : '';
    return { kind: 'approval', reason: 'PlanReady', message: `plan ${plan.name} holds ${plan.statementCount} statement(s)${locking}: ${approve}` };
  }
  return { kind: 'ready' };
}

/** The report a freshly published plan gives. */
export function planPolicyReport(pass: SchemaPass, plan: CurrentPlan): Report {
  const verdict = planPolicy(pass, plan);
  switch (verdict.kind) {
    case 'blocked':
      return { phase: 'Blocked', reason: verdict.reason, message: verdict.message };
    case 'approval':
      return { phase: 'AwaitingApproval', reason: verdict.reason, message: verdict.message };
    case 'ready':
      return { phase: 'ReadyToApply', reason: 'ApplyPending', message: `plan ${plan.name} (${plan.statementCount} statement(s)) runs under spec.policy.apply Always` };
  }
}
