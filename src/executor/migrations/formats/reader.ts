// What a migration directory format supplies to the reading (files.ts): which entries are its migrations, and,
// for each file, the up SQL the executor runs and whether it runs in a transaction. The up SQL keeps the file's
// line numbers (lines outside the up section are blanked), so every message and server error names file lines.
import type { MigrationFormat } from '../../../shared/migration-format.js';
import { MIGRATION_ARTIFACT_REFUSALS } from '../../../shared/executor-report.js';
import { ExecutorFailure } from '../../failure.js';
import { nonTransactionalCommand, splitSqlStatements } from '../../sql-split.js';

export type DirectoryEntry =
  | { kind: 'migration'; version: string; name: string }
  /** The format's own files that never run (down, undo). */
  | { kind: 'ignored' }
  /** Not a migration of this format; `why` says what the name looks like when the format has a reason. */
  | { kind: 'misnamed'; why?: string };

export interface UpSection {
  sql: string;
  transactional: boolean;
  /** What to change, in this format's words, so a statement that cannot run in a transaction runs outside one. */
  transactionAdvice: string;
}

/** The tools whose markers a reading recognises; `ptah` is the `-- ptah:no-transaction` directive. */
export type MarkerTool = 'goose' | 'dbmate' | 'ptah';

export interface FormatReader {
  format: MigrationFormat;
  /** How a migration file of this format is named, in short, e.g. `<version>_<name>.up.sql`. */
  fileShape: string;
  /** Appended to every naming refusal: how this format names a migration. */
  namingRule: string;
  entry(fileName: string): DirectoryEntry;
  /** Throws MIGRATION_ARTIFACT_REFUSALS.invalidFile naming the file and line when the file is not a well-formed file of the format. */
  upSection(fileName: string, text: string): UpSection;
  /** Markers of other tools this format does not read: a file carrying one is refused. */
  foreignTools: readonly MarkerTool[];
  /** The format applies files in file-name order: a directory whose name order is not its version order is refused. */
  ordersByFileName: boolean;
}

export function fileProblem(fileName: string, line: number, message: string): ExecutorFailure {
  return new ExecutorFailure(MIGRATION_ARTIFACT_REFUSALS.invalidFile, `migration ${fileName} line ${line}: ${message}`);
}

/** The text with only lines [from, to) (0-based) kept; the others are emptied, their line breaks kept. */
export function keepLines(lines: readonly string[], from: number, to: number): string {
  return lines.map((line, i) => (i >= from && i < to ? line : '')).join('\n');
}

/** A file's lines without their terminators, for marker matching (CRLF files read as LF). */
export const bareLines = (lines: readonly string[]): string[] => lines.map((line) => line.replace(/\r$/, ''));

/**
 * Whether SQL sent to the server as one query (golang-migrate's file, dbmate's up block) runs in a transaction:
 * PostgreSQL runs a multi-statement query as one implicit transaction, so only a sole statement that cannot run
 * in one runs outside it.
 */
export function oneQueryIsTransactional(sql: string): boolean {
  const statements = splitSqlStatements(sql);
  return !(statements.length === 1 && nonTransactionalCommand(statements[0]!) !== undefined);
}

/** A version that must fit an integer type of the tool (goose int64 from 1, golang-migrate uint64). */
export function versionInRange(version: string, min: bigint, max: bigint): boolean {
  const value = BigInt(version);
  return value >= min && value <= max;
}
