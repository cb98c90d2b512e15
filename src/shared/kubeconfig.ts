// The manager's own kubeconfig loader (issue #10): importing @kubernetes/client-node cost the manager about
// 60 MiB of RSS at start (bench/README.md) for the one thing it used of it at runtime, turning a kubeconfig into
// TLS options and a bearer token. This reads what a manager is given: a kubeconfig file (--kubeconfig, KUBECONFIG, ~/.kube/config) or
// the Pod's ServiceAccount. Credentials that live in files are re-read once a minute, as client-go does,
// because a projected ServiceAccount token rotates under a long-lived manager. What it does not support
// (exec plugins, auth providers, proxies, impersonation, basic auth) it refuses at start, naming what to use.
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type https from 'node:https';
import { isIPv6 } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { systemClock, type Clock } from './clock.js';

/** What the API clients (restClient, the informer) need of a kubeconfig; client-node's KubeConfig has it too. */
export interface ClusterAccess {
  getCurrentCluster(): { server: string } | null;
  /** Sets TLS options and the Authorization header for one request; called per request, so rotations apply. */
  applyToHTTPSOptions(options: https.RequestOptions): Promise<void>;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** How long a credential read from a file is used before it is read again (client-go's token file period). */
export const CREDENTIAL_REREAD_MS = 60_000;

export interface LoadOptions {
  /** An explicit kubeconfig file (--kubeconfig); without it KUBECONFIG, ~/.kube/config, then in-cluster. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  home?: string;
  serviceAccountDir?: string;
  clock?: Pick<Clock, 'monotonicMs'>;
}

/** A credential: bytes given inline (decoded once) or a file re-read every CREDENTIAL_REREAD_MS. */
class Material {
  private pending: Promise<Buffer> | undefined;

  private constructor(
    private value: Buffer,
    private readAt: number,
    private readonly file?: { path: string; clock: Pick<Clock, 'monotonicMs'> },
  ) {}

  static inline(value: Buffer): Material {
    return new Material(value, 0);
  }

  /** Reads the file once now, so a missing file stops the manager at start rather than failing its first request. */
  static file(path: string, clock: Pick<Clock, 'monotonicMs'>): Material {
    return new Material(readFileSync(path), clock.monotonicMs(), { path, clock });
  }

  async current(): Promise<Buffer> {
    const file = this.file;
    if (!file || file.clock.monotonicMs() - this.readAt < CREDENTIAL_REREAD_MS) return this.value;
    this.pending ??= readFile(file.path).then(
      (value) => {
        [this.value, this.readAt, this.pending] = [value, file.clock.monotonicMs(), undefined];
        return value;
      },
      (e: unknown) => {
        this.pending = undefined;
        throw e;
      },
    );
    return this.pending;
  }
}

interface Credentials {
  server: string;
  skipTLSVerify: boolean;
  tlsServerName?: string;
  ca?: Material;
  cert?: Material;
  key?: Material;
  token?: Material;
}

/** A loaded kubeconfig: the current context's cluster and user (its namespace is not the manager's concern). */
export class Kubeconfig implements ClusterAccess {
  constructor(
    private readonly credentials: Credentials,
    /** Where it came from, for the start-up log: the file path(s) or "in-cluster". */
    readonly source: string,
  ) {}

  getCurrentCluster(): { server: string } {
    return { server: this.credentials.server };
  }

  async applyToHTTPSOptions(options: https.RequestOptions): Promise<void> {
    const { ca, cert, key, token, skipTLSVerify, tlsServerName } = this.credentials;
    if (skipTLSVerify) options.rejectUnauthorized = false;
    if (tlsServerName) options.servername = tlsServerName;
    if (ca) options.ca = await ca.current();
    if (cert) options.cert = await cert.current();
    if (key) options.key = await key.current();
    if (token) options.headers = { ...options.headers, Authorization: `Bearer ${(await token.current()).toString('utf8').trim()}` };
  }
}

/** Loads the manager's kubeconfig; every error names the file (or the in-cluster files) and what to change. */
export function loadKubeConfig(fileOrOptions?: string | LoadOptions): Kubeconfig {
  const options = typeof fileOrOptions === 'string' ? { file: fileOrOptions } : (fileOrOptions ?? {});
  const env = options.env ?? process.env;
  const clock = options.clock ?? systemClock;
  if (options.file) return fromFiles([options.file], options.file, clock);
  const listed = (env.KUBECONFIG ?? '').split(delimiter).filter(Boolean);
  if (listed.length > 0) return fromFiles(listed, listed.join(delimiter), clock);
  const home = join(options.home ?? env.HOME ?? homedir(), '.kube', 'config');
  if (existsSync(home)) return fromFiles([home], home, clock);
  const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (existsSync(join(dir, 'token'))) return inCluster(dir, env, clock);
  throw new Error(`cannot load the kubeconfig: KUBECONFIG is unset, ${home} does not exist and there is no ServiceAccount token at ${join(dir, 'token')}; pass --kubeconfig or run inside a cluster`);
}

function inCluster(dir: string, env: NodeJS.ProcessEnv, clock: Pick<Clock, 'monotonicMs'>): Kubeconfig {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error(`cannot load the kubeconfig: there is a ServiceAccount token in ${dir} but KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is unset; pass --kubeconfig`);
  const file = (name: string) => {
    try {
      return Material.file(join(dir, name), clock);
    } catch (e) {
      throw new Error(`cannot load the in-cluster kubeconfig: ${(e as Error).message}`);
    }
  };
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return new Kubeconfig({ server, skipTLSVerify: false, ca: file('ca.crt'), token: file('token') }, 'in-cluster');
}

type Mapping = Record<string, unknown>;
type Fail = (reason: string) => never;
const LISTS = { clusters: 'cluster', users: 'user', contexts: 'context' } as const;
type List = keyof typeof LISTS;

/** A named entry's body, with the directory its relative paths resolve against (its file's). */
interface Entry {
  value: Mapping;
  dir: string;
}

interface Parsed {
  currentContext?: string;
  entries: Record<List, Map<string, Entry>>;
}

/** Reads and merges kubeconfig files as kubectl does: the first file to set a value (or name an entry) wins. */
function fromFiles(files: string[], label: string, clock: Pick<Clock, 'monotonicMs'>): Kubeconfig {
  const fail: Fail = (reason) => {
    throw new Error(`cannot load the kubeconfig ${label}: ${reason}`);
  };
  const noCluster: Fail = (why) => {
    throw new Error(`the kubeconfig ${label} names no current cluster (${why}); pass --kubeconfig or run inside a cluster`);
  };
  const merged: Parsed = { entries: { clusters: new Map(), users: new Map(), contexts: new Map() } };
  for (const parsed of files.map((file) => parseFile(file, fail))) {
    merged.currentContext ??= parsed.currentContext;
    for (const list of Object.keys(LISTS) as List[]) {
      for (const [name, entry] of parsed.entries[list]) if (!merged.entries[list].has(name)) merged.entries[list].set(name, entry);
    }
  }
  const contextName = merged.currentContext ?? noCluster('it sets no current-context');
  const context = merged.entries.contexts.get(contextName)?.value ?? noCluster(`current-context "${contextName}" is not among its contexts`);
  const where = `context "${contextName}"`;
  const clusterName = text(context, 'cluster', where, fail) ?? noCluster(`${where} names no cluster`);
  const cluster = merged.entries.clusters.get(clusterName) ?? noCluster(`${where} names cluster "${clusterName}", which it does not define`);
  const userName = text(context, 'user', where, fail);
  const user = userName === undefined ? undefined : (merged.entries.users.get(userName) ?? fail(`${where} names user "${userName}", which it does not define`));
  const material = materialReader(clock, fail);
  return new Kubeconfig(
    { ...clusterCredentials(`cluster "${clusterName}"`, cluster, material, fail), ...(user ? userCredentials(`user "${userName}"`, user, material, fail) : {}) },
    label,
  );
}

type MaterialReader = (where: string, entry: Entry, fileKey: string, dataKey?: string) => Material | undefined;

function materialReader(clock: Pick<Clock, 'monotonicMs'>, fail: Fail): MaterialReader {
  return (where, entry, fileKey, dataKey) => {
    const data = dataKey === undefined ? undefined : text(entry.value, dataKey, where, fail);
    // As kubectl documents: the inline -data overrides the file.
    if (data !== undefined) return Material.inline(Buffer.from(data, 'base64'));
    const file = text(entry.value, fileKey, where, fail);
    if (file === undefined) return undefined;
    try {
      return Material.file(resolve(entry.dir, file), clock);
    } catch (e) {
      return fail(`${where} ${fileKey}: ${(e as Error).message}`);
    }
  };
}

function clusterCredentials(where: string, cluster: Entry, material: MaterialReader, fail: Fail): Credentials {
  const c = cluster.value;
  if (c['proxy-url'] !== undefined) fail(`${where} sets proxy-url, which the manager does not support; let it reach the API server directly`);
  const server = (text(c, 'server', where, fail) ?? fail(`${where} has no server`)).replace(/\/$/, '');
  const skipTLSVerify = c['insecure-skip-tls-verify'] === true;
  if (!/^https?:\/\//.test(server)) fail(`${where}: server ${server} is not an https:// URL`);
  // As client-node: plain HTTP only when the kubeconfig says outright that the server is not verified.
  if (server.startsWith('http:') && !skipTLSVerify) fail(`${where} is served over plain HTTP (${server}), which needs insecure-skip-tls-verify: true`);
  return {
    server,
    skipTLSVerify,
    tlsServerName: text(c, 'tls-server-name', where, fail),
    ca: material(where, cluster, 'certificate-authority', 'certificate-authority-data'),
  };
}

const UNSUPPORTED_USER_KEYS: Record<string, string> = {
  exec: 'an exec credential plugin',
  'auth-provider': 'an auth-provider plugin',
  username: 'basic authentication',
  password: 'basic authentication',
  as: 'impersonation',
  'as-uid': 'impersonation',
  'as-groups': 'impersonation',
  'as-user-extra': 'impersonation',
};

function userCredentials(where: string, user: Entry, material: MaterialReader, fail: Fail): Partial<Credentials> {
  for (const [key, what] of Object.entries(UNSUPPORTED_USER_KEYS)) {
    if (user.value[key] !== undefined) fail(`${where} uses ${what} (${key}), which the manager does not support; give it a client certificate, a token or a tokenFile (in a cluster: its ServiceAccount)`);
  }
  const cert = material(where, user, 'client-certificate', 'client-certificate-data');
  const key = material(where, user, 'client-key', 'client-key-data');
  if ((cert === undefined) !== (key === undefined)) fail(`${where} has a client certificate without its key, or a key without its certificate`);
  const inline = text(user.value, 'token', where, fail);
  // As client-go documents, an inline token takes precedence over the file. tokenFile is client-go's key;
  // token-file is the one client-node (which loaded the manager's kubeconfig before) reads.
  const token = inline !== undefined ? Material.inline(Buffer.from(inline)) : material(where, user, user.value.tokenFile !== undefined ? 'tokenFile' : 'token-file');
  return { cert, key, token };
}

function parseFile(file: string, fail: Fail): Parsed {
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch (e) {
    return fail((e as Error).message);
  }
  // No pretty errors: their excerpt of the file could print a credential.
  const doc = parseDocument(source, { prettyErrors: false });
  const problem = doc.errors[0];
  if (problem) fail(`${file} is not YAML: line ${source.slice(0, problem.pos[0]).split('\n').length}: ${problem.message}`);
  const top: unknown = doc.toJS();
  if (!isMapping(top)) return fail(`${file} is not a kubeconfig: its top level is ${top === null ? 'empty' : 'not a mapping'}`);
  const dir = dirname(resolve(file));
  const named = (list: List): Map<string, Entry> => {
    const items = top[list] ?? [];
    if (!Array.isArray(items)) fail(`${file}: ${list} is not a list`);
    const map = new Map<string, Entry>();
    (items as unknown[]).forEach((item, i) => {
      if (!isMapping(item) || typeof item.name !== 'string' || item.name === '') return fail(`${file}: ${list}[${i}] has no name`);
      const value = item[LISTS[list]] ?? {};
      if (!isMapping(value)) fail(`${file}: ${list}[${i}].${LISTS[list]} is not a mapping`);
      if (!map.has(item.name)) map.set(item.name, { value: value as Mapping, dir });
    });
    return map;
  };
  const currentContext = text(top, 'current-context', file, fail);
  return { currentContext, entries: { clusters: named('clusters'), users: named('users'), contexts: named('contexts') } };
}

const isMapping = (value: unknown): value is Mapping => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A string field; absent, null and "" alike are unset. */
function text(mapping: Mapping, key: string, where: string, fail: Fail): string | undefined {
  const value = mapping[key];
  if (value === undefined || value === null || value === '') return undefined;
  return typeof value === 'string' ? value : fail(`${where}: ${key} is not a string`);
}
