// A migration claim's Job (claim-job.ts): rebuilt from the claim and the objects it was decided from, and held to
// its claim; the migration supplies its plan and whether its claim's inputs still hold.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigrationPlan } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import type { HeldJob } from '../active-claim.js';
import { holdJobToItsClaim, rebuildOwnedJob } from '../claim-job.js';
import type { MigrationPass } from './context.js';
import { migrationInputFingerprint } from './fingerprint.js';

/** The plan an Apply claim runs, read uncached under its planRef (undefined when gone or replaced). */
export async function claimPlan(pass: MigrationPass, claim: ActiveOperation): Promise<PtahMigrationPlan | undefined> {
  if (!claim.planRef) return undefined;
  const plan = await pass.deps.client.tryGet<PtahMigrationPlan>({ apiVersion: API_VERSION, kind: KINDS.PtahMigrationPlan.kind, namespace: pass.namespace, name: claim.planRef.name });
  return plan?.metadata.uid === claim.planRef.uid ? plan : undefined;
}

/** The Job `claim` builds; `liveJob` gives the manager identity the stored Job recorded, which binds nothing. */
export function rebuildMigrationJob(pass: MigrationPass, claim: ActiveOperation, plan: PtahMigrationPlan | undefined, liveJob?: V1Job): V1Job {
  return rebuildOwnedJob(pass, pass.m, pass.status.executionBinding, claim, plan, liveJob);
}

/** Whether the claim's inputs still hold: its fingerprint recomputes and, for an Apply, its plan still stands. */
export async function claimInputsHold(pass: MigrationPass, claim: ActiveOperation): Promise<{ hold: true; plan?: PtahMigrationPlan } | { hold: false; why: string }> {
  const binding = pass.status.executionBinding;
  if (!binding || binding.epoch !== claim.executionBindingID) return { hold: false, why: 'the execution binding moved' };
  const fingerprint = migrationInputFingerprint(pass.m, {
    type: claim.type,
    // A Resolve is decided before any pin: it finds one.
    artifact: claim.type === 'Resolve' ? undefined : pass.status.artifact,
    executionBindingID: binding.epoch,
    coordinationDigest: pass.realm(),
    planRef: claim.planRef,
  });
  if (fingerprint !== claim.inputFingerprint) return { hold: false, why: 'the resource changed since the claim was made (spec, artifact or binding)' };
  if (claim.type !== 'Apply') return { hold: true };
  const plan = await claimPlan(pass, claim);
  return plan ? { hold: true, plan } : { hold: false, why: `the plan ${claim.planRef?.name ?? '?'} the Apply runs was deleted or replaced` };
}

/** Holds the Job under the claim's name to the claim (claim-job.ts). */
export async function holdMigrationJobToItsClaim(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Promise<HeldJob<PtahMigrationPlan>> {
  return holdJobToItsClaim(pass, claim, job, await claimInputsHold(pass, claim), (plan, liveJob) => rebuildMigrationJob(pass, claim, plan, liveJob));
}
