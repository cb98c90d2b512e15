// Who decided: the identity admission stamps on approvals and run acknowledgments, taken only from the
// authenticated request (never from the object), normalised the same way on both passes so they can compare.
import type { Identity } from '../shared/api/shapes.js';
import type { UserInfo } from './admission.js';

const MAX_GROUPS = 64;

// Byte order of the UTF-8 encoding, so the order never depends on locale or on UTF-16 surrogates.
const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/** Trimmed username and uid; groups trimmed, empties dropped, unique, in byte order, at most 64. */
export function identityOf(userInfo: UserInfo): Identity {
  const username = (userInfo.username ?? '').trim();
  const uid = (userInfo.uid ?? '').trim();
  const groups = [...new Set((userInfo.groups ?? []).map((g) => g.trim()).filter((g) => g !== ''))].sort(byteOrder).slice(0, MAX_GROUPS);
  return { username, ...(uid ? { uid } : {}), groups };
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
