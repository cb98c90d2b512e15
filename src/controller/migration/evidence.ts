// A migration Apply whose log holds no frame may be read from its runner's termination summary (the seed's
// terminationSummaryStandIn); the rest of what a terminal Job left to read is shared (src/controller/evidence.ts).
import type { V1ContainerStateTerminated } from '@kubernetes/client-node';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import { parseSummaryFor, SummaryError, summaryStandsIn, type RunnerSummary } from '../../shared/runner-protocol.js';
import type { MigrationPass } from './context.js';

/**
 * The runner's termination summary standing in for a migration Apply's frame: only when the log holds no
 * readable frame (or is gone), only when the summary names this attempt and agrees with every frame header the
 * log holds. It can say less than the frame would have, never more.
 */
export function terminationSummaryStandIn(pass: MigrationPass, claim: ActiveOperation, terminated: V1ContainerStateTerminated, log: string | undefined): RunnerSummary | undefined {
  if (claim.type !== 'Apply' || !terminated.message) return undefined;
  let summary: RunnerSummary;
  try {
    summary = parseSummaryFor(terminated.message, 'migration-apply', claim.id);
  } catch (e) {
    if (e instanceof SummaryError && e.kind === 'refused') {
      pass.event('Warning', 'TerminationSummaryRefused', `the termination summary of operation ${claim.id} was refused: ${e.message}`);
    }
    return undefined;
  }
  if (summaryStandsIn(summary, log)) return summary;
  pass.event('Warning', 'TerminationSummaryRefused', `the termination summary of operation ${claim.id} does not agree with the frame headers in its log`);
  return undefined;
}
