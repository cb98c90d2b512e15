// The directory formats a PtahMigration artifact may be written in (spec.artifact.format), defined once for the
// CRD, the Job's environment, the runner and the executor. `ptah` is the project's own convention.
export const MIGRATION_FORMATS = ['ptah', 'golang-migrate', 'goose', 'dbmate', 'flyway'] as const;
export type MigrationFormat = (typeof MIGRATION_FORMATS)[number];
export const DEFAULT_MIGRATION_FORMAT: MigrationFormat = 'ptah';

export function isMigrationFormat(value: unknown): value is MigrationFormat {
  return typeof value === 'string' && (MIGRATION_FORMATS as readonly string[]).includes(value);
}
