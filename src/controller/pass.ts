// What one reconcile pass of either family works with: its dependencies, the resource as last read or written
// (every write hands back the stored object, so later steps of the pass see what the API server holds), and the
// small helpers every step uses. Each family's pass (MigrationPass, SchemaPass) adds only its own accessors.
import type { V1Job } from '@kubernetes/client-node';
import { API_VERSION } from '../shared/api/names.js';
import type { ActiveOperation } from '../shared/api/shapes.js';
import type { Clock } from '../shared/clock.js';
import type { KubeClient, KubeObject, ResourceRef } from '../shared/kube-client.js';
import type { DispatchOrder } from '../shared/lifecycle/dispatch.js';
import { PassLeases } from '../shared/lifecycle/leases.js';
import type { Logger } from '../shared/logger.js';
import { realmDigestOf, type RealmTarget } from '../shared/realm.js';
import type { TargetLock } from '../shared/targetlock.js';
import type { EventInput } from './events.js';

/** The manager as its Jobs record it and as the execution binding binds it. */
export interface ManagerIdentity {
  controllerImage: string;
  controllerRevision: string;
  /** Carries the runner, and the executor as its child: the Job's only container. Recorded, never bound. */
  runnerImage: string;
  /** The digest of the code that opens the database (src/shared/executor-identity.ts); bound by the epoch. */
  executorIdentity: string;
  /** Bumped when the meaning of stored status changes; part of the execution binding. */
  controllerStateVersion: number;
  runnerProtocolVersion: number;
}

export interface OwnerEvents {
  record(regarding: KubeObject, event: EventInput): void;
}

export interface OwnerDeps {
  client: KubeClient;
  events: OwnerEvents;
  manager: ManagerIdentity;
  clock: Clock;
  /** The realm Leases kept in a namespace. */
  lockFor(namespace: string): TargetLock;
  /**
   * Where the Leases of realms named by a realmRef live (the manager's Lease namespace), so resources of every
   * namespace a PtahRealm lists serialize on one Lease. A coordinationKey's Lease stays in its resource's namespace.
   */
  coordinationNamespace: string;
  log: Logger;
  /** Dispatch order: a test seam for the dispatch-order tests, never configuration. */
  order?: DispatchOrder;
  /** In-process memory of result reads that keep failing, by operation ID: when the first failure was seen. */
  readFailures: Map<string, number>;
  /**
   * The informer cache of a kind the controller watches whole, for triggering only: a step may skip an uncached read
   * the cache shows has nothing to find, when the object it would find wakes the resource once the cache holds it.
   * Undefined for a kind not watched so (and for every kind without a manager): read.
   */
  cached?(apiVersion: string, kind: string): readonly KubeObject[] | undefined;
}

/** The end of a pass: when to look again, and why. */
export interface PassEnd {
  requeueAfterMs: number;
  why: string;
}

export const endPass = (why: string, requeueAfterMs = 1): PassEnd => ({ why, requeueAfterMs: Math.max(1, Math.round(requeueAfterMs)) });

/** What a pass needs of its resource: a PtahSchema or a PtahMigration. */
export interface OwnerResource extends KubeObject {
  kind?: string;
  metadata: NonNullable<KubeObject['metadata']>;
  spec: { target: RealmTarget & { sharedRealm?: boolean } };
  status?: { activeOperation?: ActiveOperation; executionBinding?: { epoch: string; controllerStateVersion: number } };
}

export class OwnerPass<R extends OwnerResource> {
  private leases?: PassLeases;

  constructor(
    readonly deps: OwnerDeps,
    /** The resource as the API server last returned it to this pass. */
    public obj: R,
    readonly kind: string,
  ) {}

  get claim(): ActiveOperation | undefined {
    return this.obj.status?.activeOperation;
  }

  get namespace(): string {
    return this.obj.metadata.namespace ?? '';
  }

  get name(): string {
    return this.obj.metadata.name ?? '';
  }

  get uid(): string {
    return this.obj.metadata.uid ?? '';
  }

  get generation(): number {
    return this.obj.metadata.generation ?? 0;
  }

  /**
   * The Leases of this resource's realm, as this pass sees them (what it renewed is remembered for the dispatch
   * sequence's lease step). The CRD forbids switching between coordinationKey and realmRef, so every digest this
   * resource ever recorded has its Lease in the namespace chosen here.
   */
  get lock(): PassLeases {
    this.leases ??= new PassLeases(this.deps.lockFor(this.obj.spec.target.realmRef ? this.deps.coordinationNamespace : this.namespace), this.deps.clock);
    return this.leases;
  }

  now(): Date {
    return this.deps.clock.now();
  }

  nowIso(): string {
    return this.now().toISOString();
  }

  ref(): ResourceRef {
    return { apiVersion: API_VERSION, kind: this.kind, namespace: this.namespace, name: this.name };
  }

  /** The realm: the database this resource addresses, by coordination digest. */
  realm(): string {
    return realmDigestOf(this.obj.spec.target, this.namespace);
  }

  /** The owner reference jobclaim.match holds a Job to. */
  owner(): { kind: string; name: string; namespace: string; uid: string } {
    return { kind: this.kind, name: this.name, namespace: this.namespace, uid: this.uid };
  }

  /** The binding in force, as jobclaim.match takes it. */
  bindingInForce(): { epoch: string; controllerStateVersion: number } | undefined {
    const binding = this.obj.status?.executionBinding;
    return binding && { epoch: binding.epoch, controllerStateVersion: binding.controllerStateVersion };
  }

  jobRef(name: string): ResourceRef {
    return { apiVersion: 'batch/v1', kind: 'Job', namespace: this.namespace, name };
  }

  async readJob(name: string): Promise<V1Job | undefined> {
    return this.deps.client.tryGet<V1Job>(this.jobRef(name));
  }

  event(type: EventInput['type'], reason: string, note: string, action?: string): void {
    this.deps.events.record(this.obj, { type, reason, note, action });
  }
}
