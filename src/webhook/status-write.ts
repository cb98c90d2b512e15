// /validate/status-write: the status of every operator.ptah.run kind is the manager's record, and so is a
// PtahMigration's unresolved-run annotation (its copy of status.unresolvedRun). Anyone else is refused and told
// what to do instead: settle an unresolved run with a PtahMigrationRunAcknowledgment.
import { ANNOTATIONS, GROUP, KINDS } from '../shared/api/names.js';
import { allow, refuse, rejectRequest, subjectOf, type AdmissionRequest, type Verdict } from './admission.js';
import { WEBHOOK_PATHS } from '../shared/api/webhooks.js';
import type { AdmissionContext } from './server.js';

const ROUTE = WEBHOOK_PATHS.statusWrite;

interface MaybeMigration {
  metadata?: { uid?: string; annotations?: Record<string, string> };
  status?: { unresolvedRun?: { operationID?: string } };
}

function howToSettle(request: AdmissionRequest): string {
  const old = request.oldObject as MaybeMigration | undefined;
  const operationID = old?.status?.unresolvedRun?.operationID;
  const base = `to settle an unresolved migration run, create a ${KINDS.PtahMigrationRunAcknowledgment.kind} whose spec.migrationRef names the PtahMigration (name and uid) and whose spec.operationID is the run's operation ID (status.unresolvedRun.operationID)`;
  if (request.resource.resource !== KINDS.PtahMigration.plural || !operationID) return base;
  return `${base}; for ${subjectOf(request)} that is spec.migrationRef {name: ${request.name ?? ''}, uid: ${old?.metadata?.uid ?? ''}} and spec.operationID ${operationID}`;
}

function annotationOf(object: unknown): string | undefined {
  const value = (object as MaybeMigration | undefined)?.metadata?.annotations?.[ANNOTATIONS.unresolvedRun];
  return value === undefined ? undefined : String(value);
}

export async function judgeStatusWrite(request: AdmissionRequest, ctx: AdmissionContext): Promise<Verdict> {
  const { resource, subResource, operation } = request;
  const who = request.userInfo.username ?? '';
  const isManager = who === ctx.managerUsername;
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
  if (typeof request.oldObject !== 'object' || request.oldObject === null) {
    rejectRequest(`the update of ${subjectOf(request)} carries no oldObject`);
  }

  const before = annotationOf(request.oldObject);
  const after = annotationOf(request.object);
  if (before === after || isManager) return allow();
  const change = before === undefined ? 'set' : after === undefined ? 'remove' : 'change';
  refuse(
    `the ${ANNOTATIONS.unresolvedRun} annotation is the manager's copy of status.unresolvedRun; only the operator's manager may ${change} it, not ${who || 'an anonymous user'}. ` +
      `Instead, ${howToSettle(request)}`,
  );
}
