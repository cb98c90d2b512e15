// A person's acknowledgment of a run nobody could account for (the seed's person's settlement). Both families define
// it alike; only the kind, the field that names the resource, and what the operation must name differ.
import { conditionStatus, defineKind } from './kind.js';
import type { KindName } from './names.js';
import { object, optional } from './schema.js';
import { conditionsStatus, identity, objectRef, sha256, timestamp, uid } from './shapes.js';

/** The spec of an acknowledgment: the resource (under `refField`), the operation, and who acknowledged it when. */
function acknowledgmentSpec<R extends string>(refField: R, operation: string) {
  // Listed first so the CRD's properties keep the order a reader expects.
  const resourceRef = { [refField]: objectRef } as Record<R, typeof objectRef>;
  return object({
    ...resourceRef,
    operationID: sha256(operation),
    acknowledgedBy: optional(identity),
    acknowledgedAt: optional(timestamp()),
    mutationRequestUID: optional(uid('The admission request that stamped acknowledgedBy.')),
  });
}

export interface AcknowledgmentKindOptions<R extends string> {
  description: string;
  /** The spec field naming the resource, and the header of its column. */
  refField: R;
  refColumn: string;
  /** What spec.operationID must name. */
  operation: string;
}

/** The acknowledgment kind `kind`, with the spec acknowledgmentSpec(refField) describes. */
export function acknowledgmentKind<K extends KindName, R extends string>(kind: K, options: AcknowledgmentKindOptions<R>) {
  const { description, refField, refColumn, operation } = options;
  return defineKind(kind, {
    description,
    spec: acknowledgmentSpec(refField, operation),
    status: conditionsStatus,
    immutableSpec: 'an acknowledgment is immutable; create a new acknowledgment instead',
    printerColumns: [
      { name: refColumn, type: 'string', jsonPath: `.spec.${refField}.name` },
      { name: 'Acknowledged By', type: 'string', jsonPath: '.spec.acknowledgedBy.username' },
      { name: 'Consumed', type: 'string', jsonPath: conditionStatus('Consumed') },
      { name: 'Stale', type: 'string', jsonPath: conditionStatus('Stale') },
      { name: 'Operation', type: 'string', jsonPath: '.spec.operationID', priority: 1 },
    ],
  });
}
