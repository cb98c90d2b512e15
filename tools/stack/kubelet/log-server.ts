// The kubelet's read-only HTTPS endpoint for container logs. The API server's pods/log handler connects here (the
// Node's InternalIP and kubeletEndpoint port) with its kubelet client certificate and relays the body, streaming it
// when `follow` is set. Both sides are verified against the test CA.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ContainerLog, LogQuery, LogStream } from './container-log.js';

/**
 * A container's logs, or why there are none (becomes a 400/404 the API server passes on), or `hang`: the request
 * is never answered (a test's kubelet that stopped responding; see HANG_LOG_ANNOTATION).
 */
export type LogLookup =
  | { current: ContainerLog; previous?: ContainerLog }
  | { error: string; status: 400 | 404; previous?: ContainerLog }
  | { hang: true };

export interface LogServerOptions {
  cert: string;
  key: string;
  /** Clients must present a certificate signed by this CA (the API server's kubelet client certificate). */
  clientCA: string;
  lookup(namespace: string, pod: string, container: string): LogLookup;
}

export interface LogServer {
  port: number;
  close(): Promise<void>;
}

export async function startLogServer(options: LogServerOptions): Promise<LogServer> {
  const server: Server = createServer(
    { cert: options.cert, key: options.key, ca: options.clientCA, requestCert: true, rejectUnauthorized: true },
    (req, res) => handle(options, req, res),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

function handle(options: LogServerOptions, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'https://kubelet');
  const match = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)\/?$/.exec(url.pathname);
  if (req.method !== 'GET' || !match) return fail(res, 404, `the fake kubelet serves only GET /containerLogs/{namespace}/{pod}/{container}, not ${req.method} ${url.pathname}`);
  const [namespace, pod, container] = match.slice(1).map(decodeURIComponent) as [string, string, string];
  let query: LogQuery & { follow: boolean; previous: boolean };
  try {
    query = parseQuery(url.searchParams);
  } catch (e) {
    return fail(res, 400, (e as Error).message);
  }
  const found = options.lookup(namespace, pod, container);
  // No status line, no body: the connection stays open until the client gives up or the server closes.
  if ('hang' in found) return;
  const log = query.previous ? found.previous : 'current' in found ? found.current : undefined;
  if (!log) {
    if (query.previous) return fail(res, 400, `previous terminated container "${container}" in pod "${pod}" not found`);
    return fail(res, 'status' in found ? found.status : 404, 'error' in found ? found.error : 'no log');
  }
  res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
  if (!query.follow) {
    res.end(log.read(query));
    return;
  }
  const stop = log.follow(query, { write: (chunk) => res.write(chunk), end: () => res.end() });
  res.on('close', stop);
}

function parseQuery(params: URLSearchParams): LogQuery & { follow: boolean; previous: boolean } {
  const int = (name: string, min: number): number | undefined => {
    const raw = params.get(name);
    if (raw === null) return undefined;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < min) throw new Error(`${name} must be an integer >= ${min}, got ${JSON.stringify(raw)}`);
    return n;
  };
  const sinceSeconds = int('sinceSeconds', 1);
  const sinceTime = params.get('sinceTime');
  if (sinceTime !== null && Number.isNaN(Date.parse(sinceTime))) throw new Error(`sinceTime must be an RFC 3339 time, got ${JSON.stringify(sinceTime)}`);
  const stream = params.get('stream');
  const streams: Record<string, LogStream | undefined> = { Stdout: 'stdout', Stderr: 'stderr', All: undefined };
  if (stream !== null && !(stream in streams)) throw new Error(`stream must be Stdout, Stderr or All, got ${JSON.stringify(stream)}`);
  return {
    follow: params.get('follow') === 'true',
    previous: params.get('previous') === 'true',
    timestamps: params.get('timestamps') === 'true',
    tailLines: int('tailLines', 0),
    limitBytes: int('limitBytes', 1),
    since: sinceSeconds !== undefined ? new Date(Date.now() - sinceSeconds * 1000) : sinceTime !== null ? new Date(sinceTime) : undefined,
    stream: stream === null ? undefined : streams[stream],
  };
}

function fail(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(message);
}
