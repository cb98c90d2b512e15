// Wires the PtahMigration reconciler into the controller manager: one pass per resource at a time (and so one
// writer of its status), woken by the resource itself, the Jobs and Pods it dispatched when they stop
// (src/controller/triggers.ts), and the plans, approvals and acknowledgments that name it. Events only wake a key;
// every decision re-reads uncached.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import '../../shared/kube.js'; // registers the operator's kinds with the REST client
import { MIGRATION_PHASES } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import { JOB_LABELS } from '../../shared/job/metadata.js';
import type { KubeObject } from '../../shared/kube-client.js';
import { ignoreStatusOnlyUpdates, toLabelledOwner, type KeyMapper } from '../controller.js';
import { familyController, type FamilyControllerOptions } from '../family-controller.js';
import { registerController, type ControllerRegistration } from '../manager.js';
import { reportResources } from '../operator-metrics.js';
import { jobStopEdges, podStopEdges } from '../triggers.js';
import { reconcileMigration } from './reconcile.js';

export { CONTROLLER_STATE_VERSION } from '../family-controller.js';
export const MIGRATION_CONTROLLER = 'ptahmigration';
export type MigrationControllerOptions = FamilyControllerOptions;

const OWNER = { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind };
const OPERATION_OBJECTS = `${JOB_LABELS.component}=migration-operation`;

/** Maps an approval, acknowledgment or plan to the migration its spec names. */
const toNamedMigration: KeyMapper<KubeObject & { spec?: { migrationRef?: { name?: string } } }> = (obj) => {
  const name = obj.spec?.migrationRef?.name;
  return name && obj.metadata?.namespace ? [`${obj.metadata.namespace}/${name}`] : [];
};

export function migrationControllerRegistration(options: MigrationControllerOptions): ControllerRegistration {
  return {
    name: MIGRATION_CONTROLLER,
    setup: (env) => familyController(env, MIGRATION_CONTROLLER, options, reconcileMigration, (controller, informer) => {
      const primary = informer(API_VERSION, KINDS.PtahMigration.kind);
      controller.watchPrimary(primary, ignoreStatusOnlyUpdates).onStop(reportResources(KINDS.PtahMigration.kind, MIGRATION_PHASES, primary));
      controller.watchOwned(informer<V1Job>('batch/v1', 'Job', OPERATION_OBJECTS), OWNER, jobStopEdges);
      controller.watch(informer<V1Pod>('v1', 'Pod', OPERATION_OBJECTS), toLabelledOwner(JOB_LABELS.migration), podStopEdges);
      controller.watchOwned(informer(API_VERSION, KINDS.PtahMigrationPlan.kind), OWNER);
      controller.watch(informer(API_VERSION, KINDS.PtahMigrationApproval.kind), toNamedMigration);
      controller.watch(informer(API_VERSION, KINDS.PtahMigrationRunAcknowledgment.kind), toNamedMigration);
    }),
  };
}

/** Registers the migration controller with every manager started afterwards; returns the unregister function. */
export function registerMigrationController(options: MigrationControllerOptions): () => void {
  return registerController(migrationControllerRegistration(options));
}
