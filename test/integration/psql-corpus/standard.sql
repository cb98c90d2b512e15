-- The psql-witness corpus (test/integration/executor-migration-files.test.ts), standard_conforming_strings on.
-- Every statement runs, in order, on a fresh database. psql decides where each statement ends (its -L log holds
-- what it sent); splitSqlStatements must cut the same statements. No psql meta-commands or psql variables: a
-- migration file is SQL, not a psql script.
create table t (a int, b text);
create table log (msg text);

-- rules whose actions are a parenthesized list: psql does not end a statement on a ; inside parentheses
create rule r_ins as on insert to t do also (
  insert into log values ('insert; one');
  update log set msg = msg || ';' where msg = 'never (;'
);
create rule r_upd as on update to t do instead (insert into log values ((select ';' || 'x')); notify t_changed; );
create rule r_del as on delete to t do instead nothing;
insert into t values (1, 'a;b');
update t set a = 2;

-- parentheses, and the ; and ( that strings, comments, identifiers and dollar quotes hide from them
select ((1 + (2)) * 3), (select ';'), array[(select 1)];
select coalesce((select b from t where b = ';' limit 1), '(;');
select $$($$ as "(", 1 /* ( */ -- (
;

-- standard strings: doubled quotes, a backslash is an ordinary character
select 'it''s; fine', '', ''';''';
select 'a\';            -- this comment is the next statement's
select 'first' as x, 'second;'  as y;
comment on table t is 'a; b';
-- escape strings, national, Unicode-escape, bit and hex strings
select E'a\'; b', e'\\', E'\\'';', E'\x3b\073';
select N'nat;', U&'\0061;', X'3B', B'0101';
-- a literal continued across a newline, with comments between the parts
select 'continued'
  -- a comment between the parts
  '; still the same literal';

-- quoted identifiers
create table "semi;colon" ("a""b;" int, "$$" int);
select "a""b;", "$$" from "semi;colon";
select U&"\0061" from (select 1 as a) s;

-- comments
select 1 /* ; */ + /* nested /* ; */ still; */ 2;
select 2 */* a comment right after an operator */ 3;
select 4 -- ; ' " $$ /*
 + 5;
/* a leading block comment; */ select 6;
select 7 /* -- not a line comment ; */;

-- dollar quotes
do $$ begin perform 1; end $$;
do $body$ begin raise notice 'inside $$ ; $body'; end $body$;
select $a$ $ab$ ; $a$, $t1$;$t1$, $é$ ; $é$, $$;$$ as "$$;";
create function plpgsql_f(x int) returns int language plpgsql as $f$
declare
  y int := x;
begin
  if y > 0 then
    return y; -- ;
  end if;
  return 0;
end
$f$;
prepare p(int) as select $1 + 1;
execute p(1);
deallocate p;

-- SQL-standard routine bodies: BEGIN ATOMIC … END, with CASE … END inside
create function atomic_f(x int) returns int language sql
begin atomic
  select case when x > 0 then x else 0 end;
end;
create or replace function atomic_g(x int) returns text language sql
begin atomic
  insert into log values ('g;');
  select case x when 1 then 'one' else case when x > 1 then 'many' end end;
end;
create procedure atomic_p() language sql
begin atomic
  insert into log values ('p'); insert into log values ('p;2');
end;
call atomic_p();
create function sql_return_f() returns int language sql return 1;
-- begin, case and end outside a routine body are ordinary words
create table begin_end (begin int, "end" int, case_ int);
select case when true then 'x' end as begin, 1 as end from begin_end;
create view v as select case when a > 0 then 'pos' end as sign from t;

-- numbers, operators and casts
select 1.5e3, .5, 1., 1.e2, 10::text, (array[1, 2, 3])[2:3], -1, 2-1, 1 + -- c
 2;

-- a statement over several lines, and empty statements
select
  8
;
;;
-- the last statement has no semicolon
select 'end of file'
