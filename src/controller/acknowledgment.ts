// A person's settlement of a run nobody could account for, the same for both families: a run acknowledgment names
// the resource (by name and UID) and the operation, is stamped by admission with who made it, and is settled here in
// that name. The open acknowledgments of a resource are worked off oldest first: the one naming the run the resource
// waits on settles it, through the family's own write; any other is marked Stale. A family supplies only what differs
// (its kind, the run it waits on, and the write that settles it).
import type { PtahMigrationRunAcknowledgment } from '../shared/api/migration-kinds.js';
import type { PtahSchemaRunAcknowledgment } from '../shared/api/schema-kinds.js';
import type { Identity, ObjectRef } from '../shared/api/shapes.js';
import { API_VERSION } from '../shared/api/names.js';
import { withCondition } from './conditions.js';
import { endPass, type OwnerPass, type OwnerResource, type PassEnd } from './pass.js';

/** Either family's acknowledgment kind (acknowledgment-kind.ts defines both alike). */
export type RunAcknowledgment = PtahMigrationRunAcknowledgment | PtahSchemaRunAcknowledgment;

/** The resource an acknowledgment names: its kind's own field (migrationRef, schemaRef). */
const resourceRefOf = (ack: RunAcknowledgment): ObjectRef | undefined => ('schemaRef' in ack.spec ? ack.spec.schemaRef : ack.spec.migrationRef);

export interface AcknowledgmentFamily {
  kind: RunAcknowledgment['kind'];
  /** The operation the resource waits on a person for, if any. */
  waitingOn: string | undefined;
  /** The acknowledgment the resource's last settlement names (its UID), so a pass that stopped before marking it ends the job. */
  settledWith: string | undefined;
  /** The family's one write that settles the run in the acknowledger's name; it reports and records the settlement. */
  settle(ack: RunAcknowledgment & { metadata: { name: string; uid: string } }, acknowledgedBy: Identity): Promise<void>;
  /** The Event reason said once the run is settled. */
  settledEvent: string;
}

const settled = (ack: RunAcknowledgment): boolean =>
  ack.status?.conditions?.some((c) => (c.type === 'Consumed' || c.type === 'Stale') && c.status === 'True') === true;

const stamped = (ack: RunAcknowledgment): boolean => Boolean(ack.spec.acknowledgedBy?.username && ack.spec.acknowledgedAt && ack.spec.mutationRequestUID);

/** An acknowledgment of this resource (by name and UID) that is neither Consumed nor Stale. */
function openFor(pass: OwnerPass<OwnerResource>) {
  return (ack: RunAcknowledgment): boolean => {
    const ref = resourceRefOf(ack);
    return ack.metadata.namespace === pass.namespace && ref?.name === pass.name && ref.uid === pass.uid && !settled(ack);
  };
}

async function mark(pass: OwnerPass<OwnerResource>, ack: RunAcknowledgment, type: 'Consumed' | 'Stale', reason: string, message: string): Promise<void> {
  const conditions = withCondition(ack.status?.conditions, type, 'True', reason, message, ack.metadata.generation ?? 0, pass.nowIso());
  await pass.deps.client.update<RunAcknowledgment>({ ...ack, status: { ...ack.status, observedGeneration: ack.metadata.generation, conditions } }, { subresource: 'status' });
}

/**
 * Works off the resource's oldest open acknowledgment: a pass that settled with it and stopped before marking it
 * marks it Consumed; one admission did not stamp, or one naming a run the resource is not waiting on, is marked Stale;
 * the one naming the run settles it, then is marked Consumed. Returns the end of the pass when it wrote anything.
 */
export async function settleByAcknowledgment(pass: OwnerPass<OwnerResource>, family: AcknowledgmentFamily): Promise<PassEnd | undefined> {
  // The cache only says whether to look: an open acknowledgment it does not hold yet wakes this key once it does.
  const cached = pass.deps.cached?.(API_VERSION, family.kind) as RunAcknowledgment[] | undefined;
  if (cached && !cached.some(openFor(pass))) return undefined;
  const all = await pass.deps.client.list<RunAcknowledgment>(API_VERSION, family.kind, pass.namespace);
  const ack = all
    .filter(openFor(pass))
    .sort((a, b) => String(a.metadata.creationTimestamp ?? '').localeCompare(String(b.metadata.creationTimestamp ?? '')) || (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''))[0];
  if (!ack) return undefined;
  const what = `acknowledgment ${ack.metadata.name}`;
  const operationID = ack.spec.operationID;

  if (family.settledWith !== undefined && family.settledWith === ack.metadata.uid) {
    await mark(pass, ack, 'Consumed', 'RunAcknowledged', `settled operation ${operationID}`);
    return endPass(`${what} marked consumed`);
  }
  if (!stamped(ack)) {
    await mark(pass, ack, 'Stale', 'NotStamped', 'admission did not stamp who acknowledged the run, so it settles nothing');
    return endPass(`${what} is not stamped`);
  }
  if (family.waitingOn !== operationID) {
    await mark(pass, ack, 'Stale', 'RunNotUnresolved', `operation ${operationID} is not the run this ${pass.kind} is waiting on`);
    return endPass(`${what} names no run this ${pass.kind} waits on`);
  }
  const acknowledgedBy = ack.spec.acknowledgedBy!;
  await family.settle(ack as RunAcknowledgment & { metadata: { name: string; uid: string } }, acknowledgedBy);
  await mark(pass, ack, 'Consumed', 'RunAcknowledged', `settled operation ${operationID}`);
  pass.event('Normal', family.settledEvent, `${acknowledgedBy.username} acknowledged operation ${operationID} (${what})`);
  return endPass(`operation ${operationID} settled by acknowledgment`);
}
