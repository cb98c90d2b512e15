// /validate/controller-write: judges the manager's own writes only (the webhook registration's matchCondition
// sends only those; anyone else reaching this route is admitted here and judged by other rules). Each write the
// manager makes is admitted only when it rebuilds from the owner's persisted state, read uncached; a manager
// write of any other kind or operation is refused.
import type { V1ConfigMap, V1Job } from '@kubernetes/client-node';
import { GROUP, KINDS, VERSION } from '../../shared/api/names.js';
import { CanonicalJsonError } from '../../shared/canonical.js';
import type { PtahSchemaPlan, PtahSchemaPlanChunk } from '../../shared/api/schema-kinds.js';
import { allow, clip, optionalObject, optionalString, refuse, rejectRequest, subjectOf, type AdmissionRequest, type Operation, type Verdict } from '../admission.js';
import type { AdmissionContext } from '../judge.js';
import { judgeJobCleanup, judgeJobCreate } from './job.js';
import type { Owned } from './owner.js';
import { judgeChunkCreate, judgePlanCreate, judgeProjectionCreate } from './plan.js';

interface WriteRule {
  group: string;
  version: string;
  resource: string;
  kind: string;
  operation: Operation;
  judge: (object: Owned, request: AdmissionRequest, ctx: AdmissionContext) => Promise<Verdict>;
}

const RULES: readonly WriteRule[] = [
  { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', operation: 'CREATE', judge: (job, _r, ctx) => judgeJobCreate(job as V1Job & Owned, ctx) },
  {
    group: 'batch',
    version: 'v1',
    resource: 'jobs',
    kind: 'Job',
    operation: 'UPDATE',
    judge: (job, request, ctx) => judgeJobCleanup(job as V1Job & Owned, candidate(request, 'oldObject', 'Job') as V1Job, ctx),
  },
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', operation: 'CREATE', judge: (cm, _r, ctx) => judgeProjectionCreate(cm as V1ConfigMap & Owned, ctx) },
  {
    group: GROUP,
    version: VERSION,
    resource: KINDS.PtahSchemaPlan.plural,
    kind: KINDS.PtahSchemaPlan.kind,
    operation: 'CREATE',
    judge: (plan, _r, ctx) => judgePlanCreate(plan as PtahSchemaPlan & Owned, ctx),
  },
  {
    group: GROUP,
    version: VERSION,
    resource: KINDS.PtahSchemaPlanChunk.plural,
    kind: KINDS.PtahSchemaPlanChunk.kind,
    operation: 'CREATE',
    judge: (chunk, _r, ctx) => judgeChunkCreate(chunk as PtahSchemaPlanChunk & Owned, ctx),
  },
];

const sameGvk = (a: { group: string; version: string; kind: string }, b: { group: string; version: string; kind: string }) =>
  a.group === b.group && a.version === b.version && a.kind === b.kind;

/** The request's object or oldObject, decoded far enough to be judged: the kind it claims, where it claims to be. */
function candidate(request: AdmissionRequest, which: 'object' | 'oldObject', kind: string): Owned {
  const raw = request[which] as { apiVersion?: unknown; kind?: unknown; metadata?: unknown } | null | undefined;
  if (typeof raw !== 'object' || raw === null) rejectRequest(`the ${request.operation} of ${subjectOf(request)} carries no ${which}`);
  const apiVersion = request.kind.group ? `${request.kind.group}/${request.kind.version}` : request.kind.version;
  const rawApiVersion = optionalString(raw.apiVersion, `${which}.apiVersion`);
  const rawKind = optionalString(raw.kind, `${which}.kind`);
  if (rawApiVersion !== apiVersion || rawKind !== kind) {
    rejectRequest(`the ${which} is ${clip(rawApiVersion ?? 'without apiVersion')} ${clip(rawKind ?? 'without kind')}, not ${apiVersion} ${kind}`);
  }
  const metadata = optionalObject(raw.metadata, `${which}.metadata`) as Owned['metadata'] | undefined;
  if (!metadata?.name || metadata.name !== request.name || (metadata.namespace ?? request.namespace) !== request.namespace || !request.namespace) {
    rejectRequest(`the ${which}'s namespace and name do not match the admission request's ${subjectOf(request)} (the manager names every object it writes)`);
  }
  return { ...raw, kind, metadata: { ...metadata, namespace: request.namespace } } as Owned;
}

export async function judgeControllerWrite(request: AdmissionRequest, ctx: AdmissionContext): Promise<Verdict> {
  if (request.userInfo.username !== ctx.managerUsername) {
    return allow('not a write by the operator manager; this route judges only the manager’s own writes');
  }
  const { resource, operation } = request;
  const target = `${resource.group || 'core'}/${resource.version} ${resource.resource}`;
  if (request.subResource || request.requestSubResource) refuse(`operator manager writes to subresources are not permitted here (${target}/${request.subResource ?? request.requestSubResource})`);
  const rule = RULES.find((r) => r.group === resource.group && r.version === resource.version && r.resource === resource.resource && r.operation === operation);
  if (!rule) refuse(`the ${operation} of ${target} ${subjectOf(request)} is outside the operator manager's write contract`);
  const expected = { group: rule.group, version: rule.version, kind: rule.kind };
  if (!sameGvk(request.kind, expected)) rejectRequest(`admission request kind ${request.kind.kind} does not match its resource ${resource.resource}`);
  if (request.requestKind && !sameGvk(request.requestKind, expected)) rejectRequest('converted or equivalent kind requests are not judged: the manager writes the exact version');
  if (request.requestResource && (request.requestResource.group !== rule.group || request.requestResource.version !== rule.version || request.requestResource.resource !== rule.resource)) {
    rejectRequest('converted or equivalent resource requests are not judged: the manager writes the exact version');
  }
  try {
    return await rule.judge(candidate(request, 'object', rule.kind), request, ctx);
  } catch (e) {
    // The comparisons copy and hash what was submitted; a value they cannot take came with the request.
    if (e instanceof CanonicalJsonError) rejectRequest(`the ${operation} of ${subjectOf(request)} holds a value with no plain JSON form: ${e.message}`);
    throw e;
  }
}
