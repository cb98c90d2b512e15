// The kinds a person creates to decide something, and which spec fields admission stamps on each. The
// mutating and the validating pass read the same table, so they cannot disagree about what a stamp is.
import { DECISION_KINDS, GROUP, KINDS, VERSION } from '../shared/api/names.js';
import { clip, optionalObject, optionalString, rejectRequest, subjectOf, type AdmissionRequest } from './admission.js';

export interface DecisionKind {
  kind: (typeof DECISION_KINDS)[number];
  /** Spec field holding the stamped identity. */
  identityField: 'approver' | 'acknowledgedBy';
  /** Spec field holding the stamped time. */
  timeField: 'approvedAt' | 'acknowledgedAt';
  noun: 'approval' | 'acknowledgment';
}

export const DECISION_KIND_TABLE: readonly DecisionKind[] = [
  { kind: 'PtahSchemaApproval', identityField: 'approver', timeField: 'approvedAt', noun: 'approval' },
  { kind: 'PtahSchemaRunAcknowledgment', identityField: 'acknowledgedBy', timeField: 'acknowledgedAt', noun: 'acknowledgment' },
  { kind: 'PtahMigrationApproval', identityField: 'approver', timeField: 'approvedAt', noun: 'approval' },
  { kind: 'PtahMigrationRunAcknowledgment', identityField: 'acknowledgedBy', timeField: 'acknowledgedAt', noun: 'acknowledgment' },
];

/** The field every decision kind carries: the uid of the admission request that stamped it. */
export const MUTATION_REQUEST_UID = 'mutationRequestUID';

export interface DecisionObject {
  kind: DecisionKind;
  metadata: { name?: string; namespace?: string };
  spec: Record<string, unknown>;
}

/** Which decision kind a request is about; anything else was sent to the wrong route (400). */
export function decisionKindOf(request: AdmissionRequest, route: string): DecisionKind {
  const { resource, kind, subResource } = request;
  const entry = DECISION_KIND_TABLE.find((k) => KINDS[k.kind].plural === resource.resource);
  if (resource.group !== GROUP || resource.version !== VERSION || !entry) {
    rejectRequest(`${route} judges only ${DECISION_KIND_TABLE.map((k) => KINDS[k.kind].plural).join(', ')} of ${GROUP}/${VERSION}; got ${resource.group || 'core'}/${resource.version} ${resource.resource}`);
  }
  if (subResource) rejectRequest(`${route} judges the ${entry.kind} object itself, not its ${subResource} subresource`);
  if (kind.group !== GROUP || kind.version !== VERSION || kind.kind !== entry.kind) {
    rejectRequest(`admission request kind ${kind.group}/${kind.version} ${kind.kind} does not match its resource ${resource.resource}`);
  }
  return entry;
}

/** The request's object (or oldObject) as a decision, checked to belong where the request says it does. */
export function decisionObjectOf(request: AdmissionRequest, kind: DecisionKind, which: 'object' | 'oldObject'): DecisionObject {
  const raw = request[which];
  if (typeof raw !== 'object' || raw === null) rejectRequest(`the ${kind.kind} ${subjectOf(request)} request carries no ${which}`);
  const object = raw as { apiVersion?: unknown; kind?: unknown; metadata?: unknown; spec?: unknown };
  const apiVersion = optionalString(object.apiVersion, `${which}.apiVersion`);
  const objectKind = optionalString(object.kind, `${which}.kind`);
  if (apiVersion !== `${GROUP}/${VERSION}` || objectKind !== kind.kind) {
    rejectRequest(`the ${which} is ${clip(apiVersion ?? 'without apiVersion')} ${clip(objectKind ?? 'without kind')}, not ${GROUP}/${VERSION} ${kind.kind}`);
  }
  if (typeof object.spec !== 'object' || object.spec === null || Array.isArray(object.spec)) {
    rejectRequest(`the ${kind.kind} ${subjectOf(request)} has no spec object`);
  }
  const fields = optionalObject(object.metadata, `${which}.metadata`) ?? {};
  const metadata = {
    name: optionalString(fields.name, `${which}.metadata.name`),
    namespace: optionalString(fields.namespace, `${which}.metadata.namespace`),
  };
  if (metadata.namespace !== undefined && request.namespace !== undefined && metadata.namespace !== request.namespace) {
    rejectRequest(`the ${kind.noun}'s namespace ${clip(metadata.namespace)} does not match the admission request's ${request.namespace}`);
  }
  return { kind, metadata, spec: object.spec as Record<string, unknown> };
}
