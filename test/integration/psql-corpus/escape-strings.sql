-- The psql-witness corpus run with standard_conforming_strings off: a plain '…' string then takes backslash
-- escapes, in psql's lexer as in the server's.
select 'a\'; b' as escaped;
select 'a\\', 'b''c;', N'n\';';
select 'x'
'\'; continued';
select $$\$$, E'\'', "a\" from (select 1 as "a\") s;
select 'last\''
