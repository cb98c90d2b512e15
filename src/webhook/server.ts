// The manager's two HTTPS services: the admission routes (routes.ts) with /healthz and /readyz (buildServer), and
// /metrics on a listener of its own (buildMetricsServer), so that scrapes never hold the connection slots and the
// queue that admission and the kubelet's probes are served from. Both share one guarded TLS listener shape; neither
// listens or installs process handlers, so tests drive them through inject() or on port 0, and main.ts owns the
// lifecycle.
import { STATUS_CODES, type OutgoingHttpHeader, type ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import helmet from '@fastify/helmet';
import Fastify, {
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type HookHandlerDoneFunction,
} from 'fastify';
import type { Clock } from '../shared/clock.js';
import type { UncachedReader } from '../shared/kube.js';
import type { Logger } from '../shared/logger.js';
import { coalescedScrape, registry, webhookMetrics } from '../shared/metrics.js';
import type { ServingCertificate } from '../shared/tls.js';
import {
  ADMISSION_REVIEW_SCHEMA,
  Refusal,
  badRequest,
  internalError,
  reviewResponse,
  type AdmissionReview,
  type Verdict,
  unsendableValue,
} from './admission.js';
import { guardedHttpsServer } from './connections.js';
import type { AdmissionContext, ManagerImages } from './judge.js';
import { ADMISSION_ROUTES } from './routes.js';

/**
 * The largest AdmissionReview the API server sends these routes is the CREATE of a full 512 KiB plan chunk (a
 * PtahSchemaPlanChunk, or its projection ConfigMap): 683 KiB of base64 plus metadata and managedFields, with no
 * oldObject. An UPDATE carries two copies of an object, but of the kinds routed here only annotations (capped by
 * the API server at 256 KiB in total) can grow. 1 MiB leaves a third of margin over the chunk, and keeps
 * MAX_CONNECTIONS half-sent bodies within the manager's memory (the 3 MiB limit let 100 of them reach 528 MB of
 * a 512 Mi limit); anything larger is 413.
 */
export const BODY_LIMIT = 1024 * 1024;

/**
 * The whole request, headers and body, must arrive within this; the API server stops waiting for an answer after
 * WEBHOOK_TIMEOUT_SECONDS (10 s) anyway, so a request still arriving then is no one's. A kept-alive connection idle
 * between requests is not timed by it (KEEP_ALIVE_TIMEOUT_MS is).
 */
export const REQUEST_TIMEOUT_MS = 10_000;

/**
 * The TLS handshake, and a request's headers, must be done within this (or the request timeout, when shorter). The
 * API server's take milliseconds; a connection that has not got that far is holding a slot, not using it.
 */
export const GREETING_TIMEOUT_MS = 3000;

/**
 * A connection idle after an answer is closed after this (Fastify's default kept it 72 s). The API server keeps
 * its connections while it sends requests and opens one again after a pause; Node's default.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 5000;

/**
 * A connection with no traffic either way for this long is cut: above all one whose client does not read its
 * answer, which no other timeout covers. Longer than a request may take, judging included.
 */
export const STALLED_CONNECTION_MS = 30_000;

/** How often Node looks for requests past their timeout, so a stalled client is cut within timeout + this. */
export const CONNECTION_CHECK_INTERVAL_MS = 1000;

/**
 * Open connections at most. One arriving at the cap evicts the connection that has waited longest with no request
 * in hand (src/webhook/connections.ts); only when every one is receiving or judging a request is the newcomer
 * dropped (the API server treats that as a failed call and, failing closed, refuses the request). The API server
 * keeps a pool of connections per replica, far below this, and MAX_CONNECTIONS bodies of BODY_LIMIT, with their
 * parse, stay well inside the pod's 512 Mi.
 */
export const MAX_CONNECTIONS = 128;

/** The connection limits; tests set small ones to observe them quickly. */
export interface ServerLimits {
  requestTimeoutMs: number;
  maxConnections: number;
}

export type { ManagerImages } from './judge.js';

export interface ServerDeps {
  /** Uncached API reads; never an informer cache. */
  reader: UncachedReader;
  config: { managerUsername: string; manager: ManagerImages; bodyLimit?: number; limits?: Partial<ServerLimits> };
  /** The root logger, or false for none (tests). */
  logger: Logger | false;
  clock: Pick<Clock, 'now'>;
  /** The serving pair; the server follows its reloads. */
  certificate: ServingCertificate;
  /** Extra readiness condition (e.g. the controller's); the service is ready only when it says so too. */
  ready?: () => boolean;
}

export type WebhookServer = FastifyInstance<HttpsServer>;

const TLS_MIN_VERSION = 'TLSv1.2' as const;

function decisionOf(verdict: Verdict): 'allowed' | 'denied' | 'invalid' | 'errored' {
  if (verdict.allowed) return 'allowed';
  if (verdict.code >= 500) return 'errored';
  return verdict.code === 400 ? 'invalid' : 'denied';
}

type SecurityHeaders = readonly (readonly [name: string, value: OutgoingHttpHeader])[];
let securityHeadersOnce: Promise<SecurityHeaders> | undefined;

/**
 * The headers @fastify/helmet puts on every response (helmet's defaults, CSP off: no answer here is a page a
 * browser renders), asked of helmet itself once per process on a throwaway instance. Registered on the service,
 * it would build helmet's middleware anew for every request (about 23 µs of each admission) to set the same
 * fixed headers; these options make none of them depend on the request.
 */
function securityHeaders(): Promise<SecurityHeaders> {
  securityHeadersOnce ??= (async () => {
    const probe = Fastify({ logger: false });
    await probe.register(helmet, { global: true, contentSecurityPolicy: false });
    let set: SecurityHeaders = [];
    // After helmet's own onRequest hooks, the raw response holds what they set and nothing else yet.
    probe.addHook('onRequest', (_request, reply, done) => {
      set = Object.entries(reply.raw.getHeaders()).flatMap(([name, value]) => (value === undefined ? [] : [[name, value] as const]));
      done();
    });
    probe.get('/', async () => '');
    await probe.inject({ method: 'GET', url: '/' });
    await probe.close();
    if (set.length === 0) throw new Error('@fastify/helmet set no headers on the probe; the service would answer without them');
    return set;
  })();
  return securityHeadersOnce;
}

/** Sets `headers` on the raw response, where helmet set them. */
function setHeaders(res: ServerResponse, headers: SecurityHeaders): void {
  for (const [name, value] of headers) res.setHeader(name, value);
}

/** The hook that sets them, so every answer that reaches the hooks (errors and 404s too) carries them. */
function withHeaders(headers: SecurityHeaders) {
  return (_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    setHeaders(reply.raw, headers);
    done();
  };
}

/**
 * The answer to a request the router refuses before any hook runs (FST_ERR_BAD_URL: a URL it cannot decode):
 * Fastify's own, written on the raw response as Fastify writes it, with the headers.
 */
function frameworkError(headers: SecurityHeaders, error: FastifyError, res: ServerResponse): void {
  const status = error.statusCode ?? 400;
  const body = JSON.stringify({ statusCode: status, error: STATUS_CODES[status], code: error.code, message: error.message });
  setHeaders(res, headers);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const started = Symbol('webhookStart');
type TimedRequest = FastifyRequest & { [started]?: bigint };

/**
 * The hooks of one admission route that keep its series: in flight from onRequest until the answer is sent or
 * the client gives up; requests by code and latency when an answer is sent. On the route itself, so no request
 * looks up which webhook it is for.
 */
function metricsHooks(webhook: string) {
  const labels = { webhook };
  const finish = (request: TimedRequest, code: number | undefined): void => {
    const start = request[started];
    if (start === undefined) return;
    request[started] = undefined;
    webhookMetrics.inFlight.dec(labels);
    if (code !== undefined) {
      webhookMetrics.requests.inc({ webhook, code: String(code) });
      webhookMetrics.latency.observe(labels, Number(process.hrtime.bigint() - start) / 1e9);
    }
  };
  return {
    onRequest(request: TimedRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
      request[started] = process.hrtime.bigint();
      webhookMetrics.inFlight.inc(labels);
      done();
    },
    onResponse(request: TimedRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
      finish(request, reply.statusCode);
      done();
    },
    async onRequestAbort(request: TimedRequest): Promise<void> {
      finish(request, undefined);
    },
  };
}

/** What both services are built on. */
interface ListenerDeps {
  certificate: ServingCertificate;
  logger: Logger | false;
  bodyLimit: number;
  limits?: Partial<ServerLimits>;
}

/**
 * A Fastify instance on the guarded TLS listener (connections.ts), following the certificate's reloads, with the
 * security headers on every answer and errors answered without internals.
 */
async function guardedApp(deps: ListenerDeps): Promise<WebhookServer> {
  const { certificate } = deps;
  const requestTimeout = deps.limits?.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const greetingTimeout = Math.min(GREETING_TIMEOUT_MS, requestTimeout);
  const headers = await securityHeaders();
  const app = Fastify({
    serverFactory: (handler) => {
      const server = guardedHttpsServer({
        key: certificate.current.key,
        cert: certificate.current.cert,
        minVersion: TLS_MIN_VERSION,
        handshakeTimeout: greetingTimeout,
        headersTimeout: greetingTimeout,
        requestTimeout,
        connectionsCheckingInterval: Math.min(CONNECTION_CHECK_INTERVAL_MS, requestTimeout),
      }, handler, deps.limits?.maxConnections ?? MAX_CONNECTIONS);
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      server.setTimeout(STALLED_CONNECTION_MS);
      return server;
    },
    // The factory makes the server; this only tells Fastify it is HTTPS (its listening address says https://).
    https: {},
    bodyLimit: deps.bodyLimit,
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    // Judge the request exactly as sent: no coercion, no defaults, no stripped properties.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false } },
    // Each admission answer is logged once, with its decision; probes and scrapes are not logged.
    logController: new LogController({ disableRequestLogging: true }),
    frameworkErrors: (error, _request, reply) => frameworkError(headers, error, reply.raw),
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  }) as unknown as WebhookServer;

  // First of the hooks, as helmet's were: every response carries the headers, whatever ends the request.
  app.addHook('onRequest', withHeaders(headers));
  // Only application/json is an AdmissionReview; anything else is 415 rather than a string the schema refuses.
  app.removeContentTypeParser('text/plain');

  const offReload = certificate.onChange((pair) => app.server.setSecureContext({ key: pair.key, cert: pair.cert, minVersion: TLS_MIN_VERSION }));
  app.addHook('onClose', async () => {
    offReload();
  });

  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(status).send({ statusCode: status, error: STATUS_CODES[status], message: 'internal error' });
    }
    // Malformed JSON, a body that is not an AdmissionReview, an oversized body: the client's mistake, named.
    return reply.code(status).send({ statusCode: status, error: STATUS_CODES[status], message: error.message });
  });
  return app;
}

