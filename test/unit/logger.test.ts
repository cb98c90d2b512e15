// The root logger's redaction: linear in the text, bounded per field, and covering the credential forms a
// PostgreSQL operator meets (URLs, libpq key/value, .pgpass lines, JSON text), including one cut in half.
import t from 'tap';
import { MAX_LOGGED_ENTRIES, MAX_LOGGED_STRING, REDACTED, createLogger, redactCredentials, scrubCredentials } from '../../src/shared/logger.js';

/**
 * Milliseconds of this process's CPU time `fn` takes, the least of up to nine runs. CPU time, not wall time: on a
 * loaded machine (CI runs other test files beside this one) a run of a few milliseconds is often preempted, which
 * adds wall time but no CPU time; the least run is the one least disturbed by garbage collection.
 */
function timed(fn: () => void): number {
  let best = Infinity;
  let spent = 0;
  for (let run = 0; run < 9 && (run < 3 || spent < 1000); run++) {
    const start = process.cpuUsage();
    fn();
    const used = process.cpuUsage(start);
    const ms = (used.user + used.system) / 1000;
    spent += ms;
    best = Math.min(best, ms);
  }
  return best;
}

/** How many times longer the large input is than the small one. */
const FACTOR = 16;
/**
 * Linear work grows ×16, quadratic ×256; 64 is their geometric middle, 4× from either. Query parameters measure
 * ×32 here: their cost per character steps up once between 64 and 128 KiB and is flat from there to 1 MiB.
 */
const QUADRATIC_BELOW = 64;

/**
 * How much longer `work` takes on an input 16× as long: about 16 when it is linear, 256 when it re-scans
 * quadratically. A ratio of two timings taken side by side, so no bound on the time itself is asserted.
 */
function growth(work: (scale: number) => void): { ratio: number; small: number; large: number } {
  const small = timed(() => work(1));
  const large = timed(() => work(FACTOR));
  // Below a millisecond the ratio is timer noise; such a run cannot be the stall this guards against.
  return { ratio: large < 1 ? 1 : large / Math.max(small, 0.05), small, large };
}

function capture(): { logger: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ level: 'debug' }, { write: (line: string) => void lines.push(line) }), lines };
}

t.test('the growth measure tells a quadratic scan from a linear one', async (t) => {
  let sink = 0;
  const quadratic = growth((scale) => {
    const n = 400 * scale;
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) sink += i ^ j;
  });
  t.ok(quadratic.ratio >= QUADRATIC_BELOW, `a nested loop over 16× the input takes ×${quadratic.ratio.toFixed(1)} (${quadratic.small.toFixed(2)} → ${quadratic.large.toFixed(2)} ms)`);
  t.ok(sink !== 0, 'the loop ran');
});

t.test('redaction is linear in the text: no input makes it scan the same characters again and again', async (t) => {
  // Each shape makes a backtracking pattern re-scan a run from every position. Before the fix a 64 KB run of
  // [a-z0-9+.-] took 4.4 s (quadratic: 8× the text, 64× the time); linear redaction grows with the text.
  const KiB16 = 16 * 1024;
  const shapes: [string, (n: number) => string][] = [
    ['a run of scheme characters', (n) => 'a'.repeat(n)],
    ['a run of scheme characters with dots and pluses', (n) => 'a.b+c-d'.repeat(n / 7)],
    ['many scheme separators without userinfo', (n) => 'a://b/'.repeat(n / 6)],
    ['many userinfo starts without an @', (n) => 'a://b:c'.repeat(n / 7)],
    ['a long password with no @ and no end', (n) => `postgres://u:${'p'.repeat(n)}`],
    ['a run of backslashes before quotes', (n) => `${'\\'.repeat(n)}"password"`],
    ['many JSON keys with unterminated values', (n) => '"password":"x'.repeat(n / 14)],
    ['many key=value starts', (n) => 'password='.repeat(n / 9)],
    ['colon chains that look like .pgpass', (n) => 'h:1:d:u:'.repeat(n / 8)],
    ['escaped whitespace that looks like a .pgpass field', (n) => '\\ '.repeat(n / 2)],
    ['many userinfo starts without an @, one word each', (n) => 'a://b:c '.repeat(n / 8)],
    ['many userinfo starts, then an @ at the end', (n) => `${'x://u:p w '.repeat(n / 10)}@host`],
    ['percent-encoded userinfo starts without an @', (n) => 'a%3A%2F%2Fb%3Ac '.repeat(n / 16)],
    ['query parameters', (n) => '?token=&password='.repeat(n / 17)],
  ];
  for (const [name, shape] of shapes) {
    const texts = [shape(KiB16), shape(FACTOR * KiB16)];
    const g = growth((scale) => redactCredentials(texts[scale === 1 ? 0 : 1]!));
    t.ok(g.ratio < QUADRATIC_BELOW, `${name}: 16 KiB in ${g.small.toFixed(2)} ms, 256 KiB in ${g.large.toFixed(2)} ms of CPU (×${g.ratio.toFixed(1)}; linear is ×16, quadratic ×256)`);
  }
});

