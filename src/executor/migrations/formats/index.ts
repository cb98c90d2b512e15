// The reader of each directory format (spec.artifact.format).
import type { MigrationFormat } from '../../../shared/migration-format.js';
import { dbmateReader } from './dbmate.js';
import { flywayReader } from './flyway.js';
import { golangMigrateReader } from './golang-migrate.js';
import { gooseReader } from './goose.js';
import { ptahReader } from './ptah.js';
import type { FormatReader } from './reader.js';

const READERS: Record<MigrationFormat, FormatReader> = {
  ptah: ptahReader,
  'golang-migrate': golangMigrateReader,
  goose: gooseReader,
  dbmate: dbmateReader,
  flyway: flywayReader,
};

export const readerFor = (format: MigrationFormat): FormatReader => READERS[format];
