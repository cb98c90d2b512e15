// A client of the OCI distribution API, as narrow as the operator needs: read a manifest or a blob by digest,
// resolve a tag, push blobs and a manifest. Every answer is bounded before it is read (a registry cannot make a Job
// hold more than it asked for), every request has a deadline, TLS is the only transport, and credentials go to the
// registry's own origin only: a redirect to another host drops them, a redirect to plain HTTP is refused. Errors
// carry a reason a condition can name and a message without any credential.
import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { sha256Digest } from '../canonical.js';
import { INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, type Descriptor } from './artifact-layout.js';
import { SHA256_DIGEST } from './reference.js';
import { ReasonedError } from './requests.js';

export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface RegistryClientOptions {
  credentials?: RegistryCredentials;
  /**
   * PEM certificates the registry's own origin is trusted by, instead of the system's roots (a private registry's
   * CA); its token service and storage origins are trusted by the system's roots and these.
   */
  ca?: string;
  /** Each request's deadline, headers and body (default 30 s). */
  timeoutMs?: number;
}

/** Why a registry request failed, as a condition reason would name it. */
export type RegistryFailure = 'RegistryUnreachable' | 'RegistryUnauthorized' | 'ArtifactNotFound' | 'RegistryProtocolError' | 'ArtifactTooLarge' | 'DigestMismatch';

export class RegistryError extends ReasonedError<RegistryFailure> {
  override name = 'RegistryError';
}

export interface ResolvedManifest {
  digest: string;
  mediaType: string;
  size: number;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

interface Send {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: Uint8Array;
  /** Answers with longer bodies are refused unread past this many bytes. */
  maxBytes: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_REDIRECTS = 3;
/** Errors, challenges and upload answers are small; anything longer is not read. */
const SMALL_BODY = 64 << 10;
export const MANIFEST_ACCEPT = `${MANIFEST_MEDIA_TYPE}, ${INDEX_MEDIA_TYPE}`;

export class RegistryClient {
  readonly #base: URL;
  readonly #options: RegistryClientOptions;
  /**
   * The trust given, made once: handing node the CA as `ca` on every request cost about 3 ms of CPU a request with
   * the system roots beside it (the agent keys its pool by them), a tenfold slowdown of a 1,000-file pull. The
   * registry's origin trusts the CA alone; its token service and a storage origin it redirects to trust the system's
   * roots and the CA (a private registry's token service usually shares its CA; object storage has a public one).
   */
  readonly #registryTrust: SecureContext | undefined;
  #elsewhereTrust: SecureContext | undefined;
  /** The client's connections, kept alive between requests. */
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 8 });
  /** Authorization headers by scope, so a bearer token is fetched once per scope. */
  readonly #authorizations = new Map<string, string>();

  constructor(readonly registry: string, options: RegistryClientOptions = {}) {
    this.#base = new URL(`https://${registry}`);
    this.#options = options;
    this.#registryTrust = options.ca ? createSecureContext({ ca: options.ca }) : undefined;
  }

  /** The manifest a tag or digest names now, by a HEAD (which registries do not count as a pull). */
  async resolve(repository: string, reference: string): Promise<ResolvedManifest> {
    const answer = await this.#call(repository, 'pull', `/v2/${repository}/manifests/${reference}`, { method: 'HEAD', headers: { accept: MANIFEST_ACCEPT }, maxBytes: 0 });
    this.#expect(answer, [200], `resolve ${repository}:${reference}`);
    const digest = header(answer, 'docker-content-digest');
    const mediaType = header(answer, 'content-type') ?? '';
    // A registry that names no digest is answered by hashing what it serves (the spec allows the omission).
    if (digest === undefined) {
      const bytes = await this.manifest(repository, reference);
      return { digest: sha256Digest(bytes), mediaType, size: bytes.byteLength };
    }
    if (!SHA256_DIGEST.test(digest)) throw new RegistryError('RegistryProtocolError', `${this.registry} resolved ${repository}:${reference} to ${JSON.stringify(digest)}, not a sha256 digest`);
    return { digest, mediaType, size: Number(header(answer, 'content-length') ?? 0) };
  }

