// The registry client's guards against a registry that misbehaves, each with its control: a Node HTTPS server
// plays the registry (its certificate from a test CA), since no real registry can be made to lie on cue. A redirect
// to another origin loses the credentials; one to plain HTTP is refused; redirects are capped; a body longer than
// asked for is cut off whether or not it was declared; content that does not hash to the digest asked for is refused;
// a digest header that is not sha256 is refused; an upload sent to another origin is refused; a Bearer challenge
// fetches a token once per scope over HTTPS only; a registry that does not answer meets the deadline.
import t from 'tap';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256Digest } from '../../src/shared/canonical.js';
import { RegistryClient, RegistryError } from '../../src/shared/oci/registry-client.js';
import { createPki } from '../../tools/stack/pki.js';

const pki = await createPki(join(await mkdtemp(join(tmpdir(), 'ptah-registry-client-')), 'pki'));
const serving = await pki.issueServing('fake-registry', { ips: ['127.0.0.1'], dns: ['localhost'] });
const tls = { cert: await readFile(serving.cert), key: await readFile(serving.key) };

interface Seen { method: string; url: string; authorization?: string }
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A registry answering with `handler`, recording every request it saw. */
async function fake(handler: Handler): Promise<{ host: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer(tls, (req, res) => {
    seen.push({ method: req.method!, url: req.url!, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  const address = server.address();
  return { host: `127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, seen, server };
}

const credentials = { username: 'puller', password: 'secret-password' };
const basic = `Basic ${Buffer.from('puller:secret-password').toString('base64')}`;
const client = (host: string, extra: object = {}) => new RegistryClient(host, { ca: pki.caPem, credentials, ...extra });
const body = Buffer.from('{"schemaVersion":2}');
const digest = sha256Digest(body);

t.test('a redirect to another origin is followed without the credentials; the same origin keeps them', async (t) => {
  const storage = await fake((_req, res) => res.writeHead(200).end(body));
  const registry = await fake((req, res) => {
    if (!req.headers.authorization) return void res.writeHead(401, { 'www-authenticate': 'Basic realm="r"' }).end();
    if (req.url!.includes('/blobs/')) return void res.writeHead(307, { location: `https://${storage.host}/storage/blob` }).end();
    res.writeHead(307, { location: `/v2/moved/manifests/${digest}` }).end();
  });
  t.equal((await client(registry.host).blob('app', { digest, size: body.length })).toString(), body.toString(), 'the blob is read from the storage origin');
  t.same(storage.seen, [{ method: 'GET', url: '/storage/blob' }], 'which was sent no credentials');
  t.ok(registry.seen.some((s) => s.authorization === basic), 'control: the registry was sent them');
  await t.rejects(client(registry.host).manifest('app', 'v1'), { reason: 'RegistryProtocolError', message: /redirected more than 3 times/ }, 'a redirect loop ends');
  const moved = registry.seen.filter((s) => s.url.startsWith('/v2/moved/'));
  t.ok(moved.length > 0 && moved.every((s) => s.authorization === basic), 'a same-origin redirect keeps the credentials');
});

t.test('a redirect to plain HTTP is refused', async (t) => {
  const registry = await fake((_req, res) => res.writeHead(302, { location: 'http://127.0.0.1:9/blob' }).end());
  await t.rejects(client(registry.host).blob('app', { digest, size: body.length }), { reason: 'RegistryProtocolError', message: /redirected to http:\/\/127\.0\.0\.1:9: only HTTPS is followed/ });
});

t.test('bodies are bounded, declared or not', async (t) => {
  const registry = await fake((req, res) => {
    if (req.url!.includes('declared')) return void res.writeHead(200, { 'content-length': '5000' }).end(Buffer.alloc(5000));
    res.writeHead(200); // chunked: no length declared
    res.write(Buffer.alloc(3000));
    res.end(Buffer.alloc(3000));
  });
  await t.rejects(client(registry.host).manifest('declared', 'v1', 1000), { reason: 'ArtifactTooLarge', message: /5000 bytes, more than the 1000 allowed/ }, 'a declared length over the bound is not read');
  await t.rejects(client(registry.host).manifest('chunked', 'v1', 1000), { reason: 'ArtifactTooLarge', message: /sent more than the 1000 bytes allowed/ }, 'an undeclared one is cut off at the bound');
  t.equal((await client(registry.host).manifest('chunked', 'v1', 6000)).length, 6000, 'control: within the bound it is read whole');
});

t.test('content that does not hash to the digest asked for is refused', async (t) => {
  const registry = await fake((req, res) => {
    if (req.method === 'HEAD') return void res.writeHead(200, { 'docker-content-digest': 'sha512:abc', 'content-type': 'application/vnd.oci.image.manifest.v1+json' }).end();
    res.writeHead(200).end(Buffer.from('{"schemaVersion":3}'));
  });
  await t.rejects(client(registry.host).manifest('app', digest), { reason: 'DigestMismatch', message: new RegExp(`served app@${digest} with content whose digest is sha256:`) }, 'a manifest');
  await t.rejects(client(registry.host).blob('app', { digest, size: body.length }), { reason: 'DigestMismatch', message: /served the blob .* whose digest is/ }, 'a blob of the right length');
  await t.rejects(client(registry.host).blob('app', { digest, size: body.length + 5 }), { reason: 'DigestMismatch', message: /served 19 bytes for the blob .* whose descriptor says 24/ }, 'a blob shorter than its descriptor');
  await t.rejects(client(registry.host).resolve('app', 'v1'), { reason: 'RegistryProtocolError', message: /resolved app:v1 to "sha512:abc", not a sha256 digest/ }, 'a digest header of another algorithm');
  const honest = await fake((_req, res) => res.writeHead(200).end(body));
  t.equal((await client(honest.host).manifest('app', digest)).toString(), body.toString(), 'control: the right content is read');
});

t.test('an upload sent to another origin is refused', async (t) => {
  const registry = await fake((req, res) => {
    if (req.method === 'POST') return void res.writeHead(202, { location: 'https://uploads.example/upload/1' }).end();
    res.writeHead(500).end();
  });
  await t.rejects(client(registry.host).pushBlob('app', digest, body), { reason: 'RegistryProtocolError', message: /asked for the upload at another origin \(https:\/\/uploads\.example\)/ });
  t.same(registry.seen.map((s) => s.method), ['POST'], 'nothing else was sent');
});

t.test('a Bearer challenge: one token per scope, from an HTTPS realm only', async (t) => {
  let tokens = 0;
  const realm = await fake((req, res) => {
    tokens++;
    if (req.headers.authorization !== basic) return void res.writeHead(401).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: `token-${new URL(req.url!, 'https://x').searchParams.get('scope')}` }));
  });
  const registry = await fake((req, res) => {
    const scope = req.url!.startsWith('/v2/app/') ? 'repository:app:pull' : 'repository:other:pull';
    if (req.headers.authorization !== `Bearer token-${scope}`) {
      return void res.writeHead(401, { 'www-authenticate': `Bearer realm="https://${realm.host}/token",service="fake",scope="${scope}"` }).end();
    }
    res.writeHead(200).end(body);
  });
  const c = client(registry.host);
  await c.manifest('app', digest);
  await c.manifest('app', digest);
  await c.manifest('other', digest);
  t.equal(tokens, 2, 'two scopes, two tokens; the second read of a scope reuses its token');
  t.match(realm.seen[0]!.url, /service=fake&scope=repository%3Aapp%3Apull/);
  await t.rejects(client(registry.host, { credentials: { username: 'puller', password: 'wrong' } }).manifest('app', digest), { reason: 'RegistryUnauthorized', message: /token service refused the credentials given for repository:app:pull \(401\)/ });
  const plain = await fake((_req, res) => res.writeHead(401, { 'www-authenticate': 'Bearer realm="http://127.0.0.1:9/token"' }).end());
  await t.rejects(client(plain.host).manifest('app', digest), { reason: 'RegistryProtocolError', message: /token realm http:\/\/127\.0\.0\.1:9 is not HTTPS/ }, 'credentials are never sent to a plain-HTTP realm');
});

t.test('a registry that does not answer meets the deadline', async (t) => {
  const silent = await fake(() => { /* never answers */ });
  await t.rejects(client(silent.host, { timeoutMs: 300 }).manifest('app', digest), { reason: 'RegistryUnreachable', message: /did not answer GET \/v2\/app\/manifests\/sha256:[a-f0-9]+ within 300 ms/ });
});

t.test('no error message holds the password', async (t) => {
  const registry = await fake((_req, res) => res.writeHead(401, { 'www-authenticate': 'Basic realm="r"' }).end('{"errors":[{"code":"UNAUTHORIZED","message":"no"}]}'));
  const error = await client(registry.host).manifest('app', digest).catch((e: Error) => e);
  t.match(error, { reason: 'RegistryUnauthorized' });
  t.notOk(String((error as Error).message).includes('secret-password') || String((error as Error).message).includes(basic.slice(6)), 'the message names the scope, not the credentials');
});
