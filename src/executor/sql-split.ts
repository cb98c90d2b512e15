// A small lexer that splits PostgreSQL script text into top-level statements. It knows exactly what can hide a
// semicolon or a keyword: comments (nested block comments too), standard and E'' strings, quoted identifiers,
// dollar quoting, and SQL-standard function bodies (BEGIN ATOMIC … END). It does not parse SQL beyond that.

export interface SqlStatement {
  /** The statement's text from its first token, without the terminating semicolon. */
  text: string;
  /** 1-based line where the statement's first token starts. */
  line: number;
  /** The first two words, upper-cased (e.g. ["CREATE", "TABLE"]); comments are not words. */
  leadingWords: string[];
}

const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const WORD_CHAR = /[A-Za-z0-9_$\u0080-\uffff]/;

export function splitSqlStatements(sql: string): SqlStatement[] {
  const statements: SqlStatement[] = [];
  let firstTokenAt = -1;
  let words: string[] = [];
  let previousWord = '';
  let atomicDepth = 0;
  let i = 0;

  const finish = (end: number) => {
    if (firstTokenAt >= 0) {
      statements.push({
        text: sql.slice(firstTokenAt, end).trimEnd(),
        line: sql.slice(0, firstTokenAt).split('\n').length,
        leadingWords: words.slice(0, 2),
      });
    }
    firstTokenAt = -1;
    words = [];
    previousWord = '';
    atomicDepth = 0;
  };
  const token = (at: number) => {
    if (firstTokenAt < 0) firstTokenAt = at;
  };

  while (i < sql.length) {
    const ch = sql[i]!;
    const next = sql[i + 1];
    if (ch === '-' && next === '-') {
      const eol = sql.indexOf('\n', i);
      i = eol < 0 ? sql.length : eol + 1;
    } else if (ch === '/' && next === '*') {
      i = skipBlockComment(sql, i);
    } else if (ch === "'") {
      token(i);
      i = skipQuoted(sql, i, "'", isEscapeStringPrefix(sql, i));
    } else if (ch === '"') {
      token(i);
      i = skipQuoted(sql, i, '"', false);
    } else if (ch === '$' && !(i > 0 && WORD_CHAR.test(sql[i - 1]!))) {
      token(i);
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const close = sql.indexOf(tag[0], i + tag[0].length);
        i = close < 0 ? sql.length : close + tag[0].length;
      } else {
        i += 1;
      }
    } else if (WORD_START.test(ch)) {
      token(i);
      let j = i + 1;
      while (j < sql.length && WORD_CHAR.test(sql[j]!)) j += 1;
      const word = sql.slice(i, j).toUpperCase();
      if (words.length < 2) words.push(word);
      if (word === 'ATOMIC' && previousWord === 'BEGIN' && words[0] !== 'BEGIN') atomicDepth += 1;
      else if (atomicDepth > 0 && word === 'CASE') atomicDepth += 1;
      else if (atomicDepth > 0 && word === 'END') atomicDepth -= 1;
      previousWord = word;
      i = j;
    } else if (ch === ';' && atomicDepth === 0) {
      finish(i);
      i += 1;
    } else {
      if (!/\s/.test(ch)) token(i);
      i += 1;
    }
  }
  finish(sql.length);
  return statements;
}

const TRANSACTION_CONTROL = new Set(['BEGIN', 'START', 'COMMIT', 'END', 'ROLLBACK', 'ABORT', 'SAVEPOINT', 'RELEASE']);

/** True for a statement that opens, ends or subdivides a transaction (including PREPARE TRANSACTION). */
export function isTransactionControl(statement: SqlStatement): boolean {
  const [first, second] = statement.leadingWords;
  if (first === undefined) return false;
  if (first === 'PREPARE') return second === 'TRANSACTION';
  return TRANSACTION_CONTROL.has(first);
}

function skipBlockComment(sql: string, at: number): number {
  let depth = 0;
  let i = at;
  while (i < sql.length) {
    if (sql[i] === '/' && sql[i + 1] === '*') {
      depth += 1;
      i += 2;
    } else if (sql[i] === '*' && sql[i + 1] === '/') {
      depth -= 1;
      i += 2;
      if (depth === 0) return i;
    } else {
      i += 1;
    }
  }
  return sql.length;
}

function isEscapeStringPrefix(sql: string, quoteAt: number): boolean {
  const prefix = sql[quoteAt - 1];
  if (prefix !== 'E' && prefix !== 'e') return false;
  return quoteAt < 2 || !WORD_CHAR.test(sql[quoteAt - 2]!);
}

/** Index just past the closing quote; a doubled quote is part of the text, as is a backslash escape in E''. */
function skipQuoted(sql: string, at: number, quote: string, backslashEscapes: boolean): number {
  let i = at + 1;
  while (i < sql.length) {
    const ch = sql[i];
    if (backslashEscapes && ch === '\\') {
      i += 2;
    } else if (ch === quote) {
      if (sql[i + 1] === quote) i += 2;
      else return i + 1;
    } else {
      i += 1;
    }
  }
  return sql.length;
}
