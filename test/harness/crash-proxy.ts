// A TLS-terminating proxy between a manager process and the API server, so a test can stop the manager exactly
// between two durable writes without any hook in the product. It presents a serving certificate from the harness
// CA to the manager and talks upstream with the manager's own client certificate, so the API server sees the
// manager's identity. Every request is recorded (writes with their JSON body). An armed kill recognises one write,
// lets it reach the API server, and when the API server has stored it (2xx) kills the manager before the response
// is delivered: the write is durable, and the manager never learned that it was, so it cannot have made the next.
//
// The proxy also narrows a manager to one namespace: src/main.ts watches every namespace, and other test files'
// migrations (in their own namespaces, run by their own in-process controllers) must stay invisible to it. A list
// or watch of a namespaced kind across all namespaces is rewritten to the same collection in `namespace`, as if
// the cluster held that namespace only.
//
// For a chaos run (bench/soak.ts) the proxy also injects faults (fault-injection.ts) into any request except a
// write an armed kill waits for, and can keep only the requests a run needs, so hours of traffic fit in memory.
import { request as httpsRequest, createServer, Agent, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import type { FaultDecision, FaultInjector } from './fault-injection.js';
import type { CertFiles } from '../../tools/stack/pki.js';

export interface ProxiedWrite {
  method: string;
  /** The path as the manager sent it, without the query. */
  path: string;
  /** The request body parsed as JSON (undefined when it is not JSON). */
  body: unknown;
}

export interface RecordedRequest extends ProxiedWrite {
  /** The upstream status (0 when none arrived). */
  status: number;
  /** How many kills the proxy had made when the request arrived: 0 is the first manager, 1 the one after it. */
  generation: number;
  at: number;
  /** When the answer arrived from the API server, and the resourceVersion a write's answer carried. */
  answeredAt?: number;
  storedVersion?: string;
  /** The fault injected into this request, if any. */
  fault?: FaultDecision['kind'];
}

/** One write a kill waits for; `match` sees every write the manager sends until it returns true for a stored one. */
export interface KillTrigger {
  what: string;
  match(write: ProxiedWrite): boolean;
}

export interface FiredKill {
  write: RecordedRequest;
  /** When the API server's answer arrived, and when the manager was dead (ms since the epoch). */
  storedAt: number;
  killedAt: number;
}

export interface CrashProxy {
  url: string;
  /** Every request so far, in arrival order. */
  readonly requests: readonly RecordedRequest[];
  /** The writes (every method but GET), in arrival order. */
  writes(): RecordedRequest[];
  /** TLS connections the manager has opened to the proxy so far (each a handshake on both sides). */
  readonly connections: number;
  /**
   * Arms one kill: the first write `trigger` matches that the API server stores is followed by `kill()` before
   * its response is delivered. Resolves once the manager is dead. One kill may be armed at a time.
   */
  armKill(trigger: KillTrigger, kill: () => Promise<void>): Promise<FiredKill>;
  /** Drops an armed kill that has not fired (a test that failed before reaching its window). */
  disarm(): void;
  /** Injects `faults` into every later request (undefined: none). */
  injectFaults(faults: FaultInjector | undefined): void;
  /** Keeps in `requests` only the later requests `keep` accepts (every one by default). */
  recordOnly(keep: (request: ProxiedWrite) => boolean): void;
  close(): Promise<void>;
}

export interface CrashProxyOptions {
  /** The API server, https://127.0.0.1:<port>. */
  upstream: string;
  caPem: string;
  /** The manager's client certificate, presented upstream. */
  client: CertFiles;
  /** The proxy's own serving certificate (harness CA, 127.0.0.1). */
  serving: CertFiles;
  /** The one namespace the manager sees. */
  namespace: string;
}

/** k8s.io/apiserver's secure serving: `IdleTimeout: 90 * time.Second`. */
export const API_SERVER_IDLE_TIMEOUT_MS = 90_000;

// Collections the controllers list and watch across namespaces that are namespaced: PtahRealm is cluster-scoped.
const NAMESPACED_COLLECTION = /^\/(api\/v1|apis\/batch\/v1|apis\/operator\.ptah\.run\/[^/]+)\/(pods|jobs|ptah(?!realms$)[a-z]+)$/;

/** A cluster-wide collection path of a namespaced kind, rewritten to `namespace`'s; anything else unchanged. */
export function scopedPath(path: string, namespace: string): string {
  const [pathname, query] = splitQuery(path);
  const m = NAMESPACED_COLLECTION.exec(pathname);
  if (!m) return path;
  return `/${m[1]}/namespaces/${encodeURIComponent(namespace)}/${m[2]}${query === undefined ? '' : `?${query}`}`;
}

function splitQuery(path: string): [string, string | undefined] {
  const at = path.indexOf('?');
  return at < 0 ? [path, undefined] : [path.slice(0, at), path.slice(at + 1)];
}

function parseJson(buffer: Buffer): unknown {
  if (buffer.length === 0) return undefined;
  try {
    return JSON.parse(buffer.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const isWatch = (url: string) => /[?&]watch=(true|1)(&|$)/.test(url);

/** Reads the resourceVersion of the object in a write's answer into `record`, beside the pipe to the manager. */
function keepStoredVersion(up: IncomingMessage, record: RecordedRequest): void {
  const chunks: Buffer[] = [];
  up.on('data', (c: Buffer) => chunks.push(c));
  up.on('end', () => {
    const answer = parseJson(Buffer.concat(chunks)) as { metadata?: { resourceVersion?: string } } | undefined;
    if (answer?.metadata?.resourceVersion) record.storedVersion = answer.metadata.resourceVersion;
  });
}

/** Cuts a watch stream after `ms`, unless it ended first. */
function dropLater(res: ServerResponse, ms: number, dropped: () => void): void {
  const timer = setTimeout(() => {
    dropped();
    res.destroy();
  }, ms);
  res.once('close', () => clearTimeout(timer));
}

interface Armed {
  trigger: KillTrigger;
  kill: () => Promise<void>;
  resolve(fired: FiredKill): void;
}

export async function startCrashProxy(options: CrashProxyOptions): Promise<CrashProxy> {
  const upstream = new URL(options.upstream);
  const [cert, key, servingCert, servingKey] = await Promise.all([
    readFile(options.client.cert), readFile(options.client.key), readFile(options.serving.cert), readFile(options.serving.key),
  ]);
  const agent = new Agent({ keepAlive: true, ca: options.caPem, cert, key });
  const requests: RecordedRequest[] = [];
  let armed: Armed | undefined;
  let kills = 0;
  let faults: FaultInjector | undefined;
  let keep: (request: ProxiedWrite) => boolean = () => true;

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer | undefined, onResponse: (up: IncomingMessage) => void, onError: (e: Error) => void) => {
    const headers = { ...req.headers, host: upstream.host };
    const up = httpsRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: scopedPath(req.url ?? '/', options.namespace), headers, agent }, onResponse);
    up.on('error', onError);
    // A manager that went away (killed, or a watch it closed) takes its upstream request with it.
    res.once('close', () => up.destroy());
    if (body) up.end(body);
    else req.pipe(up);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const method = req.method ?? 'GET';
    const [path] = splitQuery(req.url ?? '/');
    const record: RecordedRequest = { method, path, body: undefined, status: 0, generation: kills, at: Date.now() };
    const fail = (e: Error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`crash proxy: ${e.message}`);
    };
    const body = method === 'GET' ? undefined : await readBody(req);
    if (body) record.body = parseJson(body);
    if (keep(record)) requests.push(record);
    const candidate = body && armed && armed.trigger.match(record) ? armed : undefined;
    const fault = candidate ? undefined : faults?.decide({ method, watch: isWatch(req.url ?? ''), path, body: record.body });
    if (fault) record.fault = fault.kind;
    if (fault && fault.kind !== 'watchDrop') faults?.applied(fault.kind);
    if (fault?.kind === 'latency') await new Promise((resolve) => setTimeout(resolve, fault.ms));
    if (fault?.kind === 'error') {
      record.status = 503;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'ServiceUnavailable', code: 503, message: 'crash proxy: injected fault' }));
      return;
    }
    // A read is cut before it is sent; a write after the API server answered, so it may be stored unheard.
    if (fault?.kind === 'reset' && !body) {
      res.socket?.destroy();
      return;
    }
    forward(req, res, body, (up) => {
      record.status = up.statusCode ?? 0;
      record.answeredAt = Date.now();
      const stored = record.status >= 200 && record.status < 300;
      if (fault?.kind === 'reset') {
        // Stored or not, the manager never hears; the record still reads the answer, then the connection is cut.
        keepStoredVersion(up, record);
        up.once('end', () => res.socket?.destroy());
        return;
      }
      if (!candidate || armed !== candidate || !stored) {
        res.writeHead(record.status, up.headers);
        if (body) keepStoredVersion(up, record);
        up.pipe(res);
        if (fault?.kind === 'watchDrop') dropLater(res, fault.afterMs, () => faults?.applied('watchDrop'));
        return;
      }
      // The write is stored. The manager dies before it hears so; its socket is dropped only once it is dead,
      // so a reset can never reach a live manager as a failed write it might act on.
      armed = undefined;
      const storedAt = Date.now();
      up.resume();
      void candidate.kill().then(() => {
        kills += 1;
        res.socket?.destroy();
        candidate.resolve({ write: record, storedAt, killedAt: Date.now() });
      });
    }, fail);
  };

  const server: Server = createServer({ cert: servingCert, key: servingKey }, (req, res) => {
    handle(req, res).catch((e: Error) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(`crash proxy: ${e.message}`);
    });
  });
  // An idle connection is kept 90 s, as kube-apiserver's secure serving does (IdleTimeout), not node's 5 s: a manager
  // behind the proxy then makes the handshakes it would make against the API server itself.
  server.keepAliveTimeout = API_SERVER_IDLE_TIMEOUT_MS;
  let connections = 0;
  server.on('secureConnection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    get connections() {
      return connections;
    },
    writes: () => requests.filter((r) => r.method !== 'GET'),
    armKill(trigger, kill) {
      if (armed) throw new Error(`a kill is already armed (${armed.trigger.what})`);
      return new Promise((resolve) => {
        armed = { trigger, kill, resolve };
      });
    },
    disarm() {
      armed = undefined;
    },
    injectFaults(injector) {
      faults = injector;
    },
    recordOnly(filter) {
      keep = filter;
    },
    async close() {
      armed = undefined;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
