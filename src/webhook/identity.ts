// Who decided: the identity admission stamps on approvals and run acknowledgments, taken only from the
// authenticated request (never from the object), normalised the same way on both passes so they can compare.
import type { Identity } from '../shared/api/shapes.js';
import { refuse, rejectRequest, type UserInfo } from './admission.js';

const MAX_GROUPS = 64;
/**
 * Bounds on the userInfo an identity is built from, checked before anything is sorted: an identity names at
 * most 64 groups of 512 characters (the CRD's bounds), so a request with more than 1024 groups, or a name longer
 * than 1024 characters, is not a caller anyone stamps; 300,000 groups blocked the event loop for seconds.
 */
export const MAX_USERINFO_GROUPS = 1024;
export const MAX_USERINFO_NAME = 1024;

export const ANONYMOUS_USER = 'system:anonymous';
export const UNAUTHENTICATED_GROUP = 'system:unauthenticated';

/**
 * Byte order of the UTF-8 encoding, so the order never depends on locale or on UTF-16 surrogates, compared
 * without encoding: UTF-8 byte order is code point order, which is UTF-16 code unit order once surrogates are
 * moved above U+E000-U+FFFF.
 */
function byteOrder(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

const codePointRank = (unit: number): number => (unit >= 0xd800 && unit <= 0xdfff ? unit + 0x2000 : unit >= 0xe000 ? unit - 0x800 : unit);

function boundedName(value: string | undefined, field: string): string {
  const name = value ?? '';
  if (name.length > MAX_USERINFO_NAME) rejectRequest(`${field} is ${name.length} characters long; at most ${MAX_USERINFO_NAME} is an identity this webhook records`);
  return name.trim();
}

/** The groups as sent, trimmed, each bounded; a list longer than MAX_USERINFO_GROUPS is refused before any work. */
function groupsOf(userInfo: UserInfo): string[] {
  const groups = userInfo.groups ?? [];
  if (groups.length > MAX_USERINFO_GROUPS) {
    rejectRequest(`userInfo.groups lists ${groups.length} groups; at most ${MAX_USERINFO_GROUPS} is an identity this webhook records`);
  }
  return groups.map((g, i) => boundedName(g, `userInfo.groups[${i}]`));
}

/** Trimmed username and uid; groups trimmed, empties dropped, unique, in byte order, at most 64. */
export function identityOf(userInfo: UserInfo): Identity {
  const username = boundedName(userInfo.username, 'userInfo.username');
  const uid = boundedName(userInfo.uid, 'userInfo.uid');
  const groups = [...new Set(groupsOf(userInfo).filter((g) => g !== ''))].sort(byteOrder).slice(0, MAX_GROUPS);
  return { username, ...(uid ? { uid } : {}), groups };
}

/**
 * The identity of the person who authors a decision: an authenticated caller, never the anonymous user or a
 * member of the unauthenticated group (looked for among all the groups sent, not only the 64 that are stamped).
 */
export function authorOf(userInfo: UserInfo, noun: string): Identity {
  const identity = identityOf(userInfo);
  if (identity.username === '') refuse(`the request has no authenticated username, so there is no one to record as this ${noun}'s author`);
  if (identity.username === ANONYMOUS_USER || groupsOf(userInfo).includes(UNAUTHENTICATED_GROUP)) {
    refuse(
      `the request was not authenticated (${ANONYMOUS_USER} or group ${UNAUTHENTICATED_GROUP}); an anonymous caller cannot be this ${noun}'s author. ` +
        'Create it with credentials the API server authenticates',
    );
  }
  return identity;
}

export function sameIdentity(a: Identity, b: unknown): boolean {
  if (typeof b !== 'object' || b === null) return false;
  const other = b as Partial<Identity>;
  const otherGroups = Array.isArray(other.groups) ? other.groups : [];
  return (
    a.username === other.username &&
    (a.uid ?? '') === (other.uid ?? '') &&
    a.groups.length === otherGroups.length &&
    a.groups.every((g, i) => g === otherGroups[i])
  );
}

/** Admission time: the server clock in UTC, whole seconds, as a Kubernetes Time (RFC 3339 with Z). */
export function admissionTime(now: Date): string {
  return `${now.toISOString().slice(0, 19)}Z`;
}
