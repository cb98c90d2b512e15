// Wires the PtahSchema reconciler into the controller manager, beside the migration controller: one pass per
// resource at a time, woken by the resource itself, the Jobs and Pods it dispatched when they stop
// (src/controller/triggers.ts), its plans and the approvals that name it. Events only wake a key; every decision
// re-reads uncached.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import '../../shared/kube.js'; // registers the operator's kinds with the REST client
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import { SCHEMA_PHASES } from '../../shared/api/schema-kinds.js';
import { JOB_LABELS } from '../../shared/job/metadata.js';
import type { KubeObject } from '../../shared/kube-client.js';
import { ignoreStatusOnlyUpdates, toLabelledOwner, type KeyMapper } from '../controller.js';
import { familyController, type FamilyControllerOptions } from '../family-controller.js';
import { registerController, type ControllerRegistration } from '../manager.js';
import { reportResources } from '../operator-metrics.js';
import { jobStopEdges, podStopEdges } from '../triggers.js';
import { reconcileSchema } from './reconcile.js';

export const SCHEMA_CONTROLLER = 'ptahschema';

const OWNER = { apiVersion: API_VERSION, kind: KINDS.PtahSchema.kind };
const OPERATION_OBJECTS = `${JOB_LABELS.component}=schema-operation`;

/** Maps an approval or acknowledgment to the schema its spec names. */
const toNamedSchema: KeyMapper<KubeObject & { spec?: { schemaRef?: { name?: string } } }> = (obj) => {
  const name = obj.spec?.schemaRef?.name;
  return name && obj.metadata?.namespace ? [`${obj.metadata.namespace}/${name}`] : [];
};

export function schemaControllerRegistration(options: FamilyControllerOptions): ControllerRegistration {
  return {
    name: SCHEMA_CONTROLLER,
    setup: (env) => familyController(env, SCHEMA_CONTROLLER, options, reconcileSchema, (controller, informer) => {
      const primary = informer(API_VERSION, KINDS.PtahSchema.kind);
      controller.watchPrimary(primary, ignoreStatusOnlyUpdates).onStop(reportResources(KINDS.PtahSchema.kind, SCHEMA_PHASES, primary));
      controller.watchOwned(informer<V1Job>('batch/v1', 'Job', OPERATION_OBJECTS), OWNER, jobStopEdges);
      controller.watch(informer<V1Pod>('v1', 'Pod', OPERATION_OBJECTS), toLabelledOwner(JOB_LABELS.schema), podStopEdges);
      controller.watchOwned(informer(API_VERSION, KINDS.PtahSchemaPlan.kind), OWNER);
      controller.watch(informer(API_VERSION, KINDS.PtahSchemaApproval.kind), toNamedSchema);
      controller.watch(informer(API_VERSION, KINDS.PtahSchemaRunAcknowledgment.kind), toNamedSchema);
    }),
  };
}

/** Registers the schema controller with every manager started afterwards; returns the unregister function. */
export function registerSchemaController(options: FamilyControllerOptions): () => void {
  return registerController(schemaControllerRegistration(options));
}
