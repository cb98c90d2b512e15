// goose SQL files: `<version>_<name>.sql` (version: the digits before the first `_`, an int64 from 1), read by
// goose's annotation state machine: `-- +goose Up` once and first, an optional `-- +goose Down` after it (never
// run), `StatementBegin`/`StatementEnd` around a statement goose must not cut, `NO TRANSACTION` anywhere. goose
// ends a statement at every line whose last word ends in `;`, without looking at quotes; where that cut falls
// inside a statement psql would keep whole, goose sends broken SQL, so such a file is refused with the fix.
import { splitSqlStatements, type SqlStatement } from '../../sql-split.js';
import { bareLines, fileProblem, keepLines, versionInRange, type FormatReader, type UpSection } from './reader.js';

const FILE = /^(?<version>[0-9]+)_(?<name>.*)\.sql$/;
const INT64_MAX = 2n ** 63n - 1n;
const ANNOTATIONS = ['up', 'down', 'statementbegin', 'statementend', 'no transaction', 'envsub on', 'envsub off'] as const;
type Annotation = (typeof ANNOTATIONS)[number];

export const gooseReader: FormatReader = {
  format: 'goose',
  fileShape: '<version>_<name>.sql',
  namingRule: 'goose names each migration <version>_<name>.sql (version: the digits before the first _, from 1 to the int64 maximum, ' +
    'unique by numeric value: 00001 and 1 are the same version); hidden entries are ignored; goose .go migrations cannot run here; ' +
    'rename or remove anything else',
  entry(fileName) {
    if (fileName.endsWith('.go')) return { kind: 'misnamed', why: 'a Go migration, which only goose itself can run' };
    const match = FILE.exec(fileName);
    if (!match) return { kind: 'misnamed' };
    const { version, name } = match.groups as { version: string; name: string };
    if (version.length > 30 || !versionInRange(version, 1n, INT64_MAX)) {
      return { kind: 'misnamed', why: 'goose versions run from 1 to the int64 maximum, in at most 30 digits' };
    }
    return { kind: 'migration', version, name: name === '' ? fileName : name };
  },
  upSection: readGooseFile,
  foreignTools: ['dbmate', 'ptah'],
  ordersByFileName: false,
};

/** goose's reading of one line: an annotation, or undefined for SQL and ordinary comments. */
function annotationOf(fileName: string, line: string, lineNo: number): Annotation | undefined {
  const trimmed = line.trim();
  if (!trimmed.startsWith('--') || !trimmed.includes('+goose')) return undefined;
  if (/^\s/.test(line)) throw fileProblem(fileName, lineNo, `goose refuses an indented annotation ("${trimmed}"): start the line with --`);
  const word = trimmed.replaceAll('--', '').replace('+goose', '').trim().toLowerCase();
  const known = ANNOTATIONS.find((a) => a === word);
  if (known) return known;
  throw fileProblem(fileName, lineNo, `goose reads "${trimmed}" as an annotation (a -- comment containing +goose) and does not know it; ` +
    'use Up, Down, StatementBegin, StatementEnd or NO TRANSACTION, or reword the comment');
}

/** goose's end of a statement: the last word before any `--` word ends in `;`. */
function endsStatement(line: string): boolean {
  const words = line.split(/\s+/).filter((w) => w !== '');
  const comment = words.findIndex((w) => w.startsWith('--'));
  const code = comment < 0 ? words : words.slice(0, comment);
  return code.at(-1)?.endsWith(';') === true;
}

const isSql = (line: string) => line.trim() !== '' && !line.trim().startsWith('--');

