// Reading the migration files of an artifact directory: `<version>_<name>.up.sql`, ordered by the numeric
// value of the version. The naming rule is documented in docs/executor.md; any other visible file is refused so
// a misnamed migration is never silently skipped.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Digest } from '../../shared/canonical.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { isTransactionControl, splitSqlStatements } from '../sql-split.js';

export const UP_FILE = /^(?<version>[0-9]{1,30})_(?<name>[A-Za-z0-9][A-Za-z0-9_-]{0,199})\.up\.sql$/;
/** Down files are allowed beside the up files (other tools use them) and ignored. */
const DOWN_FILE = /^[0-9]{1,30}_[A-Za-z0-9][A-Za-z0-9_-]{0,199}\.down\.sql$/;
export const NO_TRANSACTION_DIRECTIVE = '-- ptah:no-transaction';

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

/** Every visible entry of `dir`, validated and sorted by version. Hidden entries (ConfigMap mount internals) are skipped. */
export function readMigrationSources(dir: string): MigrationSource[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch (err) {
    throw new ExecutorFailure('artifact_unreadable', `cannot list the migration artifact directory: ${errorMessage(err)}`);
  }
  const sources: MigrationSource[] = [];
  const bad: string[] = [];
  for (const fileName of entries.sort()) {
    if (fileName.startsWith('.')) continue;
    const match = UP_FILE.exec(fileName);
    if (!match) {
      if (!DOWN_FILE.test(fileName)) bad.push(fileName);
      continue;
    }
    const path = join(dir, fileName);
    let bytes: Buffer;
    try {
      if (!statSync(path).isFile()) {
        bad.push(fileName);
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
  if (bad.length > 0) {
    throw new ExecutorFailure('invalid_migration_name',
      `the artifact holds ${bad.length === 1 ? 'a file' : 'files'} that ${bad.length === 1 ? 'is' : 'are'} not named <version>_<name>.up.sql ` +
      `(version: digits; name: letters, digits, _ and -): ${bad.slice(0, 5).join(', ')}${bad.length > 5 ? ', …' : ''}`);
  }
  sources.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  for (let i = 1; i < sources.length; i += 1) {
    if (sources[i]!.order === sources[i - 1]!.order) {
      throw new ExecutorFailure('duplicate_migration_version',
        `migration files ${sources[i - 1]!.fileName} and ${sources[i]!.fileName} have the same version; every version must be unique`);
    }
  }
  return sources;
}

/** Refuses a file that controls transactions itself: the executor owns transaction boundaries (docs/executor.md). */
export function assertNoTransactionControl(source: MigrationSource): void {
  const offending = splitSqlStatements(source.sql).find(isTransactionControl);
  if (offending) {
    throw new ExecutorFailure('migration_invalid',
      `migration ${source.fileName} line ${offending.line}: ${offending.leadingWords.join(' ')} is not allowed; the executor runs each ` +
      `file in its own transaction (or, with ${NO_TRANSACTION_DIRECTIVE}, each statement on its own)`);
  }
}
