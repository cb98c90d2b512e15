// The digest of an artifact ConfigMap's content: `sha256:` over canonical JSON of {key: "sha256:<hex of value>"}.
// The controller computes it from the ConfigMap it pins; the runner recomputes it from the mounted files.
import { digest, sha256Digest } from './canonical.js';

export function artifactDigest(files: ReadonlyMap<string, string | Uint8Array> | Record<string, string | Uint8Array>): string {
  const entries = files instanceof Map ? [...files.entries()] : Object.entries(files);
  const hashes: Record<string, string> = {};
  for (const [key, value] of entries) hashes[key] = sha256Digest(value);
  return digest(hashes);
}
