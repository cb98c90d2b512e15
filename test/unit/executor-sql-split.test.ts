import t from 'tap';
import { isTransactionControl, splitSqlStatements } from '../../src/executor/sql-split.js';

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
  ];
  for (const c of cases) t.same(splitSqlStatements(c.sql).map((s) => s.text), c.texts, c.name);
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
