// How the executor cuts a migration file into statements, held against psql itself: psql runs a corpus and logs
// every query it sent (-L), and splitSqlStatements must cut the same statements. psql is the witness because
// people test their files with it, and because its lexer (psqlscan.l) is the server's lexer plus the rules that
// decide where a statement ends.
import t, { type Test } from 'tap';
import pg from 'pg';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { nonTransactionalCommand, splitSqlStatements, type SplitOptions } from '../../src/executor/sql-split.js';
import { artifactDir, freshDatabase, type Database } from './executor-helpers.js';

const CORPUS = new URL('psql-corpus/', import.meta.url);
const corpus = (name: string) => readFileSync(new URL(name, CORPUS), 'utf8');
const STANDARD: SplitOptions = { standardConformingStrings: true };
const ESCAPE_STRINGS: SplitOptions = { standardConformingStrings: false };

interface PsqlRun {
  /** What psql sent, one entry per query, as its log shows it. */
  sent: string[];
  code: number;
  stderr: string;
}

const QUERY_HEADER = '********* QUERY **********\n';
const QUERY_FOOTER = '\n**************************\n';

/**
 * Runs `sql` as a file through psql against `db` and reads back every query it sent: its -L log holds each one
 * between fixed lines (--echo-queries prints the same text, but undelimited).
 */
async function psql(t: Test, db: Database, sql: string, options: { lexing: SplitOptions; stopOnError: boolean }): Promise<PsqlRun> {
  const dir = artifactDir(t, { 'corpus.sql': sql });
  const log = join(dir, 'psql.log');
  writeFileSync(log, '');
  const args = ['-X', '-q', '-o', '/dev/null', '-L', log, '-f', join(dir, 'corpus.sql'), '-v', `ON_ERROR_STOP=${options.stopOnError ? 1 : 0}`, db.url];
  // psql learns standard_conforming_strings from the server, as it lexes; LC_ALL=C keeps its log untranslated.
  const env = { ...process.env, LC_ALL: 'C', PGOPTIONS: `-c standard_conforming_strings=${options.lexing.standardConformingStrings ? 'on' : 'off'}` };
  const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve, reject) => {
    execFile('psql', args, { env }, (err, _stdout, stderr) => {
      if (err && typeof err.code !== 'number') reject(err);
      else resolve({ code: err ? Number(err.code) : 0, stderr });
    });
  });
  const sent = readFileSync(log, 'utf8').split(QUERY_HEADER).slice(1).map((entry) => entry.slice(0, entry.indexOf(QUERY_FOOTER)));
  return { sent, code, stderr };
}

// psql's whitespace; a vertical tab, for one, is not.
const SPACE = '[ \\t\\n\\r\\f]';
const LEADING_SPACE_OR_COMMENT = new RegExp(`^(?:${SPACE}+|--[^\\n\\r]*|/\\*[\\s\\S]*?(?:\\*/|$))`);

/** One statement's text, compared without the spaces before its terminating semicolon or after it. */
const canonical = (text: string) => text.replace(new RegExp(`${SPACE}*(;?)${SPACE}*$`), '$1');

/**
 * What psql sent, as splitSqlStatements sees it: psql also sends the comments before a statement's first token
 * (the executor starts a statement there), and a query that is only comments and a semicolon is no statement.
 */
function psqlStatements(run: PsqlRun): string[] {
  return run.sent.flatMap((query) => {
    let text = query;
    for (let m = LEADING_SPACE_OR_COMMENT.exec(text); m && m[0] !== ''; m = LEADING_SPACE_OR_COMMENT.exec(text)) text = text.slice(m[0].length);
    return text === '' || text === ';' ? [] : [canonical(text)];
  });
}

/** Our statements, each with its terminating semicolon when it has one, as psql sends them. */
function ours(sql: string, lexing: SplitOptions): string[] {
  let cursor = 0;
  return splitSqlStatements(sql, lexing).map(({ text }) => {
    cursor = sql.indexOf(text, cursor) + text.length;
    const terminator = new RegExp(`^${SPACE}*;`).exec(sql.slice(cursor));
    cursor += terminator?.[0].length ?? 0;
    return canonical(terminator ? `${text};` : text);
  });
}

/** Runs each statement on its own in one session, autocommitted, as a no-transaction migration does. */
async function runEach(db: Database, statements: readonly string[]): Promise<void> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

