// The ptah_operator_* series a person reads the lifecycle's obligations from. The gauges are counted at scrape time
// from what the primary informers of the term in force hold (no API request, no bookkeeping in passes), so they
// follow the cache and vanish with the term; the counters are incremented where each outcome is decided. Labels
// are kinds, namespaces, phases, operation types and reason words from code: never a resource name or a message.
import { Counter, Gauge } from 'prom-client';
import { EXECUTION_DEFAULTS, type ActiveOperation } from '../shared/api/shapes.js';
import { JOB_DEADLINE_GRACE_SECONDS } from '../shared/job/build.js';
import { ApiError, type KubeObject } from '../shared/kube-client.js';
import { mayHaveDispatched } from '../shared/lifecycle/dispatch.js';
import { registry } from '../shared/metrics.js';
import { LEASE_GRACE_SECONDS } from './claim-values.js';

const registers = [registry];

/** Past its deadline by more than this, a claim is overdue: by then its Job has stopped and its Lease would lapse. */
export const OVERDUE_GRACE_SECONDS = JOB_DEADLINE_GRACE_SECONDS + LEASE_GRACE_SECONDS;

/** What the census reads of a primary object. */
interface CensusObject extends KubeObject {
  spec?: { execution?: { activeDeadlineSeconds?: number } };
  status?: {
    phase?: string;
    activeOperation?: ActiveOperation;
    unresolvedRun?: unknown;
    pendingObservation?: unknown;
    pendingLockRelease?: unknown;
    pendingBindingRetirement?: unknown;
  };
}

/** A primary informer as the census reads it. */
export interface ResourceSource {
  list(): readonly KubeObject[];
  hasSynced(): boolean;
}

interface Reporter {
  family: string;
  phases: readonly string[];
  source: ResourceSource;
}

const reporters = new Set<Reporter>();

/**
 * Counts `source`'s objects (a family's primary informer, of kind `family`, whose phases are `phases`) into the
 * gauges while it lives; the returned function removes it, so a replica that stopped leading reports nothing.
 */
export function reportResources(family: string, phases: readonly string[], source: ResourceSource): () => void {
  const reporter: Reporter = { family, phases, source };
  reporters.add(reporter);
  return () => void reporters.delete(reporter);
}

/** What one family holds in one namespace. */
interface Tally {
  labels: { family: string; namespace: string };
  phases: Map<string, number>;
  unresolvedRuns: number;
  pendingObservations: number;
  pendingLockReleases: number;
  pendingBindingRetirements: number;
  claims: Map<string, number>;
  oldestClaimSeconds: number;
  overdueClaims: number;
}

/** When the claim's work should be over: an Apply's execution deadline, a reading's Job deadline from its (re)start. */
function claimDeadlineMs(obj: CensusObject, claim: ActiveOperation): number {
  if (claim.executionNotAfter) return Date.parse(claim.executionNotAfter);
  const from = Math.max(Date.parse(claim.startedAt), claim.retryNotBefore ? Date.parse(claim.retryNotBefore) : 0);
  return from + (obj.spec?.execution?.activeDeadlineSeconds ?? EXECUTION_DEFAULTS.activeDeadlineSeconds) * 1000;
}

/** The synced caches, tallied by family and namespace; an unsynced cache would report a false zero, so it is left out. */
function census(nowMs: number): Tally[] {
  const tallies = new Map<string, Tally>();
  for (const { family, phases, source } of reporters) {
    if (!source.hasSynced()) continue;
    for (const obj of source.list() as readonly CensusObject[]) {
      const namespace = obj.metadata?.namespace ?? '';
      const key = JSON.stringify([family, namespace]);
      let tally = tallies.get(key);
      if (!tally) {
        tally = { labels: { family, namespace }, phases: new Map(phases.map((p) => [p, 0])), unresolvedRuns: 0, pendingObservations: 0,
          pendingLockReleases: 0, pendingBindingRetirements: 0, claims: new Map(), oldestClaimSeconds: 0, overdueClaims: 0 };
        tallies.set(key, tally);
      }
      const status = obj.status ?? {};
      // A phase the CRD does not list cannot be stored; an object not yet reconciled has none.
      const phase = status.phase && phases.includes(status.phase) ? status.phase : 'None';
      tally.phases.set(phase, (tally.phases.get(phase) ?? 0) + 1);
      if (status.unresolvedRun) tally.unresolvedRuns += 1;
      if (status.pendingObservation) tally.pendingObservations += 1;
      if (status.pendingLockRelease) tally.pendingLockReleases += 1;
      if (status.pendingBindingRetirement) tally.pendingBindingRetirements += 1;
      const claim = status.activeOperation;
      if (!claim) continue;
      const operation = labelWord(claim.type);
      tally.claims.set(operation, (tally.claims.get(operation) ?? 0) + 1);
      tally.oldestClaimSeconds = Math.max(tally.oldestClaimSeconds, (nowMs - Date.parse(claim.startedAt)) / 1000);
      if (nowMs > claimDeadlineMs(obj, claim) + OVERDUE_GRACE_SECONDS * 1000) tally.overdueClaims += 1;
    }
  }
  return [...tallies.values()];
}

