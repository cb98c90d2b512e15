// A narrow REST client for the Kubernetes API: every read is a direct (uncached) request to the API server, every
// failure is an ApiError carrying the server's Status (or none when no answer came back). The lifecycle and the
// webhook speak only this interface, so tests can wrap it with faults and the production path has no cache to
// mistake for the truth.
import https from 'node:https';
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { API_VERSION, KINDS } from './api/names.js';
import { countApiRequest } from './api-request-metrics.js';
import type { ClusterAccess } from './kubeconfig.js';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}

export interface ResourceRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

/** The Kubernetes Status of a failed request; empty when no response came back. */
export interface ApiStatus {
  code?: number;
  reason?: string;
  message?: string;
}

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: ApiStatus,
    readonly request: string,
  ) {
    super(`${request}: ${status.code === undefined ? 'no response' : `${status.code} ${status.reason ?? ''}`.trim()}${status.message ? `: ${status.message}` : ''}`);
  }
  get code(): number | undefined {
    return this.status.code;
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.code === 404;
export const isConflict = (e: unknown): boolean => e instanceof ApiError && e.code === 409;
export const isAlreadyExists = (e: unknown): boolean => e instanceof ApiError && e.code === 409 && e.status.reason === 'AlreadyExists';

export type PatchType = 'merge' | 'json' | 'strategic';
export type JsonPatchOp =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string };

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
}

export interface WriteOptions {
  subresource?: 'status';
  /** Server-side dry run: the answer is what the write would store; nothing is stored. */
  dryRun?: boolean;
}

export interface DeleteOptions {
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
}

export interface LogOptions {
  container?: string;
  limitBytes?: number;
  tailLines?: number;
}

export interface KubeClient {
  /** Uncached GET; throws ApiError (404 included). */
  get<T extends KubeObject>(ref: ResourceRef): Promise<T>;
  /** Uncached GET; undefined on 404, throws on anything else. */
  tryGet<T extends KubeObject>(ref: ResourceRef): Promise<T | undefined>;
  list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string | undefined, options?: ListOptions): Promise<T[]>;
  create<T extends KubeObject>(object: T, options?: { dryRun?: boolean }): Promise<T>;
  /** PUT with the object's resourceVersion as the precondition. */
  update<T extends KubeObject>(object: T, options?: WriteOptions): Promise<T>;
  patch<T extends KubeObject>(ref: ResourceRef, patch: unknown, type: PatchType, options?: WriteOptions): Promise<T>;
  delete(ref: ResourceRef, options?: DeleteOptions): Promise<void>;
  readPodLog(namespace: string, pod: string, options?: LogOptions): Promise<string>;
}

interface ResourceInfo {
  plural: string;
  namespaced: boolean;
}

const RESOURCES = new Map<string, ResourceInfo>([
  ['v1/Pod', { plural: 'pods', namespaced: true }],
  ['v1/ConfigMap', { plural: 'configmaps', namespaced: true }],
  ['v1/Secret', { plural: 'secrets', namespaced: true }],
  ['v1/Event', { plural: 'events', namespaced: true }],
  ['v1/Namespace', { plural: 'namespaces', namespaced: false }],
  ['v1/Node', { plural: 'nodes', namespaced: false }],
  ['v1/ServiceAccount', { plural: 'serviceaccounts', namespaced: true }],
  ['batch/v1/Job', { plural: 'jobs', namespaced: true }],
  ['coordination.k8s.io/v1/Lease', { plural: 'leases', namespaced: true }],
  ['scheduling.k8s.io/v1/PriorityClass', { plural: 'priorityclasses', namespaced: false }],
  ['events.k8s.io/v1/Event', { plural: 'events', namespaced: true }],
  ...Object.values(KINDS).map((k): [string, ResourceInfo] => [`${API_VERSION}/${k.kind}`, { plural: k.plural, namespaced: k.namespaced }]),
]);

/** Registers a further kind the client may address (the core kinds above and the Ptah kinds are known). */
export function registerResource(apiVersion: string, kind: string, info: ResourceInfo): void {
  RESOURCES.set(`${apiVersion}/${kind}`, info);
}

function resourceInfo(apiVersion: string, kind: string): ResourceInfo {
  const info = RESOURCES.get(`${apiVersion}/${kind}`);
  if (!info) throw new Error(`kube-client: ${apiVersion} ${kind} is not a registered resource`);
  return info;
}

