// The manager's kubeconfig loader (src/shared/kubeconfig.ts): files, the default chain, in-cluster, credential
// re-reads, and every refusal, each naming the file and what to change.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import t, { type Test } from 'tap';
import { stringify } from 'yaml';
import { generateCertificates } from '../../certs/generate.js';
import { restClient } from '../../src/shared/kube-client.js';
import { CREDENTIAL_REREAD_MS, loadKubeConfig, type LoadOptions } from '../../src/shared/kubeconfig.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

interface Doc {
  'current-context'?: unknown;
  clusters?: unknown;
  users?: unknown;
  contexts?: unknown;
}

/** A one-context kubeconfig document: cluster c, user u, context x. */
function doc(cluster: Record<string, unknown>, user?: Record<string, unknown>): Doc {
  return {
    'current-context': 'x',
    clusters: [{ name: 'c', cluster }],
    users: user ? [{ name: 'u', user }] : [],
    contexts: [{ name: 'x', context: { cluster: 'c', ...(user ? { user: 'u' } : {}) } }],
  };
}

async function scratch(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ptah-kubeconfig-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function write(dir: string, name: string, content: Doc | string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, typeof content === 'string' ? content : stringify(content));
  return file;
}

/** The options one request would be sent with. */
async function applied(options: LoadOptions | string): Promise<https.RequestOptions> {
  const tls: https.RequestOptions = {};
  await loadKubeConfig(options).applyToHTTPSOptions(tls);
  return tls;
}

/** A clock the test moves. */
function fakeClock() {
  let now = 1_000;
  return { monotonicMs: () => now, advance: (ms: number) => void (now += ms) };
}

const NOTHING = (dir: string): LoadOptions => ({ env: {}, home: join(dir, 'no-home'), serviceAccountDir: join(dir, 'no-sa') });