  /** A manifest's bytes (at most `maxBytes`); by digest, they are checked against it. */
  async manifest(repository: string, reference: string, maxBytes = 4 << 20): Promise<Buffer> {
    const answer = await this.#call(repository, 'pull', `/v2/${repository}/manifests/${reference}`, { method: 'GET', headers: { accept: MANIFEST_ACCEPT }, maxBytes });
    this.#expect(answer, [200], `read the manifest ${repository}@${reference}`);
    if (SHA256_DIGEST.test(reference) && sha256Digest(answer.body) !== reference) {
      throw new RegistryError('DigestMismatch', `${this.registry} served ${repository}@${reference} with content whose digest is ${sha256Digest(answer.body)}`);
    }
    return answer.body;
  }

  /** A blob's bytes, exactly `descriptor.size` of them, checked against its digest. */
  async blob(repository: string, descriptor: Pick<Descriptor, 'digest' | 'size'>): Promise<Buffer> {
    const answer = await this.#call(repository, 'pull', `/v2/${repository}/blobs/${descriptor.digest}`, { method: 'GET', maxBytes: descriptor.size });
    this.#expect(answer, [200], `read the blob ${descriptor.digest}`);
    if (answer.body.byteLength !== descriptor.size) {
      throw new RegistryError('DigestMismatch', `${this.registry} served ${answer.body.byteLength} bytes for the blob ${descriptor.digest}, whose descriptor says ${descriptor.size}`);
    }
    const actual = sha256Digest(answer.body);
    if (actual !== descriptor.digest) throw new RegistryError('DigestMismatch', `${this.registry} served the blob ${descriptor.digest} with content whose digest is ${actual}`);
    return answer.body;
  }

  /**
   * The referrers of a manifest as an image index's bytes: through the referrers API, else (a registry that answers
   * 404 there) the index tagged with the tag-schema fallback `sha256-<hex>`; undefined when there are none.
   */
  async referrers(repository: string, digest: string, maxBytes = 1 << 20): Promise<{ index: Buffer; via: 'api' | 'tag' } | undefined> {
    const api = await this.#call(repository, 'pull', `/v2/${repository}/referrers/${digest}`, { method: 'GET', headers: { accept: INDEX_MEDIA_TYPE }, maxBytes });
    if (api.status === 200) return { index: api.body, via: 'api' };
    if (api.status !== 404) this.#expect(api, [200], `list the referrers of ${digest}`);
    const tag = digest.replace(':', '-');
    const fallback = await this.#call(repository, 'pull', `/v2/${repository}/manifests/${tag}`, { method: 'GET', headers: { accept: INDEX_MEDIA_TYPE }, maxBytes });
    if (fallback.status === 404) return undefined;
    this.#expect(fallback, [200], `read the referrers tag ${tag}`);
    return { index: fallback.body, via: 'tag' };
  }

  /** A manifest by tag when it exists (e.g. cosign's `sha256-<hex>.sig`), undefined when the registry has none. */
  async optionalManifest(repository: string, tag: string, maxBytes = 4 << 20): Promise<Buffer | undefined> {
    const answer = await this.#call(repository, 'pull', `/v2/${repository}/manifests/${tag}`, { method: 'GET', headers: { accept: MANIFEST_ACCEPT }, maxBytes });
    if (answer.status === 404) return undefined;
    this.#expect(answer, [200], `read the manifest ${repository}:${tag}`);
    return answer.body;
  }

  async hasBlob(repository: string, digest: string): Promise<boolean> {
    const answer = await this.#call(repository, 'pull,push', `/v2/${repository}/blobs/${digest}`, { method: 'HEAD', maxBytes: 0 });
    if (answer.status === 404) return false;
    this.#expect(answer, [200], `look for the blob ${digest}`);
    return true;
  }

