// One pass over a PtahSchema (the seed's schema_controller reconcile). Everything is re-read through the API
// server, and the pass ends right after a boundary write, to be requeued; the next pass starts from what is stored.
// The order: an owed release first; deletion; the finalizer; the execution binding (and what a rotation still
// owes); the claim in flight; the proof an Apply owes, ahead of suspension and the generation gate; and only with
// neither, the idle path that reads, plans and claims.
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { PtahSchema } from '../../shared/api/schema-kinds.js';
import { reconcileActiveSchema } from './active.js';
import { reconcileSchemaExecutionBinding } from './binding.js';
import { endPass, SchemaPass, type PassEnd, type SchemaDeps } from './context.js';
import { reconcileSchemaDeletion, reconcileSchemaFinalizer } from './deletion.js';
import { reconcileIdleSchema } from './idle.js';
import { reconcilePendingObservation } from './proof.js';
import { completeSchemaPendingLockRelease } from './retire.js';

export async function reconcileSchema(deps: SchemaDeps, namespace: string, name: string): Promise<PassEnd | undefined> {
  const s = await deps.client.tryGet<PtahSchema>({ apiVersion: API_VERSION, kind: KINDS.PtahSchema.kind, namespace, name });
  if (!s) return undefined;
  const pass = new SchemaPass(deps, s);

  if (await completeSchemaPendingLockRelease(pass)) return endPass('owed release completed');
  if (pass.s.metadata.deletionTimestamp) return reconcileSchemaDeletion(pass);
  const finalizer = await reconcileSchemaFinalizer(pass);
  if (finalizer) return finalizer;
  const binding = await reconcileSchemaExecutionBinding(pass);
  if (binding) return binding;
  const claim = pass.claim;
  if (claim) return reconcileActiveSchema(pass, claim);
  if (pass.status.pendingObservation) return reconcilePendingObservation(pass);
  return reconcileIdleSchema(pass);
}