export function resourcePath(apiVersion: string, kind: string, namespace: string | undefined, name?: string): string {
  const info = resourceInfo(apiVersion, kind);
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  if (info.namespaced && !namespace && name !== undefined) throw new Error(`kube-client: ${kind} ${name} needs a namespace`);
  const ns = info.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${base}${ns}/${info.plural}${name === undefined ? '' : `/${encodeURIComponent(name)}`}`;
}

export function refOf(object: KubeObject): ResourceRef {
  const { apiVersion, kind, metadata } = object;
  if (!apiVersion || !kind || !metadata?.name) throw new Error('kube-client: object lacks apiVersion, kind or metadata.name');
  return { apiVersion, kind, namespace: metadata.namespace, name: metadata.name };
}

const CONTENT_TYPES: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
};

export interface RestClientOptions {
  /** Per-request timeout; a request that times out fails with an ApiError without a code. */
  timeoutMs?: number;
  /** Field manager recorded in managedFields. */
  fieldManager?: string;
}

/** The production KubeClient: plain HTTPS requests with the kubeconfig's credentials. */
export async function restClient(kubeConfig: ClusterAccess, options: RestClientOptions = {}): Promise<KubeClient> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('kube-client: the kubeconfig has no current cluster');
  const server = new URL(cluster.server);
  // Credentials are applied per request: a projected ServiceAccount token rotates under a long-lived manager.
  const credentials = async (): Promise<https.RequestOptions> => {
    const tls: https.RequestOptions = {};
    await kubeConfig.applyToHTTPSOptions(tls);
    return tls;
  };
  const agent = new https.Agent({ keepAlive: true, maxSockets: 16 });
  const timeoutMs = options.timeoutMs ?? 30_000;
  const fieldManager = options.fieldManager ?? 'ptah-operator';

  /** One request, counted once: by the status the API server answered, or as an error when no answer came. */
  async function send(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<{ code: number; text: string }> {
    let answered: number | undefined;
    try {
      return await exchange(method, path, body, contentType, (code) => (answered = code));
    } finally {
      countApiRequest(method, path, answered);
    }
  }

  async function exchange(method: string, path: string, body: unknown, contentType: string, onStatus: (code: number) => void): Promise<{ code: number; text: string }> {
    const label = `${method} ${path}`;
    const tls = await credentials().catch((e: unknown) => {
      throw new ApiError({ message: `could not load credentials: ${e instanceof Error ? e.message : String(e)}` }, label);
    });
    return new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = https.request(
        {
          ...tls,
          agent,
          protocol: server.protocol,
          hostname: server.hostname,
          port: server.port,
          method,
          path,
          timeout: timeoutMs,
          headers: {
            ...(tls.headers ?? {}),
            accept: 'application/json',
            ...(payload ? { 'content-type': contentType, 'content-length': payload.length } : {}),
          },
        },
        (res) => {
          if (res.statusCode !== undefined) onStatus(res.statusCode);
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ code: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', (e) => reject(new ApiError({ message: e.message }, label)));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
      req.on('error', (e) => reject(new ApiError({ message: e.message }, label)));
      if (payload) req.write(payload);
      req.end();
    });
  }

  async function call<T>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
    const { code, text } = await send(method, path, body, contentType);
    if (code >= 200 && code < 300) return (text ? JSON.parse(text) : undefined) as T;
    let status: ApiStatus = { code };
    try {
      const parsed = JSON.parse(text) as { reason?: string; message?: string; code?: number };
      status = { code, reason: parsed.reason, message: parsed.message };
    } catch {
      status = { code, message: text.slice(0, 512) };
    }
    throw new ApiError(status, `${method} ${path.split('?')[0]}`);
  }

  const query = (params: Record<string, string | number | undefined>): string => {
    const entries = Object.entries(params).filter((e): e is [string, string | number] => e[1] !== undefined);
    return entries.length ? `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}` : '';
  };

  const client: KubeClient = {
    get: (ref) => call('GET', resourcePath(ref.apiVersion, ref.kind, ref.namespace, ref.name)),
    async tryGet<T extends KubeObject>(ref: ResourceRef) {
      try {
        return await client.get<T>(ref);
      } catch (e) {
        if (isNotFound(e)) return undefined;
        throw e;
      }
    },
    async list<T extends KubeObject>(apiVersion: string, kind: string, namespace: string | undefined, opts: ListOptions = {}) {
      const list = await call<{ items: T[] }>('GET', resourcePath(apiVersion, kind, namespace) + query({ labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector }));
      // List items carry no apiVersion/kind; restore them so callers can address the objects.
      return list.items.map((item) => ({ ...item, apiVersion, kind }));
    },
    create: (object, opts = {}) => {
      // A create may name the object or let the server generate the name.
      const { apiVersion, kind, metadata } = object;
      if (!apiVersion || !kind || !(metadata?.name || metadata?.generateName)) throw new Error('kube-client: a create needs apiVersion, kind and metadata.name or generateName');
      return call('POST', resourcePath(apiVersion, kind, metadata.namespace) + query({ fieldManager, dryRun: opts.dryRun ? 'All' : undefined }), object);
    },
    update: (object, opts = {}) => {
      const ref = refOf(object);
      const sub = opts.subresource ? `/${opts.subresource}` : '';
      return call('PUT', resourcePath(ref.apiVersion, ref.kind, ref.namespace, ref.name) + sub + query({ fieldManager, dryRun: opts.dryRun ? 'All' : undefined }), object);
    },
    patch: (ref, patch, type, opts = {}) => {
      const sub = opts.subresource ? `/${opts.subresource}` : '';
      return call('PATCH', resourcePath(ref.apiVersion, ref.kind, ref.namespace, ref.name) + sub + query({ fieldManager, dryRun: opts.dryRun ? 'All' : undefined }), patch, CONTENT_TYPES[type]);
    },
    async delete(ref, opts = {}) {
      const body = { apiVersion: 'v1', kind: 'DeleteOptions', ...opts };
      await call('DELETE', resourcePath(ref.apiVersion, ref.kind, ref.namespace, ref.name), body);
    },
    async readPodLog(namespace, pod, opts = {}) {
      const path = `${resourcePath('v1', 'Pod', namespace, pod)}/log${query({ container: opts.container, limitBytes: opts.limitBytes, tailLines: opts.tailLines })}`;
      const { code, text } = await send('GET', path);
      if (code >= 200 && code < 300) return text;
      let status: ApiStatus = { code, message: text.slice(0, 512) };
      try {
        const parsed = JSON.parse(text) as { reason?: string; message?: string };
        status = { code, reason: parsed.reason, message: parsed.message };
      } catch {
        // not a Status document; keep the text
      }
      throw new ApiError(status, `GET ${path.split('?')[0]}`);
    },
  };
  return client;
}
