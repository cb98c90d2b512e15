// Reading an artifact back: the manifest, judged from its own bytes (never from a listing, which may drop or
// substitute its artifactType), then each file's blob, bounded by its descriptor and checked against its digest.
// Everything a manifest can be wrong in is reported at once, with the check that failed, before any blob is read.
import { artifactDigest } from '../artifact.js';
import {
  ARTIFACT_LIMITS, ARTIFACT_TYPES, EMPTY_CONFIG, FILE_MEDIA_TYPE, fileNameProblem, filesProblem, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, TITLE_ANNOTATION,
  type ArtifactKind, type Descriptor,
} from './artifact-layout.js';
import { SHA256_DIGEST } from './reference.js';
import type { RegistryClient } from './registry-client.js';
import { isObject } from './json.js';
import { eachAtMost, ReasonedError } from './requests.js';

/** A manifest's facts, as the verification policy judges them. */
export interface ArtifactManifestFacts {
  artifactType: string;
  annotations: Record<string, string>;
  /** The file layers, in the manifest's order. */
  files: { name: string; digest: string; size: number }[];
}

export interface PulledArtifact extends ArtifactManifestFacts {
  /** The manifest's digest: what was pinned. */
  digest: string;
  /** artifactDigest of the files (src/shared/artifact.ts): what the runner recomputes from the directory it is given. */
  contentDigest: string;
  contents: Map<string, Buffer>;
}

/** A manifest that is not an artifact of the expected kind; `reason` is a condition reason. */
export class ArtifactManifestError extends ReasonedError<'ArtifactTypeMismatch' | 'ArtifactInvalid'> {
  override name = 'ArtifactManifestError';
}

/** The manifest's facts, or an ArtifactManifestError naming every problem (the type first, as its own reason). */
export function readArtifactManifest(bytes: Uint8Array, kind: ArtifactKind): ArtifactManifestFacts {
  let document: unknown;
  try {
    document = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw new ArtifactManifestError('ArtifactInvalid', 'the manifest is not JSON');
  }
  if (!isObject(document)) throw new ArtifactManifestError('ArtifactInvalid', 'the manifest is not a JSON object');
  if (document.mediaType === INDEX_MEDIA_TYPE || Array.isArray(document.manifests)) {
    throw new ArtifactManifestError('ArtifactInvalid', 'the reference names an image index, not an artifact manifest; name the artifact\'s own digest');
  }
  const problems: string[] = [];
  if (document.schemaVersion !== 2) problems.push(`schemaVersion is ${JSON.stringify(document.schemaVersion)}, not 2`);
  if (document.mediaType !== MANIFEST_MEDIA_TYPE) problems.push(`mediaType is ${JSON.stringify(document.mediaType)}, not ${MANIFEST_MEDIA_TYPE}`);
  const config = isObject(document.config) ? document.config : undefined;
  const artifactType = typeof document.artifactType === 'string' ? document.artifactType : typeof config?.mediaType === 'string' ? config.mediaType : '';
  if (artifactType !== ARTIFACT_TYPES[kind]) {
    throw new ArtifactManifestError('ArtifactTypeMismatch', `the artifact's type is ${JSON.stringify(artifactType)}, not ${ARTIFACT_TYPES[kind]} (a ${kind === 'schema' ? 'desired schema' : 'migration directory'})`);
  }
  if (!config || config.mediaType !== EMPTY_CONFIG.mediaType || config.digest !== EMPTY_CONFIG.digest || config.size !== EMPTY_CONFIG.size) {
    problems.push('its config is not the empty descriptor');
  }
  const annotations: Record<string, string> = {};
  if (document.annotations !== undefined) {
    if (!isObject(document.annotations) || Object.values(document.annotations).some((v) => typeof v !== 'string')) problems.push('its annotations are not a map of strings');
    else Object.assign(annotations, document.annotations);
  }
  const layers = Array.isArray(document.layers) ? document.layers : undefined;
  if (!layers) problems.push('it has no layers list');
  if (layers && layers.length > ARTIFACT_LIMITS.files) problems.push(`it lists ${layers.length} layers, more than ${ARTIFACT_LIMITS.files}`);
  const files: ArtifactManifestFacts['files'] = [];
  const seen = new Set<string>();
  let total = 0;
  for (const [i, layer] of (layers && layers.length <= ARTIFACT_LIMITS.files ? layers : []).entries()) {
    const problem = layerProblem(layer);
    if (problem) {
      problems.push(`layer ${i}: ${problem}`);
      continue;
    }
    const { digest, size, annotations: layerAnnotations } = layer as Descriptor & { annotations: Record<string, string> };
    const name = layerAnnotations[TITLE_ANNOTATION]!;
    if (seen.has(name)) problems.push(`layer ${i}: the file ${name} appears twice`);
    seen.add(name);
    total += size;
    files.push({ name, digest, size });
  }
  if (total > ARTIFACT_LIMITS.totalBytes) problems.push(`its files hold ${total} bytes, more than ${ARTIFACT_LIMITS.totalBytes}`);
  if (problems.length > 0) throw new ArtifactManifestError('ArtifactInvalid', `the manifest is not a ${kind} artifact: ${problems.slice(0, 10).join('; ')}${problems.length > 10 ? `; and ${problems.length - 10} more` : ''}`);
  return { artifactType, annotations, files };
}

function layerProblem(layer: unknown): string | undefined {
  if (!isObject(layer)) return 'not a descriptor';
  if (layer.mediaType !== FILE_MEDIA_TYPE) return `its mediaType is ${JSON.stringify(layer.mediaType)}, not ${FILE_MEDIA_TYPE}`;
  if (typeof layer.digest !== 'string' || !SHA256_DIGEST.test(layer.digest)) return 'its digest is not sha256:<64 lowercase hex>';
  if (typeof layer.size !== 'number' || !Number.isSafeInteger(layer.size) || layer.size < 0) return 'its size is not a whole number of bytes';
  if (layer.size > ARTIFACT_LIMITS.fileBytes) return `it is ${layer.size} bytes, more than ${ARTIFACT_LIMITS.fileBytes}`;
  const title = isObject(layer.annotations) ? layer.annotations[TITLE_ANNOTATION] : undefined;
  if (typeof title !== 'string') return `it has no ${TITLE_ANNOTATION}`;
  return fileNameProblem(title);
}

/** The artifact the digest names, every file read and checked; the files are then held to the kind's own rules. */
export async function pullArtifact(client: RegistryClient, repository: string, digest: string, kind: ArtifactKind): Promise<PulledArtifact> {
  const manifest = await client.manifest(repository, digest, ARTIFACT_LIMITS.manifestBytes);
  const facts = readArtifactManifest(manifest, kind);
  const contents = new Map<string, Buffer>();
  await eachAtMost(facts.files, 4, async (file) => { contents.set(file.name, await client.blob(repository, file)); });
  const ordered = new Map(facts.files.map((f) => [f.name, contents.get(f.name)!]));
  const problem = filesProblem(kind, ordered);
  if (problem) throw new ArtifactManifestError('ArtifactInvalid', `the artifact's files are not a ${kind} artifact: ${problem}`);
  return { ...facts, digest, contentDigest: artifactDigest(ordered), contents: ordered };
}
