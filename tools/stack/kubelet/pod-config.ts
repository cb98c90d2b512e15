// What a container needs before it can start, read through the API with the kubelet's own (admin) credentials —
// never the manager's: its environment (values, Secret/ConfigMap keys, envFrom, downward API, $(VAR) references)
// and its volumes, written to disk the way the kubelet writes them.
import { chown, chmod, lstat, mkdir, readdir, rename, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type {
  CoreV1Api, V1ConfigMap, V1Container, V1KeyToPath, V1ObjectFieldSelector, V1Pod, V1Secret, V1Volume,
} from '@kubernetes/client-node';

/** Why a container cannot start yet; the kubelet reports it as the container's waiting reason and retries. */
export class PodConfigError extends Error {
  override name = 'PodConfigError';
  constructor(
    readonly reason: 'CreateContainerConfigError' | 'ContainerCreating',
    message: string,
  ) {
    super(message);
  }
}

/** Reads the Pod's Secrets and ConfigMaps once per preparation; a missing object is undefined. */
export class PodObjects {
  readonly #secrets = new Map<string, Promise<V1Secret | undefined>>();
  readonly #configMaps = new Map<string, Promise<V1ConfigMap | undefined>>();

  constructor(
    private readonly core: CoreV1Api,
    private readonly namespace: string,
  ) {}

  secret(name: string): Promise<V1Secret | undefined> {
    return memo(this.#secrets, name, () => notFoundAsUndefined(this.core.readNamespacedSecret({ name, namespace: this.namespace })));
  }

  configMap(name: string): Promise<V1ConfigMap | undefined> {
    return memo(this.#configMaps, name, () => notFoundAsUndefined(this.core.readNamespacedConfigMap({ name, namespace: this.namespace })));
  }

  /** The key's bytes; undefined when the object or key is missing and the reference is optional. */
  async secretKey(ref: { name?: string; key: string; optional?: boolean }): Promise<Buffer | undefined> {
    const secret = await this.secret(ref.name ?? '');
    if (!secret) return missing(ref.optional, `secret "${ref.name}" not found`);
    const value = secret.data?.[ref.key];
    if (value === undefined) return missing(ref.optional, `couldn't find key ${ref.key} in Secret ${this.namespace}/${ref.name}`);
    return Buffer.from(value, 'base64');
  }

  async configMapKey(ref: { name?: string; key: string; optional?: boolean }): Promise<Buffer | undefined> {
    const cm = await this.configMap(ref.name ?? '');
    if (!cm) return missing(ref.optional, `configmap "${ref.name}" not found`);
    const text = cm.data?.[ref.key];
    const binary = cm.binaryData?.[ref.key];
    if (text === undefined && binary === undefined) return missing(ref.optional, `couldn't find key ${ref.key} in ConfigMap ${this.namespace}/${ref.name}`);
    return text !== undefined ? Buffer.from(text, 'utf8') : Buffer.from(binary ?? '', 'base64');
  }
}

/** The container's environment as the kubelet builds it: envFrom in order, then env, each able to use earlier values. */
export async function containerEnv(pod: V1Pod, container: V1Container, objects: PodObjects): Promise<Map<string, string>> {
  const env = new Map<string, string>();
  for (const source of container.envFrom ?? []) {
    const prefix = source.prefix ?? '';
    if (source.configMapRef) {
      const cm = await objects.configMap(source.configMapRef.name ?? '');
      if (!cm) { missing(source.configMapRef.optional, `configmap "${source.configMapRef.name}" not found`); continue; }
      for (const [k, v] of Object.entries(cm.data ?? {})) env.set(prefix + k, v);
    } else if (source.secretRef) {
      const secret = await objects.secret(source.secretRef.name ?? '');
      if (!secret) { missing(source.secretRef.optional, `secret "${source.secretRef.name}" not found`); continue; }
      for (const [k, v] of Object.entries(secret.data ?? {})) env.set(prefix + k, Buffer.from(v, 'base64').toString('utf8'));
    }
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    let value: string | undefined;
    if (!from) value = expandReferences(variable.value ?? '', env);
    else if (from.secretKeyRef) value = (await objects.secretKey(from.secretKeyRef))?.toString('utf8');
    else if (from.configMapKeyRef) value = (await objects.configMapKey(from.configMapKeyRef))?.toString('utf8');
    else if (from.fieldRef) value = fieldValue(pod, from.fieldRef);
    else throw new PodConfigError('CreateContainerConfigError', `env ${variable.name}: the fake kubelet supports value, secretKeyRef, configMapKeyRef and fieldRef, not ${Object.keys(from).join(', ')}`);
    if (value !== undefined) env.set(variable.name, value);
  }
  return env;
}

/**
 * Kubernetes' $(VAR) expansion: a reference to a defined variable is replaced, `$$` is a literal `$`, anything else
 * (an undefined name, an unclosed reference) stays as written.
 */
export function expandReferences(input: string, env: ReadonlyMap<string, string>): string {
  let out = '';
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    const next = input[i + 1];
    if (c !== '$' || next === undefined) { out += c; continue; }
    if (next === '$') { out += '$'; i++; continue; }
    if (next === '(') {
      const close = input.indexOf(')', i + 2);
      const name = close === -1 ? '' : input.slice(i + 2, close);
      if (close !== -1 && name !== '') {
        out += env.get(name) ?? input.slice(i, close + 1);
        i = close;
        continue;
      }
    }
    out += c;
  }
  return out;
}

function fieldValue(pod: V1Pod, ref: V1ObjectFieldSelector): string {
  const m = pod.metadata ?? {};
  const keyed = /^metadata\.(labels|annotations)\['([^']+)'\]$/.exec(ref.fieldPath);
  if (keyed) return (keyed[1] === 'labels' ? m.labels : m.annotations)?.[keyed[2] as string] ?? '';
  const fields: Record<string, string | undefined> = {
    'metadata.name': m.name,
    'metadata.namespace': m.namespace,
    'metadata.uid': m.uid,
    'metadata.labels': formatMap(m.labels),
    'metadata.annotations': formatMap(m.annotations),
    'spec.nodeName': pod.spec?.nodeName,
    'spec.serviceAccountName': pod.spec?.serviceAccountName,
    'status.hostIP': '127.0.0.1',
    'status.podIP': '127.0.0.1',
  };
  if (!(ref.fieldPath in fields)) throw new PodConfigError('CreateContainerConfigError', `fieldRef ${ref.fieldPath} is not supported by the fake kubelet`);
  return fields[ref.fieldPath] ?? '';
}

function formatMap(map: Record<string, string> | undefined): string {
  return Object.keys(map ?? {}).sort().map((k) => `${k}=${JSON.stringify(map?.[k])}`).join('\n');
}

/** Files of one atomic-writer volume: relative path → content and mode. */
type VolumeFiles = Map<string, { data: Buffer; mode: number }>;

const DEFAULT_FILE_MODE = 0o644;

/**
 * Writes every volume of the Pod under `dir/<volume name>` and returns each volume's host directory.
 * ConfigMap, Secret, projected and downward API volumes use the kubelet's atomic-writer layout (files are symlinks
 * through `..data` into a timestamped directory), so code that reads them meets the same layout as in a cluster.
 */
export async function writeVolumes(pod: V1Pod, objects: PodObjects, core: CoreV1Api, dir: string): Promise<Map<string, string>> {
  const paths = new Map<string, string>();
  const fsGroup = pod.spec?.securityContext?.fsGroup;
  for (const volume of pod.spec?.volumes ?? []) {
    const target = join(dir, volume.name);
    if (volume.emptyDir) {
      await mkdir(target, { recursive: true });
      await chmod(target, 0o777);
    } else if (volume.hostPath) {
      paths.set(volume.name, volume.hostPath.path);
      continue;
    } else {
      const files = await volumeFiles(pod, volume, objects, core);
      await writeAtomic(target, files);
    }
    if (fsGroup !== undefined) await applyFsGroup(target, fsGroup, volume.emptyDir !== undefined);
    paths.set(volume.name, target);
  }
  return paths;
}

async function volumeFiles(pod: V1Pod, volume: V1Volume, objects: PodObjects, core: CoreV1Api): Promise<VolumeFiles> {
  const files: VolumeFiles = new Map();
  if (volume.configMap) {
    const src = volume.configMap;
    await addKeys(files, await configMapEntries(objects, src.name, src.optional), src.items, src.defaultMode, src.optional, `ConfigMap ${src.name}`);
  } else if (volume.secret) {
    const src = volume.secret;
    await addKeys(files, await secretEntries(objects, src.secretName, src.optional), src.items, src.defaultMode, src.optional, `Secret ${src.secretName}`);
  } else if (volume.downwardAPI) {
    addDownward(files, pod, volume.downwardAPI.items ?? [], volume.downwardAPI.defaultMode);
  } else if (volume.projected) {
    const mode = volume.projected.defaultMode;
    for (const source of volume.projected.sources ?? []) {
      if (source.configMap) {
        const src = source.configMap;
        await addKeys(files, await configMapEntries(objects, src.name, src.optional), src.items, mode, src.optional, `ConfigMap ${src.name}`);
      } else if (source.secret) {
        const src = source.secret;
        await addKeys(files, await secretEntries(objects, src.name, src.optional), src.items, mode, src.optional, `Secret ${src.name}`);
      } else if (source.downwardAPI) {
        addDownward(files, pod, source.downwardAPI.items ?? [], mode);
      } else if (source.serviceAccountToken) {
        const token = await serviceAccountToken(core, pod, source.serviceAccountToken.audience, source.serviceAccountToken.expirationSeconds);
        files.set(source.serviceAccountToken.path, { data: Buffer.from(token), mode: mode ?? DEFAULT_FILE_MODE });
      } else {
        throw new PodConfigError('ContainerCreating', `volume ${volume.name}: the fake kubelet supports projected configMap, secret, downwardAPI and serviceAccountToken sources, not ${Object.keys(source).join(', ')}`);
      }
    }
  } else {
    const kind = Object.keys(volume).filter((k) => k !== 'name').join(', ');
    throw new PodConfigError('ContainerCreating', `volume ${volume.name}: the fake kubelet supports configMap, secret, projected, downwardAPI, emptyDir and hostPath volumes, not ${kind}`);
  }
  return files;
}

async function configMapEntries(objects: PodObjects, name: string | undefined, optional: boolean | undefined): Promise<Map<string, Buffer>> {
  const cm = await objects.configMap(name ?? '');
  if (!cm) { missingVolumeSource(optional, `configmap "${name}" not found`); return new Map(); }
  return new Map([
    ...Object.entries(cm.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'utf8')] as const),
    ...Object.entries(cm.binaryData ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')] as const),
  ]);
}

