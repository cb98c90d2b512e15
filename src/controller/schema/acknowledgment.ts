// A person's settlement of a schema proof (the seed: "Only deletion and a person's settlement end a proof that no read
// can finish"): a PtahSchemaRunAcknowledgment naming the Apply whose proof is owed. It is taken only once nothing of
// the Apply can still write (where the proof would claim its reading, or where a claimed reading waits to run), by
// the write that ends the proof and hands its realm back, in the name admission stamped on it; the plan goes with
// it, so a fresh reading comes before anything is planned. The mechanism is the migration's (../acknowledgment.ts).
import { KINDS } from '../../shared/api/names.js';
import { settleByAcknowledgment } from '../acknowledgment.js';
import type { PassEnd, SchemaPass } from './context.js';
import { endProofUnread } from './retire.js';

export function settleProofByAcknowledgment(pass: SchemaPass): Promise<PassEnd | undefined> {
  const pending = pass.status.pendingObservation;
  return settleByAcknowledgment(pass, {
    kind: KINDS.PtahSchemaRunAcknowledgment.kind,
    waitingOn: pending?.applyOperationID,
    settledWith: pass.status.resolvedProof?.acknowledgmentRef.uid,
    settledEvent: 'ProofAcknowledged',
    settle: async (ack, acknowledgedBy) => {
      const operationID = pending!.applyOperationID;
      await endProofUnread(pass, {
        why: 'ProofAcknowledged',
        record: (status) => {
          status.resolvedProof = {
            operationID,
            outcome: pending!.outcome,
            acknowledgmentRef: { name: ack.metadata.name, uid: ack.metadata.uid },
            acknowledgedBy,
            resolvedAt: pass.nowIso(),
          };
          // A fresh reading comes before anything is planned.
          status.plan = undefined;
          status.nextReconciliationTime = pass.nowIso();
        },
        report: {
          phase: 'Pending',
          reason: 'ProofAcknowledged',
          message: `${acknowledgedBy.username} acknowledged Apply ${operationID}, whose proof no reading finished; the database is read again before anything is planned`,
        },
      });
    },
  });
}