export async function buildServer(deps: ServerDeps): Promise<WebhookServer> {
  const { certificate } = deps;
  const app = await guardedApp({ certificate, logger: deps.logger, bodyLimit: deps.config.bodyLimit ?? BODY_LIMIT, limits: deps.config.limits });

  for (const [path, judge] of Object.entries(ADMISSION_ROUTES)) {
    app.post(path, { schema: { body: ADMISSION_REVIEW_SCHEMA }, ...metricsHooks(path) }, async (req) => {
      const { request } = req.body as AdmissionReview;
      const log = req.log.child({ admissionUID: request.uid });
      const ctx: AdmissionContext = {
        reader: deps.reader,
        managerUsername: deps.config.managerUsername,
        manager: deps.config.manager,
        now: () => deps.clock.now(),
        log,
      };
      let verdict: Verdict;
      try {
        const unsendable = unsendableValue(req.body);
        verdict = unsendable ? badRequest(`the AdmissionReview holds what no API server sends: ${unsendable}`) : await judge(request, ctx);
      } catch (e) {
        if (e instanceof Refusal) verdict = e.verdict;
        else {
          log.error({ err: e }, 'admission judge failed');
          verdict = internalError('the webhook failed while judging this request; it is refused until it can be judged');
        }
      }
      const decision = decisionOf(verdict);
      webhookMetrics.decisions.inc({ webhook: path, decision });
      log[decision === 'allowed' ? 'debug' : 'info'](
        {
          webhook: path,
          operation: request.operation,
          resource: `${request.resource.group}/${request.resource.resource}${request.subResource ? `/${request.subResource}` : ''}`,
          namespace: request.namespace,
          name: request.name,
          username: request.userInfo.username,
          dryRun: request.dryRun === true,
          decision,
          ...(verdict.allowed ? {} : { code: verdict.code, detail: verdict.message }),
        },
        'admission decision',
      );
      return reviewResponse(request.uid, verdict);
    });
  }

  app.get('/healthz', { logLevel: 'warn' }, async () => ({ status: 'ok' }));

  app.get('/readyz', { logLevel: 'warn' }, async (_req, reply) => {
    const problems: string[] = [];
    if (!certificate.valid(deps.clock.now())) problems.push(`the serving certificate expired at ${certificate.current.notAfter.toISOString()}`);
    if (deps.ready && !deps.ready()) problems.push('a readiness check of the manager is not satisfied');
    if (problems.length > 0) return reply.code(503).send({ status: 'not ready', problems });
    return { status: 'ready' };
  });

  return app;
}

export interface MetricsServerDeps {
  logger: Logger | false;
  /** The same serving pair as the admission service: a scraper verifies it with the same CA. */
  certificate: ServingCertificate;
  limits?: Partial<ServerLimits>;
}

/** Scrapes send no body; anything past this is refused before it is read. */
const METRICS_BODY_LIMIT = 1024;

/** GET /metrics, on its own listener. */
export async function buildMetricsServer(deps: MetricsServerDeps): Promise<WebhookServer> {
  const app = await guardedApp({ certificate: deps.certificate, logger: deps.logger, bodyLimit: METRICS_BODY_LIMIT, limits: deps.limits });
  const scrape = coalescedScrape();
  app.get('/metrics', { logLevel: 'warn' }, async (_req, reply) => reply.type(registry.contentType).send(await scrape()));
  return app;
}
