// Reading the migration files of an artifact directory: `<version>_<name>.up.sql`, ordered by the numeric
// value of the version. The naming rule is documented in docs/executor.md; any other visible file is refused so
// a misnamed migration is never silently skipped. A file about to be applied must also be runnable as written:
// plain SQL, without another tool's section markers, without its own transaction control, and without statements
// that cannot run in the transaction the executor runs it in.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Digest } from '../../shared/canonical.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { isTransactionControl, nonTransactionalCommand, splitSqlStatements, type SplitOptions, type SqlStatement } from '../sql-split.js';

export const UP_FILE = /^(?<version>[0-9]{1,30})_(?<name>[A-Za-z0-9][A-Za-z0-9_-]{0,199})\.up\.sql$/;
/** Down files are allowed beside the up files (other tools use them) and ignored. */
const DOWN_FILE = /^[0-9]{1,30}_[A-Za-z0-9][A-Za-z0-9_-]{0,199}\.down\.sql$/;
export const NO_TRANSACTION_DIRECTIVE = '-- ptah:no-transaction';
const NAMING_RULE = 'Name each migration <version>_<name>.up.sql (version: 1 to 30 digits, unique by numeric value: 001 and 1 ' +
  'are the same version; name: a letter or digit, then letters, digits, _ and -, up to 200 characters); ' +
  '<version>_<name>.down.sql files and hidden entries are ignored; rename or remove anything else';
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
  sql: string;
  transactional: boolean;
}

/**
 * Every visible entry of `dir`, validated and sorted by version. Hidden entries (ConfigMap mount internals) are
 * skipped. Every naming problem is refused at once.
 */
export function readMigrationSources(dir: string): MigrationSource[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch (err) {
    throw new ExecutorFailure('artifact_unreadable', `cannot list the migration artifact directory: ${errorMessage(err)}`);
  }
  const sources: MigrationSource[] = [];
  const misnamed: string[] = [];
  for (const fileName of entries.sort()) {
    if (fileName.startsWith('.')) continue;
    const match = UP_FILE.exec(fileName);
    if (!match) {
      if (!DOWN_FILE.test(fileName)) misnamed.push(fileName);
      continue;
    }
    const path = join(dir, fileName);
    let bytes: Buffer;
    try {
      if (!statSync(path).isFile()) {
        misnamed.push(fileName);
        continue;
      }
      bytes = readFileSync(path);
    } catch (err) {
      throw new ExecutorFailure('artifact_unreadable', `cannot read migration file ${fileName}: ${errorMessage(err)}`);
    }
    const version = match.groups!.version!;
    const sql = bytes.toString('utf8');
    sources.push({
      version,
      order: BigInt(version),
      name: match.groups!.name!,
      fileName,
      checksum: sha256Digest(bytes),
      sql,
      transactional: (sql.split('\n', 1)[0] ?? '').trimEnd() !== NO_TRANSACTION_DIRECTIVE,
    });
  }
  sources.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  refuseNamingProblems(misnamed, sharedVersions(sources));
  return sources;
}

/** Groups of two or more sources with one version, from sources sorted by version. */
function sharedVersions(sorted: readonly MigrationSource[]): MigrationSource[][] {
  const groups: MigrationSource[][] = [];
  for (const [i, source] of sorted.entries()) {
    if (i > 0 && sorted[i - 1]!.order === source.order) groups.at(-1)!.push(source);
    else groups.push([source]);
  }
  return groups.filter((group) => group.length > 1);
}

