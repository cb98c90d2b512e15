// Flyway SQL migrations: `V<version>__<description>.sql` (prefix case-sensitive, suffix not), versions compared as
// numbers part by part, trailing zero parts ignored (`1`, `1.0`, `1_0`, `001` are one version). The executor
// records integer versions, so a version with a non-zero part after the first is refused, as are the files whose
// meaning the executor cannot keep: repeatable (`R__`), baseline (`B`) and callback scripts, `.conf` sidecars,
// and `${…}` placeholders. Undo (`U`) files never run. A script runs in a transaction unless it holds a statement
// that cannot, and then all of it must be such statements (Flyway's default `mixed=false`).
import { crc32 } from 'node:zlib';
import { nonTransactionalCommand, splitSqlStatements } from '../../sql-split.js';
import { fileProblem, type DirectoryEntry, type FormatReader, type UpSection } from './reader.js';

const SCRIPT = /^(?<prefix>[A-Z])(?<version>.*?)(?:__(?<description>.*))?\.sql$/i;
const VERSION = /^[0-9]+(?:[._][0-9]+)*$/;
const CALLBACK = /^(before|after)[A-Za-z]*(__.*)?\.sql$/i;
const PLACEHOLDER = '${';

export const flywayReader: FormatReader = {
  format: 'flyway',
  fileShape: 'V<version>__<description>.sql',
  namingRule: 'Flyway names each migration V<version>__<description>.sql (version: digits, with . or _ between parts; the executor ' +
    'records integer versions, so only the first part may be non-zero: V1, V001, V1.0 and V1_0 are one version); U undo files and ' +
    'hidden entries are ignored; rename or remove anything else',
  entry: flywayEntry,
  upSection: readFlywayScript,
  foreignTools: ['goose', 'dbmate', 'ptah'],
  ordersByFileName: false,
};

function flywayEntry(fileName: string): DirectoryEntry {
  if (fileName.endsWith('.conf')) {
    return { kind: 'misnamed', why: 'a Flyway script configuration, which the executor does not read: remove it (executeInTransaction follows the statements)' };
  }
  if (CALLBACK.test(fileName)) return { kind: 'misnamed', why: 'a Flyway callback, which the executor never runs: remove it' };
  const match = SCRIPT.exec(fileName);
  if (!match) return { kind: 'misnamed' };
  const { prefix, version, description = '' } = match.groups as { prefix: string; version: string; description?: string };
  if (prefix === 'U') return { kind: 'ignored' };
  if (prefix === 'R') {
    return { kind: 'misnamed', why: 'a repeatable migration, which Flyway runs again whenever it changes; the executor applies each file once: make it a V file' };
  }
  if (prefix === 'B') return { kind: 'misnamed', why: 'a baseline migration, which the executor does not read: remove it' };
  if (prefix !== 'V' || !VERSION.test(version)) return { kind: 'misnamed' };
  const first = flywayIntegerVersion(version);
  if (first === undefined) {
    return { kind: 'misnamed', why: 'a dotted version; the executor records integer versions: renumber it with an integer version above the ones before it' };
  }
  if (first.length > 30) return { kind: 'misnamed', why: 'a version of more than 30 digits' };
  return { kind: 'migration', version: first, name: description === '' ? fileName : description };
}

/**
 * The integer a Flyway version stands for (its first part, as written), or undefined when it is not a version or
 * a part after the first is non-zero: the one rule for file names and for versions in Flyway's history table.
 */
export function flywayIntegerVersion(version: string): string | undefined {
  if (!VERSION.test(version)) return undefined;
  const [first, ...rest] = version.split(/[._]/);
  return rest.some((part) => BigInt(part) !== 0n) ? undefined : first;
}

function readFlywayScript(fileName: string, text: string): UpSection {
  const at = text.indexOf(PLACEHOLDER);
  if (at >= 0) {
    throw fileProblem(fileName, text.slice(0, at).split('\n').length, 'Flyway replaces ${…} placeholders before it runs a script (in strings ' +
      'and $$ bodies too), and the executor has no placeholder values: write the value into the file');
  }
  const statements = splitSqlStatements(text);
  const outside = statements.filter((s) => nonTransactionalCommand(s) !== undefined);
  const inside = statements.find((s) => nonTransactionalCommand(s) === undefined);
  if (outside.length > 0 && inside) {
    throw fileProblem(fileName, outside[0]!.line, `${nonTransactionalCommand(outside[0]!)} cannot run in a transaction, so Flyway runs this ` +
      `script outside one, and refuses to mix it with the statement at line ${inside.line} (mixed=false): move it to a script of its own`);
  }
  return { sql: text, transactional: outside.length === 0, transactionAdvice: 'move the statement to a script of its own' };
}

/**
 * Flyway's checksum of a script's text, as its history table stores it: one CRC32 over each line's UTF-8 bytes with
 * the terminators (\n, \r, \r\n) and a leading U+FEFF dropped, read as a signed int32 (Java's int).
 */
export function flywayChecksum(text: string): number {
  return text.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/).reduce((crc, line) => crc32(line, crc), 0) | 0;
}