function readGooseFile(fileName: string, text: string): UpSection {
  const raw = text.split('\n');
  const lines = bareLines(raw);
  const refuse = (i: number, message: string) => fileProblem(fileName, i + 1, message);
  let state: 'before' | 'up' | 'down' = 'before';
  let upFrom = 0;
  let upTo = lines.length;
  let noTransaction = false;
  let block: number | undefined;
  /** 0-based lines where goose ends an up statement, and the up blocks goose sends whole. */
  const cuts: number[] = [];
  const blocks: [number, number][] = [];
  /** Annotation lines are emptied in the up SQL, as goose drops them from what it sends. */
  const annotations = new Set<number>();
  /** The first line of an up statement goose has not ended yet. */
  let open: number | undefined;
  const closeUp = (i: number) => {
    if (block !== undefined) throw refuse(block, '-- +goose StatementBegin has no -- +goose StatementEnd before the section ends');
    if (open !== undefined) throw refuse(open, 'goose refuses an up statement that does not end with ; at the end of a line: add it');
    upTo = i;
  };
  for (const [i, line] of lines.entries()) {
    const annotation = annotationOf(fileName, line, i + 1);
    if (annotation === undefined) {
      if (state === 'before' && isSql(line)) throw refuse(i, 'goose refuses SQL before -- +goose Up: move it into the Up section');
      if (state === 'up' && block === undefined) {
        if (endsStatement(line)) {
          cuts.push(i);
          open = undefined;
        } else if (isSql(line)) open ??= i;
      }
      continue;
    }
    annotations.add(i);
    switch (annotation) {
      case 'up':
        if (state !== 'before') throw refuse(i, 'goose allows one -- +goose Up, before -- +goose Down: remove this one');
        state = 'up';
        upFrom = i + 1;
        break;
      case 'down':
        if (state === 'before') throw refuse(i, '-- +goose Down comes before -- +goose Up: goose requires Up first');
        if (state === 'down') throw refuse(i, 'goose allows one -- +goose Down: remove this one');
        closeUp(i);
        state = 'down';
        break;
      case 'statementbegin':
        if (state === 'before') throw refuse(i, '-- +goose StatementBegin comes before -- +goose Up: goose requires Up first');
        if (block !== undefined) throw refuse(i, `-- +goose StatementBegin inside the block opened at line ${block + 1}: end that one first`);
        if (state === 'up' && open !== undefined) throw refuse(open, 'this up statement does not end with ; before the -- +goose StatementBegin below it: add it');
        block = i;
        break;
      case 'statementend':
        if (block === undefined) throw refuse(i, '-- +goose StatementEnd without a -- +goose StatementBegin before it');
        if (state === 'up') {
          blocks.push([block, i]);
          cuts.push(i);
        }
        block = undefined;
        break;
      case 'no transaction':
        noTransaction = true;
        break;
      default:
        throw refuse(i, 'goose substitutes environment variables after -- +goose ENVSUB ON, and the executor gives a migration no ' +
          'environment of yours: write the values into the file and remove the ENVSUB annotations');
    }
  }
  if (state === 'before') throw refuse(0, 'a goose file must have a -- +goose Up annotation: add it above the up SQL');
  if (state === 'up') closeUp(lines.length);
  if (block !== undefined) throw refuse(block, '-- +goose StatementBegin has no -- +goose StatementEnd before the file ends');
  const sql = keepLines(raw.map((line, i) => (annotations.has(i) ? '' : line)), upFrom, upTo);
  refuseGooseCuts(fileName, splitSqlStatements(sql), cuts, noTransaction ? blocks : []);
  return {
    sql,
    transactional: !noTransaction,
    transactionAdvice: 'add -- +goose NO TRANSACTION to the file (its statements then run one at a time, each committed on its own), ' +
      'or move the statement to a file of its own that has it',
  };
}

const lastLine = (s: SqlStatement) => s.line + (s.text.match(/\n/g)?.length ?? 0);

/**
 * Refuses a file where goose and psql disagree on the statements: a goose cut inside a statement (its `;` at a
 * line's end inside a string, a dollar quote or a routine body), or, without a transaction, a StatementBegin block
 * holding several statements (goose sends the block as one query, which PostgreSQL runs as one transaction).
 */
function refuseGooseCuts(fileName: string, statements: readonly SqlStatement[], cuts: readonly number[], blocks: readonly [number, number][]): void {
  for (const cut of cuts) {
    const line = cut + 1;
    const cutInside = statements.find((s) => s.line <= line && line < lastLine(s));
    if (cutInside) {
      throw fileProblem(fileName, line, `goose ends a statement at this line, inside the statement that starts at line ${cutInside.line} ` +
        '(a ; at the end of a line in a string, dollar quote or routine body), and would send it cut in two: put that statement between ' +
        '-- +goose StatementBegin and -- +goose StatementEnd');
    }
  }
  for (const [begin, end] of blocks) {
    const inside = statements.filter((s) => s.line > begin + 1 && s.line < end + 1);
    if (inside.length > 1) {
      throw fileProblem(fileName, begin + 1, `this block holds ${inside.length} statements; under -- +goose NO TRANSACTION goose sends a ` +
        'block as one query, which PostgreSQL runs as one transaction, and the executor would run them one at a time: give each ' +
        'statement its own block');
    }
  }
}
