// Support for the webhook's unit tests: an in-memory uncached reader, AdmissionReview builders, and a server
// built on a freshly generated certificate. The real-apiserver proofs live in the integration suite.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls, { type TLSSocket } from 'node:tls';
import { isDeepStrictEqual } from 'node:util';
import { generateCertificates, type CertificateFiles } from '../../certs/generate.js';
import { ApiError, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import type { UncachedReader } from '../../src/shared/kube.js';
import type { Logger } from '../../src/shared/logger.js';
import { ServingCertificate } from '../../src/shared/tls.js';
import type { AdmissionRequest, AdmissionResponseBody, GroupVersionKind, GroupVersionResource, Operation, UserInfo } from '../../src/webhook/admission.js';
import { buildMetricsServer, buildServer, type ServerLimits, type WebhookServer } from '../../src/webhook/server.js';

export const MANAGER = 'system:serviceaccount:ptah-system:ptah-manager';
/** An executor identity for tests whose Jobs no runner runs. */
export const TEST_EXECUTOR_IDENTITY = `sha256:${'e'.repeat(64)}`;
export const MANAGER_IMAGES = {
  controllerImage: `registry.example/ptah@sha256:${'c'.repeat(64)}`,
  controllerRevision: 'rev-1',
  runnerImage: `registry.example/ptah@sha256:${'d'.repeat(64)}`,
};
/** The webhook clock in tests: a fixed instant inside the generated certificates' validity. */
export const NOW = new Date();

const key = (r: { apiVersion: string; kind: string; namespace?: string; name: string }) =>
  `${r.apiVersion}/${r.kind}/${r.namespace ?? ''}/${r.name}`;

export interface StoredObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [field: string]: unknown };
  [field: string]: unknown;
}

/**
 * Objects by apiVersion/kind/namespace/name; a failure can be planted per object or for every read. Each read
 * returns a fresh copy: JSON.parse of the stored object's JSON, as a reader of an HTTP answer pays, for an object
 * that JSON carries exactly, and a structuredClone for any other (a Date, an undefined field, -0).
 */
export class MemoryReader implements UncachedReader {
  readonly objects = new Map<string, KubeObject>();
  readonly failures = new Map<string, ApiError>();
  readonly reads: string[] = [];
  /** The JSON of each stored object that JSON carries exactly; a stored object is never written. */
  readonly #json = new WeakMap<KubeObject, string>();

  /** Stores a copy of `object` as the API server would return it (plain JSON, timestamps as strings). */
  put(object: StoredObject): void {
    const m = object.metadata;
    const copy = structuredClone(object) as KubeObject;
    const json = JSON.stringify(copy);
    if (isDeepStrictEqual(JSON.parse(json), copy)) this.#json.set(copy, json);
    this.objects.set(key({ apiVersion: object.apiVersion, kind: object.kind, namespace: m.namespace, name: m.name }), copy);
  }

  /** The next reads of this object fail with `code` (undefined: no response at all). */
  fail(ref: ResourceRef, code: number | undefined, message = 'injected failure'): void {
    this.failures.set(key(ref), new ApiError({ code, reason: code === 403 ? 'Forbidden' : code === 404 ? 'NotFound' : undefined, message }, `GET ${ref.kind}`));
  }

  async get<T extends KubeObject>(ref: ResourceRef): Promise<T> {
    const k = key(ref);
    this.reads.push(k);
    const failure = this.failures.get(k);
    if (failure) throw failure;
    const object = this.objects.get(k);
    if (!object) throw new ApiError({ code: 404, reason: 'NotFound', message: `${ref.kind} "${ref.name}" not found` }, `GET ${ref.kind}`);
    return this.#copy(object) as T;
  }

  /** Every stored object of the kind (in `namespace`, when given); a failure planted on the list's ref fails it. */
  async list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string | undefined): Promise<T[]> {
    const k = key({ apiVersion, kind, namespace, name: '' });
    this.reads.push(k);
    const failure = this.failures.get(k);
    if (failure) throw failure;
    return [...this.objects.values()]
      .filter((o) => o.apiVersion === apiVersion && o.kind === kind && (namespace === undefined || o.metadata?.namespace === namespace))
      .map((o) => this.#copy(o) as T);
  }

  #copy(object: KubeObject): KubeObject {
    const json = this.#json.get(object);
    return json === undefined ? structuredClone(object) : (JSON.parse(json) as KubeObject);
  }
}

export interface ReviewInput {
  operation: Operation;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  subResource?: string;
  namespace?: string;
  name?: string;
  object?: unknown;
  oldObject?: unknown;
  userInfo?: UserInfo;
  uid?: string;
  requestKind?: GroupVersionKind;
}

export function review(input: ReviewInput): { apiVersion: string; kind: string; request: AdmissionRequest } {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: input.uid ?? 'req-0001',
      kind: input.kind,
      resource: input.resource,
      ...(input.subResource ? { subResource: input.subResource } : {}),
      ...(input.requestKind ? { requestKind: input.requestKind } : {}),
      name: input.name,
      namespace: input.namespace,
      operation: input.operation,
      userInfo: input.userInfo ?? { username: 'alice', uid: 'u-alice', groups: ['system:authenticated', 'dba'] },
      ...(input.object !== undefined ? { object: input.object } : {}),
      ...(input.oldObject !== undefined ? { oldObject: input.oldObject } : {}),
    },
  };
}

/** A kind as a review names it: the GVK and the resource (plural) it is served as. */
export interface ReviewedKind {
  group: string;
  version: string;
  kind: string;
  resource: string;
}

