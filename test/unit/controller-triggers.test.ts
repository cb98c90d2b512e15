// Which events of its operation Jobs and Pods wake a resource, through each family's real registration: only the
// edges at which a Job or a Pod stops (seen stopped, just stopped, deleted while it ran). A Job's counters, a Pod
// being scheduled or started, the cleanup TTL and the collection of what already stopped wake nothing: each of them
// used to cost a pass that re-read the resource, the Job, the Lease and the plan to find nothing to do.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import t from 'tap';
import type { Controller, EventSource, ObjectEvent } from '../../src/controller/controller.js';
import { EventRecorder } from '../../src/controller/events.js';
import type { Informer } from '../../src/controller/informer.js';
import type { ControllerEnv, ControllerRegistration, InformerSpec } from '../../src/controller/manager.js';
import { migrationControllerRegistration } from '../../src/controller/migration/register.js';
import { schemaControllerRegistration } from '../../src/controller/schema/register.js';
import { jobStopEdges, podStopEdges } from '../../src/controller/triggers.js';
import { JOB_LABELS } from '../../src/shared/job/metadata.js';
import type { KubeClient, KubeObject } from '../../src/shared/kube-client.js';

const silent = pino({ level: 'silent' });

type Handler = (obj: KubeObject, old?: KubeObject) => void;
class FakeInformer implements EventSource<KubeObject> {
  private readonly handlers = new Map<ObjectEvent, Set<Handler>>();
  on(event: ObjectEvent, handler: Handler): () => void {
    const set = this.handlers.get(event) ?? new Set<Handler>();
    this.handlers.set(event, set);
    set.add(handler);
    return () => set.delete(handler);
  }
  emit(event: ObjectEvent, obj: KubeObject, old?: KubeObject): void {
    for (const h of this.handlers.get(event) ?? []) h(obj, old);
  }
  list(): KubeObject[] {
    return [];
  }
  hasSynced(): boolean {
    return false;
  }
}

/** A family's controller set up on fake informers, one per kind. */
function setUp(registration: ControllerRegistration): { controller: Controller; informers: Map<string, FakeInformer> } {
  const informers = new Map<string, FakeInformer>();
  const client = {} as KubeClient;
  const env: ControllerEnv = {
    informer: <T extends KubeObject>(spec: InformerSpec) => {
      let informer = informers.get(spec.kind);
      if (!informer) informers.set(spec.kind, (informer = new FakeInformer()));
      return informer as unknown as Informer<T>;
    },
    client,
    events: new EventRecorder({ client, controller: 'test', instance: 'test', logger: silent }),
    logger: silent,
    workers: 1,
  };
  return { controller: registration.setup(env), informers };
}

const options = { manager: { controllerImage: 'c', controllerRevision: 'r', runnerImage: 'i' }, leaseNamespace: 'ns' };
const FAMILIES = [
  { family: 'migration', registration: migrationControllerRegistration(options), owner: 'PtahMigration', label: JOB_LABELS.migration },
  { family: 'schema', registration: schemaControllerRegistration(options), owner: 'PtahSchema', label: JOB_LABELS.schema },
] as const;

function job(owner: string, status: V1Job['status'] = {}): V1Job {
  return {
    apiVersion: 'batch/v1', kind: 'Job',
    metadata: { name: 'op', namespace: 'ns', resourceVersion: String(Math.random()), ownerReferences: [{ apiVersion: 'operator.ptah.run/v1alpha1', kind: owner, name: 'r1', uid: 'u1', controller: true }] },
    status,
  };
}

function pod(label: string, status: V1Pod['status'] = {}, meta: Partial<NonNullable<V1Pod['metadata']>> = {}): V1Pod {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'op-x', namespace: 'ns', labels: { [label]: 'r1' }, ...meta }, status };
}

const complete = { conditions: [{ type: 'Complete', status: 'True' }], succeeded: 1 };
const running = { phase: 'Running', containerStatuses: [{ name: 'runner', image: 'i', imageID: '', ready: true, restartCount: 0, state: { running: {} } }] };
const succeeded = { phase: 'Succeeded', containerStatuses: [{ name: 'runner', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0 } } }] };

for (const { family, registration, owner, label } of FAMILIES) {
  t.test(`${family}: only the events at which an operation Job or Pod stops wake the resource`, async (t) => {
    const { controller, informers } = setUp(registration);
    t.teardown(() => controller.stop());
    const jobs = informers.get('Job')!;
    const pods = informers.get('Pod')!;
    const wakes = async (emit: () => void): Promise<boolean> => {
      emit();
      const woke = controller.queue.length > 0;
      if (woke) controller.queue.done((await controller.queue.get())!);
      return woke;
    };
    const quiet: [string, () => void][] = [
      ['a Job created', () => jobs.emit('add', job(owner))],
      ['a running Job\'s counters', () => jobs.emit('update', job(owner, { active: 1, ready: 1 }), job(owner, { active: 1 }))],
      ['the cleanup TTL on a finished Job', () => jobs.emit('update', job(owner, complete), job(owner, complete))],
      ['a finished Job collected', () => jobs.emit('delete', job(owner, complete))],
      ['a Pod created', () => pods.emit('add', pod(label, { phase: 'Pending' }))],
      ['a Pod started', () => pods.emit('update', pod(label, running), pod(label, { phase: 'Pending' }))],
      ['the evidence finalizer off a stopped Pod', () => pods.emit('update', pod(label, succeeded), pod(label, succeeded, { finalizers: ['x'] }))],
      ['a stopped Pod collected', () => pods.emit('delete', pod(label, succeeded))],
    ];
    for (const [what, emit] of quiet) t.notOk(await wakes(emit), `${what}: no pass`);
    const loud: [string, () => void][] = [
      ['a Job that finished', () => jobs.emit('update', job(owner, complete), job(owner, { active: 1 }))],
      ['a Job seen finished (a relist, a new term)', () => jobs.emit('add', job(owner, complete))],
      ['a Job deleted while it ran', () => jobs.emit('delete', job(owner, { active: 1 }))],
      ['a Pod that stopped', () => pods.emit('update', pod(label, succeeded), pod(label, running))],
      ['a Pod deleted while it ran', () => pods.emit('delete', pod(label, running))],
    ];
    for (const [what, emit] of loud) t.ok(await wakes(emit), `${what}: a pass`);
  });
}

t.test('the edges themselves', async (t) => {
  t.ok(jobStopEdges('update', job('X', { conditions: [{ type: 'Failed', status: 'True' }] }), job('X')), 'a failed Job stopped');
  t.notOk(jobStopEdges('update', job('X', { conditions: [{ type: 'Complete', status: 'False' }] }), job('X')), 'a condition that is not True stops nothing');
  t.ok(podStopEdges('update', pod('l', { phase: 'Failed' }), pod('l', running)), 'a failed Pod stopped');
  t.ok(podStopEdges('update', pod('l', running)), 'an update without its old state passes');
});
