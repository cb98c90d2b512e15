// Reading untrusted JSON from a registry (manifests, indexes, signature payloads) or a Docker config: a parse that
// answers undefined instead of throwing, and the object test every reader of it narrows with.

export function parseJsonBytes(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return undefined;
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function asObject(value: unknown): Record<string, unknown> | undefined {
  return isObject(value) ? value : undefined;
}
