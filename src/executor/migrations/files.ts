// Reading the migration files of an artifact directory, in the format the resource declares
// (spec.artifact.format; formats/ holds one reader per format), ordered by the numeric value of the version. Any
// visible file that is not a migration of the format is refused so a misnamed migration is never silently
// skipped. A file about to be applied must also be runnable as written: its up SQL without another tool's markers,
// without its own transaction control, and without statements that cannot run in the transaction it runs in.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Digest } from '../../shared/canonical.js';
import { DEFAULT_MIGRATION_FORMAT, type MigrationFormat } from '../../shared/migration-format.js';
import { MIGRATION_ARTIFACT_REFUSALS } from '../../shared/executor-report.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { isTransactionControl, nonTransactionalCommand, splitSqlStatements, type SplitOptions, type SqlStatement } from '../sql-split.js';
import { flywayChecksum } from './formats/flyway.js';
import { readerFor } from './formats/index.js';
import type { FormatReader, MarkerTool } from './formats/reader.js';

/** How many names a refusal lists before it only counts the rest. */
const LISTED = 10;

export interface MigrationSource {
  /** The version as the file name spells it. */
  version: string;
  /** The numeric value, the version's identity: `001` and `1` are the same version. */
  order: bigint;
  name: string;
  fileName: string;
  /** sha256 of the file's bytes. */
  checksum: string;
  /** The up SQL the executor runs, on the file's own lines. */
  sql: string;
  transactional: boolean;
  /** What to change so that a statement that cannot run in a transaction runs outside one (formats/reader.ts). */
  transactionAdvice: string;
  format: MigrationFormat;
  /** Flyway's checksum of the file's text, for adopting Flyway's history; only files read as flyway have one. */
  flywayChecksum?: number;
}

/**
 * Every visible entry of `dir`, read in `format`, validated and sorted by version. Hidden entries (ConfigMap mount
 * internals) are skipped. Every naming problem is refused at once.
 */
export function readMigrationSources(dir: string, format: MigrationFormat = DEFAULT_MIGRATION_FORMAT): MigrationSource[] {
  const reader = readerFor(format);
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch (err) {
    throw new ExecutorFailure('artifact_unreadable', `cannot list the migration artifact directory: ${errorMessage(err)}`);
  }
  const found: Found[] = [];
  const misnamed: string[] = [];
  for (const fileName of entries.sort()) {
    if (fileName.startsWith('.')) continue;
    const entry = reader.entry(fileName);
    if (entry.kind !== 'migration') {
      if (entry.kind === 'misnamed') misnamed.push(entry.why ? `${fileName} (${entry.why})` : fileName);
      continue;
    }
    const path = join(dir, fileName);
    let bytes: Buffer;
    try {
      if (!statSync(path).isFile()) {
        misnamed.push(`${fileName} (not a file)`);
        continue;
      }
      bytes = readFileSync(path);
    } catch (err) {
      throw new ExecutorFailure('artifact_unreadable', `cannot read migration file ${fileName}: ${errorMessage(err)}`);
    }
    found.push({ version: entry.version, order: BigInt(entry.version), name: entry.name, fileName, bytes });
  }
  found.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  // Names first, all at once; then the files' contents, whose problems are one file's at a time.
  refuseNamingProblems(reader, misnamed, sharedVersions(found), reader.ordersByFileName ? nameOrderInversions(found) : []);
  return found.map(({ bytes, ...file }) => {
    const text = bytes.toString('utf8');
    return { ...file, checksum: sha256Digest(bytes), ...reader.upSection(file.fileName, text), format, ...(format === 'flyway' ? { flywayChecksum: flywayChecksum(text) } : {}) };
  });
}

/** A migration file of the format, before its contents are read. */
type Found = Pick<MigrationSource, 'version' | 'order' | 'name' | 'fileName'> & { bytes: Buffer };

/** Consecutive sources, in version order, whose file names sort the other way (the tool would apply them swapped). */
function nameOrderInversions(sorted: readonly Found[]): string[] {
  return sorted.slice(1).flatMap((source, i) => {
    const before = sorted[i]!;
    return before.order !== source.order && before.fileName > source.fileName ? [`${source.fileName} before ${before.fileName}`] : [];
  });
}

/** Groups of two or more sources with one version, from sources sorted by version. */
function sharedVersions(sorted: readonly Found[]): Found[][] {
  const groups: Found[][] = [];
  for (const [i, source] of sorted.entries()) {
    if (i > 0 && sorted[i - 1]!.order === source.order) groups.at(-1)!.push(source);
    else groups.push([source]);
  }
  return groups.filter((group) => group.length > 1);
}

