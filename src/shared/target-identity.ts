// Which database a PostgreSQL URL opens, as a credential-free digest. The runner computes it inside the Pod
// from the URL it was given; the controller only compares digests (a plan binds one, an Apply must reach the
// same one). Two spellings of one target (`postgres://` vs `postgresql://`, `Host` vs `host`, `:5432` vs no port,
// reordered options) give one digest; a password, an sslpassword or a timeout never changes it.
import { digest } from './canonical.js';

export class TargetIdentityError extends Error {
  override name = 'TargetIdentityError';
}

/** The parts of a URL that name the target. Never holds a credential. */
export interface TargetIdentity {
  scheme: 'postgresql';
  /** Lowercase DNS name, canonical IP (IPv6 in brackets), or `unix:<socket directory>`. */
  host: string;
  /** Absent when it is PostgreSQL's default, 5432. */
  port?: number;
  database: string;
  user?: string;
  /** Every other query option, except credentials and timeouts. Sorted by canonical JSON. */
  options: Record<string, string>;
}

const DEFAULT_PORT = 5432;
/** Versioned so a future change of recipe cannot collide with digests made by this one. */
const IDENTITY_RECIPE = 'ptah-target-identity/v1';
const CREDENTIAL_OPTIONS = new Set(['password', 'sslpassword']);
/** Timeouts tune a connection; they do not change which database it reaches. */
const TIMEOUT_OPTION = /(^|_)timeout$/;

/** `sha256:` digest of the target a PostgreSQL URL names. Throws TargetIdentityError (never echoing the URL). */
export function targetIdentityDigest(url: string): string {
  return digest({ recipe: IDENTITY_RECIPE, ...targetIdentity(url) });
}

export function targetIdentity(url: string): TargetIdentity {
  const parts = splitDatabaseUrl(url);
  if (!parts) throw new TargetIdentityError('the database URL is not a postgres:// or postgresql:// URL');
  if (parts.fragment !== undefined) throw new TargetIdentityError('the database URL has a #fragment, which PostgreSQL URLs do not use');
  const { userinfo, hostspec } = splitAuthority(parts.authority);
  if (hostspec.includes(',')) {
    throw new TargetIdentityError('the database URL names more than one host; name exactly one so the target is unambiguous');
  }
  const query = readQuery(parts.query);

  const authorityHost = parseHostspec(hostspec);
  const user = pickOnce('user', userinfo === undefined ? undefined : decode(userinfo.split(':', 1)[0], 'user name'), query.get('user'));
  const rawHost = pickOnce('host', authorityHost.host, query.get('host'));
  const rawPort = pickOnce('port', authorityHost.port, query.get('port'));
  if (query.has('dbname') || query.has('database')) {
    throw new TargetIdentityError('the database URL names its database in a query option; name it in the URL path (postgres://host/<database>)');
  }
  if (rawHost === undefined || rawHost === '') throw new TargetIdentityError('the database URL names no host');
  if (rawHost.includes(',')) {
    throw new TargetIdentityError('the database URL names more than one host; name exactly one so the target is unambiguous');
  }
  const database = parts.path === undefined ? '' : decode(parts.path.slice(1), 'database name');
  if (database === '') throw new TargetIdentityError('the database URL names no database; add it as the URL path (postgres://host/<database>)');

  const options: Record<string, string> = {};
  for (const [key, value] of query) {
    if (key === 'user' || key === 'host' || key === 'port' || CREDENTIAL_OPTIONS.has(key) || TIMEOUT_OPTION.test(key)) continue;
    options[key] = value;
  }
  const port = parsePort(rawPort);
  const identity: TargetIdentity = { scheme: 'postgresql', host: normaliseHost(rawHost), database, options };
  if (port !== DEFAULT_PORT) identity.port = port;
  if (user !== undefined && user !== '') identity.user = user;
  return identity;
}

/**
 * Every string in a database URL that is or holds a credential, as written and percent-decoded: the whole
 * URL, its password and its `password`/`sslpassword` options. Never throws, so a URL that names no valid
 * target is still kept out of every output.
 */