  /** Uploads a blob in one PUT (POST for an upload session, then PUT it whole with its digest). */
  async pushBlob(repository: string, digest: string, bytes: Uint8Array): Promise<void> {
    const started = await this.#call(repository, 'pull,push', `/v2/${repository}/blobs/uploads/`, { method: 'POST', maxBytes: SMALL_BODY, headers: { 'content-length': '0' } });
    this.#expect(started, [202], `start the upload of ${digest}`);
    const location = header(started, 'location');
    if (!location) throw new RegistryError('RegistryProtocolError', `${this.registry} started an upload without a Location`);
    const target = new URL(location, this.#base);
    if (target.origin !== this.#base.origin) {
      throw new RegistryError('RegistryProtocolError', `${this.registry} asked for the upload at another origin (${target.origin}); credentials are sent to the registry's own origin only`);
    }
    target.searchParams.set('digest', digest);
    const put = await this.#call(repository, 'pull,push', target.pathname + target.search, {
      method: 'PUT', body: bytes, maxBytes: SMALL_BODY, headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.byteLength) },
    });
    this.#expect(put, [201], `upload the blob ${digest}`);
  }

  /** Puts a manifest under a tag or its digest; returns the digest the registry reports, checked against ours. */
  async putManifest(repository: string, reference: string, bytes: Uint8Array, mediaType: string): Promise<string> {
    const answer = await this.#call(repository, 'pull,push', `/v2/${repository}/manifests/${reference}`, {
      method: 'PUT', body: bytes, maxBytes: SMALL_BODY, headers: { 'content-type': mediaType, 'content-length': String(bytes.byteLength) },
    });
    this.#expect(answer, [201], `put the manifest ${repository}:${reference}`);
    const ours = sha256Digest(bytes);
    const theirs = header(answer, 'docker-content-digest');
    if (theirs !== undefined && theirs !== ours) throw new RegistryError('DigestMismatch', `${this.registry} stored the manifest as ${theirs}; its bytes hash to ${ours}`);
    return ours;
  }

  /** Sends with the scope's authorization, answering one challenge (Basic, or a Bearer token for the scope). */
  async #call(repository: string, actions: string, path: string, send: Send): Promise<Answer> {
    const scope = `repository:${repository}:${actions}`;
    const url = new URL(path, this.#base);
    const known = this.#authorizations.get(scope);
    let answer = await this.#send(url, send, known);
    if (answer.status !== 401) return answer;
    const authorization = await this.#answerChallenge(header(answer, 'www-authenticate') ?? '', scope);
    this.#authorizations.set(scope, authorization);
    answer = await this.#send(url, send, authorization);
    if (answer.status === 401) {
      throw new RegistryError('RegistryUnauthorized', `${this.registry} refused the credentials given for ${scope} (401)`);
    }
    return answer;
  }

  async #answerChallenge(challenge: string, scope: string): Promise<string> {
    const credentials = this.#options.credentials;
    const scheme = challenge.split(' ', 1)[0]!.toLowerCase();
    if (!credentials && scheme !== 'bearer') {
      throw new RegistryError('RegistryUnauthorized', `${this.registry} asks for credentials (401) and none were given for it`);
    }
    const basic = credentials ? `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}` : undefined;
    if (scheme === 'basic') return basic!;
    if (scheme !== 'bearer') throw new RegistryError('RegistryProtocolError', `${this.registry} challenged with an unknown scheme ${JSON.stringify(scheme)}`);
    const params = challengeParams(challenge);
    if (!params.realm) throw new RegistryError('RegistryProtocolError', `${this.registry}'s Bearer challenge names no realm`);
    const realm = new URL(params.realm);
    if (realm.protocol !== 'https:') throw new RegistryError('RegistryProtocolError', `${this.registry}'s token realm ${realm.origin} is not HTTPS; credentials are never sent in the clear`);
    if (params.service) realm.searchParams.set('service', params.service);
    realm.searchParams.set('scope', scope);
    // Straight to the realm the registry named, credentials included, as the token protocol has it; no redirect is
    // followed from there, so they reach no third origin.
    const answer = await this.#once(realm, { method: 'GET', maxBytes: SMALL_BODY }, basic);
    if (answer.status === 401 || answer.status === 403) throw new RegistryError('RegistryUnauthorized', `${this.registry}'s token service refused the credentials given for ${scope} (${answer.status})`);
    this.#expect(answer, [200], `get a token for ${scope}`);
    let token: unknown;
    try {
      const parsed = JSON.parse(answer.body.toString('utf8')) as { token?: unknown; access_token?: unknown };
      token = parsed.token ?? parsed.access_token;
    } catch { /* reported below */ }
    if (typeof token !== 'string' || token === '') throw new RegistryError('RegistryProtocolError', `${this.registry}'s token service answered without a token`);
    return `Bearer ${token}`;
  }

  #expect(answer: Answer, statuses: number[], what: string): void {
    if (statuses.includes(answer.status)) return;
    const detail = registryErrors(answer.body);
    const reason: RegistryFailure = answer.status === 404 ? 'ArtifactNotFound' : answer.status === 401 || answer.status === 403 ? 'RegistryUnauthorized' : 'RegistryProtocolError';
    throw new RegistryError(reason, `${this.registry} answered ${answer.status} to ${what}${detail ? `: ${detail}` : ''}`);
  }

  /** One request, following at most three redirects; Authorization goes only to the registry's own origin. */
  async #send(url: URL, send: Send, authorization: string | undefined): Promise<Answer> {
    let target = url;
    for (let hop = 0; ; hop++) {
      const sameOrigin = target.origin === this.#base.origin;
      const answer = await this.#once(target, send, sameOrigin ? authorization : undefined);
      if (![301, 302, 303, 307, 308].includes(answer.status) || send.method !== 'GET' && send.method !== 'HEAD') return answer;
      const location = header(answer, 'location');
      if (!location) return answer;
      if (hop >= MAX_REDIRECTS) throw new RegistryError('RegistryProtocolError', `${this.registry} redirected more than ${MAX_REDIRECTS} times`);
      const next = new URL(location, target);
      if (next.protocol !== 'https:') throw new RegistryError('RegistryProtocolError', `${this.registry} redirected to ${next.protocol}//${next.host}: only HTTPS is followed`);
      target = next;
    }
  }

  #trustFor(url: URL): SecureContext {
    if (url.origin === this.#base.origin) return this.#registryTrust!;
    this.#elsewhereTrust ??= createSecureContext({ ca: [...rootCertificates, this.#options.ca!] });
    return this.#elsewhereTrust;
  }

  #once(url: URL, send: Send, authorization: string | undefined): Promise<Answer> {
    const timeoutMs = this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const options: RequestOptions = {
      method: send.method,
      headers: { ...send.headers, ...(authorization ? { authorization } : {}) },
      agent: this.#agent,
      ...(this.#options.ca ? { secureContext: this.#trustFor(url) } : {}),
      signal: AbortSignal.timeout(timeoutMs),
    };
    return new Promise<Answer>((resolve, reject) => {
      const fail = (e: Error) => reject(e instanceof RegistryError ? e : new RegistryError('RegistryUnreachable',
        e.name === 'AbortError' || e.name === 'TimeoutError' ? `${url.host} did not answer ${send.method} ${url.pathname} within ${timeoutMs} ms` : `${url.host} could not be reached (${send.method} ${url.pathname}): ${e.message}`));
      const req = httpsRequest(url, options, (res) => {
        const declared = Number(res.headers['content-length'] ?? 0);
        // Only a success is held to the caller's bound; an error body is read up to a small one.
        const limit = (res.statusCode ?? 0) < 300 ? send.maxBytes : SMALL_BODY;
        if (send.method !== 'HEAD' && declared > limit && (res.statusCode ?? 0) < 300) {
          res.destroy();
          reject(new RegistryError('ArtifactTooLarge', `${url.host} answered ${send.method} ${url.pathname} with ${declared} bytes, more than the ${limit} allowed`));
          return;
        }
        const chunks: Buffer[] = [];
        let length = 0;
        res.on('data', (chunk: Buffer) => {
          length += chunk.byteLength;
          if (length > limit) {
            res.destroy();
            if ((res.statusCode ?? 0) < 300) reject(new RegistryError('ArtifactTooLarge', `${url.host} sent more than the ${limit} bytes allowed for ${send.method} ${url.pathname}`));
            else resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
            return;
          }
          chunks.push(chunk);
        });
        res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.once('error', fail);
      });
      req.once('error', fail);
      req.end(send.body);
    });
  }
}

function header(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** `realm="…",service="…"` of a challenge. */
function challengeParams(challenge: string): Record<string, string> {
  const params: Record<string, string> = {};
  for (const match of challenge.slice(challenge.indexOf(' ') + 1).matchAll(/([a-zA-Z_]+)="([^"]*)"/g)) params[match[1]!.toLowerCase()] = match[2]!;
  return params;
}

/** The codes and messages of a registry's JSON error body, shortened; nothing when it is not one. */
function registryErrors(body: Buffer): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { errors?: { code?: unknown; message?: unknown }[] };
    if (!Array.isArray(parsed.errors)) return '';
    return parsed.errors.slice(0, 3).map((e) => `${String(e.code)}${e.message ? ` (${String(e.message).slice(0, 200)})` : ''}`).join(', ');
  } catch {
    return '';
  }
}