function refuseNamingProblems(reader: FormatReader, misnamed: readonly string[], shared: readonly Found[][], inversions: readonly string[]): void {
  const problems = [
    ...(misnamed.length > 0 ? [`${count(misnamed.length, 'file is', 'files are')} not named ${reader.fileShape}: ${listed(misnamed)}`] : []),
    ...(shared.length > 0 ? [`${count(shared.length, 'version is', 'versions are')} used by more than one file: ` +
      listed(shared.map((group) => `${group[0]!.order} (${listed(group.map((s) => s.fileName).sort())})`))] : []),
    ...(inversions.length > 0 ? [`${reader.format} applies files in file-name order, and ${count(inversions.length, 'pair sorts', 'pairs sort')} ` +
      `against the version order: ${listed(inversions)}`] : []),
  ];
  if (problems.length === 0) return;
  throw new ExecutorFailure(misnamed.length > 0 || inversions.length > 0 ? MIGRATION_ARTIFACT_REFUSALS.misnamed : MIGRATION_ARTIFACT_REFUSALS.duplicateVersion,
    `${problems.join('; ')}. ${reader.namingRule}`);
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
export const listed = (items: readonly string[]) => items.slice(0, LISTED).join(', ') + (items.length > LISTED ? ` and ${items.length - LISTED} more` : '');

/** Refuses a file that cannot be run as written (see the header); the first problem, with its line and the fix. */
export function assertRunnable(source: MigrationSource, lexing: SplitOptions): void {
  assertNoForeignMarkers(source);
  const statements = splitSqlStatements(source.sql, lexing);
  assertNoTransactionControl(source, statements);
  assertRunsInItsTransaction(source, statements);
}

/** A line that another migration tool reads as a marker of its format. */
export interface ForeignMarker {
  tool: MarkerTool;
  /** 1-based. */
  line: number;
  /** The line, trimmed. */
  text: string;
}

// goose: a line comment whose text, dashes and spaces aside, is +goose and an annotation (any case, spaces
// optional). dbmate: `-- migrate:up` or `-- migrate:down` at the start of a line, options after a space. ptah:
// the no-transaction directive, which only the ptah format reads.
const MARKERS: Record<MarkerTool, RegExp> = {
  goose: /^\s*--[-\s]*\+goose\s*(up|down|statementbegin|statementend|no\s+transaction|envsub(st)?\s+(on|off))\s*$/i,
  dbmate: /^--\s*migrate:(up|down)(\s|$)/,
  ptah: /^\s*--\s*ptah:no-transaction\s*$/i,
};

/** The lines of `sql` that one of `tools` reads as its markers, in order. */
export function foreignMarkers(sql: string, tools: readonly MarkerTool[]): ForeignMarker[] {
  return sql.split('\n').flatMap((line, i): ForeignMarker[] => {
    const tool = tools.find((t) => MARKERS[t].test(line));
    return tool ? [{ tool, line: i + 1, text: line.trim() }] : [];
  });
}

function assertNoForeignMarkers(source: MigrationSource): void {
  const [marker] = foreignMarkers(source.sql, readerFor(source.format).foreignTools);
  if (!marker) return;
  const where = `migration ${source.fileName} line ${marker.line}: "${marker.text}"`;
  if (marker.tool === 'ptah') {
    throw new ExecutorFailure(MIGRATION_ARTIFACT_REFUSALS.invalidFile, `${where} is the ptah format's directive, and this directory is read as ` +
      `${source.format} (spec.artifact.format), which does not read it: remove it (${source.format} files say how they run in their own way)`);
  }
  if (source.format === 'ptah') {
    throw new ExecutorFailure(MIGRATION_ARTIFACT_REFUSALS.invalidFile,
      `${where} is a ${marker.tool} marker; the ptah format runs a file whole and does not read ${marker.tool}'s sections, so its down ` +
      `section would run too. Declare spec.artifact.format: ${marker.tool} to read the directory as ${marker.tool} does, or keep only the ` +
      `up SQL in the .up.sql file (down SQL may go to ${source.version}_${source.name}.down.sql, which is ignored) and remove the markers`);
  }
  throw new ExecutorFailure(MIGRATION_ARTIFACT_REFUSALS.invalidFile,
    `${where} is a ${marker.tool} marker, and this directory is read as ${source.format} (spec.artifact.format), which does not read ` +
    `it, so a ${marker.tool} down section would run too: declare the format the files are written in, or remove the marker`);
}

/** Refuses a file that controls transactions itself: the executor owns transaction boundaries (docs/executor.md). */
export function assertNoTransactionControl(source: MigrationSource, statements: readonly SqlStatement[] = splitSqlStatements(source.sql)): void {
  const offending = statements.find(isTransactionControl);
  if (offending) {
    throw new ExecutorFailure(MIGRATION_ARTIFACT_REFUSALS.invalidFile,
      `migration ${source.fileName} line ${offending.line}: ${offending.leadingWords.join(' ')} is not allowed; the executor runs each ` +
      'file in its own transaction (or, where the file says so in its format, each statement on its own): remove it');
  }
}

/** Refuses, in a file that runs in one transaction, a statement that PostgreSQL refuses to run inside one. */
function assertRunsInItsTransaction(source: MigrationSource, statements: readonly SqlStatement[]): void {
  if (!source.transactional) return;
  for (const statement of statements) {
    const command = nonTransactionalCommand(statement);
    if (command) {
      throw new ExecutorFailure(MIGRATION_ARTIFACT_REFUSALS.invalidFile,
        `migration ${source.fileName} line ${statement.line}: ${command} cannot run inside a transaction block, and this file runs in ` +
        `one; ${source.transactionAdvice}`);
    }
  }
}
