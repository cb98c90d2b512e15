// An artifact's reference, `<registry>/<repository>[:<tag>][@sha256:<hex>]`, parsed by the distribution spec's
// grammar. The registry is always explicit (no Docker Hub default: a schema's source is never guessed), and sha256
// is the only digest algorithm: one that cannot be verified here is refused, never passed on.

/** The only digest form accepted anywhere an artifact is pinned. */
export const SHA256_DIGEST = /^sha256:[a-f0-9]{64}$/;
const REPOSITORY = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$/;
const TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
// A host name or IPv4 address, or a bracketed IPv6 address, with an optional port.
const REGISTRY = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]{1,5})?$/;
/** Longer references are refused unread (the spec bounds a repository name at 255 characters in practice). */
export const MAX_REFERENCE_LENGTH = 512;

export interface ArtifactReference {
  /** `host[:port]`, as written. */
  registry: string;
  repository: string;
  tag?: string;
  digest?: string;
}

export class ReferenceError extends Error {
  override name = 'ReferenceError';
}

/** Parses a reference; throws a ReferenceError that names what is wrong. */
export function parseReference(text: string): ArtifactReference {
  const fail = (why: string): never => {
    throw new ReferenceError(`${JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)} is not an artifact reference: ${why}`);
  };
  if (text.length > MAX_REFERENCE_LENGTH) fail(`longer than ${MAX_REFERENCE_LENGTH} characters`);
  let rest = text;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!SHA256_DIGEST.test(digest)) fail(`the digest ${JSON.stringify(digest)} is not sha256:<64 lowercase hex> (the only algorithm verified)`);
  }
  const slash = rest.indexOf('/');
  if (slash <= 0) fail('it names no registry (write it as <registry>/<repository>[:<tag>][@sha256:<hex>])');
  const registry = rest.slice(0, slash);
  let path = rest.slice(slash + 1);
  if (!REGISTRY.test(registry) || !(registry.includes('.') || registry.includes(':') || registry === 'localhost')) {
    fail(`${JSON.stringify(registry)} is not a registry host (a name with a dot or a port, or localhost)`);
  }
  let tag: string | undefined;
  const colon = path.lastIndexOf(':');
  if (colon >= 0) {
    tag = path.slice(colon + 1);
    path = path.slice(0, colon);
    if (!TAG.test(tag)) fail(`the tag ${JSON.stringify(tag)} is not [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`);
  }
  if (!REPOSITORY.test(path)) fail(`the repository ${JSON.stringify(path)} is not lowercase path components ([a-z0-9] joined by . _ __ or -)`);
  if (tag === undefined && digest === undefined) fail('it names neither a tag nor a digest');
  return { registry, repository: path, ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) };
}

/** The reference as text, `registry/repository[:tag][@digest]`. */
export function formatReference(ref: ArtifactReference): string {
  return `${ref.registry}/${ref.repository}${ref.tag !== undefined ? `:${ref.tag}` : ''}${ref.digest !== undefined ? `@${ref.digest}` : ''}`;
}