/**
 * The review of `operation` on the object `name` of `type`: object (and oldObject, when given) carry apiVersion,
 * kind and metadata { name, namespace } beneath their own fields, so a test writes only what it is about.
 */
export function reviewOf(
  type: ReviewedKind,
  operation: Operation,
  name: string,
  fields: { object?: Record<string, unknown>; oldObject?: Record<string, unknown>; userInfo?: UserInfo; namespace?: string },
): ReturnType<typeof review> {
  const namespace = fields.namespace ?? 'team-a';
  const envelope = { apiVersion: type.group ? `${type.group}/${type.version}` : type.version, kind: type.kind, metadata: { name, namespace } };
  return review({
    operation,
    kind: { group: type.group, version: type.version, kind: type.kind },
    resource: { group: type.group, version: type.version, resource: type.resource },
    namespace,
    name,
    object: fields.object && { ...envelope, ...fields.object },
    oldObject: fields.oldObject && { ...envelope, ...fields.oldObject },
    userInfo: fields.userInfo,
  });
}

export async function tempDir(prefix: string): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), `${prefix}-`));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export interface Harness {
  app: WebhookServer;
  /** The /metrics listener, over the same certificate. */
  metrics: WebhookServer;
  reader: MemoryReader;
  files: CertificateFiles;
  certificate: ServingCertificate;
  /** POSTs a review to `url` and returns the AdmissionReview response (asserting HTTP 200). */
  admit(url: string, body: unknown): Promise<AdmissionResponseBody['response']>;
  /** Listens on 127.0.0.1 (a free port) over the real TLS listener; the CA PEM verifies it as `localhost`. */
  listen(): Promise<{ port: number; ca: string }>;
  /** The same, for the /metrics listener. */
  listenMetrics(): Promise<{ port: number; ca: string }>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  ready?: () => boolean;
  bodyLimit?: number;
  /** Overrides of the service's connection limits (small values make the limits observable quickly). */
  limits?: Partial<ServerLimits>;
  now?: () => Date;
  logger?: Logger;
}

/** A server over a generated certificate and an empty MemoryReader. */
export async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const tmp = await tempDir('ptah-webhook');
  const files = await generateCertificates({ outDir: tmp.dir });
  const certificate = await ServingCertificate.load(tmp.dir);
  const reader = new MemoryReader();
  const app = await buildServer({
    reader,
    config: { managerUsername: MANAGER, manager: MANAGER_IMAGES, bodyLimit: options.bodyLimit, limits: options.limits },
    logger: options.logger ?? false,
    clock: { now: options.now ?? (() => NOW) },
    certificate,
    ready: options.ready,
  });
  const metrics = await buildMetricsServer({ logger: options.logger ?? false, certificate, limits: options.limits });
  const listening = async (server: WebhookServer) => {
    await server.listen({ port: 0, host: '127.0.0.1' });
    return { port: (server.server.address() as AddressInfo).port, ca: await readFile(files.caCert, 'utf8') };
  };
  return {
    app,
    metrics,
    reader,
    files,
    certificate,
    async admit(url, body) {
      const res = await app.inject({ method: 'POST', url, payload: body as object });
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${res.body}`);
      const parsed = res.json() as AdmissionResponseBody;
      return parsed.response;
    },
    listen: () => listening(app),
    listenMetrics: () => listening(metrics),
    async close() {
      await Promise.all([app.close(), metrics.close()]);
      certificate.stop();
      await tmp.remove();
    },
  };
}

/** Where a listening harness is reached over HTTPS. */
export interface Endpoint {
  port: number;
  ca: string;
  /** A keep-alive agent, to send several requests over one connection; none means a connection per request. */
  agent?: https.Agent;
}

export interface PostResult {
  status: number;
  body: string;
  /** The request went over a connection an earlier request had opened (keep-alive). */
  reusedSocket: boolean;
}

/**
 * POSTs `text` as application/json over the real TLS listener. Raw text, so a test can send what JSON.stringify
 * cannot write (1e400, lone surrogate escapes, truncated JSON). Rejects when no answer comes within `timeoutMs`.
 */
export function postText(endpoint: Endpoint, path: string, text: string | Buffer, timeoutMs = 30_000): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const payload = typeof text === 'string' ? Buffer.from(text) : text;
    const req = https.request(
      {
        host: '127.0.0.1',
        port: endpoint.port,
        path,
        method: 'POST',
        ca: endpoint.ca,
        servername: 'localhost',
        agent: endpoint.agent ?? false,
        headers: { 'content-type': 'application/json', 'content-length': payload.length },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), reusedSocket: req.reusedSocket }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${path} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** A TLS connection to the service once its handshake is done; rejects if the server drops it first. */
export function connectTls(endpoint: Endpoint): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: endpoint.port, ca: endpoint.ca, servername: 'localhost' });
    const fail = (e?: Error) => reject(e ?? new Error('the server closed the connection during the TLS handshake'));
    socket.once('secureConnect', () => {
      socket.off('error', fail);
      socket.off('close', onClose);
      resolve(socket);
    });
    const onClose = () => fail();
    socket.once('error', fail);
    socket.once('close', onClose);
  });
}

/** When `socket` closes (ms after `since`) and what the server sent on it; rejects after `timeoutMs`. */
export function whenClosed(socket: TLSSocket, since: number, timeoutMs: number): Promise<{ afterMs: number; received: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ afterMs: performance.now() - since, received: Buffer.concat(chunks).toString() });
    });
  });
}
