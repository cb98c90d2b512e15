// The database realm: the digest that names one physical database within a namespace, and the Lease name and
// holder identity derived from it. Two resources with one coordination key serialize on one Lease however
// their URLs are spelled, and only the digest ever leaves the spec.
import { createHash } from 'node:crypto';
import { digest, isDigest } from './canonical.js';
import { COORDINATION_KEY_PATTERN, ENGINE_PATTERN } from './api/shapes.js';

const REALM_VERSION = 'ptah-realm/v1';
const ENGINE = new RegExp(ENGINE_PATTERN);
const COORDINATION_KEY = new RegExp(COORDINATION_KEY_PATTERN);
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const MAX_NAME = 63;

export class RealmError extends Error {
  override name = 'RealmError';
}

export interface RealmInput {
  engine: string;
  namespace: string;
  coordinationKey: string;
}

/** `sha256:` digest of the versioned tuple (engine in lower case, namespace, coordination key). */
export function coordinationDigest({ engine, namespace, coordinationKey }: RealmInput): string {
  if (typeof engine !== 'string' || !ENGINE.test(engine)) throw new RealmError(`engine ${JSON.stringify(engine)} does not match ${ENGINE_PATTERN}`);
  if (typeof namespace !== 'string' || !NAMESPACE.test(namespace)) throw new RealmError(`namespace ${JSON.stringify(namespace)} is not a namespace name`);
  if (typeof coordinationKey !== 'string' || !COORDINATION_KEY.test(coordinationKey)) {
    throw new RealmError(`coordination key ${JSON.stringify(coordinationKey)} does not match ${COORDINATION_KEY_PATTERN}`);
  }
  return digest([REALM_VERSION, engine.toLowerCase(), namespace, coordinationKey]);
}

/** The realm's Lease: `ptah-t-` + base32 of the digest's 32 bytes. */
export function leaseNameFor(realmDigest: string): string {
  if (!isDigest(realmDigest)) throw new RealmError(`coordination digest ${JSON.stringify(realmDigest)} is not a sha256: digest`);
  return fit('ptah-t-', base32(Buffer.from(realmDigest.slice('sha256:'.length), 'hex')));
}

/** Who holds a realm: `ptah-h-` + base32 of sha256(resource UID, NUL, operation ID). */
export function holderIdentityFor(resourceUid: string, operationId: string): string {
  for (const [what, value] of [['resource UID', resourceUid], ['operation ID', operationId]] as const) {
    if (typeof value !== 'string' || value === '') throw new RealmError(`${what} is empty`);
    if (value.includes('\0')) throw new RealmError(`${what} holds a NUL byte`);
  }
  return fit('ptah-h-', base32(createHash('sha256').update(`${resourceUid}\0${operationId}`).digest()));
}

function fit(prefix: string, encoded: string): string {
  return (prefix + encoded).slice(0, MAX_NAME);
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

/** RFC 4648 base32, lower case, without padding. */
export function base32(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += ALPHABET[(buffer << (5 - bits)) & 31];
  return out;
}
