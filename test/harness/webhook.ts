// Support for the webhook's unit tests: an in-memory uncached reader, AdmissionReview builders, and a server
// built on a freshly generated certificate. The real-apiserver proofs live in the integration suite.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generateCertificates, type CertificateFiles } from '../../certs/generate.js';
import { ApiError, type KubeObject, type ResourceRef } from '../../src/shared/kube-client.js';
import type { UncachedReader } from '../../src/shared/kube.js';
import type { Logger } from '../../src/shared/logger.js';
import { ServingCertificate } from '../../src/shared/tls.js';
import type { AdmissionRequest, AdmissionResponseBody, GroupVersionKind, GroupVersionResource, Operation, UserInfo } from '../../src/webhook/admission.js';
import { buildServer, type WebhookServer } from '../../src/webhook/server.js';

export const MANAGER = 'system:serviceaccount:ptah-system:ptah-manager';
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

/** Objects by apiVersion/kind/namespace/name; a failure can be planted per object or for every read. */
export class MemoryReader implements UncachedReader {
  readonly objects = new Map<string, KubeObject>();
  readonly failures = new Map<string, ApiError>();
  readonly reads: string[] = [];

  /** Stores a copy of `object` as the API server would return it (plain JSON, timestamps as strings). */
  put(object: StoredObject): void {
    const m = object.metadata;
    this.objects.set(key({ apiVersion: object.apiVersion, kind: object.kind, namespace: m.namespace, name: m.name }), structuredClone(object) as KubeObject);
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
    return structuredClone(object) as T;
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

export async function tempDir(prefix: string): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), `${prefix}-`));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export interface Harness {
  app: WebhookServer;
  reader: MemoryReader;
  files: CertificateFiles;
  certificate: ServingCertificate;
  /** POSTs a review to `url` and returns the AdmissionReview response (asserting HTTP 200). */
  admit(url: string, body: unknown): Promise<AdmissionResponseBody['response']>;
  close(): Promise<void>;
}

/** A server over a generated certificate and an empty MemoryReader. */
export async function harness(options: { ready?: () => boolean; bodyLimit?: number; now?: () => Date; logger?: Logger } = {}): Promise<Harness> {
  const tmp = await tempDir('ptah-webhook');
  const files = await generateCertificates({ outDir: tmp.dir });
  const certificate = await ServingCertificate.load(tmp.dir);
  const reader = new MemoryReader();
  const app = await buildServer({
    reader,
    config: { managerUsername: MANAGER, manager: MANAGER_IMAGES, bodyLimit: options.bodyLimit },
    logger: options.logger ?? false,
    clock: { now: options.now ?? (() => NOW) },
    certificate,
    ready: options.ready,
  });
  return {
    app,
    reader,
    files,
    certificate,
    async admit(url, body) {
      const res = await app.inject({ method: 'POST', url, payload: body as object });
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${res.body}`);
      const parsed = res.json() as AdmissionResponseBody;
      return parsed.response;
    },
    async close() {
      await app.close();
      certificate.stop();
      await tmp.remove();
    },
  };
}
