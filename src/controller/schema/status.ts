// Writing a PtahSchema's status: the shared status writer (src/controller/status.ts) with the schema's phases.
import type { ActiveOperation } from '../../shared/api/shapes.js';
import type { PtahSchemaStatus, SchemaPhase } from '../../shared/api/schema-kinds.js';
import { claimWith, reportChanges, writeStatus, type PhaseSummary, type Report as OwnerReport } from '../status.js';
import type { SchemaPass } from './context.js';

export type Report = OwnerReport<SchemaPhase>;

const SUMMARY: PhaseSummary<SchemaPhase> = { progressing: new Set(['Pending', 'Resolving', 'Observing', 'Planning', 'Applying', 'VerifyingConvergence']) };

/** Writes `next` as the status (with `report`'s phase and conditions when given). */
export async function writeSchemaStatus(pass: SchemaPass, next: PtahSchemaStatus, report?: Report): Promise<void> {
  await writeStatus(pass, next, SUMMARY, report);
}

/** Writes the report alone, only when it changes something. Returns whether it wrote. */
export async function publishSchemaReport(pass: SchemaPass, report: Report): Promise<boolean> {
  if (!reportChanges(pass.status, report, pass.generation)) return false;
  await writeSchemaStatus(pass, pass.status, report);
  return true;
}

/** Writes fields of the claim in flight; refused when the status no longer holds that claim. */
export async function writeSchemaClaimFields(pass: SchemaPass, claimId: string, fields: Partial<ActiveOperation>, report?: Report): Promise<void> {
  await writeSchemaStatus(pass, { ...pass.status, activeOperation: claimWith(pass, claimId, fields) }, report);
}
