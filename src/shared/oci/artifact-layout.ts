// How a desired schema or a migration directory is laid out as an OCI artifact (image manifest v1.1): the artifact
// type says which, the config is the empty descriptor, and each file is one layer titled with its name. The files
// are exactly what an artifact ConfigMap would hold (flat names, the same key rule), so both sources feed the runner
// the same directory, and the same files always make the same manifest bytes: nothing in it is a time or an order
// the files do not dictate (a `created` annotation appears only when the person gives one).
import { sha256Digest } from '../canonical.js';

export const ARTIFACT_TYPES = {
  schema: 'application/vnd.ptah-operator.schema.v1',
  migrations: 'application/vnd.ptah-operator.migrations.v1',
} as const;
export type ArtifactKind = keyof typeof ARTIFACT_TYPES;
/** Every file is a layer of this type; its name is the layer's title annotation. */
export const FILE_MEDIA_TYPE = 'application/vnd.ptah-operator.file.v1';
export const MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json';
export const INDEX_MEDIA_TYPE = 'application/vnd.oci.image.index.v1+json';
export const TITLE_ANNOTATION = 'org.opencontainers.image.title';
export const EMPTY_CONFIG = {
  mediaType: 'application/vnd.oci.empty.v1+json',
  digest: 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a',
  size: 2,
  data: 'e30=',
} as const;
export const EMPTY_CONFIG_BYTES = new TextEncoder().encode('{}');

/** A ConfigMap key's rule, so an artifact's files could always have been a ConfigMap's. */
const FILE_NAME = /^[-._a-zA-Z0-9]{1,253}$/;
/** Bounds on what is packed or read: a manifest of 10,000 layers stays under the 4 MiB registries accept. */
export const ARTIFACT_LIMITS = { files: 10_000, fileBytes: 64 << 20, totalBytes: 512 << 20, manifestBytes: 4 << 20 } as const;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  data?: string;
  artifactType?: string;
}

export interface ImageManifest {
  schemaVersion: 2;
  mediaType: typeof MANIFEST_MEDIA_TYPE;
  artifactType: string;
  config: Descriptor;
  layers: Descriptor[];
  subject?: Descriptor;
  annotations?: Record<string, string>;
}

export interface PackedArtifact {
  manifest: Uint8Array;
  /** `sha256:` of the manifest bytes: what a tag resolves to and every plan binds. */
  digest: string;
  /** Each layer's bytes by digest (files with equal content share one blob). */
  blobs: Map<string, Uint8Array>;
}

export class ArtifactLayoutError extends Error {
  override name = 'ArtifactLayoutError';
}

/** Why a file name cannot be an artifact's file, or undefined. */
export function fileNameProblem(name: string): string | undefined {
  if (!FILE_NAME.test(name) || name === '.' || name === '..') {
    return `${JSON.stringify(name)} is not a file name an artifact holds (1 to 253 of [-._a-zA-Z0-9], as a ConfigMap key)`;
  }
  return undefined;
}

/** Why `files` cannot be an artifact of `kind`, naming every problem, or undefined. */
export function filesProblem(kind: ArtifactKind, files: ReadonlyMap<string, Uint8Array>): string | undefined {
  const problems: string[] = [];
  if (files.size === 0) problems.push('it holds no file');
  if (files.size > ARTIFACT_LIMITS.files) problems.push(`it holds ${files.size} files, more than ${ARTIFACT_LIMITS.files}`);
  if (kind === 'schema' && (files.size !== 1 || !files.has('schema.sql'))) {
    problems.push(`a schema artifact holds exactly one file, schema.sql (found: ${[...files.keys()].slice(0, 5).join(', ') || 'none'})`);
  }
  let total = 0;
  for (const [name, bytes] of files) {
    const nameProblem = fileNameProblem(name);
    if (nameProblem) problems.push(nameProblem);
    if (bytes.byteLength > ARTIFACT_LIMITS.fileBytes) problems.push(`${name} is ${bytes.byteLength} bytes, more than ${ARTIFACT_LIMITS.fileBytes}`);
    total += bytes.byteLength;
  }
  if (total > ARTIFACT_LIMITS.totalBytes) problems.push(`its files hold ${total} bytes, more than ${ARTIFACT_LIMITS.totalBytes}`);
  return problems.length > 0 ? problems.join('; ') : undefined;
}

/**
 * The artifact of `kind` holding `files`, with the manifest annotations given. Layers are in file-name order
 * (code-unit order, as a ConfigMap's keys), so the manifest depends on the files and annotations alone.
 */
export function packArtifact(kind: ArtifactKind, files: ReadonlyMap<string, Uint8Array>, annotations: Readonly<Record<string, string>> = {}): PackedArtifact {
  const problem = filesProblem(kind, files);
  if (problem) throw new ArtifactLayoutError(`these files cannot be a ${kind} artifact: ${problem}`);
  const blobs = new Map<string, Uint8Array>();
  const layers: Descriptor[] = [...files.keys()].sort(byCodeUnits).map((name) => {
    const bytes = files.get(name)!;
    const digest = sha256Digest(bytes);
    blobs.set(digest, bytes);
    return { mediaType: FILE_MEDIA_TYPE, digest, size: bytes.byteLength, annotations: { [TITLE_ANNOTATION]: name } };
  });
  const sortedAnnotations = Object.fromEntries(Object.entries(annotations).sort(([a], [b]) => byCodeUnits(a, b)));
  const manifest: ImageManifest = {
    schemaVersion: 2,
    mediaType: MANIFEST_MEDIA_TYPE,
    artifactType: ARTIFACT_TYPES[kind],
    config: { ...EMPTY_CONFIG },
    layers,
    ...(Object.keys(sortedAnnotations).length > 0 ? { annotations: sortedAnnotations } : {}),
  };
  const bytes = new TextEncoder().encode(JSON.stringify(manifest));
  if (bytes.byteLength > ARTIFACT_LIMITS.manifestBytes) throw new ArtifactLayoutError(`its manifest would be ${bytes.byteLength} bytes, more than ${ARTIFACT_LIMITS.manifestBytes}`);
  return { manifest: bytes, digest: sha256Digest(bytes), blobs };
}

function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
