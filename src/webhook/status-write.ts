// /validate/status-write: the status of every operator.ptah.run kind is the manager's record, and so is a
// PtahMigration's unresolved-run annotation (its copy of status.unresolvedRun). Anyone else is refused and told
// what to do instead: settle an unresolved run with a PtahMigrationRunAcknowledgment, a schema proof no reading can
// finish with a PtahSchemaRunAcknowledgment.
import { ANNOTATIONS, GROUP, KINDS } from '../shared/api/names.js';
import { allow, clip, optionalObject, optionalString, refuse, rejectRequest, subjectOf, type AdmissionRequest, type Verdict } from './admission.js';
import { WEBHOOK_PATHS } from '../shared/api/webhooks.js';
import type { AdmissionContext } from './judge.js';

const ROUTE = WEBHOOK_PATHS.statusWrite;

/** `value` when it is a string, else undefined: for a message only, which must not fail on a malformed oldObject. */
const textOf = (value: unknown): string | undefined => (typeof value === 'string' ? clip(value) : undefined);
const fieldOf = (value: unknown, key: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined);

/** Which acknowledgment settles what a resource waits on a person for, and where its status names the operation. */
const SETTLEMENTS = [
  { resource: KINDS.PtahMigration, kind: KINDS.PtahMigrationRunAcknowledgment.kind, refField: 'migrationRef', what: 'an unresolved migration run', path: ['unresolvedRun', 'operationID'] },
  { resource: KINDS.PtahSchema, kind: KINDS.PtahSchemaRunAcknowledgment.kind, refField: 'schemaRef', what: 'a schema proof no reading can finish', path: ['pendingObservation', 'applyOperationID'] },
] as const;

/** How a person settles what the resource waits on: its own family's way, or both ways for another kind. */
function howToSettle(request: AdmissionRequest): string {
  const old = request.oldObject;
  const own = SETTLEMENTS.filter((s) => s.resource.plural === request.resource.resource);
  const ways = (own.length > 0 ? own : SETTLEMENTS).map((s) => {
    const base = `to settle ${s.what}, create a ${s.kind} whose spec.${s.refField} names the ${s.resource.kind} (name and uid) and whose spec.operationID is the run's operation ID (status.${s.path.join('.')})`;
    const operationID = textOf(fieldOf(fieldOf(fieldOf(old, 'status'), s.path[0]), s.path[1]));
    if (request.resource.resource !== s.resource.plural || !operationID) return base;
    return `${base}; for ${subjectOf(request)} that is spec.${s.refField} {name: ${request.name ?? ''}, uid: ${textOf(fieldOf(fieldOf(old, 'metadata'), 'uid')) ?? ''}} and spec.operationID ${operationID}`;
  });
  return ways.join('; ');
}

/**
 * The unresolved-run annotation of the request's object or oldObject, compared as a string only when it is one:
 * annotations are a map of strings, so metadata, annotations or a value of another type is a malformed request.
 */
function annotationOf(request: AdmissionRequest, which: 'object' | 'oldObject'): string | undefined {
  const metadata = optionalObject(fieldOf(request[which], 'metadata'), `${which}.metadata`);
  const annotations = optionalObject(metadata?.annotations, `${which}.metadata.annotations`);
  return optionalString(annotations?.[ANNOTATIONS.unresolvedRun], `${which}.metadata.annotations[${JSON.stringify(ANNOTATIONS.unresolvedRun)}]`);
}

export async function judgeStatusWrite(request: AdmissionRequest, ctx: AdmissionContext): Promise<Verdict> {
  const { resource, subResource, operation } = request;
  const who = clip(request.userInfo.username ?? '');
  const isManager = request.userInfo.username === ctx.managerUsername;
  if (resource.group !== GROUP) rejectRequest(`${ROUTE} judges only ${GROUP} resources; got ${resource.group || 'core'} ${resource.resource}`);

  if (subResource === 'status') {
    if (operation !== 'UPDATE') rejectRequest(`${ROUTE} judges updates of a status subresource, not ${operation}`);
    if (isManager) return allow();
    refuse(
      `the status of ${request.kind.kind} ${subjectOf(request)} is written only by the operator's manager, not by ${who || 'an anonymous user'}; ` +
        `it is the manager's durable record and an edit could replay or hide a database change. Instead, ${howToSettle(request)}`,
    );
  }
  if (subResource) rejectRequest(`${ROUTE} judges the status subresource, not ${resource.resource}/${subResource}`);
  if (resource.resource !== KINDS.PtahMigration.plural) {
    rejectRequest(`${ROUTE} judges status subresources and ${KINDS.PtahMigration.plural}; got ${resource.resource}`);
  }
  // Creates are not judged: a restore that recreates a PtahMigration with its copy of the unresolved run is how
  // the record survives a lost status (reconcileUnresolvedRunCopy puts it back).
  if (operation !== 'UPDATE') rejectRequest(`${ROUTE} judges updates of ${resource.resource}, not ${operation}`);
  for (const which of ['object', 'oldObject'] as const) {
    if (typeof request[which] !== 'object' || request[which] === null) rejectRequest(`the update of ${subjectOf(request)} carries no ${which}`);
  }

  const before = annotationOf(request, 'oldObject');
  const after = annotationOf(request, 'object');
  if (before === after || isManager) return allow();
  const change = before === undefined ? 'set' : after === undefined ? 'remove' : 'change';
  refuse(
    `the ${ANNOTATIONS.unresolvedRun} annotation is the manager's copy of status.unresolvedRun; only the operator's manager may ${change} it, not ${who || 'an anonymous user'}. ` +
      `Instead, ${howToSettle(request)}`,
  );
}