export function databaseUrlSecrets(url: string): string[] {
  const secrets = new Set<string>([url]);
  const afterScheme = url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  // Read the userinfo both as a well-formed URL has it and up to the last "@" anywhere, so a password holding
  // an unescaped "/", "?" or "#" is still found.
  const authority = /^[^/?#]*/.exec(afterScheme)?.[0] ?? '';
  for (const userinfo of [splitAuthority(authority).userinfo, splitAuthority(afterScheme).userinfo]) {
    const colon = userinfo?.indexOf(':') ?? -1;
    if (userinfo !== undefined && colon >= 0) addWithDecoded(secrets, userinfo.slice(colon + 1));
  }
  for (const pair of (splitDatabaseUrl(url)?.query ?? '').split('&')) {
    const eq = pair.indexOf('=');
    if (eq >= 0 && CREDENTIAL_OPTIONS.has(safeDecode(pair.slice(0, eq).replace(/\+/g, ' ')))) addWithDecoded(secrets, pair.slice(eq + 1));
  }
  secrets.delete('');
  return [...secrets];
}

interface UrlParts {
  authority: string;
  path?: string;
  query?: string;
  fragment?: string;
}

function splitDatabaseUrl(url: string): UrlParts | undefined {
  const match = /^postgres(?:ql)?:\/\/([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?(?:#(.*))?$/is.exec(url);
  if (!match) return undefined;
  return { authority: match[1], path: match[2], query: match[3], fragment: match[4] };
}

function splitAuthority(authority: string): { userinfo?: string; hostspec: string } {
  const at = authority.lastIndexOf('@');
  return at < 0 ? { hostspec: authority } : { userinfo: authority.slice(0, at), hostspec: authority.slice(at + 1) };
}

function parseHostspec(hostspec: string): { host?: string; port?: string } {
  if (hostspec === '') return {};
  if (hostspec.startsWith('[')) {
    const close = hostspec.indexOf(']');
    const rest = hostspec.slice(close + 1);
    if (close < 0 || (rest !== '' && !rest.startsWith(':'))) throw new TargetIdentityError('the database URL has a malformed bracketed IPv6 host');
    return { host: hostspec.slice(1, close), port: rest === '' ? undefined : rest.slice(1) };
  }
  const colon = hostspec.indexOf(':');
  const host = decode(colon < 0 ? hostspec : hostspec.slice(0, colon), 'host');
  return colon < 0 ? { host } : { host, port: hostspec.slice(colon + 1) };
}

function readQuery(query: string | undefined): Map<string, string> {
  const options = new Map<string, string>();
  if (query === undefined || query === '') return options;
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const key = decode((eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, ' '), 'query option name');
    const value = eq < 0 ? '' : decode(pair.slice(eq + 1).replace(/\+/g, ' '), `value of query option ${JSON.stringify(key)}`);
    if (options.has(key)) throw new TargetIdentityError(`the database URL repeats the query option ${JSON.stringify(key)}; give it once`);
    options.set(key, value);
  }
  return options;
}

/** A value may come from the URL's authority or from a query option, but not from both. */
function pickOnce(what: string, fromAuthority: string | undefined, fromQuery: string | undefined): string | undefined {
  if (fromAuthority !== undefined && fromAuthority !== '' && fromQuery !== undefined) {
    throw new TargetIdentityError(`the database URL names its ${what} twice (in the URL and as a query option); give it once`);
  }
  return fromQuery ?? fromAuthority;
}

function parsePort(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_PORT;
  const port = /^[0-9]{1,5}$/.test(raw) ? Number(raw) : NaN;
  if (!(port >= 1 && port <= 65535)) throw new TargetIdentityError('the database URL has a port that is not a number from 1 to 65535');
  return port;
}

function normaliseHost(host: string): string {
  // A host starting with "/" is a Unix-socket directory (libpq and node-postgres both read it that way).
  if (host.startsWith('/')) return `unix:${host}`;
  if (/[\s/?#@\\[\]]/.test(host)) throw new TargetIdentityError('the database URL has a host that is not a valid host name or IP address');
  // The WHATWG host parser lowercases names, applies IDNA, canonicalises IPv4 and compresses IPv6.
  try {
    return new URL(`http://${host.includes(':') ? `[${host}]` : host}/`).host;
  } catch {
    throw new TargetIdentityError('the database URL has a host that is not a valid host name or IP address');
  }
}

function decode(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new TargetIdentityError(`the database URL has invalid percent-encoding in its ${what}`);
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function addWithDecoded(into: Set<string>, raw: string): void {
  into.add(raw);
  into.add(safeDecode(raw));
  into.add(safeDecode(raw.replace(/\+/g, ' ')));
}