t.test('the standard corpus splits where psql splits it, and every statement runs on its own', async (t) => {
  const sql = corpus('standard.sql');
  for (const [name, text] of [['LF', sql], ['CRLF', sql.replace(/\n/g, '\r\n')]] as const) {
    const run = await psql(t, await freshDatabase(t, 'psql_corpus'), text, { lexing: STANDARD, stopOnError: true });
    t.equal(run.code, 0, `${name}: psql ran the whole corpus: ${run.stderr}`);
    const expected = psqlStatements(run);
    t.ok(expected.length >= 40, `${name}: psql sent ${expected.length} statements`);
    t.same(ours(text, STANDARD), expected, `${name}: the same statements`);
  }
  const db = await freshDatabase(t, 'split_corpus');
  await t.resolves(runEach(db, ours(sql, STANDARD)), 'each statement runs on its own, as in a no-transaction file');
  t.same(await db.query('SELECT msg FROM log ORDER BY msg'), [{ msg: ';x' }, { msg: 'insert; one' }, { msg: 'p' }, { msg: 'p;2' }],
    'the multi-action rules ran whole');
});

t.test('with standard_conforming_strings off, a plain string takes backslash escapes, as psql reads it', async (t) => {
  const sql = corpus('escape-strings.sql');
  const run = await psql(t, await freshDatabase(t, 'psql_escape'), sql, { lexing: ESCAPE_STRINGS, stopOnError: true });
  t.equal(run.code, 0, run.stderr);
  t.same(ours(sql, ESCAPE_STRINGS), psqlStatements(run));
  t.not(ours(sql, STANDARD).length, psqlStatements(run).length, 'the setting changes the split (the corpus can tell)');
});

t.test('odd input splits where psql splits it', async (t) => {
  // Each on its own psql run: one of them going wrong must not shift the others.
  const cases: Record<string, string> = {
    'a semicolon inside parentheses does not end a statement': 'select (1; select 2);\nselect 3;',
    'a surplus closing parenthesis is ignored': 'select 1); select 2;',
    'BEGIN in CREATE FUNCTION opens a body, even as a name': "create function begin() returns int language sql return 1; select 'glued'; end;\nselect 3;",
    'BEGIN as a routine parameter is inside parentheses': 'create function begin_param(begin int) returns int language sql return 1;\nselect 3;',
    'a routine body: BEGIN at any case, CASE inside': 'CREATE OR REPLACE PROCEDURE p() LANGUAGE sql Begin Atomic select case when true then 1 end; eNd;\nselect 3;',
    'CREATE OR REPLACE without a routine is not a body': 'create or replace view begin_v as select 1 as begin; select 3;',
    'a number followed by a letter (trailing junk) ends before a quote': "select 1e'\\';' as junk;\nselect 3;",
    'an exponent without digits is a number then a word': "select 1e+'\\';' as realfail;\nselect 3;",
    'junk after a number then a dollar quote': 'select 1a$x$ ; $x$;\nselect 3;',
    'x after a number is junk, not a hex string': "select 2x'; ';\nselect 3;",
    'junk after a parameter then a dollar quote': 'select $1a$b$ ; $b$;\nselect 3;',
    'a number before ..': 'select 1..2;\nselect 3;',
    'a dollar after an identifier is part of it': 'select a$b$ ; $b$;\nselect 3;',
    'an unterminated quoted identifier runs to the end': 'select "never closed;\nselect 3;',
    'an unterminated dollar quote runs to the end': 'select $x$ never closed;\nselect 3;',
    'an unterminated string runs to the end': "select 'never closed;\nselect 3;",
    'an unterminated block comment hides the rest': 'select 1;\n/* never closed; select 2;',
    'a line comment at the very end': 'select 1 -- no newline at the end',
    'a carriage return alone ends a line comment': 'select 1 -- comment\r, 2;\rselect 3;',
    'a vertical tab is not whitespace to psql': 'select 1;\v;select 2;',
    'bit strings end at the first quote': "select B'01''10';\nselect 3;",
  };
  for (const [name, sql] of Object.entries(cases)) {
    const run = await psql(t, await freshDatabase(t, 'psql_odd'), sql, { lexing: STANDARD, stopOnError: false });
    t.same(ours(sql, STANDARD), psqlStatements(run), name);
  }
});

