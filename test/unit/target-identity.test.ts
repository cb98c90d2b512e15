import t from 'tap';
import { databaseUrlSecrets, targetIdentity, targetIdentityDigest, TargetIdentityError } from '../../src/shared/target-identity.js';

const base = 'postgresql://app:pw@db.example.com/app';

t.test('spellings of one target share one digest', async (t) => {
  const same = [
    base,
    'postgres://app:pw@db.example.com/app',
    'POSTGRESQL://app:other-password@DB.Example.COM:5432/app',
    'postgresql://app@db.example.com/app?connect_timeout=5&password=x',
    'postgresql://db.example.com/app?user=app&statement_timeout=100&sslpassword=y',
    'postgresql://app:pw@db.example.com/app?port=5432',
    'postgresql://app:pw@db.example.com/app?host=db.example.com'.replace('@db.example.com/', '@/'),
  ];
  const expected = targetIdentityDigest(base);
  for (const url of same) t.equal(targetIdentityDigest(url), expected, url);
  t.equal(
    targetIdentityDigest('postgresql://app@db/app?sslmode=require&application_name=x'),
    targetIdentityDigest('postgresql://app@db/app?application_name=x&sslmode=require'),
    'options are sorted',
  );
  t.equal(targetIdentityDigest('postgresql://app@127.000.000.001/app'), targetIdentityDigest('postgresql://app@127.0.0.1/app'), 'IPv4 canonical');
  t.equal(targetIdentityDigest('postgresql://app@[0:0:0:0:0:0:0:1]:5432/app'), targetIdentityDigest('postgresql://app@[::1]/app'), 'IPv6 canonical');
});

t.test('what names another target changes the digest', async (t) => {
  const different = [
    'postgresql://app:pw@db2.example.com/app',
    'postgresql://app:pw@db.example.com:5433/app',
    'postgresql://app:pw@db.example.com/other',
    'postgresql://admin:pw@db.example.com/app',
    'postgresql://app:pw@db.example.com/app?sslmode=disable',
    'postgresql://app:pw@db.example.com./app',
  ];
  const digests = new Set([base, ...different].map(targetIdentityDigest));
  t.equal(digests.size, different.length + 1);
});

t.test('the identity holds no credential', async (t) => {
  t.strictSame(targetIdentity('postgres://app:pw@[::1]:6432/app%2Fx?sslmode=require&password=pw&sslpassword=s&connect_timeout=3'), {
    scheme: 'postgresql', host: '[::1]', port: 6432, database: 'app/x', user: 'app', options: { sslmode: 'require' },
  });
  t.strictSame(targetIdentity('postgresql://%2Fvar%2Frun%2Fpostgresql/app'), {
    scheme: 'postgresql', host: 'unix:/var/run/postgresql', database: 'app', options: {},
  }, 'a Unix-socket directory');
  t.match(targetIdentityDigest(base), /^sha256:[0-9a-f]{64}$/);
});

t.test('URLs that name no single target are refused with a reason and without the URL', async (t) => {
  const refused: [string, RegExp][] = [
    ['mysql://app:pw@db/app', /not a postgres/],
    ['postgresql://app:pw@h1,h2/app', /more than one host/],
    ['postgresql://app:pw@h1:5432,h2:5432/app', /more than one host/],
    ['postgresql://app:pw@/app?host=h1,h2', /more than one host/],
    ['postgresql://app:pw@db.example.com', /names no database/],
    ['postgresql://app:pw@db.example.com/', /names no database/],
    ['postgresql://app:pw@db.example.com/?dbname=app', /query option/],
    ['postgresql://app:pw@/app', /names no host/],
    ['postgresql://app:pw@db.example.com/app?host=other', /host twice/],
    ['postgresql://app:pw@db.example.com/app?user=other', /user twice/],
    ['postgresql://app:pw@db.example.com/app?sslmode=a&sslmode=b', /repeats the query option "sslmode"/],
    ['postgresql://app:pw@db.example.com:99999/app', /port/],
    ['postgresql://app:pw@db.example.com:x/app', /port/],
    ['postgresql://app:pw@db.example.com/app#frag', /fragment/],
    ['postgresql://app:pw@[::1/app', /IPv6/],
    ['postgresql://app:pw@db%ZZ/app', /percent-encoding/],
    ['postgresql://app:pw@bad^host/app', /not a valid host/],
  ];
  for (const [url, reason] of refused) {
    t.throws(() => targetIdentityDigest(url), TargetIdentityError, url);
    try {
      targetIdentityDigest(url);
    } catch (error) {
      t.match((error as Error).message, reason, url);
      t.notOk((error as Error).message.includes('pw'), 'the message never holds the URL');
    }
  }
});

t.test('every credential in a URL is found, as written and decoded', async (t) => {
  const url = 'postgresql://app:p%40ss%2Fw0rd@db/app?sslpassword=k%20ey&application_name=x';
  const secrets = databaseUrlSecrets(url);
  for (const s of [url, 'p%40ss%2Fw0rd', 'p@ss/w0rd', 'k%20ey', 'k ey']) t.ok(secrets.includes(s), s);
  t.notOk(secrets.includes('app'), 'the user name is no secret');
  t.notOk(secrets.includes('x'));
  const unescaped = 'postgresql://app:pa/ss#word@db/app';
  t.ok(databaseUrlSecrets(unescaped).includes('pa/ss#word'), 'an unescaped password in a URL that does not parse is still found');
  t.strictSame(databaseUrlSecrets('postgresql://db/app'), ['postgresql://db/app'], 'no password: the URL alone');
});