t.test('what is logged of one string is bounded, and says how long the string was', async (t) => {
  const long = 'n'.repeat(160 * 1024);
  const longer = 'n'.repeat(FACTOR * 160 * 1024);
  const g = growth((scale) => scrubCredentials(scale === 1 ? long : longer));
  t.ok(g.ratio < QUADRATIC_BELOW, `160 KB scrubbed for a log line in ${g.small.toFixed(2)} ms, 2.5 MB in ${g.large.toFixed(2)} ms of CPU (×${g.ratio.toFixed(1)}; it froze the process for 27 s)`);
  const logged = scrubCredentials(long);
  t.ok(logged.length < MAX_LOGGED_STRING + 64, `cut to ${logged.length} characters`);
  t.match(logged, /…\[truncated: 163840 characters\]$/, 'the marker says how long it was');
  t.equal(scrubCredentials('short'), 'short', 'a short string is untouched');
  t.equal(scrubCredentials('x'.repeat(MAX_LOGGED_STRING)), 'x'.repeat(MAX_LOGGED_STRING), 'a string of exactly the limit is not cut');

  const pair = `${'x'.repeat(MAX_LOGGED_STRING - 1)}\u{1F600}${'y'.repeat(10)}`;
  t.notMatch(scrubCredentials(pair), /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/, 'the cut never splits a surrogate pair');

  const { logger, lines } = capture();
  // Words, not one run, so that this case measures size and not the (separately tested) redaction time.
  logger.info({ name: 'mm '.repeat(2 * 1024 * 1024), groups: Array.from({ length: 300_000 }, (_, i) => `g${i}`) }, 'x '.repeat(50_000));
  t.equal(lines.length, 1);
  t.ok(lines[0]!.length < 4 * MAX_LOGGED_STRING, `a record with a 6 MiB field, 300,000 list items and a 100 KB message is a ${lines[0]!.length}-character line`);
  const record = JSON.parse(lines[0]!);
  t.equal(record.groups.length, MAX_LOGGED_ENTRIES + 1, 'a long list keeps its first entries and a marker');
  t.match(record.groups.at(-1), /\[299900 more items\]/);
  t.match(record.name, /\[truncated: 6291456 characters\]$/);
  t.match(record.msg, /\[truncated: 100000 characters\]$/);

  const many = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i]));
  logger.info({ many }, 'wide');
  const wide = JSON.parse(lines[1]!);
  t.equal(Object.keys(wide.many).length, MAX_LOGGED_ENTRIES + 1, 'a wide object keeps its first properties and a marker');
  t.match(wide.many['…'], /900 more properties/);
});

t.test('a credential cut in half by the length cap is not logged in part', async (t) => {
  const secret = 'Sup3rS3cretPassw0rd';
  const prefix = secret.slice(0, 6);
  // Each form placed so the cap falls inside the secret.
  const forms: [string, (pad: string) => string][] = [
    ['a URL whose @ is past the cut', (pad) => `${pad} postgres://app:${secret}@db.example/orders`],
    ['a libpq password', (pad) => `${pad} host=db password=${secret}`],
    ['a quoted libpq password', (pad) => `${pad} password='${secret} with spaces'`],
    ['a .pgpass line', (pad) => `${pad}\ndb.example:5432:orders:app:${secret}`],
    ['JSON text', (pad) => `${pad} {"password":"${secret}"}`],
    ['a query parameter', (pad) => `${pad} https://h/x?token=${secret}&a=b`],
  ];
  for (const [name, build] of forms) {
    const probe = build('');
    const at = probe.indexOf(secret) + 3; // the cut lands three characters into the secret
    const text = build('.'.repeat(MAX_LOGGED_STRING - at));
    t.equal(text.indexOf(secret) + 3, MAX_LOGGED_STRING, `${name}: the cut is inside the secret`);
    const logged = scrubCredentials(text);
    t.notMatch(logged, secret.slice(0, 3), `${name}: no part of the secret is logged`);
    t.notMatch(logged, prefix, `${name}: no prefix of the secret is logged`);
    t.match(logged, /\[truncated: \d+ characters\]$/, `${name}: and the string says it was cut`);
  }
  // Without a cut, a URL with no @ is not a credential: the end of the text only ends a password at a cut.
  t.equal(scrubCredentials('dialing http://db.example:5432'), 'dialing http://db.example:5432');
});

