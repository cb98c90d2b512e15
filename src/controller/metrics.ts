// The controller framework's series, in the process's one registry. Names and labels are controller-runtime's
// (workqueue_*, controller_runtime_*, leader_election_master_status) so dashboards and alerts written for Go
// operators read this one unchanged; the informer series are ours and carry the ptah_operator_ prefix.
import { Counter, Gauge, Histogram, exponentialBuckets } from 'prom-client';
import { registry } from '../shared/metrics.js';

const registers = [registry];

/** What a live work queue reports at scrape time about the items its workers hold. */
export interface InFlightReport {
  /** Seconds of work done so far by items still being processed. */
  unfinishedSeconds: number;
  /** Seconds the longest-running item still being processed has run. */
  longestSeconds: number;
}

const inFlightReporters = new Map<string, () => InFlightReport>();

/**
 * A queue reports its in-flight work while it lives; the returned function removes it and its series. A newer
 * queue of the same name (a controller restarted after regaining leadership) takes over the series, and the older
 * queue's late removal then leaves them alone.
 */
export function reportInFlight(name: string, report: () => InFlightReport): () => void {
  inFlightReporters.set(name, report);
  return () => {
    if (inFlightReporters.get(name) !== report) return;
    inFlightReporters.delete(name);
    workqueueMetrics.unfinishedWork.remove({ name, controller: name });
    workqueueMetrics.longestRunning.remove({ name, controller: name });
  };
}

// controller-runtime's queue latency buckets: 10 ns to 10 s, one per decade.
const queueBuckets = exponentialBuckets(1e-8, 10, 10);

export const workqueueMetrics = {
  depth: new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of workqueue',
    labelNames: ['name', 'controller', 'priority'] as const,
    registers,
  }),
  adds: new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue',
    labelNames: ['name', 'controller'] as const,
    registers,
  }),
  queueDuration: new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    labelNames: ['name', 'controller'] as const,
    buckets: queueBuckets,
    registers,
  }),
  workDuration: new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes.',
    labelNames: ['name', 'controller'] as const,
    buckets: queueBuckets,
    registers,
  }),
  unfinishedWork: new Gauge({
    name: 'workqueue_unfinished_work_seconds',
    help: 'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration.',
    labelNames: ['name', 'controller'] as const,
    registers,
    collect() {
      for (const [name, report] of inFlightReporters) this.set({ name, controller: name }, report().unfinishedSeconds);
    },
  }),
  longestRunning: new Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'How many seconds has the longest running processor for workqueue been running.',
    labelNames: ['name', 'controller'] as const,
    registers,
    collect() {
      for (const [name, report] of inFlightReporters) this.set({ name, controller: name }, report().longestSeconds);
    },
  }),
  retries: new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue',
    labelNames: ['name', 'controller'] as const,
    registers,
  }),
};

export type ReconcileResultLabel = 'success' | 'error' | 'requeue' | 'requeue_after';
export const RECONCILE_RESULTS: readonly ReconcileResultLabel[] = ['success', 'error', 'requeue', 'requeue_after'];

export const controllerMetrics = {
  reconcileTotal: new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Total number of reconciliations per controller',
    labelNames: ['controller', 'result'] as const,
    registers,
  }),
  reconcileErrors: new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total number of reconciliation errors per controller',
    labelNames: ['controller'] as const,
    registers,
  }),
  terminalReconcileErrors: new Counter({
    name: 'controller_runtime_terminal_reconcile_errors_total',
    help: 'Total number of terminal reconciliation errors per controller',
    labelNames: ['controller'] as const,
    registers,
  }),
  reconcileTime: new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Length of time per reconciliation per controller',
    labelNames: ['controller'] as const,
    buckets: [
      0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75,
      2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
    ],
    registers,
  }),
  maxConcurrentReconciles: new Gauge({
    name: 'controller_runtime_max_concurrent_reconciles',
    help: 'Maximum number of concurrent reconciles per controller',
    labelNames: ['controller'] as const,
    registers,
  }),
  activeWorkers: new Gauge({
    name: 'controller_runtime_active_workers',
    help: 'Number of currently used workers per controller',
    labelNames: ['controller'] as const,
    registers,
  }),
};

export const leaderElectionMetrics = {
  masterStatus: new Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. \'name\' is the string used to identify the lease. Please make sure to group by name.',
    labelNames: ['name'] as const,
    registers,
  }),
};

/** Why an informer made a full LIST: the first one, a 410 Gone from its watch, or recovery after a failure. */
export type ListReason = 'initial' | 'gone' | 'error';
/** Why an informer (re)opened its watch: after a LIST, after the server ended the last one, or after it fell silent. */
export type WatchReason = 'list' | 'closed' | 'watchdog';

export const informerMetrics = {
  lists: new Counter({
    name: 'ptah_operator_informer_lists_total',
    help: 'Full LISTs an informer made, by reason (initial, gone = 410 from its watch, error = recovering from a failure).',
    labelNames: ['resource', 'reason'] as const,
    registers,
  }),
  watches: new Counter({
    name: 'ptah_operator_informer_watches_total',
    help: 'WATCH requests an informer opened, by reason (list = after a LIST, closed = the server ended the last one, watchdog = the last one fell silent).',
    labelNames: ['resource', 'reason'] as const,
    registers,
  }),
  failures: new Counter({
    name: 'ptah_operator_informer_failures_total',
    help: 'LISTs and WATCHes that failed; each is retried after an exponential backoff.',
    labelNames: ['resource'] as const,
    registers,
  }),
  lastEvent: new Gauge({
    name: 'ptah_operator_informer_last_event_timestamp_seconds',
    help: 'Unix time of the last LIST or watch event an informer received.',
    labelNames: ['resource'] as const,
    registers,
  }),
};
