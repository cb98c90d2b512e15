// The database realm: the digest that names one physical database, within a namespace (a coordination key) or
// across the namespaces a cluster-scoped PtahRealm lists (a realmRef), and the Lease name and holder identity
// derived from it. Two resources with one realm serialize on one Lease however their URLs are spelled, and only
// the digest ever leaves the spec.
import { createHash } from 'node:crypto';
import { digest, isDigest } from './canonical.js';
import { COORDINATION_KEY_PATTERN, ENGINE_PATTERN } from './api/shapes.js';

const REALM_VERSION = 'ptah-realm/v1';
// Its own tag and tuple length, so no realm name can spell the digest of a namespace's coordination key.
const REALM_REF_VERSION = 'ptah-realm-ref/v1';
const ENGINE = new RegExp(ENGINE_PATTERN);
const COORDINATION_KEY = new RegExp(COORDINATION_KEY_PATTERN);
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const REALM_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
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
  const normalized = checkEngine(engine);
  if (typeof namespace !== 'string' || !NAMESPACE.test(namespace)) throw new RealmError(`namespace ${JSON.stringify(namespace)} is not a namespace name`);
  if (typeof coordinationKey !== 'string' || !COORDINATION_KEY.test(coordinationKey)) {
    throw new RealmError(`coordination key ${JSON.stringify(coordinationKey)} does not match ${COORDINATION_KEY_PATTERN}`);
  }
  return digest([REALM_VERSION, normalized, namespace, coordinationKey]);
}

function checkEngine(engine: string): string {
  if (typeof engine !== 'string' || !ENGINE.test(engine)) throw new RealmError(`engine ${JSON.stringify(engine)} does not match ${ENGINE_PATTERN}`);
  return engine.toLowerCase();
}

/** `sha256:` digest of the versioned tuple (engine in lower case, PtahRealm name): the same from every namespace. */
export function sharedRealmDigest({ engine, realm }: { engine: string; realm: string }): string {
  const normalized = checkEngine(engine);
  if (typeof realm !== 'string' || !REALM_NAME.test(realm)) throw new RealmError(`realm ${JSON.stringify(realm)} is not a PtahRealm name`);
  return digest([REALM_REF_VERSION, normalized, realm]);
}

/** What a spec.target says about its realm. */
export interface RealmTarget {
  engine: string;
  coordinationKey?: string;
  realmRef?: { name: string };
}

/** The realm a spec.target of a resource in `namespace` names: its PtahRealm's when it has a realmRef, else its key's. */
export function realmDigestOf(target: RealmTarget, namespace: string): string {
  if (target.realmRef) return sharedRealmDigest({ engine: target.engine, realm: target.realmRef.name });
  if (target.coordinationKey === undefined) throw new RealmError('the target names neither a coordinationKey nor a realmRef');
  return coordinationDigest({ engine: target.engine, namespace, coordinationKey: target.coordinationKey });
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

/** What a PtahRealm says about who may name it (its spec). */
export interface RealmGrant {
  engine: string;
  namespaces: readonly string[];
}

/** Whether a realm lets a resource of `engine` in `namespace` name it; engines compare as the digest normalizes them. */
export function realmAuthorizes(grant: RealmGrant | undefined, namespace: string, engine: string): boolean {
  return grant !== undefined && grant.engine.toLowerCase() === engine.toLowerCase() && grant.namespaces.includes(namespace);
}

/**
 * The overlap rule the webhook holds PtahRealms to: two realms overlap when they are for one engine (normalized) and
 * list a namespace in common, so within a namespace one engine's databases have at most one realm to share them by.
 * Returns the namespaces `a` and `b` have in common for one engine, sorted ([] when they do not overlap).
 */
export function realmOverlap(a: RealmGrant, b: RealmGrant): string[] {
  if (a.engine.toLowerCase() !== b.engine.toLowerCase()) return [];
  return [...new Set(a.namespaces.filter((ns) => b.namespaces.includes(ns)))].sort();
}
