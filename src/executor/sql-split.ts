// Splits PostgreSQL script text into top-level statements where psql does (PostgreSQL 15's psqlscan.l), since
// files are written and tried with psql: a semicolon ends a statement unless it is inside a string, a quoted
// identifier, a dollar quote, a comment, parentheses, or the BEGIN … END of a CREATE [OR REPLACE] FUNCTION or
// PROCEDURE. Tokens follow the server's lexer (scan.l). One deliberate difference: a literal continued on the
// next line ('a'⏎'b') stays in the mode it started in, as the server reads it; psql lexes line by line and starts
// a standard string there, so an E'…' continued with an escaped quote is cut where the server then refuses it.
// test/integration/executor-migration-files.test.ts holds this against psql itself.

export interface SplitOptions {
  /**
   * The session's standard_conforming_strings. Off, a plain '…' takes backslash escapes, as E'…' does; psql
   * follows the server's setting the same way.
   */
  standardConformingStrings: boolean;
}

/** PostgreSQL's default since 9.1. */
export const STANDARD_STRINGS: SplitOptions = { standardConformingStrings: true };

export interface SqlStatement {
  /** The statement's text from its first token, without the terminating semicolon. */
  text: string;
  /** 1-based line where the statement's first token starts. */
  line: number;
  /** The first two words, upper-cased (e.g. ["CREATE", "TABLE"]); comments are not words. */
  leadingWords: string[];
  /**
   * The first HEAD_TOKENS tokens, enough to tell a command by: words upper-cased, anything else (quoted
   * identifiers, literals, punctuation one character each) as written.
   */
  head: string[];
}

const HEAD_TOKENS = 32;

export function splitSqlStatements(sql: string, options: SplitOptions = STANDARD_STRINGS): SqlStatement[] {
  const statements: SqlStatement[] = [];
  const lineOf = lineCounter(sql);
  let current: { start: number; head: string[]; leadingWords: string[]; end: StatementEnd } | undefined;
  for (let token = nextToken(sql, 0, options); token; token = nextToken(sql, token.end, options)) {
    const text = sql.slice(token.start, token.end);
    if (!current) {
      if (text === ';') continue; // an empty statement
      current = { start: token.start, head: [], leadingWords: [], end: new StatementEnd() };
    }
    const value = token.kind === 'word' ? text.toUpperCase() : text;
    if (current.end.endsAt(token.kind, value)) {
      statements.push(finish(sql, current, token.start, lineOf));
      current = undefined;
      continue;
    }
    if (current.head.length < HEAD_TOKENS) current.head.push(value);
    if (token.kind === 'word' && current.leadingWords.length < 2) current.leadingWords.push(value);
  }
  if (current) statements.push(finish(sql, current, sql.length, lineOf));
  return statements;
}

function finish(sql: string, statement: { start: number; head: string[]; leadingWords: string[] }, end: number, lineOf: (at: number) => number): SqlStatement {
  const { start, head, leadingWords } = statement;
  let textEnd = end;
  while (textEnd > start && isSpace(sql[textEnd - 1])) textEnd -= 1;
  return { text: sql.slice(start, textEnd), line: lineOf(start), leadingWords, head };
}

/** The 1-based line of each offset; offsets must come in ascending order. */
function lineCounter(sql: string): (at: number) => number {
  let line = 1;
  let counted = 0;
  return (at) => {
    for (; counted < at; counted += 1) if (sql[counted] === '\n') line += 1;
    return line;
  };
}

/**
 * psql's rule for the semicolon that ends a statement: not inside parentheses, and not inside a routine body.
 * A BEGIN at the top level of a statement that starts CREATE [OR REPLACE] FUNCTION/PROCEDURE opens a body (any
 * BEGIN: psql does not look for ATOMIC), a CASE inside one opens another, an END closes one.
 */
class StatementEnd {
  #parens = 0;
  #bodies = 0;
  #words: string[] = [];

  endsAt(kind: TokenKind, value: string): boolean {
    if (kind === 'word') this.#word(value);
    else if (value === '(') this.#parens += 1;
    else if (value === ')') this.#parens = Math.max(0, this.#parens - 1);
    else if (value === ';') return this.#parens === 0 && this.#bodies === 0;
    return false;
  }