async function secretEntries(objects: PodObjects, name: string | undefined, optional: boolean | undefined): Promise<Map<string, Buffer>> {
  const secret = await objects.secret(name ?? '');
  if (!secret) { missingVolumeSource(optional, `secret "${name}" not found`); return new Map(); }
  return new Map(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')] as const));
}

async function addKeys(files: VolumeFiles, entries: Map<string, Buffer>, items: V1KeyToPath[] | undefined, defaultMode: number | undefined,
  optional: boolean | undefined, what: string): Promise<void> {
  const mode = defaultMode ?? DEFAULT_FILE_MODE;
  if (!items) {
    for (const [key, data] of entries) files.set(key, { data, mode });
    return;
  }
  for (const item of items) {
    const data = entries.get(item.key);
    if (data === undefined) { missingVolumeSource(optional, `${what} has no key ${item.key}`); continue; }
    files.set(item.path, { data, mode: item.mode ?? mode });
  }
}

function addDownward(files: VolumeFiles, pod: V1Pod, items: { path: string; fieldRef?: V1ObjectFieldSelector; mode?: number }[], defaultMode: number | undefined): void {
  for (const item of items) {
    if (!item.fieldRef) throw new PodConfigError('ContainerCreating', `downwardAPI item ${item.path}: the fake kubelet supports fieldRef items only`);
    files.set(item.path, { data: Buffer.from(fieldValue(pod, item.fieldRef)), mode: item.mode ?? defaultMode ?? DEFAULT_FILE_MODE });
  }
}

async function serviceAccountToken(core: CoreV1Api, pod: V1Pod, audience: string | undefined, expirationSeconds: number | undefined): Promise<string> {
  const name = pod.spec?.serviceAccountName ?? 'default';
  const answer = await core.createNamespacedServiceAccountToken({
    name,
    namespace: pod.metadata?.namespace ?? '',
    body: {
      spec: {
        audiences: audience ? [audience] : [],
        expirationSeconds: expirationSeconds ?? 3607,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, uid: pod.metadata?.uid },
      },
    },
  }).catch((e: Error) => { throw new PodConfigError('ContainerCreating', `token for ServiceAccount ${name}: ${e.message}`); });
  return answer.status?.token ?? '';
}

