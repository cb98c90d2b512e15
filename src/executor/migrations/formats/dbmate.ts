// dbmate: `<digits><anything>.sql`, applied in file-name order; a file holds `-- migrate:up [options]` then
// `-- migrate:down` (both required, at the start of a line), and only the up block runs. The up block is sent
// as one query: in a transaction unless the up marker carries exactly `transaction:false`, and even then
// PostgreSQL runs a multi-statement query as one implicit transaction.
import { bareLines, fileProblem, keepLines, oneQueryIsTransactional, type FormatReader, type UpSection } from './reader.js';

const FILE = /^(?<version>[0-9]+)(?<name>.*)\.sql$/;
const MARKER = /^--\s*migrate:(?<direction>up|down)(?:\s*$|\s+(?<options>\S.*)$)/;

export const dbmateReader: FormatReader = {
  format: 'dbmate',
  fileShape: '<version><anything>.sql',
  namingRule: 'dbmate names each migration <version><anything>.sql (version: the leading digits, at most 30; the executor compares ' +
    'versions by numeric value, so 01 and 1 are one version, and applies files in dbmate\'s file-name order, so every version ' +
    'needs the same number of digits, as dbmate\'s timestamps have); hidden entries are ignored; rename or remove anything else',
  entry(fileName) {
    const match = FILE.exec(fileName);
    if (!match) return { kind: 'misnamed' };
    const { version, name } = match.groups as { version: string; name: string };
    if (version.length > 30) return { kind: 'misnamed', why: 'a version of more than 30 digits' };
    const title = name.replace(/^_/, '');
    return { kind: 'migration', version, name: title === '' ? fileName : title };
  },
  upSection: readDbmateFile,
  foreignTools: ['goose', 'ptah'],
  ordersByFileName: true,
};

function readDbmateFile(fileName: string, text: string): UpSection {
  const raw = text.split('\n');
  let up: { line: number; noTransaction: boolean } | undefined;
  let down: number | undefined;
  for (const [i, line] of bareLines(raw).entries()) {
    const marker = MARKER.exec(line);
    if (!marker) {
      if (!up && line.trim() !== '' && !line.trim().startsWith('--')) {
        throw fileProblem(fileName, i + 1, 'dbmate refuses SQL before -- migrate:up: move it into the up block');
      }
      continue;
    }
    if (marker.groups!.direction === 'up') {
      if (up) {
        throw fileProblem(fileName, i + 1, `a second -- migrate:up (the first is at line ${up.line + 1}): dbmate records the file's version ` +
          'once per section and fails at the second (amacneil/dbmate#820); split the sections into files of their own');
      }
      // dbmate reads only the exact word transaction:false; any other spelling leaves the transaction on.
      up = { line: i, noTransaction: (marker.groups!.options ?? '').split(/\s+/).includes('transaction:false') };
    } else {
      if (!up) throw fileProblem(fileName, i + 1, '-- migrate:down comes before -- migrate:up: dbmate requires the up block first');
      if (down !== undefined) throw fileProblem(fileName, i + 1, `a second -- migrate:down (the first is at line ${down + 1}): remove it`);
      down = i;
    }
  }
  if (!up) throw fileProblem(fileName, 1, 'a dbmate file must have a -- migrate:up line: add it above the up SQL');
  if (down === undefined) {
    throw fileProblem(fileName, up.line + 1, 'dbmate requires a -- migrate:down line after the up block (it may be followed by nothing): add it');
  }
  const sql = keepLines(raw, up.line + 1, down);
  return {
    sql,
    transactional: !up.noTransaction || oneQueryIsTransactional(sql),
    transactionAdvice: up.noTransaction
      ? 'dbmate sends the up block as one query, which PostgreSQL runs as one transaction even under transaction:false: move the ' +
        'statement to a file of its own, alone in its up block'
      : 'add transaction:false to the -- migrate:up line (exactly that spelling) and keep the statement alone in its up block',
  };
}
