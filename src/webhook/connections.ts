// What one client can make the service hold (issue #23). Node's HTTP server parses every pipelined request a client
// sends and runs them all at once, queueing their answers behind a client that may never read them (450 rendered
// scrapes a connection); and at its connection cap it drops the newcomer, so connections that merely sit there
// (idle, half-shaken, half-sent headers) shut out the kubelet's probes and the API server alike. Here a connection
// has one request handled at a time, with a few pipelined ones waiting and the connection cut beyond that; and a
// connection arriving at the cap evicts the one that has waited longest without a request in hand.
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * Pipelined requests a connection may have waiting behind the one being handled; the next one cuts the connection.
 * No client of this service pipelines (the API server, the kubelet and Prometheus send a request once the previous
 * answer is in), so this is only room for one that does.
 */
export const MAX_PIPELINED = 4;

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

interface Connection {
  raw: Socket;
  tls?: TLSSocket;
  /** The answer being produced, if any; the next pipelined request waits for its end. */
  current?: ServerResponse;
  waiting: [IncomingMessage, ServerResponse][];
  /** When it connected, or last started or finished a request: the older, the likelier to be evicted. */
  since: number;
}

/** Whether evicting it cuts no request the service is still receiving or judging. */
const evictable = (c: Connection): boolean => c.current === undefined || c.current.writableEnded;

/** 4-tuple of a socket, the same on the TCP socket and the TLS socket over it. */
const endpoints = (s: Socket): string => `${s.localAddress}|${s.localPort}|${s.remoteAddress}|${s.remotePort}`;

/**
 * An HTTPS server whose connections follow the policy above, `maxConnections` at most; `handler` (Fastify's) sees
 * one request of a connection at a time. net's own maxConnections stays as the backstop for a burst that arrives
 * before an eviction completes.
 */
export function guardedHttpsServer(options: https.ServerOptions, handler: Handler, maxConnections: number): https.Server {
  const live = new Set<Connection>();
  const byTls = new WeakMap<Socket, Connection>();
  const pending = new Map<string, Connection>();

  const dispatch = (c: Connection, req: IncomingMessage, res: ServerResponse): void => {
    c.current = res;
    c.since = performance.now();
    res.once('close', () => {
      c.current = undefined;
      c.since = performance.now();
      const next = c.waiting.shift();
      if (next && !req.socket.destroyed) dispatch(c, ...next);
    });
    handler(req, res);
  };

  const server = https.createServer(options, (req, res) => {
    const c = byTls.get(req.socket);
    // Every TLS connection is known from its TCP one; were one not, its request is served rather than lost.
    if (!c) return handler(req, res);
    if (!c.current) return dispatch(c, req, res);
    if (c.waiting.length >= MAX_PIPELINED) {
      req.socket.destroy();
      return;
    }
    c.waiting.push([req, res]);
  });
  server.maxConnections = maxConnections;

  server.on('connection', (raw: Socket) => {
    const c: Connection = { raw, waiting: [], since: performance.now() };
    const key = endpoints(raw);
    live.add(c);
    pending.set(key, c);
    raw.once('close', () => {
      live.delete(c);
      pending.delete(key);
      c.waiting = [];
    });
    if (live.size < maxConnections) return;
    // At the cap: free a slot for the next arrival from whoever waits longest with nothing in hand.
    let victim: Connection | undefined;
    for (const other of live) {
      // One evicted a moment ago is still here until its close: a second arrival in the same turn takes another.
      if (other === c || other.raw.destroyed || !evictable(other)) continue;
      if (!victim || other.since < victim.since) victim = other;
    }
    victim?.tls?.destroy();
    victim?.raw.destroy();
  });
  server.on('secureConnection', (tls: TLSSocket) => {
    const key = endpoints(tls);
    const c = pending.get(key);
    if (!c) return;
    pending.delete(key);
    c.tls = tls;
    byTls.set(tls, c);
  });
  return server;
}