t.test('a literal continued on the next line stays an escape string, as the server reads it (psql differs)', async (t) => {
  // psql lexes line by line: it reads the continuation as a new standard string and cuts at the escaped quote,
  // so the server refuses what psql sent. The executor follows the server, which reads the whole file the same
  // way when it runs in one transaction.
  const sql = "select E'escape'\n'\\'; still the same literal' as s;\nselect 3;";
  const run = await psql(t, await freshDatabase(t, 'psql_continued'), sql, { lexing: STANDARD, stopOnError: false });
  t.same(psqlStatements(run), ["select E'escape'\n'\\';", "still the same literal' as s;\nselect 3;"], 'psql cuts inside the literal');
  t.match(run.stderr, /unterminated quoted string/, 'and the server refuses the piece');
  const statements = ours(sql, STANDARD);
  t.same(statements, ["select E'escape'\n'\\'; still the same literal' as s;", 'select 3;']);
  const db = await freshDatabase(t, 'split_continued');
  t.same(await db.query(statements[0]!), [{ s: "escape'; still the same literal" }], 'the server runs the statement as cut');
});

t.test('the statements told apart as unable to run in a transaction block are the ones PostgreSQL refuses there', async (t) => {
  const db = await freshDatabase(t, 'tx_block');
  await db.query(`CREATE TABLE t (a int); CREATE INDEX i ON t (a);
    CREATE TABLE p (a int) PARTITION BY RANGE (a); CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (10);
    CREATE MATERIALIZED VIEW m AS SELECT 1 AS a; CREATE UNIQUE INDEX m_a ON m (a)`);
  const here = `"${db.name}"`;
  const refused = [
    'create index concurrently i2 on t (a)', 'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS i3 ON t (a)',
    'drop index concurrently i', 'drop index concurrently if exists nope',
    'reindex table concurrently t', 'reindex (verbose, concurrently) index i', "reindex (concurrently 'on') table t",
    'reindex schema public', `reindex (verbose) database ${here}`, `reindex system ${here}`,
    'create database ptah_never', 'drop database if exists ptah_never', `alter database ${here} set tablespace pg_default`,
    "create tablespace ptah_never location '/nonexistent'", 'drop tablespace if exists ptah_never',
    "alter system set work_mem = '1MB'",
    'vacuum', 'vacuum (analyze) t', 'VACUUM FULL t',
    'cluster', 'cluster verbose',
    'discard all',
    'alter table p detach partition p1 concurrently', 'alter table if exists only public.p detach partition public.p1 concurrently',
  ];
  const accepted = [
    'create index i4 on t (a)', 'create unique index i5 on t (a)', 'create index concurrently_named on t (a)', 'drop index i',
    'reindex table t', 'reindex index i', 'reindex (concurrently false) table t', 'reindex (verbose, concurrently off) index i',
    `alter database ${here} set work_mem = '1MB'`, 'alter table t add column c int', 'alter table p detach partition p1',
    'analyze t', 'cluster t using i', 'cluster verbose t using i', 'cluster (verbose) t using i', 'cluster i on t',
    'discard plans', 'refresh materialized view concurrently m', 'create table vacuum_log (a int)', 'select 1',
  ];
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.teardown(() => client.end());
  /** The SQLSTATE the server answers `statement` with inside a transaction block (rolled back), or 'ok'. */
  const inTransactionBlock = async (statement: string): Promise<string> => {
    await client.query('BEGIN');
    try {
      await client.query(statement);
      return 'ok';
    } catch (err) {
      return (err as pg.DatabaseError).code ?? String(err);
    } finally {
      await client.query('ROLLBACK');
    }
  };
  const command = (statement: string) => nonTransactionalCommand(splitSqlStatements(statement)[0]!);
  for (const statement of refused) {
    t.equal(await inTransactionBlock(statement), '25001', `PostgreSQL refuses it in a transaction block: ${statement}`);
    t.ok(command(statement), `and so does the executor: ${statement}`);
  }
  for (const statement of accepted) {
    t.equal(await inTransactionBlock(statement), 'ok', `PostgreSQL runs it in a transaction block: ${statement}`);
    t.equal(command(statement), undefined, `and so does the executor: ${statement}`);
  }
});
