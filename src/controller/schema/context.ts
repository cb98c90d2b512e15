// What one reconcile pass of a PtahSchema works with: the shared pass (src/controller/pass.ts) over a PtahSchema,
// with its status and the resource under the name the schema family's steps use.
import { KINDS } from '../../shared/api/names.js';
import type { PtahSchema, PtahSchemaStatus } from '../../shared/api/schema-kinds.js';
import { schemaOperation, type OperationAnswers } from '../../shared/lifecycle/operations.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { OwnerPass, type OwnerDeps } from '../pass.js';

export { endPass, type PassEnd } from '../pass.js';
export type SchemaDeps = OwnerDeps;

export class SchemaPass extends OwnerPass<PtahSchema> {
  constructor(deps: SchemaDeps, s: PtahSchema) {
    super(deps, s, KINDS.PtahSchema.kind);
  }

  get s(): PtahSchema {
    return this.obj;
  }

  set s(value: PtahSchema) {
    this.obj = value;
  }

  get status(): PtahSchemaStatus {
    return this.obj.status ?? {};
  }
}

/** Whether the claim is one of the readings that settle the outstanding proof (it names the Apply it proves). */
export function servesProof(pass: SchemaPass, claim: ActiveOperation): boolean {
  const pending = pass.status.pendingObservation;
  return claim.proofOf !== undefined && pending !== undefined && claim.proofOf === pending.applyOperationID;
}

/** The operation table's answers for a schema claim, knowing whether it carries out the outstanding proof. */
export function operationOf(pass: SchemaPass, claim: ActiveOperation): OperationAnswers {
  return schemaOperation(claim.type, { provingApply: servesProof(pass, claim) });
}