function refuseNamingProblems(misnamed: readonly string[], shared: readonly MigrationSource[][]): void {
  const problems = [
    ...(misnamed.length > 0 ? [`${count(misnamed.length, 'file is', 'files are')} not named <version>_<name>.up.sql: ${listed(misnamed)}`] : []),
    ...(shared.length > 0 ? [`${count(shared.length, 'version is', 'versions are')} used by more than one file: ` +
      listed(shared.map((group) => `${group[0]!.order} (${listed(group.map((s) => s.fileName).sort())})`))] : []),
  ];
  if (problems.length === 0) return;
  throw new ExecutorFailure(misnamed.length > 0 ? 'invalid_migration_name' : 'duplicate_migration_version', `${problems.join('; ')}. ${NAMING_RULE}`);
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
const listed = (items: readonly string[]) => items.slice(0, LISTED).join(', ') + (items.length > LISTED ? ` and ${items.length - LISTED} more` : '');

/** Refuses a file that cannot be run as written (see the header); the first problem, with its line and the fix. */
export function assertRunnable(source: MigrationSource, lexing: SplitOptions): void {
  assertNoForeignMarkers(source);
  const statements = splitSqlStatements(source.sql, lexing);
  assertNoTransactionControl(source, statements);
  assertRunsInItsTransaction(source, statements);
}

/** A line that another migration tool reads as a section marker of its format. */
export interface ForeignMarker {
  tool: 'goose' | 'dbmate';
  /** 1-based. */
  line: number;
  /** The line, trimmed. */
  text: string;
}

// goose: a line comment whose text, dashes and spaces aside, is +goose and an annotation (any case, spaces
// optional). dbmate: `-- migrate:up` or `-- migrate:down` at the start of a line, options after a space.
const GOOSE_MARKER = /^\s*--[-\s]*\+goose\s*(up|down|statementbegin|statementend|no\s+transaction|envsub(st)?\s+(on|off))\s*$/i;
const DBMATE_MARKER = /^--\s*migrate:(up|down)(\s|$)/;

/**
 * The lines of `sql` that goose or dbmate read as their section markers, in order. The executor runs a file
 * whole, so it cannot run these; a reader of those formats can use them to find the sections.
 */
export function foreignMarkers(sql: string): ForeignMarker[] {
  return sql.split('\n').flatMap((line, i): ForeignMarker[] => {
    const tool = GOOSE_MARKER.test(line) ? 'goose' : DBMATE_MARKER.test(line) ? 'dbmate' : undefined;
    return tool ? [{ tool, line: i + 1, text: line.trim() }] : [];
  });
}

function assertNoForeignMarkers(source: MigrationSource): void {
  const [marker] = foreignMarkers(source.sql);
  if (!marker) return;
  throw new ExecutorFailure('migration_invalid',
    `migration ${source.fileName} line ${marker.line}: "${marker.text}" is a ${marker.tool} marker; the executor runs a file whole and does ` +
    `not read ${marker.tool}'s sections, so its down section would run too. Keep only the up SQL in the .up.sql file (down SQL may go to ` +
    `${source.version}_${source.name}.down.sql, which is ignored) and remove the markers; reading ${marker.tool} files directly is not supported yet`);
}

/** Refuses a file that controls transactions itself: the executor owns transaction boundaries (docs/executor.md). */
export function assertNoTransactionControl(source: MigrationSource, statements: readonly SqlStatement[] = splitSqlStatements(source.sql)): void {
  const offending = statements.find(isTransactionControl);
  if (offending) {
    throw new ExecutorFailure('migration_invalid',
      `migration ${source.fileName} line ${offending.line}: ${offending.leadingWords.join(' ')} is not allowed; the executor runs each ` +
      `file in its own transaction (or, with ${NO_TRANSACTION_DIRECTIVE} as its first line, each statement on its own): remove it`);
  }
}

/** Refuses, in a file that runs in one transaction, a statement that PostgreSQL refuses to run inside one. */
function assertRunsInItsTransaction(source: MigrationSource, statements: readonly SqlStatement[]): void {
  if (!source.transactional) return;
  for (const statement of statements) {
    const command = nonTransactionalCommand(statement);
    if (command) {
      throw new ExecutorFailure('migration_invalid',
        `migration ${source.fileName} line ${statement.line}: ${command} cannot run inside a transaction block, and this file runs in ` +
        `one; make \`${NO_TRANSACTION_DIRECTIVE}\` its first line (its statements then run one at a time, each committed on its own), ` +
        'or move the statement to a file of its own that starts with it');
    }
  }
}
