// golang-migrate: `<version>_<title>.up.sql` beside `.down.sql`, the version a uint64, the title free (even empty).
// The file carries no markers and is sent to the server as one query, which PostgreSQL runs as one implicit
// transaction: a statement that cannot run in one works only as the file's sole statement.
import { oneQueryIsTransactional, versionInRange, type FormatReader } from './reader.js';

const FILE = /^(?<version>[0-9]+)_(?<title>.*)\.(?<direction>up|down)\.(?<ext>[^.]*)$/;
const UINT64_MAX = 2n ** 64n - 1n;

export const golangMigrateReader: FormatReader = {
  format: 'golang-migrate',
  fileShape: '<version>_<title>.up.sql',
  namingRule: 'golang-migrate names each migration <version>_<title>.up.sql (version: digits, a uint64, unique by numeric value: ' +
    '001 and 1 are the same version); .down.sql files and hidden entries are ignored (down migrations never run); ' +
    'rename or remove anything else',
  entry(fileName) {
    const match = FILE.exec(fileName);
    if (!match || match.groups!.ext !== 'sql') return { kind: 'misnamed' };
    const { version, title, direction } = match.groups as { version: string; title: string; direction: string };
    if (version.length > 30 || !versionInRange(version, 0n, UINT64_MAX)) return { kind: 'misnamed', why: 'the version must be a uint64 written in at most 30 digits' };
    if (direction === 'down') return { kind: 'ignored' };
    return { kind: 'migration', version, name: title === '' ? fileName : title };
  },
  upSection(_fileName, text) {
    return {
      sql: text,
      transactional: oneQueryIsTransactional(text),
      transactionAdvice: 'golang-migrate sends a file as one query, which PostgreSQL runs as one transaction: move the statement to a ' +
        'file of its own, as its only statement',
    };
  },
  foreignTools: ['goose', 'dbmate', 'ptah'],
  ordersByFileName: false,
};
