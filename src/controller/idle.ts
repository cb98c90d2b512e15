// The start of the idle path (no claim in flight, and for a schema no proof owed), decided once for both families,
// in this order: the execution binding installed or its record brought up to date, status.observedGeneration with a
// reading due once the spec moved, then a suspension, an unsupported engine and the realm's grant, each of which
// stops the pass with a report. Whatever of that is written goes in one status write, so a new suspended resource
// costs one read and one write. Each family supplies its status, where it writes it and what its suspension says.
import { SUPPORTED_ENGINE, type Condition, type ExecutionBinding } from '../shared/api/shapes.js';
import { bindingToRecord } from './binding.js';
import { endPass, type OwnerPass, type OwnerResource, type PassEnd } from './pass.js';
import { realmRefusal } from './realm-authorization.js';
import { holdForRealm } from './realm-census.js';
import type { Report } from './status.js';

/** The reports the preamble stops a pass with. */
export type IdleStop = Report<'Suspended' | 'Blocked'>;

/** What the preamble reads and writes of a status. */
export interface IdleStatus {
  observedGeneration?: number;
  nextReconciliationTime?: string;
  executionBinding?: ExecutionBinding;
  phase?: string;
  conditions?: Condition[];
}

export interface IdleFamily<S extends IdleStatus> {
  /** The status as the pass holds it. */
  status: S;
  intervalMs: number;
  /** What a Suspended report says. */
  suspendedMessage: string;
  write(next: S, report?: IdleStop): Promise<void>;
  /** Writes the report alone, only when it changes something; returns whether it wrote. */
  publish(report: IdleStop): Promise<boolean>;
}

/** A suspension or an unsupported engine: the report the pass stops with, read from the spec alone. */
function stopOf(pass: OwnerPass<OwnerResource & { spec: { suspend?: boolean } }>, suspendedMessage: string): { report: IdleStop; why: string } | undefined {
  if (pass.obj.spec.suspend) return { report: { phase: 'Suspended', reason: 'Suspended', message: suspendedMessage }, why: 'suspended' };
  const engine = pass.obj.spec.target.engine;
  if (engine === SUPPORTED_ENGINE) return undefined;
  return {
    report: { phase: 'Blocked', reason: 'UnsupportedEngine', message: `engine ${JSON.stringify(engine)} is not supported; only ${SUPPORTED_ENGINE} is` },
    why: 'unsupported engine',
  };
}

/** Returns the end of the pass when the preamble wrote or stops it; undefined when the idle path goes on. */
export async function idlePreamble<S extends IdleStatus>(pass: OwnerPass<OwnerResource & { spec: { suspend?: boolean } }>, family: IdleFamily<S>): Promise<PassEnd | undefined> {
  const { status, intervalMs } = family;
  const binding = bindingToRecord(pass, status.executionBinding);
  const respecified = status.observedGeneration !== pass.generation;
  const stop = stopOf(pass, family.suspendedMessage);
  if (binding || respecified) {
    // The status names the generation it reports on before any report of it, the stop's included, in the same write.
    await family.write({
      ...status,
      ...(binding ? { executionBinding: binding } : {}),
      // The spec changed since the reading: what was read and planned is read again under the new spec.
      ...(respecified ? { observedGeneration: pass.generation, nextReconciliationTime: pass.nowIso() } : {}),
    }, stop?.report);
    if (stop) return endPass(stop.why, intervalMs);
    // Everything after this reads, plans or claims: the next pass does it under the binding and generation as stored.
    const wrote = [binding && (status.executionBinding ? 'execution binding record updated' : 'execution binding installed'), respecified && 'spec changed: a new reading is due'];
    return endPass(wrote.filter(Boolean).join('; '));
  }
  if (stop) {
    await family.publish(stop.report);
    return endPass(stop.why, intervalMs);
  }
  // Not folded into the write above: the check reads every PtahRealm and resource uncached, and a pass that wrote
  // ends there, so the next pass would read them all again.
  const refused = await realmRefusal(pass);
  if (refused) return holdForRealm(pass, (_, report) => family.publish(report), refused, intervalMs);
  return undefined;
}