t.test('inline credentials: server, CA, client certificate and key, bearer token', async (t) => {
  const dir = await scratch(t);
  const file = await write(dir, 'config', doc(
    { server: 'https://api.example:6443/', 'certificate-authority-data': b64('CA') },
    { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY'), token: 'tok' },
  ));
  const kc = loadKubeConfig(file);
  t.same(kc.getCurrentCluster(), { server: 'https://api.example:6443' }, 'one trailing slash dropped, as client-node did');
  t.equal(kc.source, file);
  const tls = await applied(file);
  t.same([tls.ca?.toString(), tls.cert?.toString(), tls.key?.toString()], ['CA', 'CERT', 'KEY']);
  t.same(tls.headers, { Authorization: 'Bearer tok' });
  t.equal(tls.rejectUnauthorized, undefined, 'the server is verified');
  t.equal(tls.agent, undefined, 'the transport stays the caller\'s');
});

t.test('files: relative to the kubeconfig, the token trimmed, -data over the file, token over tokenFile', async (t) => {
  const dir = await scratch(t);
  await mkdir(join(dir, 'pki'));
  for (const [name, content] of [['ca.crt', 'CA-FILE'], ['tls.crt', 'CERT-FILE'], ['tls.key', 'KEY-FILE'], ['token', 'file-token\n']]) await writeFile(join(dir, 'pki', name), content);
  const byFile = await write(dir, 'config', doc(
    { server: 'https://a', 'certificate-authority': 'pki/ca.crt' },
    { 'client-certificate': 'pki/tls.crt', 'client-key': join(dir, 'pki/tls.key'), tokenFile: 'pki/token' },
  ));
  const tls = await applied(byFile);
  t.same([tls.ca?.toString(), tls.cert?.toString(), tls.key?.toString()], ['CA-FILE', 'CERT-FILE', 'KEY-FILE'], 'relative and absolute paths');
  t.same(tls.headers, { Authorization: 'Bearer file-token' }, 'the newline a token file ends with is not sent');

  const clientNodeSpelling = await write(dir, 'config-dash', doc({ server: 'https://a' }, { 'token-file': 'pki/token' }));
  t.same((await applied(clientNodeSpelling)).headers, { Authorization: 'Bearer file-token' }, 'token-file, as client-node read it, is honoured too');

  const both = await write(dir, 'config-both', doc(
    { server: 'https://a', 'certificate-authority': 'pki/ca.crt', 'certificate-authority-data': b64('CA-DATA') },
    { token: 'inline', tokenFile: 'pki/token' },
  ));
  const over = await applied(both);
  t.equal(over.ca?.toString(), 'CA-DATA', 'certificate-authority-data overrides certificate-authority (kubectl\'s rule)');
  t.same(over.headers, { Authorization: 'Bearer inline' }, 'token takes precedence over tokenFile (client-go\'s rule)');
});

t.test('a credential file is re-read once its reading is a minute old, not before', async (t) => {
  const dir = await scratch(t);
  const token = join(dir, 'token');
  await writeFile(token, 'first');
  const file = await write(dir, 'config', doc({ server: 'https://a' }, { tokenFile: token }));
  const clock = fakeClock();
  const kc = loadKubeConfig({ file, clock });
  const bearer = async () => {
    const tls: https.RequestOptions = { headers: { 'x-kept': '1' } };
    await kc.applyToHTTPSOptions(tls);
    return tls.headers;
  };
  await writeFile(token, 'second');
  clock.advance(CREDENTIAL_REREAD_MS - 1);
  t.same(await bearer(), { 'x-kept': '1', Authorization: 'Bearer first' }, 'within the minute: the token read at load; other headers kept');
  clock.advance(1);
  t.same(await bearer(), { 'x-kept': '1', Authorization: 'Bearer second' }, 'after it: the rotated token');
  await rm(token);
  clock.advance(CREDENTIAL_REREAD_MS);
  await t.rejects(bearer(), /ENOENT/, 'a token file gone later fails the request (restClient reports "could not load credentials")');
});

t.test('cluster TLS settings: insecure-skip-tls-verify and tls-server-name as client-node honoured them', async (t) => {
  const dir = await scratch(t);
  const tls = await applied(await write(dir, 'config', doc({ server: 'https://a', 'insecure-skip-tls-verify': true, 'tls-server-name': 'kubernetes' })));
  t.equal(tls.rejectUnauthorized, false);
  t.equal(tls.servername, 'kubernetes');
  t.same(tls.headers, undefined, 'a context without a user sends no credentials');
  const plain = loadKubeConfig(await write(dir, 'plain', doc({ server: 'http://127.0.0.1:8080', 'insecure-skip-tls-verify': true })));
  t.equal(plain.getCurrentCluster().server, 'http://127.0.0.1:8080', 'plain HTTP when the kubeconfig skips verification outright');
});

t.test('the default chain: KUBECONFIG (merged, first wins), then ~/.kube/config, then in-cluster', async (t) => {
  const dir = await scratch(t);
  const first = await write(dir, 'first', {
    'current-context': 'x',
    clusters: [{ name: 'c', cluster: { server: 'https://first' } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
  });
  const second = await write(dir, 'second', {
    'current-context': 'y',
    clusters: [{ name: 'c', cluster: { server: 'https://second' } }],
    users: [{ name: 'u', user: { token: 'from-second' } }],
    contexts: [{ name: 'y', context: { cluster: 'c' } }],
  });
  const merged = { ...NOTHING(dir), env: { KUBECONFIG: ['', first, second].join(delimiter) } };
  const kc = loadKubeConfig(merged);
  t.equal(kc.getCurrentCluster().server, 'https://first', 'current-context and cluster c from the first file that sets them');
  t.same((await applied(merged)).headers, { Authorization: 'Bearer from-second' }, 'user u from the file that defines it');
  t.equal(kc.source, [first, second].join(delimiter));

  const home = join(dir, 'home');
  await mkdir(join(home, '.kube'), { recursive: true });
  await write(dir, 'home/.kube/config', doc({ server: 'https://home' }));
  t.equal(loadKubeConfig({ ...NOTHING(dir), home }).getCurrentCluster().server, 'https://home', 'without KUBECONFIG: ~/.kube/config');
  t.equal(loadKubeConfig({ ...merged, home, file: second }).getCurrentCluster().server, 'https://second', 'an explicit file wins over all');

  t.throws(() => loadKubeConfig(NOTHING(dir)), {
    message: `cannot load the kubeconfig: KUBECONFIG is unset, ${join(dir, 'no-home', '.kube', 'config')} does not exist and there is no ServiceAccount token at ${join(dir, 'no-sa', 'token')}; pass --kubeconfig or run inside a cluster`,
  }, 'nothing to load is an error, not a guess at localhost');
});

t.test('in-cluster: the ServiceAccount token and CA, the Service address, the token re-read as it rotates', async (t) => {
  const dir = await scratch(t);
  const sa = join(dir, 'sa');
  await mkdir(sa);
  await writeFile(join(sa, 'token'), 'sa-token-1');
  await writeFile(join(sa, 'ca.crt'), 'CLUSTER-CA');
  const clock = fakeClock();
  const options: LoadOptions = { ...NOTHING(dir), serviceAccountDir: sa, env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, clock };
  const kc = loadKubeConfig(options);
  t.same(kc.getCurrentCluster(), { server: 'https://10.96.0.1:443' });
  t.equal(kc.source, 'in-cluster');
  const tls: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  t.same([tls.ca?.toString(), tls.headers], ['CLUSTER-CA', { Authorization: 'Bearer sa-token-1' }]);
  await writeFile(join(sa, 'token'), 'sa-token-2');
  clock.advance(CREDENTIAL_REREAD_MS);
  await kc.applyToHTTPSOptions(tls);
  t.same(tls.headers, { Authorization: 'Bearer sa-token-2' }, 'the kubelet\'s rotated token');

  const v6 = loadKubeConfig({ ...options, env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' } });
  t.equal(v6.getCurrentCluster().server, 'https://[fd00::1]:443', 'an IPv6 Service address in brackets');
  t.throws(() => loadKubeConfig({ ...options, env: { KUBERNETES_SERVICE_HOST: '10.96.0.1' } }), /ServiceAccount token in .* but KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is unset; pass --kubeconfig/);
  await rm(join(sa, 'ca.crt'));
  t.throws(() => loadKubeConfig(options), /^cannot load the in-cluster kubeconfig: ENOENT.*ca\.crt/, 'a missing CA stops the start');
});

t.test('refusals: unreadable, not YAML, not a kubeconfig; each names the file', async (t) => {
  const dir = await scratch(t);
  const missing = join(dir, 'missing');
  t.throws(() => loadKubeConfig(missing), { message: new RegExp(`^cannot load the kubeconfig ${missing}: ENOENT`) });
  const bad = await write(dir, 'bad', 'apiVersion: v1\nusers:\n- name: u\n  user: {token: "s3cret-token\n');
  const err = t.throws(() => loadKubeConfig(bad), { message: new RegExp(`^cannot load the kubeconfig ${bad}: ${bad} is not YAML: line \\d+: `) }) as Error;
  t.notMatch(err.message, /s3cret/, 'the error quotes no part of the file (it may hold credentials)');
  for (const [name, content, reason] of [
    ['empty', '', 'its top level is empty'],
    ['list', '- a\n- b\n', 'its top level is not a mapping'],
    ['clusters-map', 'clusters: {c: {}}\n', 'clusters is not a list'],
    ['nameless', 'contexts: [{context: {cluster: c}}]\n', 'contexts[0] has no name'],
    ['body', 'users: [{name: u, user: [token]}]\n', 'users[0].user is not a mapping'],
    ['current', 'current-context: 7\n', 'current-context is not a string'],
  ] as const) {
    const file = await write(dir, name, content);
    t.throws(() => loadKubeConfig(file), { message: `cannot load the kubeconfig ${file}: ${file}${reason.startsWith('its') ? ' is not a kubeconfig: ' : ': '}${reason}` }, name);
  }
});

t.test('refusals: no current cluster, kept in the wording loadKubeConfig always had', async (t) => {
  const dir = await scratch(t);
  const cases: [string, Doc, string][] = [
    ['no current-context', { ...doc({ server: 'https://a' }), 'current-context': '' }, 'it sets no current-context'],
    ['unknown context', { ...doc({ server: 'https://a' }), 'current-context': 'gone' }, 'current-context "gone" is not among its contexts'],
    ['context without cluster', { ...doc({ server: 'https://a' }), contexts: [{ name: 'x', context: { user: 'u' } }] }, 'context "x" names no cluster'],
    ['unknown cluster', { ...doc({ server: 'https://a' }), clusters: [] }, 'context "x" names cluster "c", which it does not define'],
  ];
  for (const [what, content, why] of cases) {
    const file = await write(dir, what.replaceAll(' ', '-'), content);
    t.throws(() => loadKubeConfig(file), { message: `the kubeconfig ${file} names no current cluster (${why}); pass --kubeconfig or run inside a cluster` }, what);
  }
});

t.test('refusals: what the manager does not support, and entries it cannot use', async (t) => {
  const dir = await scratch(t);
  const cases: [string, Doc, RegExp][] = [
    ['exec', doc({ server: 'https://a' }, { exec: { command: 'aws' } }), /user "u" uses an exec credential plugin \(exec\), which the manager does not support; give it a client certificate, a token or a tokenFile \(in a cluster: its ServiceAccount\)$/],
    ['auth-provider', doc({ server: 'https://a' }, { 'auth-provider': { name: 'oidc' } }), /user "u" uses an auth-provider plugin \(auth-provider\)/],
    ['basic', doc({ server: 'https://a' }, { username: 'admin', password: 'pw' }), /user "u" uses basic authentication \(username\)/],
    ['impersonation', doc({ server: 'https://a' }, { token: 't', as: 'someone' }), /user "u" uses impersonation \(as\)/],
    ['proxy', doc({ server: 'https://a', 'proxy-url': 'http://proxy:3128' }), /cluster "c" sets proxy-url, which the manager does not support/],
    ['http', doc({ server: 'http://a:8080' }), /cluster "c" is served over plain HTTP \(http:\/\/a:8080\), which needs insecure-skip-tls-verify: true$/],
    ['not a URL', doc({ server: 'a.example:6443' }), /cluster "c": server a\.example:6443 is not an https:\/\/ URL$/],
    ['no server', doc({ 'certificate-authority-data': b64('CA') }), /cluster "c" has no server$/],
    ['cert without key', doc({ server: 'https://a' }, { 'client-certificate-data': b64('CERT') }), /user "u" has a client certificate without its key, or a key without its certificate$/],
    ['unknown user', { ...doc({ server: 'https://a' }), contexts: [{ name: 'x', context: { cluster: 'c', user: 'nobody' } }] }, /context "x" names user "nobody", which it does not define$/],
    ['missing CA file', doc({ server: 'https://a', 'certificate-authority': 'nowhere/ca.crt' }), /cluster "c" certificate-authority: ENOENT.*nowhere\/ca\.crt/],
    ['missing token file', doc({ server: 'https://a' }, { tokenFile: '/nowhere/token' }), /user "u" tokenFile: ENOENT/],
    ['not a string', doc({ server: 'https://a' }, { token: 42 }), /user "u": token is not a string$/],
  ];
  for (const [what, content, reason] of cases) {
    const file = await write(dir, what.replaceAll(' ', '-'), content);
    const err = t.throws(() => loadKubeConfig(file), what) as Error;
    t.match(err.message, new RegExp(`^cannot load the kubeconfig ${file}: ${reason.source}`), what);
  }
  // Only the current context matters: a developer's ~/.kube/config may hold exec-plugin users for other clusters.
  const other = await write(dir, 'other-users', { ...doc({ server: 'https://a' }, { token: 't' }), users: [{ name: 'u', user: { token: 't' } }, { name: 'eks', user: { exec: { command: 'aws' } } }] });
  t.equal(loadKubeConfig(other).getCurrentCluster().server, 'https://a');
});

t.test('restClient through a loaded kubeconfig: the CA verifies the server, the client certificate and token are sent', async (t) => {
  const dir = await scratch(t);
  const pki = await generateCertificates({ outDir: join(dir, 'pki') });
  const seen: { authorization?: string; clientCert: boolean }[] = [];
  const server = https.createServer({ key: await readFile(pki.key), cert: await readFile(pki.cert), requestCert: true, rejectUnauthorized: false }, (req, res) => {
    seen.push({ authorization: req.headers.authorization, clientCert: Object.keys((req.socket as TLSSocket).getPeerCertificate()).length > 0 });
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: 'ns' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const file = await write(dir, 'config', doc(
    { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, 'certificate-authority': pki.caCert },
    { 'client-certificate': pki.cert, 'client-key': pki.key, token: 'manager-token' },
  ));
  const client = await restClient(loadKubeConfig(file), { timeoutMs: 5_000 });
  const cm = await client.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'cm' });
  t.equal(cm.metadata?.name, 'cm');
  t.same(seen, [{ authorization: 'Bearer manager-token', clientCert: true }]);

  const wrongCa = await write(dir, 'wrong-ca', doc({ server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, 'certificate-authority-data': b64(await readFile(pki.cert, 'utf8')) }));
  const refused = await restClient(loadKubeConfig(wrongCa), { timeoutMs: 5_000 });
  await t.rejects(refused.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'cm' }), /certificate/, 'a server the CA did not sign is refused');
});
