// A PtahMigration's Resolve result (src/controller/resolution.ts): the pin is written as status.artifact, and a pin
// that moved (a moved tag, another policy) retires the plan and its reading, as a changed ConfigMap does; a refusal
// is Blocked with its reason and the Resolve runs again after spec.execution.failureRetryInterval.
import type { V1Job } from '@kubernetes/client-node';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { pinText, samePin } from '../artifact.js';
import { readResolution, verifiedText } from '../resolution.js';
import { retryMigrationReading } from './claim.js';
import { endPass, type MigrationPass, type PassEnd } from './context.js';
import { retireMigrationClaim } from './retire.js';
import { statusWithCondition } from './status.js';

export async function harvestMigrationResolve(pass: MigrationPass, claim: ActiveOperation, job: V1Job): Promise<PassEnd> {
  const outcome = await readResolution(pass, claim, job, pass.m.spec.artifact.oci);
  switch (outcome.kind) {
    case 'wait':
      return endPass(outcome.why, outcome.ms);
    case 'retry':
      return retryMigrationReading(pass, outcome.why);
    case 'refused':
      pass.event('Warning', 'ArtifactVerificationRefused', `${outcome.reason}: ${outcome.message}`);
      return retryMigrationReading(pass, outcome.message, outcome);
  }
  const { pin } = outcome;
  const moved = !samePin(pass.status.artifact, pin);
  await retireMigrationClaim(pass, {
    disposition: 'accounted',
    why: 'Resolved',
    job,
    record: (status) => {
      Object.assign(status, statusWithCondition(pass, status, 'ArtifactVerified', 'True', 'Verified', `${pinText(pin)} ${verifiedText(pin)}`));
      status.artifact = pin;
      // A new artifact or policy: the reading and the plan were of the old one.
      if (moved) Object.assign(status, { plan: undefined, refusedReading: undefined, nextReconciliationTime: pass.nowIso() });
    },
    report: { phase: 'Pending', reason: 'ArtifactResolved', message: `artifact ${pinText(pin)} pinned` },
  });
  if (moved) pass.event('Normal', 'ArtifactResolved', `artifact ${pinText(pin)} pinned at content digest ${pin.digest}; ${verifiedText(pin)}`);
  return endPass(moved ? 'artifact pinned' : 'artifact resolved again, unchanged');
}
