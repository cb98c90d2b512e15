// Writing a PtahMigration's status and metadata: the shared status writer (src/controller/status.ts) with the
// migration's phases, and the unresolved-run copy's annotation.
import type { MigrationPhase, PtahMigration, PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { claimWith, reportChanges, writeStatus, type PhaseSummary, type Report as OwnerReport } from '../status.js';
import type { MigrationPass } from './context.js';

export { ClaimMovedError, statusWithCondition } from '../status.js';

/** What a pass tells a person: the phase, and the reason and message every condition is derived from. */
export type Report = OwnerReport<MigrationPhase>;

const SUMMARY: PhaseSummary<MigrationPhase> = { progressing: new Set(['Pending', 'Resolving', 'Reading', 'Planning', 'Applying', 'VerifyingHistory']) };

/**
 * Writes `next` as the status (with `report`'s phase and conditions when given). status.observedGeneration is
 * whatever `next` says: it names the generation whose spec the status's reading reflects, and only the writes that
 * establish that set it.
 */
export async function writeMigrationStatus(pass: MigrationPass, next: PtahMigrationStatus, report?: Report): Promise<void> {
  await writeStatus(pass, next, SUMMARY, report);
}

/** Writes the report alone, only when it changes something. Returns whether it wrote. */
export async function publishReport(pass: MigrationPass, report: Report): Promise<boolean> {
  if (!reportChanges(pass.status, report, pass.generation)) return false;
  await writeMigrationStatus(pass, pass.status, report);
  return true;
}

/** Writes fields of the claim in flight; refused when the status no longer holds that claim. */
export async function writeClaimFields(pass: MigrationPass, claimId: string, fields: Partial<ActiveOperation>, report?: Report): Promise<void> {
  await writeMigrationStatus(pass, { ...pass.status, activeOperation: claimWith(pass, claimId, fields) }, report);
}

/** A merge patch of one annotation (null removes it), guarded by the resourceVersion the pass last saw. */
export async function patchAnnotation(pass: MigrationPass, key: string, value: string | null): Promise<void> {
  pass.m = await pass.deps.client.patch<PtahMigration>(
    pass.ref(),
    { metadata: { resourceVersion: pass.m.metadata.resourceVersion, annotations: { [key]: value } } },
    'merge',
  );
}