async function writeAtomic(target: string, files: VolumeFiles): Promise<void> {
  const stamp = `..${new Date().toISOString().replace(/[-:]/g, '_').replace('T', '_').replace('Z', '')}`;
  const dataDir = join(target, stamp);
  await mkdir(dataDir, { recursive: true });
  await chmod(target, 0o755);
  const tops = new Set<string>();
  for (const [path, file] of files) {
    if (path.startsWith('/') || path.split('/').includes('..')) throw new PodConfigError('ContainerCreating', `volume path ${path} must be relative and must not contain '..'`);
    const full = join(dataDir, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, file.data);
    await chmod(full, file.mode);
    tops.add(path.split('/')[0] as string);
  }
  await symlink(stamp, join(target, '..data_tmp'));
  await rename(join(target, '..data_tmp'), join(target, '..data'));
  for (const top of tops) await symlink(join('..data', top), join(target, top));
}

/** Group ownership and group access bits for fsGroup, as the kubelet sets them (setgid on directories). */
async function applyFsGroup(path: string, gid: number, writable: boolean): Promise<void> {
  const stat = await lstat(path);
  if (stat.isSymbolicLink()) return;
  await chown(path, stat.uid, gid);
  if (stat.isDirectory()) {
    await chmod(path, (stat.mode & 0o7777) | (writable ? 0o070 : 0o050) | 0o2000);
    for (const entry of await readdir(path)) await applyFsGroup(join(path, entry), gid, writable);
  } else {
    await chmod(path, (stat.mode & 0o7777) | (writable ? 0o060 : 0o040));
  }
}

function missing(optional: boolean | undefined, message: string): undefined {
  if (optional) return undefined;
  throw new PodConfigError('CreateContainerConfigError', message);
}

function missingVolumeSource(optional: boolean | undefined, message: string): void {
  if (!optional) throw new PodConfigError('ContainerCreating', `MountVolume.SetUp failed: ${message}`);
}

function memo<T>(cache: Map<string, Promise<T>>, key: string, load: () => Promise<T>): Promise<T> {
  let hit = cache.get(key);
  if (!hit) {
    hit = load();
    cache.set(key, hit);
  }
  return hit;
}

async function notFoundAsUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (e) {
    if ((e as { code?: number }).code === 404) return undefined;
    throw e;
  }
}
