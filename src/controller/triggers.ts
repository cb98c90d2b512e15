// Which events of the operation Jobs and Pods wake their resource, for both families. Events only trigger passes
// (every decision re-reads uncached), and every wait on a Job or a Pod is also polled (supervision every 5 s while
// the claim holds the realm's Lease and every 30 s otherwise, shared/lifecycle/supervision.ts; the proof every 5 s;
// a frame's arrival every 2 s), so an event is worth a pass only when it can end such a wait early: a Job
// or a Pod that stopped, or one deleted while it ran. The rest (a Job's counters, a Pod being scheduled and
// started, the cleanup TTL, the evidence finalizer coming off, the collection of what already stopped) would wake
// a pass that reads the resource, the Job, the Lease and the plan again to find what the cache already showed:
// nothing to do.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { KubeObject } from '../shared/kube-client.js';
import type { EventFilter } from './controller.js';
import { isJobTerminal, podStopped } from './evidence.js';

/**
 * Passes the events at which `stopped` changes: an object seen already stopped, one that just stopped, and one
 * deleted before it stopped. An object that keeps running, or that is changed or collected after it stopped, wakes
 * nothing.
 */
export function stopEdges<T extends KubeObject>(stopped: (obj: T) => boolean): EventFilter<T> {
  return (event, obj, old) => {
    if (event === 'add') return stopped(obj);
    if (event === 'delete') return !stopped(obj);
    return old === undefined || stopped(obj) !== stopped(old);
  };
}

export const jobStopEdges: EventFilter<V1Job> = stopEdges<V1Job>(isJobTerminal);
export const podStopEdges: EventFilter<V1Pod> = stopEdges<V1Pod>(podStopped);
