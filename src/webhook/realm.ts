// /validate/realm: a PtahRealm is admitted only with a well-formed spec (each refusal names its field), an engine that
// never changes, and no overlap with another realm: two realms for one engine (normalized) may not list a namespace
// in common, so within a namespace one engine's databases are shared through one realm at most. The other realms are
// listed uncached. Two creates racing each other can still both pass; the realm census then holds the resources of
// two realms that reach one database Blocked, and the executor's database writer lock lets only one of them write.
import { API_VERSION, GROUP, KINDS } from '../shared/api/names.js';
import { MAX_REALM_NAMESPACES, REALM_SHARING, type PtahRealm } from '../shared/api/realm-kinds.js';
import { ENGINE_PATTERN } from '../shared/api/shapes.js';
import { WEBHOOK_PATHS } from '../shared/api/webhooks.js';
import { realmOverlap, type RealmGrant } from '../shared/realm.js';
import { allow, clip, kindOfValue, optionalObject, Refusal, refuse, rejectRequest, type AdmissionRequest, type Verdict } from './admission.js';
import { readFailure } from './reads.js';
import type { AdmissionContext } from './judge.js';

const ENGINE = new RegExp(ENGINE_PATTERN);
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export async function judgeRealm(request: AdmissionRequest, ctx: AdmissionContext): Promise<Verdict> {
  if (request.kind.group !== GROUP || request.kind.kind !== KINDS.PtahRealm.kind) {
    rejectRequest(`${WEBHOOK_PATHS.realm} judges PtahRealms, not ${request.kind.kind}`);
  }
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') rejectRequest(`${WEBHOOK_PATHS.realm} judges creates and updates, not ${request.operation}`);
  // An UPDATE is judged against every realm but itself; a generated name on CREATE matches no stored realm.
  const name = request.name ?? '';
  const grant = grantOf(request.object, 'request.object');
  if (request.operation === 'UPDATE') {
    const before = grantOf(request.oldObject, 'request.oldObject');
    if (before.engine !== grant.engine) refuse('spec.engine is immutable; create a new PtahRealm instead');
  }
  let others: PtahRealm[];
  try {
    others = await ctx.reader.list<PtahRealm>(API_VERSION, KINDS.PtahRealm.kind, undefined);
  } catch (e) {
    throw new Refusal(readFailure({ apiVersion: API_VERSION, kind: KINDS.PtahRealm.kind, name: '(every one)' }, e));
  }
  const overlaps = others
    .filter((other) => other.metadata.name !== name)
    .map((other) => ({ other: other.metadata.name ?? '', shared: realmOverlap(grant, other.spec) }))
    .filter((o) => o.shared.length > 0)
    .sort((a, b) => a.other.localeCompare(b.other));
  if (overlaps.length > 0) {
    const first = overlaps[0]!;
    refuse(`spec.namespaces overlaps PtahRealm ${JSON.stringify(first.other)} for engine ${JSON.stringify(grant.engine)} (both list ${clip(first.shared.join(', '))})` +
      `${overlaps.length > 1 ? ` and ${overlaps.length - 1} more realm(s)` : ''}; a namespace may be listed by one realm per engine`);
  }
  return allow('the realm is well-formed and overlaps no other');
}

/** The grant a PtahRealm in a review carries; a malformed spec is refused naming the field. */
export function grantOf(object: unknown, where: string): RealmGrant & { sharing: string } {
  const spec = optionalObject(optionalObject(object, where)?.spec, `${where}.spec`);
  if (!spec) refuse('spec is required');
  const { engine, namespaces, sharing } = spec;
  if (typeof engine !== 'string' || !ENGINE.test(engine)) refuse(`spec.engine must be a string matching ${ENGINE_PATTERN}, not ${describe(engine)}`);
  if (!Array.isArray(namespaces) || namespaces.length < 1 || namespaces.length > MAX_REALM_NAMESPACES) {
    refuse(`spec.namespaces must list 1 to ${MAX_REALM_NAMESPACES} namespaces, not ${describe(namespaces)}`);
  }
  const bad = namespaces.find((ns) => typeof ns !== 'string' || !DNS_LABEL.test(ns));
  if (bad !== undefined) refuse(`spec.namespaces holds ${describe(bad)}, which is not a namespace name (a DNS label)`);
  const names = namespaces as string[];
  if (new Set(names).size !== names.length) refuse('spec.namespaces lists a namespace twice; it is a set');
  if (typeof sharing !== 'string' || !(REALM_SHARING as readonly string[]).includes(sharing)) {
    refuse(`spec.sharing must be one of ${REALM_SHARING.join(', ')}, not ${describe(sharing)}`);
  }
  return { engine, namespaces: names, sharing };
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(clip(value)) : Array.isArray(value) ? `a list of ${value.length}` : kindOfValue(value);
}
