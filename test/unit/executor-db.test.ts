import t from 'tap';
import pg from 'pg';
import { describeSqlError, failureCode, isConnectionLoss, isStatementError, parseDatabaseUrl, withoutApplicationName } from '../../src/executor/db.js';
import { ExecutorFailure } from '../../src/executor/failure.js';
import { writerApplicationName, writerRealm } from '../../src/executor/writer-lock.js';

function dbError(code: string, position?: number): pg.DatabaseError {
  const err = new pg.DatabaseError('boom', 0, 'error');
  err.code = code;
  if (position !== undefined) err.position = String(position);
  return err;
}

t.test('a statement error is told apart from a lost connection', async (t) => {
  const cases: [string, unknown, string][] = [
    ['syntax error', dbError('42601'), 'statement'],
    ['unique violation', dbError('23505'), 'statement'],
    ['statement timeout', dbError('57014'), 'statement'],
    ['admin shutdown', dbError('57P01'), 'connection_lost'],
    ['crash shutdown', dbError('57P02'), 'connection_lost'],
    ['connection failure', dbError('08006'), 'connection_lost'],
    ['socket reset', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), 'connection_lost'],
    ['terminated', new Error('Connection terminated unexpectedly'), 'connection_lost'],
    ['a bug', new TypeError('x is undefined'), 'internal_error'],
  ];
  for (const [name, err, expected] of cases) {
    t.equal(failureCode(err, 'statement'), expected, name);
    t.equal(isStatementError(err), expected === 'statement', `${name}: statement error`);
    t.equal(isConnectionLoss(err), expected === 'connection_lost', `${name}: connection loss`);
  }
});

t.test('an SQL error names the line of its position', async (t) => {
  t.equal(describeSqlError(dbError('42601', 12), 'select 1;\nselec 2;'), 'line 2: boom');
  t.equal(describeSqlError(dbError('42601'), 'select 1;'), 'boom');
  t.equal(describeSqlError(new Error('other'), 'select 1;'), 'other');
});

t.test('database URLs are checked and never echoed', async (t) => {
  t.equal(parseDatabaseUrl('postgresql://u:p@h:5432/db?sslmode=disable', 'target').hostname, 'h');
  const bad: [string, RegExp][] = [
    ['host=h password=secret-pw', /not a valid URL/],
    ['u:secret-pw@h/db', /postgres:\/\/ or postgresql:\/\//],
    ['mysql://u:secret-pw@h/db', /postgres:\/\/ or postgresql:\/\//],
    ['postgres://u:secret-pw@h', /names no database/],
    ['postgres://u:secret-pw@h/', /names no database/],
  ];
  for (const [url, message] of bad) {
    t.throws(() => parseDatabaseUrl(url, 'dev'), { name: 'ExecutorFailure', code: 'invalid_url', message }, url);
    try {
      parseDatabaseUrl(url, 'dev');
    } catch (err) {
      t.notMatch((err as ExecutorFailure).message, 'secret-pw', `${url}: no password`);
    }
  }
});

t.test('a writer names its own session, whatever application_name the URL carries', async (t) => {
  const cases: [string, string][] = [
    ['postgres://u:p%3Fw@h/db?application_name=app', 'postgres://u:p%3Fw@h/db'],
    ['postgres://u@h/db?sslmode=require&application_name=app&options=-c%20x%3D1', 'postgres://u@h/db?sslmode=require&options=-c%20x%3D1'],
    ['postgres://u@h/db?application%5Fname=app&sslmode=require', 'postgres://u@h/db?sslmode=require'],
    ['postgres://u@h/db?fallback_application_name=app&x=%ZZ', 'postgres://u@h/db?fallback_application_name=app&x=%ZZ'],
    ['postgres://u@h/db', 'postgres://u@h/db'],
  ];
  for (const [url, expected] of cases) t.equal(withoutApplicationName(url), expected, url);
});

t.test('a writer names its realm in 63 bytes, and only a writer name reads as a realm', async (t) => {
  const realm = `sha256:${'0123456789abcdef'.repeat(4)}`;
  const name = writerApplicationName(realm);
  t.ok(Buffer.byteLength(name) <= 63, 'PostgreSQL keeps the whole name');
  t.equal(writerRealm(name), realm);
  for (const other of [null, undefined, '', 'ptah-executor', `${name}x`, name.slice(0, -1), name.replace('ptah-writer', 'ptah-reader')]) {
    t.equal(writerRealm(other), undefined, `not a writer: ${String(other)}`);
  }
});
