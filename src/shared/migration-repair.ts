// Repairing a dirty history row (PtahMigration spec.repair), defined once for the CRD, the plan, the approved
// sequence, the runner and the executor. A no-transaction file that stopped after its first statement leaves its
// row dirty, and only a person can say what the database now holds: that the file's remaining statements were run
// by hand (finished: the row is marked applied) or that what it did was reversed (undone: the row is removed, so the
// file runs again). The repair is only ever proposed in a plan, which always needs a person's approval; the
// approved Apply makes it under the writer locks and records it in ptah_migrations.repairs.
export const REPAIR_RESOLUTIONS = ['finished', 'undone'] as const;
export type RepairResolution = (typeof REPAIR_RESOLUTIONS)[number];

export const isRepairResolution = (value: unknown): value is RepairResolution =>
  (REPAIR_RESOLUTIONS as readonly unknown[]).includes(value);

/** spec.repair: the dirty row's version and what the database now holds of its file. */
export interface MigrationRepair {
  version: string;
  resolution: RepairResolution;
}

/** What a repair does to the history, for a message: "marks 00004 finished" or "removes 00004's row, so it runs again". */
export function repairText({ version, resolution }: MigrationRepair): string {
  return resolution === 'finished'
    ? `marks migration ${version} finished (its remaining statements were run by hand)`
    : `removes migration ${version}'s dirty row (what it did was reversed by hand), so it runs again`;
}
