// Registry credentials from a Docker config (`~/.docker/config.json`, or a `kubernetes.io/dockerconfigjson`
// Secret's `.dockerconfigjson`): `{"auths": {"<registry>": {"auth": base64(user:password)} | {username, password}}}`.
// An entry is matched by its host and port alone (a scheme and a path in the key are ignored), exactly, as the
// Docker CLI and oras match: no glob, no path prefix. Nothing here ever puts a credential into a message.
import type { RegistryCredentials } from './registry-client.js';
import { isObject } from './json.js';

export class DockerConfigError extends Error {
  override name = 'DockerConfigError';
}

/** The credentials the config holds for `registry` (`host[:port]`), or undefined when it holds none. */
export function credentialsFor(configJson: string, registry: string, source: string): RegistryCredentials | undefined {
  let config: unknown;
  try {
    config = JSON.parse(configJson);
  } catch (e) {
    throw new DockerConfigError(`${source} is not JSON (${(e as Error).message.replace(/ in JSON.*$/s, '')})`);
  }
  const auths = isObject(config) ? config.auths : undefined;
  if (auths === undefined) return undefined;
  if (!isObject(auths)) throw new DockerConfigError(`${source}: "auths" is not an object`);
  const wanted = registry.toLowerCase();
  for (const [key, entry] of Object.entries(auths)) {
    if (authority(key) !== wanted) continue;
    if (!isObject(entry)) throw new DockerConfigError(`${source}: the entry for ${key} is not an object`);
    if (typeof entry.auth === 'string' && entry.auth !== '') {
      const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon <= 0) throw new DockerConfigError(`${source}: the "auth" of ${key} is not base64 of <username>:<password>`);
      return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
    }
    if (typeof entry.username === 'string' && entry.username !== '' && typeof entry.password === 'string') {
      return { username: entry.username, password: entry.password };
    }
    throw new DockerConfigError(`${source}: the entry for ${key} has neither "auth" nor "username" and "password" (identity tokens and credential helpers are not read)`);
  }
  return undefined;
}

/** A key's `host[:port]`: `https://reg.example:5000/v2/` and `reg.example:5000` are the same entry. */
function authority(key: string): string {
  const withoutScheme = key.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  return withoutScheme.split('/', 1)[0]!.toLowerCase();
}

/**
 * Every credential a config holds, for redaction: each entry's `auth` as written and decoded, its password, and any
 * token. Read leniently (a malformed config yields what it can), since it only ever widens what is hidden.
 */
export function configSecrets(configJson: string): string[] {
  let config: unknown;
  try {
    config = JSON.parse(configJson);
  } catch {
    return [];
  }
  const auths = isObject(config) && isObject(config.auths) ? config.auths : {};
  const secrets: string[] = [];
  for (const entry of Object.values(auths)) {
    if (!isObject(entry)) continue;
    for (const field of ['auth', 'password', 'identitytoken', 'registrytoken']) {
      const value = entry[field];
      if (typeof value === 'string' && value !== '') secrets.push(value);
    }
    if (typeof entry.auth === 'string') {
      const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
      secrets.push(decoded, decoded.slice(decoded.indexOf(':') + 1));
    }
  }
  return secrets.filter((s) => s !== '');
}