  #word(word: string): void {
    if (this.#words.length < 4) this.#words.push(word);
    if (this.#parens > 0 || !this.#definesRoutine()) return;
    if (word === 'BEGIN') this.#bodies += 1;
    else if (word === 'CASE' && this.#bodies > 0) this.#bodies += 1;
    else if (word === 'END' && this.#bodies > 0) this.#bodies -= 1;
  }

  #definesRoutine(): boolean {
    const [first, second, third, fourth] = this.#words;
    const routine = (word: string | undefined) => word === 'FUNCTION' || word === 'PROCEDURE';
    return first === 'CREATE' && (routine(second) || (second === 'OR' && third === 'REPLACE' && routine(fourth)));
  }
}

const TRANSACTION_CONTROL = new Set(['BEGIN', 'START', 'COMMIT', 'END', 'ROLLBACK', 'ABORT', 'SAVEPOINT', 'RELEASE']);

/** True for a statement that opens, ends or subdivides a transaction (including PREPARE TRANSACTION). */
export function isTransactionControl(statement: SqlStatement): boolean {
  const [first, second] = statement.leadingWords;
  if (first === undefined) return false;
  if (first === 'PREPARE') return second === 'TRANSACTION';
  return TRANSACTION_CONTROL.has(first);
}

/** Commands refused by their first tokens alone; ANY stands for one token, a name. */
const ANY = '…';
const REFUSED_BY_PREFIX: readonly (readonly string[])[] = [
  ['CREATE', 'DATABASE'], ['DROP', 'DATABASE'], ['ALTER', 'DATABASE', ANY, 'SET', 'TABLESPACE'],
  ['CREATE', 'TABLESPACE'], ['DROP', 'TABLESPACE'], ['ALTER', 'SYSTEM'],
  ['CREATE', 'INDEX', 'CONCURRENTLY'], ['CREATE', 'UNIQUE', 'INDEX', 'CONCURRENTLY'], ['DROP', 'INDEX', 'CONCURRENTLY'],
  ['VACUUM'], ['DISCARD', 'ALL'],
];

/**
 * The command, named for a message, when the statement is one PostgreSQL 15 refuses to run inside a transaction
 * block (its PreventInTransactionBlock callers) whatever the database holds: the prefixes above, REINDEX
 * CONCURRENTLY (keyword or option), REINDEX SCHEMA/DATABASE/SYSTEM, CLUSTER without a table, and ALTER TABLE …
 * DETACH PARTITION … CONCURRENTLY. Refusals that depend on the database (CLUSTER or REINDEX of a partitioned
 * table, subscriptions with replication slots, a procedure that commits) are the server's to make.
 */
export function nonTransactionalCommand({ head }: SqlStatement): string | undefined {
  const prefix = REFUSED_BY_PREFIX.find((words) => words.every((word, i) => head[i] !== undefined && (word === ANY || head[i] === word)));
  if (prefix) return prefix.join(' ');
  if (head[0] === 'REINDEX') return reindexCommand(head);
  if (head[0] === 'CLUSTER' && head[afterOptions(head, 1)] === undefined) return 'CLUSTER without a table';
  if (head[0] === 'ALTER' && head[1] === 'TABLE' && detachesConcurrently(head)) return 'ALTER TABLE … DETACH PARTITION … CONCURRENTLY';
  return undefined;
}

function detachesConcurrently(head: readonly string[]): boolean {
  const detach = head.indexOf('DETACH');
  return detach > 0 && head[detach + 1] === 'PARTITION' && head.includes('CONCURRENTLY', detach + 2);
}

/** REINDEX [ ( option [value], … ) ] INDEX|TABLE|SCHEMA|DATABASE|SYSTEM [ CONCURRENTLY ] name. */
function reindexCommand(head: readonly string[]): string | undefined {
  const kindAt = afterOptions(head, 1);
  const kind = head[kindAt];
  if (kind === 'SCHEMA' || kind === 'DATABASE' || kind === 'SYSTEM') return `REINDEX ${kind}`;
  return head[kindAt + 1] === 'CONCURRENTLY' || optionOn(head, 1, 'CONCURRENTLY') ? 'REINDEX CONCURRENTLY' : undefined;
}

/** The index of the first token after a command's options at `at`: its parenthesized list, or VERBOSE. */
function afterOptions(head: readonly string[], at: number): number {
  if (head[at] === 'VERBOSE') return at + 1;
  if (head[at] !== '(') return at;
  const close = head.indexOf(')', at);
  return close < 0 ? head.length : close + 1;
}

/** Whether the parenthesized option list at `at` names `option` without turning it off. */
function optionOn(head: readonly string[], at: number, option: string): boolean {
  if (head[at] !== '(') return false;
  for (let i = at + 1; i < head.length && head[i] !== ')'; i += 1) {
    if (head[i] === option && (head[i - 1] === '(' || head[i - 1] === ',')) return !isFalse(head[i + 1]);
  }
  return false;
}

/** A boolean option's false value as the server reads it (defGetBoolean), unquoted or quoted. */
function isFalse(value: string | undefined): boolean {
  return value !== undefined && /^'?(false|off|no|0)'?$/i.test(value);
}

// The lexer: one token at a time, comments and whitespace skipped, as the server's scan.l reads them.

type TokenKind = 'word' | 'literal' | 'symbol';

interface Token {
  kind: TokenKind;
  start: number;
  end: number;
}

const IDENT_START = /[A-Za-z_\u0080-\uffff]/;
const IDENT_CONT = /[A-Za-z0-9_$\u0080-\uffff]/;
const DIGIT = /[0-9]/;
const DOLLAR_DELIMITER = /\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/y;
// A number's forms; `1..` is the number 1 followed by `..`.
const NUMBER = /([0-9]+)\.\.|[0-9]*\.[0-9]+|[0-9]+\.?[0-9]*/y;
const EXPONENT = /[Ee][-+]?[0-9]+/y;
const EXPONENT_WITHOUT_DIGITS = /[Ee][-+]/y;
const PARAMETER = /\$[0-9]+/y;

/** Where `pattern` (sticky) matches at `at`: the end of the match (of its first group, when it has one), or -1. */
function matchEnd(pattern: RegExp, sql: string, at: number): number {
  pattern.lastIndex = at;
  const match = pattern.exec(sql);
  return match ? at + (match[1] ?? match[0]).length : -1;
}

function nextToken(sql: string, from: number, options: SplitOptions): Token | undefined {
  const start = skipSpaceAndComments(sql, from);
  if (start >= sql.length) return undefined;
  const token = (kind: TokenKind, end: number): Token => ({ kind, start, end });
  const ch = sql[start]!;
  const next = sql[start + 1];
  if (ch === "'") return token('literal', endOfString(sql, start, options.standardConformingStrings ? 'standard' : 'escape'));
  if (ch === '"') return token('literal', endOfQuotedIdentifier(sql, start));
  if (ch === '$') return token('literal', endOfDollarToken(sql, start));
  if (DIGIT.test(ch) || (ch === '.' && next !== undefined && DIGIT.test(next))) return token('literal', endOfNumber(sql, start));
  if (IDENT_START.test(ch)) return prefixedLiteral(sql, start, options) ?? token('word', endOfWord(sql, start + 1));
  return token('symbol', start + 1);
}

/** E'…', B'…', X'…', N'…', U&'…' and U&"…": literals whose first character could start a word. */
function prefixedLiteral(sql: string, start: number, options: SplitOptions): Token | undefined {
  const prefix = sql[start]!.toLowerCase();
  const literal = (end: number): Token => ({ kind: 'literal', start, end });
  if (sql[start + 1] === "'") {
    if (prefix === 'e') return literal(endOfString(sql, start + 1, 'escape'));
    if (prefix === 'b' || prefix === 'x') return literal(endOfString(sql, start + 1, 'bits'));
    if (prefix === 'n') return literal(endOfString(sql, start + 1, options.standardConformingStrings ? 'standard' : 'escape'));
  }
  if (prefix === 'u' && sql[start + 1] === '&') {
    if (sql[start + 2] === "'") return literal(endOfString(sql, start + 2, 'standard'));
    if (sql[start + 2] === '"') return literal(endOfQuotedIdentifier(sql, start + 2));
  }
  return undefined;
}

function endOfWord(sql: string, from: number): number {
  let i = from;
  while (i < sql.length && IDENT_CONT.test(sql[i]!)) i += 1;
  return i;
}

/** Whitespace is psql's and the server's: space, tab, newline, carriage return, form feed (not a vertical tab). */
function isSpace(ch: string | undefined): boolean {
  return ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r' || ch === '\f';
}

function skipSpaceAndComments(sql: string, from: number): number {
  let i = from;
  for (;;) {
    if (isSpace(sql[i])) i += 1;
    else if (sql.startsWith('--', i)) i = endOfLineComment(sql, i);
    else if (sql.startsWith('/*', i)) i = endOfBlockComment(sql, i);
    else return i;
  }
}

/** A line comment ends before the next newline or carriage return. */
function endOfLineComment(sql: string, at: number): number {
  let i = at + 2;
  while (i < sql.length && sql[i] !== '\n' && sql[i] !== '\r') i += 1;
  return i;
}

/** Block comments nest; an unterminated one runs to the end. */
function endOfBlockComment(sql: string, at: number): number {
  let depth = 0;
  let i = at;
  while (i < sql.length) {
    if (sql.startsWith('/*', i)) {
      depth += 1;
      i += 2;
    } else if (sql.startsWith('*/', i)) {
      depth -= 1;
      i += 2;
      if (depth === 0) return i;
    } else {
      i += 1;
    }
  }
  return sql.length;
}

/** standard: '' is a quote; escape: also a backslash escapes the next character; bits (B'', X''): neither. */
type StringMode = 'standard' | 'escape' | 'bits';

/** Index just past a string literal whose opening quote is at `quoteAt`, continuations included. */
function endOfString(sql: string, quoteAt: number, mode: StringMode): number {
  let i = quoteAt + 1;
  while (i < sql.length) {
    const ch = sql[i];
    if (ch === '\\' && mode === 'escape') {
      i += 2;
    } else if (ch !== "'") {
      i += 1;
    } else if (mode !== 'bits' && sql[i + 1] === "'") {
      i += 2;
    } else {
      const continued = continuationAfter(sql, i + 1);
      if (continued < 0) return i + 1;
      i = continued;
    }
  }
  return sql.length;
}

/**
 * SQL joins 'a'⏎'b' into one literal when only whitespace with a newline, and line comments, come between:
 * the index just past the continuing quote, or -1.
 */
function continuationAfter(sql: string, from: number): number {
  let newline = false;
  let i = from;
  while (i < sql.length) {
    const ch = sql[i];
    if (ch === '\n' || ch === '\r') {
      newline = true;
      i += 1;
    } else if (isSpace(ch)) {
      i += 1;
    } else if (sql.startsWith('--', i)) {
      i = endOfLineComment(sql, i);
    } else {
      return ch === "'" && newline ? i + 1 : -1;
    }
  }
  return -1;
}

/** A quoted identifier ends at a quote that is not doubled; an unterminated one runs to the end. */
function endOfQuotedIdentifier(sql: string, quoteAt: number): number {
  let i = quoteAt + 1;
  while (i < sql.length) {
    if (sql[i] !== '"') i += 1;
    else if (sql[i + 1] === '"') i += 2;
    else return i + 1;
  }
  return sql.length;
}

/** A dollar quote ($tag$ … $tag$), a parameter ($1), or a lone dollar sign. */
function endOfDollarToken(sql: string, at: number): number {
  const delimiterEnd = matchEnd(DOLLAR_DELIMITER, sql, at);
  if (delimiterEnd >= 0) {
    const close = sql.indexOf(sql.slice(at, delimiterEnd), delimiterEnd);
    return close < 0 ? sql.length : close + delimiterEnd - at;
  }
  const parameterEnd = matchEnd(PARAMETER, sql, at);
  return parameterEnd >= 0 ? withTrailingJunk(sql, parameterEnd) : at + 1;
}

/**
 * 1, 1.5, .5, 1e5; an exponent marker without digits (1e+) is not part of the number. PostgreSQL 15 takes an
 * identifier right after a number or parameter into it (trailing junk, an error the server reports).
 */
function endOfNumber(sql: string, at: number): number {
  const numberEnd = matchEnd(NUMBER, sql, at);
  if (sql.startsWith('..', numberEnd)) return numberEnd;
  const exponentEnd = matchEnd(EXPONENT, sql, numberEnd);
  if (exponentEnd >= 0) return withTrailingJunk(sql, exponentEnd);
  return matchEnd(EXPONENT_WITHOUT_DIGITS, sql, numberEnd) >= 0 ? numberEnd : withTrailingJunk(sql, numberEnd);
}

function withTrailingJunk(sql: string, end: number): number {
  return end < sql.length && IDENT_START.test(sql[end]!) ? endOfWord(sql, end + 1) : end;
}