t.test('credential forms are redacted; the text around them stays readable', async (t) => {
  const cases: [string, string, string][] = [
    ['URL userinfo', 'postgres://app:s3cr3t@db:5432/orders', `postgres://app:${REDACTED}@db:5432/orders`],
    ['a raw @ and / in a URL password', 'postgres://u:p@ss/w@host/db', `postgres://u:${REDACTED}@host/db`],
    ['a URL with an empty user', 'redis://:pw@cache:6379', `redis://:${REDACTED}@cache:6379`],
    ['query parameters', 'https://h/p?sslmode=require&sslpassword=pw1&password=pw2#frag', `https://h/p?sslmode=require&sslpassword=${REDACTED}&password=${REDACTED}#frag`],
    ['a query key that ends in password', 'https://h/p?db_password=pw3&x=1', `https://h/p?db_password=${REDACTED}&x=1`],
    ['libpq key/value', 'host=db user=app password=hunter2 dbname=orders', `host=db user=app password=${REDACTED} dbname=orders`],
    ['libpq with spaces around =', 'host=db password = hunter2 port=5432', `host=db password = ${REDACTED} port=5432`],
    ['a quoted libpq password with a space and an escaped quote', "host=db password='a b\\'c' user=app", `host=db password=${REDACTED} user=app`],
    ['an environment-style assignment', 'PGPASSWORD=hunter3 psql', `PGPASSWORD=${REDACTED} psql`],
    ['sslpassword in a conninfo', 'sslmode=verify-full sslpassword=k3y', `sslmode=verify-full sslpassword=${REDACTED}`],
    ['a .pgpass line', 'db.example:5432:orders:app:pgp4ss', `db.example:5432:orders:app:${REDACTED}`],
    ['a .pgpass line with wildcards, inside a message', 'bad line *:*:*:app:pa:ss word', `bad line *:*:*:app:${REDACTED}`],
    ['a .pgpass line with an escaped colon', 'h\\:x:5432:db:u:secret', `h\\:x:5432:db:u:${REDACTED}`],
    ['a URL password with spaces', 'connecting to postgres://app:pass word here@db:5432/orders now', `connecting to postgres://app:${REDACTED}@db:5432/orders now`],
    ['a percent-encoded URL in a query parameter', 'GET /x?dsn=postgres%3A%2F%2Fapp%3As3cr3t%40db%2Forders&y=1', `GET /x?dsn=postgres%3A%2F%2Fapp%3A${REDACTED}%40db%2Forders&y=1`],
    ['a percent-encoded URL with an encoded @ in its password', 'url=postgres%3a%2f%2fapp%3ap%40ss%40db', `url=postgres%3a%2f%2fapp%3a${REDACTED}%40db`],
    ['JSON text in a string', '{"user":"app","password":"x y"}', `{"user":"app","password":"${REDACTED}"}`],
    ['JSON text with an escaped quote in the value', '{"password":"a\\"b","next":1}', `{"password":"${REDACTED}","next":1}`],
    ['JSON text nested in JSON text', '{"body":"{\\"password\\":\\"in\\\\\\"ner\\"}"}', `{"body":"{\\"password\\":\\"${REDACTED}\\"}"}`],
    ['a JSON number value', '{"token": 12345, "ok": true}', `{"token": ${REDACTED}, "ok": true}`],
    ['a JSON key that ends in Token', '{"bearerToken":"abc"}', `{"bearerToken":"${REDACTED}"}`],
  ];
  for (const [name, input, expected] of cases) t.equal(scrubCredentials(input), expected, name);

  const readable: [string, string][] = [
    ['a service account username', 'User "system:serviceaccount:ptah-system:ptah-manager" cannot get resource: forbidden: x'],
    ['a URL without userinfo', 'GET https://10.0.0.1:6443/apis/batch/v1/namespaces/a/jobs/b'],
    ['an npm scoped URL', 'https://registry.npmjs.org/@types/node'],
    ['a key that only contains a keyword', '{"secretName":"orders-db","tokenExpirationSeconds":3600}'],
    ['a time', 'at 12:34:56 the job finished'],
    ['a stack frame', 'at judge (file:///opt/ptah/src/webhook/server.ts:151:25)'],
    ['a digest', 'sha256:0123456789abcdef'],
    ['a URL with a port, then an address later on the line', 'dialing http://db.example:5432/x for alice@example.com'],
    ['a percent-encoded URL without userinfo', 'next=https%3A%2F%2Fexample.com%2Fa%3Ab'],
  ];
  for (const [name, input] of readable) t.equal(scrubCredentials(input), input, `${name} is left as it is`);
});

t.test('every string in a record is scrubbed: fields, the message, errors and their causes', async (t) => {
  const { logger, lines } = capture();
  logger.info({ conn: 'host=db password=pw-field', nested: { dsn: ['db:5432:app:app:pw-pgpass'] } }, 'connecting with password=pw-msg');
  logger.error({ err: new Error('{"password":"pw-err"}', { cause: new Error('postgres://a:pw-cause@h') }) }, 'failed');
  const out = lines.join('');
  for (const secret of ['pw-field', 'pw-pgpass', 'pw-msg', 'pw-err', 'pw-cause']) t.notMatch(out, secret, `${secret} is not logged`);
  t.match(JSON.parse(lines[1]!).err, { type: 'Error', message: `{"password":"${REDACTED}"}` });
});
