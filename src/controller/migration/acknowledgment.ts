// A person's way out of an unresolved run: a PtahMigrationRunAcknowledgment naming the attempt. It is settled in
// the name admission stamped on it, taken even while the migration is suspended, and followed by a fresh reading
// before anything is planned. An acknowledgment naming a run the migration is not waiting on is marked Stale.
import type { PtahMigrationRunAcknowledgment } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { writeMigrationStatus } from './status.js';
import { withCondition } from '../conditions.js';

const settled = (ack: PtahMigrationRunAcknowledgment): boolean =>
  ack.status?.conditions?.some((c) => (c.type === 'Consumed' || c.type === 'Stale') && c.status === 'True') === true;

/** An acknowledgment of this migration (by name and UID) that is neither Consumed nor Stale. */
const openFor = (pass: MigrationPass) => (ack: PtahMigrationRunAcknowledgment): boolean =>
  ack.metadata.namespace === pass.namespace && ack.spec.migrationRef.name === pass.name && ack.spec.migrationRef.uid === pass.uid && !settled(ack);

const stamped = (ack: PtahMigrationRunAcknowledgment): boolean =>
  Boolean(ack.spec.acknowledgedBy?.username && ack.spec.acknowledgedAt && ack.spec.mutationRequestUID);

async function mark(pass: MigrationPass, ack: PtahMigrationRunAcknowledgment, type: 'Consumed' | 'Stale', reason: string, message: string): Promise<void> {
  const conditions = withCondition(ack.status?.conditions, type, 'True', reason, message, ack.metadata.generation ?? 0, pass.nowIso());
  await pass.deps.client.update<PtahMigrationRunAcknowledgment>({ ...ack, status: { ...ack.status, observedGeneration: ack.metadata.generation, conditions } }, { subresource: 'status' });
}

/**
 * Works off this migration's open acknowledgments, oldest first: the one naming the unresolved run settles it
 * (status.unresolvedRun swapped for status.resolvedRun in one write, then the acknowledgment marked Consumed);
 * any other is marked Stale. Returns the end of the pass when it wrote anything.
 */
export async function settleUnresolvedRunByAcknowledgment(pass: MigrationPass): Promise<PassEnd | undefined> {
  const kind = KINDS.PtahMigrationRunAcknowledgment.kind;
  // The cache only says whether to look: an open acknowledgment it does not hold yet wakes this key once it does.
  const cached = pass.deps.cached?.(API_VERSION, kind) as PtahMigrationRunAcknowledgment[] | undefined;
  if (cached && !cached.some(openFor(pass))) return undefined;
  const all = await pass.deps.client.list<PtahMigrationRunAcknowledgment>(API_VERSION, kind, pass.namespace);
  const open = all
    .filter(openFor(pass))
    .sort((a, b) => String(a.metadata.creationTimestamp ?? '').localeCompare(String(b.metadata.creationTimestamp ?? '')) || (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  const ack = open[0];
  if (!ack) return undefined;
  const { unresolvedRun, resolvedRun } = pass.status;
  const what = `acknowledgment ${ack.metadata.name}`;

  if (resolvedRun && resolvedRun.acknowledgmentRef?.uid === ack.metadata.uid) {
    // A pass settled the run with it and stopped before marking it.
    await mark(pass, ack, 'Consumed', 'RunAcknowledged', `settled unresolved run ${resolvedRun.operationID}`);
    return endPass(`${what} marked consumed`);
  }
  if (!stamped(ack)) {
    await mark(pass, ack, 'Stale', 'NotStamped', 'admission did not stamp who acknowledged the run, so it settles nothing');
    return endPass(`${what} is not stamped`);
  }
  if (!unresolvedRun || unresolvedRun.operationID !== ack.spec.operationID) {
    await mark(pass, ack, 'Stale', 'RunNotUnresolved', `operation ${ack.spec.operationID} is not the run this migration is waiting on`);
    return endPass(`${what} names no unresolved run`);
  }
  const acknowledgedBy = ack.spec.acknowledgedBy!;
  await writeMigrationStatus(pass, {
    ...pass.status,
    unresolvedRun: undefined,
    resolvedRun: {
      operationID: unresolvedRun.operationID,
      outcome: unresolvedRun.outcome,
      resolution: 'ResolvedByAcknowledgment',
      acknowledgmentRef: { name: ack.metadata.name!, uid: ack.metadata.uid! },
      acknowledgedBy,
      resolvedAt: pass.nowIso(),
    },
    // A fresh reading comes before anything is planned.
    plan: undefined,
    nextReconciliationTime: pass.nowIso(),
  }, { phase: 'Pending', reason: 'RunAcknowledged', message: `${acknowledgedBy.username} acknowledged operation ${unresolvedRun.operationID}; the history is read again before anything is planned` });
  await mark(pass, ack, 'Consumed', 'RunAcknowledged', `settled unresolved run ${unresolvedRun.operationID}`);
  pass.event('Normal', 'UnresolvedRunAcknowledged', `${acknowledgedBy.username} acknowledged unresolved operation ${unresolvedRun.operationID} (${what})`);
  return endPass('unresolved run settled by acknowledgment');
}
