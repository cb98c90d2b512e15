// One pass over a PtahMigration (the seed's migration_controller). Everything is re-read through the API server,
// and the pass ends right after a boundary write, to be requeued; the next pass starts from what is stored. The
// order: an owed release first; the unresolved-run copy; deletion; the finalizer; the execution binding; the
// claim in flight; and only with no claim, the idle path that reads, plans and claims.
import type { PtahMigration } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import { reconcileActiveMigration } from './active.js';
import { reconcileMigrationExecutionBinding } from './binding.js';
import { endPass, MigrationPass, type MigrationDeps, type PassEnd } from './context.js';
import { reconcileMigrationDeletion, reconcileMigrationFinalizer } from './deletion.js';
import { reconcileIdleMigration } from './idle.js';
import { completeMigrationPendingLockRelease } from './retire.js';
import { reconcileUnresolvedRunCopy } from './unresolved.js';

export async function reconcileMigration(deps: MigrationDeps, namespace: string, name: string): Promise<PassEnd | undefined> {
  const m = await deps.client.tryGet<PtahMigration>({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace, name });
  if (!m) return undefined;
  const pass = new MigrationPass(deps, m);

  if (await completeMigrationPendingLockRelease(pass)) return endPass('owed release completed');
  const copy = await reconcileUnresolvedRunCopy(pass);
  if (copy) return copy;
  if (pass.m.metadata.deletionTimestamp) return reconcileMigrationDeletion(pass);
  const finalizer = await reconcileMigrationFinalizer(pass);
  if (finalizer) return finalizer;
  const binding = await reconcileMigrationExecutionBinding(pass);
  if (binding) return binding;
  const claim = pass.claim;
  if (claim) return reconcileActiveMigration(pass, claim);
  return reconcileIdleMigration(pass);
}