/** A gauge of one number per family and namespace, recounted at every scrape. */
function tallyGauge(name: string, help: string, value: (tally: Tally) => number): Gauge<'family' | 'namespace'> {
  return new Gauge({
    name,
    help,
    labelNames: ['family', 'namespace'] as const,
    registers,
    collect() {
      this.reset();
      for (const tally of census(Date.now())) this.set(tally.labels, value(tally));
    },
  });
}

export const resourceMetrics = {
  resources: new Gauge({
    name: 'ptah_operator_resources',
    help: 'PtahSchemas and PtahMigrations in the leader\'s cache, by family (kind), namespace and status.phase (None: not reconciled yet).',
    labelNames: ['family', 'namespace', 'phase'] as const,
    registers,
    collect() {
      this.reset();
      for (const tally of census(Date.now())) for (const [phase, n] of tally.phases) this.set({ ...tally.labels, phase }, n);
    },
  }),
  claims: new Gauge({
    name: 'ptah_operator_claims_in_flight',
    help: 'Resources with a claim in status.activeOperation, by family, namespace and operation type.',
    labelNames: ['family', 'namespace', 'operation'] as const,
    registers,
    collect() {
      this.reset();
      for (const tally of census(Date.now())) for (const [operation, n] of tally.claims) this.set({ ...tally.labels, operation }, n);
    },
  }),
  unresolvedRuns: tallyGauge('ptah_operator_unresolved_runs',
    'Resources whose status.unresolvedRun stands: a run nobody accounted for, waiting for a History reading or a person\'s acknowledgment.', (t) => t.unresolvedRuns),
  pendingObservations: tallyGauge('ptah_operator_pending_observations',
    'Resources owing the proof of an Apply (status.pendingObservation), under the Apply\'s Lease.', (t) => t.pendingObservations),
  pendingLockReleases: tallyGauge('ptah_operator_pending_lock_releases',
    'Resources owing a realm Lease release (status.pendingLockRelease), retried at the top of every pass.', (t) => t.pendingLockReleases),
  pendingBindingRetirements: tallyGauge('ptah_operator_pending_binding_retirements',
    'Resources still working off a retired execution binding (status.pendingBindingRetirement).', (t) => t.pendingBindingRetirements),
  oldestClaimAge: tallyGauge('ptah_operator_oldest_claim_age_seconds',
    'Age of the oldest claim in flight (since its status.activeOperation.startedAt), 0 when none.', (t) => t.oldestClaimSeconds),
  overdueClaims: tallyGauge('ptah_operator_overdue_claims',
    `Claims in flight more than ${OVERDUE_GRACE_SECONDS} s past their deadline (an Apply's executionNotAfter; a reading's Job deadline from its start).`, (t) => t.overdueClaims),
};

/** A label value from code: a CamelCase word as written, anything else (which code should never pass) Other. */
export function labelWord(value: string): string {
  return /^[A-Z][A-Za-z]{0,63}$/.test(value) ? value : 'Other';
}

export const outcomeMetrics = {
  jobOutcomes: new Counter({
    name: 'ptah_operator_job_outcomes_total',
    help: 'Claims that may have dispatched a Job, retired or run again, by family, operation and outcome (the retirement\'s reason, or Retried).',
    labelNames: ['family', 'operation', 'outcome'] as const,
    registers,
  }),
  resultReadFailures: new Counter({
    name: 'ptah_operator_result_read_failures_total',
    help: 'Failed reads of an operation Pod\'s log, by family and reason (the HTTP status, or NoResponse); retried for two minutes, then the log counts as gone.',
    labelNames: ['family', 'reason'] as const,
    registers,
  }),
};

/** Counts how a claim ended, once its status write is stored; a claim that never dispatched is no Job outcome. */
export function countJobOutcome(family: string, claim: ActiveOperation, outcome: string): void {
  if (!mayHaveDispatched(claim)) return;
  outcomeMetrics.jobOutcomes.inc({ family, operation: labelWord(claim.type), outcome: labelWord(outcome) });
}

/** Counts a failed read of a result log. */
export function countResultReadFailure(family: string, err: unknown): void {
  const code = err instanceof ApiError ? err.code : undefined;
  outcomeMetrics.resultReadFailures.inc({ family, reason: code === undefined ? 'NoResponse' : String(code) });
}
