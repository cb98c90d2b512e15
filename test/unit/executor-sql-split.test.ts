import t from 'tap';
import { isTransactionControl, nonTransactionalCommand, splitSqlStatements } from '../../src/executor/sql-split.js';

t.test('splits top-level statements and keeps what hides a semicolon intact', async (t) => {
  const cases: { name: string; sql: string; texts: string[] }[] = [
    { name: 'plain', sql: 'select 1; select 2;', texts: ['select 1', 'select 2'] },
    { name: 'no trailing semicolon', sql: 'select 1;\nselect 2', texts: ['select 1', 'select 2'] },
    { name: 'empty statements and comments only', sql: ' ; -- just a comment;\n/* block; */ ;', texts: [] },
    { name: 'line comment', sql: 'select 1 -- not; a split\n, 2;', texts: ['select 1 -- not; a split\n, 2'] },
    { name: 'nested block comment', sql: 'select /* a /* b; */ c; */ 1; select 2', texts: ['select /* a /* b; */ c; */ 1', 'select 2'] },
    { name: 'string with doubled quote', sql: "select 'it''s; fine'; select 2", texts: ["select 'it''s; fine'", 'select 2'] },
    { name: 'escape string', sql: "select E'a\\'; b'; select 2", texts: ["select E'a\\'; b'", 'select 2'] },
    { name: 'backslash in a standard string is literal', sql: "select 'a\\'; select 2", texts: ["select 'a\\'", 'select 2'] },
    { name: 'quoted identifier', sql: 'create table "a;b" (x int); select 2', texts: ['create table "a;b" (x int)', 'select 2'] },
    { name: 'dollar quote', sql: 'do $$ begin perform 1; end $$; select 2', texts: ['do $$ begin perform 1; end $$', 'select 2'] },
    { name: 'tagged dollar quote', sql: 'select $x$ $$; $x$; select 2', texts: ['select $x$ $$; $x$', 'select 2'] },
    { name: 'positional parameter is not a dollar quote', sql: 'prepare p as select $1; select 2', texts: ['prepare p as select $1', 'select 2'] },
    {
      name: 'SQL-standard function body',
      sql: 'create function f() returns int language sql begin atomic select case when true then 1 end; select 2; end; select 3',
      texts: ['create function f() returns int language sql begin atomic select case when true then 1 end; select 2; end', 'select 3'],
    },
    {
      name: 'a rule with several actions in parentheses',
      sql: "create rule r as on insert to t do also (insert into a values (1); update b set x = ';'); select 2",
      texts: ["create rule r as on insert to t do also (insert into a values (1); update b set x = ';')", 'select 2'],
    },
    { name: 'psql does not end a statement inside parentheses', sql: 'select (1; 2); select 3', texts: ['select (1; 2)', 'select 3'] },
    { name: 'a surplus closing parenthesis is ignored', sql: 'select 1); select 2', texts: ['select 1)', 'select 2'] },
    {
      name: 'CREATE OR REPLACE PROCEDURE body',
      sql: 'create or replace procedure p() language sql begin atomic insert into t values (1); end; select 2',
      texts: ['create or replace procedure p() language sql begin atomic insert into t values (1); end', 'select 2'],
    },
    {
      name: 'psql opens a body at any BEGIN of CREATE FUNCTION, even a name',
      sql: 'create function begin() returns int return 1; select 2; end; select 3',
      texts: ['create function begin() returns int return 1; select 2; end', 'select 3'],
    },
    { name: 'BEGIN inside the parentheses of CREATE FUNCTION', sql: 'create function f(begin int) returns int return 1; select 2', texts: ['create function f(begin int) returns int return 1', 'select 2'] },
    { name: 'CASE and END outside a routine body', sql: 'select case when true then 1 end as begin; select 2', texts: ['select case when true then 1 end as begin', 'select 2'] },
    { name: 'a literal continued on the next line', sql: "select 'a'\n -- between\n ';b'; select 2", texts: ["select 'a'\n -- between\n ';b'", 'select 2'] },
    { name: 'a continued escape string stays one', sql: "select E'a'\n'\\'; b'; select 2", texts: ["select E'a'\n'\\'; b'", 'select 2'] },
    { name: 'no continuation without a newline', sql: "select 'a' '\\'; select 2", texts: ["select 'a' '\\'", 'select 2'] },
    { name: 'Unicode escapes and bit strings', sql: "select U&'\\0061;', U&\"a;\", B'0''1;'; select 2", texts: ["select U&'\\0061;', U&\"a;\", B'0''1;'", 'select 2'] },
    { name: 'a dollar quote right after a number', sql: 'select 1$a$;$a$; select 2', texts: ['select 1$a$;$a$', 'select 2'] },
    { name: 'a dollar inside an identifier', sql: 'select a$b$; select 2', texts: ['select a$b$', 'select 2'] },
    { name: 'a dollar-quote tag with non-ASCII letters', sql: 'select $é$;$é$; select 2', texts: ['select $é$;$é$', 'select 2'] },
    { name: 'an identifier after a number is part of it (trailing junk)', sql: "select 1e'\\'; select 2", texts: ["select 1e'\\'", 'select 2'] },
    { name: 'an E after a number with an exponent sign is a word', sql: "select 1e+'a'; select 2", texts: ["select 1e+'a'", 'select 2'] },
    { name: 'CRLF and a carriage return ending a line comment', sql: 'select 1 -- c\r, 2;\r\nselect 3\r\n', texts: ['select 1 -- c\r, 2', 'select 3'] },
    { name: 'a vertical tab is not whitespace', sql: 'select 1\v;', texts: ['select 1\v'] },
    { name: 'an unterminated string runs to the end', sql: "select 'a; select 2", texts: ["select 'a; select 2"] },
  ];
  for (const c of cases) t.same(splitSqlStatements(c.sql).map((s) => s.text), c.texts, c.name);
});

