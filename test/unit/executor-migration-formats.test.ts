import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutorFailure } from '../../src/executor/failure.js';
import { assertRunnable, readMigrationSources, type MigrationSource } from '../../src/executor/migrations/files.js';
import { STANDARD_STRINGS } from '../../src/executor/sql-split.js';
import type { MigrationFormat } from '../../src/shared/migration-format.js';

function artifact(t: Test, files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'ptah-formats-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

const read = (t: Test, format: MigrationFormat, files: Record<string, string>) => readMigrationSources(artifact(t, files), format);

/** The refusal of reading (and, for a readable directory, of running its files), or undefined. */
function refusal(t: Test, format: MigrationFormat, files: Record<string, string>): ExecutorFailure | undefined {
  try {
    for (const source of read(t, format, files)) assertRunnable(source, STANDARD_STRINGS);
  } catch (err) {
    if (err instanceof ExecutorFailure) return err;
    throw err;
  }
  return undefined;
}

/** The up SQL's non-blank lines with their 1-based numbers. */
const upLines = (s: MigrationSource) => s.sql.split('\n').flatMap((line, i) => (line.trim() === '' ? [] : [`${i + 1}: ${line}`]));

t.test('golang-migrate: up files by numeric version, down files ignored, the whole file is the up SQL', async (t) => {
  const sources = read(t, 'golang-migrate', {
    '10_ten.up.sql': 'CREATE TABLE ten (a int);',
    '2_.up.sql': 'SELECT 2;',
    '2_.down.sql': 'DROP TABLE two;',
    '1_first.title.up.sql': 'CREATE TABLE one (a int);\nCREATE TABLE one_b (a int);',
    '3_gone.down.sql': 'DROP TABLE three;',
  });
  t.same(sources.map((s) => [s.version, s.name, s.transactional]), [['1', 'first.title', true], ['2', '2_.up.sql', true], ['10', 'ten', true]]);
  t.equal(sources[0]!.sql, 'CREATE TABLE one (a int);\nCREATE TABLE one_b (a int);');
});

t.test('golang-migrate: a statement that cannot run in a transaction runs alone, and is refused beside another', async (t) => {
  const [alone] = read(t, 'golang-migrate', { '1_i.up.sql': 'CREATE INDEX CONCURRENTLY i ON t (a);\n' });
  t.equal(alone!.transactional, false, 'the sole statement of the one query runs outside a transaction');
  const mixed = refusal(t, 'golang-migrate', { '1_i.up.sql': 'CREATE TABLE t (a int);\nCREATE INDEX CONCURRENTLY i ON t (a);\n' });
  t.match(mixed?.message, /1_i\.up\.sql line 2: CREATE INDEX CONCURRENTLY cannot run inside a transaction block.*golang-migrate sends a file as one query.*only statement/);
});

t.test('golang-migrate: refusals', async (t) => {
  const cases: { name: string; files: Record<string, string>; code: string; message: RegExp }[] = [
    { name: 'another extension', files: { '1_a.up.json': '' }, code: 'invalid_migration_name', message: /1_a\.up\.json.*golang-migrate names each migration/ },
    { name: 'no direction', files: { '1_a.sql': '' }, code: 'invalid_migration_name', message: /1_a\.sql/ },
    { name: 'beyond uint64', files: { '18446744073709551616_a.up.sql': '' }, code: 'invalid_migration_name', message: /uint64/ },
    { name: 'one version twice', files: { '001_a.up.sql': '', '1_b.up.sql': '' }, code: 'duplicate_migration_version', message: /1 \(001_a\.up\.sql, 1_b\.up\.sql\)/ },
    { name: 'a goose marker', files: { '1_a.up.sql': 'CREATE TABLE a (x int);\n-- +goose Down\nDROP TABLE a;\n' }, code: 'migration_invalid', message: /1_a\.up\.sql line 2: .*goose marker.*read as golang-migrate/ },
    { name: 'a dbmate marker', files: { '1_a.up.sql': '-- migrate:up\nCREATE TABLE a (x int);\n' }, code: 'migration_invalid', message: /line 1: .*dbmate marker/ },
    { name: 'the ptah directive', files: { '1_a.up.sql': '-- ptah:no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a);\n' }, code: 'migration_invalid', message: /line 1: .*ptah format's directive.*remove it/ },
    { name: 'its own transaction', files: { '1_a.up.sql': 'BEGIN;\nCREATE TABLE a (x int);\nCOMMIT;\n' }, code: 'migration_invalid', message: /line 1: BEGIN is not allowed/ },
  ];
  for (const c of cases) {
    const err = refusal(t, 'golang-migrate', c.files);
    t.equal(err?.code, c.code, `${c.name}: code`);
    t.match(err?.message, c.message, `${c.name}: message`);
  }
  const all = refusal(t, 'golang-migrate', { 'README.md': '', '1_a.up.txt': '', '2_a.up.sql': '', '002_b.up.sql': '' });
  t.match(all?.message, /2 files are not named <version>_<title>\.up\.sql: 1_a\.up\.txt, README\.md; 1 version is used by more than one file: 2 \(002_b\.up\.sql, 2_a\.up\.sql\)/,
    'every naming problem at once');
});

const goose = (up: string, down = 'DROP TABLE a;\n') => `-- +goose Up\n${up}-- +goose Down\n${down}`;

t.test('goose: the Up section only, on the file lines; Down never', async (t) => {
  const [one, two] = read(t, 'goose', {
    '00002_b.sql': '-- a header\n\n--+goose up\nCREATE TABLE b (x int);\n',
    '00001_a.sql': goose('CREATE TABLE a (x int);\nINSERT INTO a VALUES (1);\n'),
  });
  t.same([one!.version, one!.name, two!.version, two!.name], ['00001', 'a', '00002', 'b']);
  t.same(upLines(one!), ['2: CREATE TABLE a (x int);', '3: INSERT INTO a VALUES (1);'], 'the down SQL is not in the up SQL');
  t.same(upLines(two!), ['4: CREATE TABLE b (x int);'], 'no Down section is fine');
  t.equal(one!.transactional, true);
});

t.test('goose: StatementBegin/End keeps a routine whole; NO TRANSACTION anywhere runs statements one at a time', async (t) => {
  const fn = 'CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN 1;\nEND;\n$$;\n';
  const [block] = read(t, 'goose', { '1_f.sql': goose(`-- +goose StatementBegin\n${fn}-- +goose StatementEnd\nSELECT f();\n`, 'DROP FUNCTION f;\n') });
  t.same(upLines(block!), ['3: CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$', '4: BEGIN', '5:   RETURN 1;', '6: END;', '7: $$;', '9: SELECT f();']);
  const [notx] = read(t, 'goose', { '1_i.sql': goose('CREATE INDEX CONCURRENTLY i ON a (x);\n', 'DROP INDEX i;\n-- +goose NO TRANSACTION\n') });
  t.equal(notx!.transactional, false, 'NO TRANSACTION after Down still counts');
  const tx = refusal(t, 'goose', { '1_i.sql': goose('CREATE INDEX CONCURRENTLY i ON a (x);\n') });
  t.match(tx?.message, /1_i\.sql line 2: CREATE INDEX CONCURRENTLY cannot run inside a transaction block.*-- \+goose NO TRANSACTION/);
});

t.test('goose: refusals name the file and line', async (t) => {
  const cases: { name: string; text: string; message: RegExp }[] = [
    { name: 'no Up', text: 'CREATE TABLE a (x int);\n', message: /line 1: goose refuses SQL before -- \+goose Up/ },
    { name: 'only comments', text: '-- nothing\n', message: /line 1: a goose file must have a -- \+goose Up/ },
    { name: 'Down first', text: '-- +goose Down\nDROP TABLE a;\n-- +goose Up\n', message: /line 1: -- \+goose Down comes before/ },
    { name: 'two Ups', text: '-- +goose Up\nSELECT 1;\n-- +goose Up\n', message: /line 3: goose allows one -- \+goose Up/ },
    { name: 'two Downs', text: goose('SELECT 1;\n', 'SELECT 2;\n-- +goose Down\n'), message: /line 5: goose allows one -- \+goose Down/ },
    { name: 'missing final ;', text: goose('CREATE TABLE a (x int)\n'), message: /line 2: goose refuses an up statement that does not end with ;/ },
    { name: 'StatementBegin without End', text: '-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n', message: /line 2: .*StatementBegin has no -- \+goose StatementEnd/ },
    { name: 'End without Begin', text: '-- +goose Up\nSELECT 1;\n-- +goose StatementEnd\n', message: /line 3: .*StatementEnd without/ },
    { name: 'nested Begin', text: '-- +goose Up\n-- +goose StatementBegin\n-- +goose StatementBegin\n', message: /line 3: .*inside the block opened at line 2/ },
    { name: 'unknown annotation', text: '-- +goose Up\n-- we use +goose annotations\nSELECT 1;\n', message: /line 2: goose reads "-- we use \+goose annotations" as an annotation/ },
    { name: 'indented annotation', text: '  -- +goose Up\nSELECT 1;\n', message: /line 1: goose refuses an indented annotation/ },
    { name: 'ENVSUB', text: '-- +goose Up\n-- +goose ENVSUB ON\nCREATE ROLE ${NAME};\n', message: /line 2: goose substitutes environment variables/ },
    { name: 'a ; at a line end inside a string', text: goose("INSERT INTO a VALUES ('x;\ny');\n"), message: /line 2: goose ends a statement at this line, inside the statement that starts at line 2.*StatementBegin/ },
    { name: 'a routine without StatementBegin', text: goose('CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN 1;\nEND;\n$$;\n'), message: /line 4: goose ends a statement at this line, inside the statement that starts at line 2/ },
    { name: 'NO TRANSACTION block of two statements', text: '-- +goose NO TRANSACTION\n-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\nSELECT 2;\n-- +goose StatementEnd\n', message: /line 3: this block holds 2 statements/ },
    { name: 'a dbmate marker', text: goose('-- migrate:up\nSELECT 1;\n'), message: /line 2: .*dbmate marker.*read as goose/ },
  ];
  for (const c of cases) {
    const err = refusal(t, 'goose', { '1_a.sql': c.text });
    t.equal(err?.code, 'migration_invalid', `${c.name}: code`);
    t.match(err?.message, new RegExp(`^migration 1_a\\.sql ${c.message.source}`), `${c.name}: message`);
  }
  t.equal(refusal(t, 'goose', { '1_a.sql': goose("-- +goose StatementBegin\nINSERT INTO a VALUES ('x;\ny');\n-- +goose StatementEnd\n") }), undefined,
    'the same string inside StatementBegin/End is read');
  const names = refusal(t, 'goose', { '0_zero.sql': '', '2_b.go': '', 'x_a.sql': '', '1_a.sql': goose('SELECT 1;\n'), '01_b.sql': goose('SELECT 1;\n'), '3_c.sql': 'no Up\n' });
  t.equal(names?.code, 'invalid_migration_name');
  t.match(names?.message, /^3 files are not named <version>_<name>\.sql: 0_zero\.sql \(goose versions run from 1.*\), 2_b\.go \(a Go migration.*\), x_a\.sql; 1 version is used by more than one file: 1 \(01_b\.sql, 1_a\.sql\)/);
});

const dbmate = (up: string, options = '') => `-- migrate:up${options}\n${up}\n-- migrate:down\nDROP TABLE a;\n`;

t.test('dbmate: the up block only; transaction:false; file-name order', async (t) => {
  const [a, b] = read(t, 'dbmate', {
    '20240102000000_b.sql': dbmate('CREATE INDEX CONCURRENTLY i ON a (x);', ' transaction:false'),
    '20240101000000_create_a.sql': '-- header\n' + dbmate('CREATE TABLE a (x int);'),
  });
  t.same([a!.version, a!.name, a!.transactional, b!.name, b!.transactional], ['20240101000000', 'create_a', true, 'b', false]);
  t.same(upLines(a!), ['3: CREATE TABLE a (x int);']);
  const [loose] = read(t, 'dbmate', { '1_a.sql': dbmate('CREATE TABLE a (x int);\nCREATE TABLE b (x int);', ' transaction:false') });
  t.equal(loose!.transactional, true, 'a multi-statement up block is one implicit transaction even under transaction:false');
  const spelled = refusal(t, 'dbmate', { '1_a.sql': dbmate('CREATE INDEX CONCURRENTLY i ON a (x);', ' transaction:FALSE') });
  t.match(spelled?.message, /line 2: CREATE INDEX CONCURRENTLY cannot run inside a transaction block.*add transaction:false.*exactly that spelling/);
  const mixed = refusal(t, 'dbmate', { '1_a.sql': dbmate('CREATE TABLE a (x int);\nCREATE INDEX CONCURRENTLY i ON a (x);', ' transaction:false') });
  t.match(mixed?.message, /line 3: CREATE INDEX CONCURRENTLY.*one transaction even under transaction:false/);
});

t.test('dbmate: refusals', async (t) => {
  const cases: { name: string; text: string; message: RegExp }[] = [
    { name: 'no up marker', text: '-- a comment\n', message: /line 1: a dbmate file must have a -- migrate:up line/ },
    { name: 'no down marker', text: '-- migrate:up\nCREATE TABLE a (x int);\n', message: /line 1: dbmate requires a -- migrate:down line/ },
    { name: 'SQL before up', text: 'SELECT 1;\n' + dbmate('SELECT 2;'), message: /line 1: dbmate refuses SQL before -- migrate:up/ },
    { name: 'down before up', text: '-- migrate:down\n-- migrate:up\n', message: /line 1: -- migrate:down comes before -- migrate:up/ },
    { name: 'two sections', text: dbmate('SELECT 1;') + dbmate('SELECT 2;'), message: /line 5: a second -- migrate:up \(the first is at line 1\).*#820/ },
    { name: 'two downs', text: dbmate('SELECT 1;') + '-- migrate:down\n', message: /line 5: a second -- migrate:down/ },
    { name: 'a goose marker', text: dbmate('-- +goose StatementBegin\nSELECT 1;'), message: /line 2: .*goose marker.*read as dbmate/ },
  ];
  for (const c of cases) {
    const err = refusal(t, 'dbmate', { '1_a.sql': c.text });
    t.equal(err?.code, 'migration_invalid', `${c.name}: code`);
    t.match(err?.message, new RegExp(`^migration 1_a\\.sql ${c.message.source}`), `${c.name}: message`);
  }
  const order = refusal(t, 'dbmate', { '9_a.sql': dbmate('SELECT 1;'), '10_b.sql': dbmate('SELECT 1;'), '01_c.sql': dbmate('SELECT 1;'), '1_d.sql': dbmate('SELECT 1;') });
  t.equal(order?.code, 'invalid_migration_name');
  t.match(order?.message, /1 version is used by more than one file: 1 \(01_c\.sql, 1_d\.sql\); dbmate applies files in file-name order, and 1 pair sorts against the version order: 10_b\.sql before 9_a\.sql/);
});

t.test('flyway: V files by numeric version, trailing zero parts ignored, undo files never read', async (t) => {
  const sources = read(t, 'flyway', {
    'V10__ten.sql': 'SELECT 10;', 'V2.0__two_point_oh.SQL': 'SELECT 2;', 'V3.sql': 'SELECT 3;',
    'V1__init.sql': 'CREATE TABLE a (x int);', 'U1__undo.sql': 'DROP TABLE a;',
  });
  t.same(sources.map((s) => [s.version, s.name]), [['1', 'init'], ['2', 'two_point_oh'], ['3', 'V3.sql'], ['10', 'ten']]);
  const [index] = read(t, 'flyway', { 'V1__i.sql': 'CREATE INDEX CONCURRENTLY i ON a (x);\nDROP INDEX CONCURRENTLY j;\n' });
  t.equal(index!.transactional, false, 'a script of statements that cannot run in a transaction runs outside one');
});

t.test('flyway: refusals', async (t) => {
  const names = refusal(t, 'flyway', {
    'R__view.sql': '', 'B5__base.sql': '', 'V1.1__dotted.sql': '', 'V2__x.sql.conf': '', 'beforeMigrate.sql': '', 'v3__lower.sql': '',
    'V1__a.sql': '', 'V1_0__b.sql': '', 'V001__c.sql': '',
  });
  t.equal(names?.code, 'invalid_migration_name');
  for (const expected of [/B5__base\.sql \(a baseline migration/, /R__view\.sql \(a repeatable migration.*make it a V file\)/, /V1\.1__dotted\.sql \(a dotted version/,
    /V2__x\.sql\.conf \(a Flyway script configuration/, /beforeMigrate\.sql \(a Flyway callback/, /v3__lower\.sql[,;]/,
    /1 version is used by more than one file: 1 \(V001__c\.sql, V1_0__b\.sql, V1__a\.sql\)/]) {
    t.match(names?.message, expected);
  }
  const placeholder = refusal(t, 'flyway', { 'V1__p.sql': 'CREATE TABLE a (x int);\nCREATE SCHEMA ${schema};\n' });
  t.match(placeholder?.message, /^migration V1__p\.sql line 2: Flyway replaces \$\{…\} placeholders/);
  const mixed = refusal(t, 'flyway', { 'V1__m.sql': 'CREATE TABLE a (x int);\nCREATE INDEX CONCURRENTLY i ON a (x);\n' });
  t.match(mixed?.message, /^migration V1__m\.sql line 2: CREATE INDEX CONCURRENTLY cannot run in a transaction.*statement at line 1 \(mixed=false\)/);
  const marker = refusal(t, 'flyway', { 'V1__g.sql': '-- +goose Up\nSELECT 1;\n' });
  t.match(marker?.message, /^migration V1__g\.sql line 1: .*goose marker.*read as flyway/);
});

t.test('ptah: another tool\'s markers name the format that reads them', async (t) => {
  const err = refusal(t, 'ptah', { '1_a.up.sql': '-- +goose Up\nSELECT 1;\n' });
  t.match(err?.message, /line 1: .*goose marker.*down section would run too.*Declare spec\.artifact\.format: goose.*remove the markers/);
  t.match(refusal(t, 'ptah', { '1_a.sql': '' })?.message, /declare the spec\.artifact\.format/, 'a misnamed file points at the formats');
});
