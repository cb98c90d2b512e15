// `kubectl ptah push <directory> <reference>`: packs a directory (a schema.sql, or a migration directory's files) as
// an artifact of the operator's layout and pushes it: the blobs the registry lacks, then the manifest under the tag
// (or its digest). The same files and annotations always make the same digest. Credentials come from a Docker
// config, as every registry client reads them; none is ever printed.
import { readdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ARTIFACT_TYPES, EMPTY_CONFIG, EMPTY_CONFIG_BYTES, MANIFEST_MEDIA_TYPE, packArtifact, type ArtifactKind } from '../shared/oci/artifact-layout.js';
import { credentialsFor } from '../shared/oci/docker-config.js';
import { formatReference, parseReference } from '../shared/oci/reference.js';
import { RegistryClient, type RegistryCredentials } from '../shared/oci/registry-client.js';
import { eachAtMost } from '../shared/oci/requests.js';
import { CliError } from './errors.js';

export interface PushRequest {
  directory: string;
  reference: string;
  kind?: 'schema' | 'migration';
  annotations: readonly string[];
  registryConfig?: string;
  caFile?: string;
}

/** Blobs uploaded at once: enough to hide a round trip, few enough for any registry. */
const UPLOADS_IN_FLIGHT = 4;

export async function push(request: PushRequest, out: (line: string) => void): Promise<void> {
  const reference = usage(() => parseReference(request.reference));
  const annotations = parseAnnotations(request.annotations);
  const files = await readDirectory(request.directory);
  const kind: ArtifactKind = request.kind === 'schema' ? 'schema' : request.kind === 'migration' ? 'migrations'
    : files.size === 1 && files.has('schema.sql') ? 'schema' : 'migrations';
  const artifact = packArtifact(kind, files, annotations);
  if (reference.digest !== undefined && reference.digest !== artifact.digest) {
    throw new CliError(`${request.directory} packs to ${artifact.digest}, not the digest the reference names (${reference.digest})`);
  }
  const client = new RegistryClient(reference.registry, {
    ...(await registryCredentials(reference.registry, request.registryConfig)),
    ...(request.caFile ? { ca: await readFile(request.caFile, 'utf8') } : {}),
  });
  const blobs = [...artifact.blobs, [EMPTY_CONFIG.digest, EMPTY_CONFIG_BYTES] as const];
  let uploaded = 0;
  await eachAtMost(blobs, UPLOADS_IN_FLIGHT, async ([digest, bytes]) => {
    if (await client.hasBlob(reference.repository, digest)) return;
    await client.pushBlob(reference.repository, digest, bytes);
    uploaded++;
  });
  await client.putManifest(reference.repository, reference.tag ?? artifact.digest, artifact.manifest, MANIFEST_MEDIA_TYPE);
  const bytes = [...artifact.blobs.values()].reduce((sum, b) => sum + b.byteLength, 0);
  out(`pushed ${formatReference({ ...reference, digest: artifact.digest })}`);
  out(`  ${ARTIFACT_TYPES[kind]}: ${files.size} file(s), ${bytes} bytes; uploaded ${uploaded} of its ${blobs.length} blob(s), the registry held the rest`);
}

/** A malformed argument is a usage error (exit 2), with the parser's reason. */
function usage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    throw new CliError((e as Error).message, 2);
  }
}

/** The directory's files by name. Anything else in it (a subdirectory, a link) is refused, never left out. */
async function readDirectory(directory: string): Promise<Map<string, Uint8Array>> {
  let entries;
  try {
    entries = await readdir(directory, { withFileTypes: true });
  } catch (e) {
    throw new CliError(`cannot read the directory ${directory}: ${(e as Error).message}`);
  }
  const others = entries.filter((entry) => !entry.isFile()).map((entry) => entry.name);
  if (others.length > 0) {
    throw new CliError(`${directory} holds entries that are not regular files (${others.slice(0, 5).join(', ')}${others.length > 5 ? ', …' : ''}): an artifact is a flat directory of files`);
  }
  const files = new Map<string, Uint8Array>();
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) files.set(entry.name, await readFile(join(directory, entry.name)));
  return files;
}

function parseAnnotations(pairs: readonly string[]): Record<string, string> {
  const annotations: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliError(`--annotation ${JSON.stringify(pair)} is not <key>=<value>`, 2);
    const key = pair.slice(0, eq);
    if (Object.hasOwn(annotations, key)) throw new CliError(`--annotation ${key} is given twice`, 2);
    annotations[key] = pair.slice(eq + 1);
  }
  return annotations;
}

/** The Docker config's credentials for the registry: --registry-config, else $DOCKER_CONFIG/config.json, else ~/.docker/config.json. */
async function registryCredentials(registry: string, explicit: string | undefined): Promise<{ credentials?: RegistryCredentials }> {
  const file = explicit ?? join(process.env.DOCKER_CONFIG ?? join(homedir(), '.docker'), 'config.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if (explicit === undefined && (e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read the registry config ${file}: ${(e as Error).message}`);
  }
  const credentials = credentialsFor(text, registry, file);
  return credentials ? { credentials } : {};
}