t.test('with standard_conforming_strings off, a plain string takes backslash escapes', async (t) => {
  const sql = "select 'a\\'; b', N'\\';', E'\\';'; select 2";
  t.same(splitSqlStatements(sql, { standardConformingStrings: false }).map((s) => s.text), ["select 'a\\'; b', N'\\';', E'\\';'", 'select 2']);
  t.same(splitSqlStatements(sql).map((s) => s.text), ["select 'a\\'", "b', N'\\';', E'\\';'", 'select 2'], 'on (the default), it does not');
  t.same(splitSqlStatements("select U&'\\'; select 2", { standardConformingStrings: false }).map((s) => s.text), ["select U&'\\'", 'select 2'], 'U& strings never do');
});

t.test('keeps the first tokens of each statement to tell its command by', async (t) => {
  const [statement] = splitSqlStatements('/* c */ reindex (verbose, concurrently false) table "T" ;');
  t.same(statement!.head, ['REINDEX', '(', 'VERBOSE', ',', 'CONCURRENTLY', 'FALSE', ')', 'TABLE', '"T"']);
  const long = splitSqlStatements(`select ${Array.from({ length: 40 }, (_, i) => `c${i}`).join(', ')}`)[0]!;
  t.equal(long.head.length, 32, 'at most 32');
});

t.test('reports the line of each statement and its first words', async (t) => {
  const statements = splitSqlStatements('-- header\n\ncreate table t (a int);\n  /* c */ alter\ntable t add b int;');
  t.same(statements.map((s) => [s.line, s.leadingWords]), [[3, ['CREATE', 'TABLE']], [4, ['ALTER', 'TABLE']]]);
});

t.test('recognizes transaction control and nothing else', async (t) => {
  const control = ['begin', 'BEGIN ISOLATION LEVEL SERIALIZABLE', 'start transaction', 'commit', 'end', 'rollback', 'abort',
    'savepoint s', 'release savepoint s', 'prepare transaction \'x\'', 'commit prepared \'x\''];
  for (const sql of control) t.ok(isTransactionControl(splitSqlStatements(sql)[0]!), sql);
  const other = ['prepare p as select 1', 'create table begin_x (a int)', 'select 1', 'create function f() returns int language sql begin atomic select 1; end',
    'comment on table t is \'commit\''];
  for (const sql of other) t.notOk(isTransactionControl(splitSqlStatements(sql)[0]!), sql);
});

t.test('tells a command that cannot run in a transaction block by its first tokens', async (t) => {
  // The list itself is held against PostgreSQL in test/integration/executor-migration-files.test.ts.
  const command = (sql: string) => nonTransactionalCommand(splitSqlStatements(sql)[0]!);
  t.equal(command('/* why */ Create Unique Index Concurrently i on t (a)'), 'CREATE UNIQUE INDEX CONCURRENTLY');
  t.equal(command('alter database "D b" set tablespace x'), 'ALTER DATABASE … SET TABLESPACE', 'a quoted name is one token');
  t.equal(command('cluster verbose'), 'CLUSTER without a table');
  t.equal(command('cluster (verbose) "T"'), undefined, 'options, then a quoted table name');
  t.equal(command("reindex (concurrently 'off') table t"), undefined, 'a quoted false');
  t.equal(command('reindex (verbose, concurrently) table t'), 'REINDEX CONCURRENTLY');
  t.equal(command('reindex index "concurrently"'), undefined, 'a quoted name is not the keyword');
  t.equal(command('create function f() returns int language sql begin atomic vacuum; end'), undefined, 'only the command itself counts');
});
