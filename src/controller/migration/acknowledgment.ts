// A person's way out of an unresolved run: a PtahMigrationRunAcknowledgment naming the attempt. It is settled in
// the name admission stamped on it, taken even while the migration is suspended, and followed by a fresh reading
// before anything is planned. The mechanism is shared with the schema's proof (../acknowledgment.ts).
import { KINDS } from '../../shared/api/names.js';
import { settleByAcknowledgment } from '../acknowledgment.js';
import type { MigrationPass, PassEnd } from './context.js';
import { writeMigrationStatus } from './status.js';

/** The unresolved run settled by the acknowledgment naming it: status.unresolvedRun swapped for status.resolvedRun in one write. */
export function settleUnresolvedRunByAcknowledgment(pass: MigrationPass): Promise<PassEnd | undefined> {
  const { unresolvedRun, resolvedRun } = pass.status;
  return settleByAcknowledgment(pass, {
    kind: KINDS.PtahMigrationRunAcknowledgment.kind,
    waitingOn: unresolvedRun?.operationID,
    settledWith: resolvedRun?.acknowledgmentRef?.uid,
    settledEvent: 'UnresolvedRunAcknowledged',
    settle: (ack, acknowledgedBy) => writeMigrationStatus(pass, {
      ...pass.status,
      unresolvedRun: undefined,
      resolvedRun: {
        operationID: unresolvedRun!.operationID,
        outcome: unresolvedRun!.outcome,
        resolution: 'ResolvedByAcknowledgment',
        acknowledgmentRef: { name: ack.metadata.name, uid: ack.metadata.uid },
        acknowledgedBy,
        resolvedAt: pass.nowIso(),
      },
      // A fresh reading comes before anything is planned.
      plan: undefined,
      nextReconciliationTime: pass.nowIso(),
    }, { phase: 'Pending', reason: 'RunAcknowledged', message: `${acknowledgedBy.username} acknowledged operation ${unresolvedRun!.operationID}; the history is read again before anything is planned` }),
  });
}
