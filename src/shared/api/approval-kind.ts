// A person's one-shot approval of one plan. Both families define it alike; only the kinds, the field that names
// the resource the plan belongs to, and the conditions shown as columns differ.
import { conditionStatus, defineKind } from './kind.js';
import type { KindName } from './names.js';
import { object, optional } from './schema.js';
import { conditionsStatusFields, identity, objectRef, sha256, timestamp, uid } from './shapes.js';

/** The spec of an approval: the resource (under `refField`, e.g. schemaRef), the plan, and who approved it when. */
function approvalSpec<R extends string>(refField: R) {
  // Listed first so the CRD's properties keep the order a reader expects.
  const resourceRef = { [refField]: objectRef } as Record<R, typeof objectRef>;
  return object({
    ...resourceRef,
    planRef: objectRef,
    planFingerprint: sha256(),
    approver: optional(identity),
    approvedAt: optional(timestamp()),
    mutationRequestUID: optional(uid('The admission request that stamped the approver.')),
  });
}

/**
 * The status of an approval: its conditions, and which operation spent it. "Spent by this claim" is read from
 * consumedBy, a field the manager writes with the Consumed condition, never from a condition's human text.
 */
const approvalStatus = object({
  ...conditionsStatusFields,
  consumedBy: optional(object({
    operationID: sha256('The operation that spent this approval.'),
    consumedAt: timestamp(),
  }, { description: 'The operation that spent this approval, written with its Consumed condition.' })),
});

export interface ApprovalKindOptions<R extends string> {
  /** The plan kind it approves. */
  plan: KindName;
  /** The spec field naming the resource the plan belongs to, and the header of its column. */
  refField: R;
  refColumn: string;
  /** Conditions shown as columns, in order. */
  conditionColumns: readonly string[];
}

/** The approval kind `kind` of one plan kind, with the spec approvalSpec(refField) describes. */
export function approvalKind<K extends KindName, R extends string>(kind: K, options: ApprovalKindOptions<R>) {
  const { plan, refField, refColumn, conditionColumns } = options;
  return defineKind(kind, {
    description: `A person’s one-shot approval of exactly one ${plan}.`,
    spec: approvalSpec(refField),
    status: approvalStatus,
    immutableSpec: 'an approval is immutable; create a new approval instead',
    printerColumns: [
      { name: refColumn, type: 'string', jsonPath: `.spec.${refField}.name` },
      { name: 'Plan', type: 'string', jsonPath: '.spec.planRef.name' },
      { name: 'Approver', type: 'string', jsonPath: '.spec.approver.username' },
      ...conditionColumns.map((type) => ({ name: type, type: 'string' as const, jsonPath: conditionStatus(type) })),
    ],
  });
}
