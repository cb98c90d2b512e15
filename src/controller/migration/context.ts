// What one reconcile pass of a PtahMigration works with: its dependencies, the resource as last read or written
// (every write hands back the stored object, so later steps of the pass see what the API server holds), and the
// small helpers every step uses.
import type { V1Job } from '@kubernetes/client-node';
import type { PtahMigration, PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../shared/api/names.js';
import type { ActiveOperation } from '../../shared/api/shapes.js';
import type { Clock } from '../../shared/clock.js';
import type { KubeClient, ResourceRef } from '../../shared/kube-client.js';
import type { DispatchOrder } from '../../shared/lifecycle/dispatch.js';
import type { Logger } from '../../shared/logger.js';
import { coordinationDigest } from '../../shared/realm.js';
import type { TargetLock } from '../../shared/targetlock.js';
import type { EventInput } from '../events.js';

/** The manager as its Jobs record it and as the execution binding binds it. */
export interface MigrationManagerIdentity {
  controllerImage: string;
  controllerRevision: string;
  /** Runs the runner, and the executor as its child: the Job's only container. */
  runnerImage: string;
  /** The image that opens the database; in this project the runner image itself. */
  executorImage: string;
  /** Bumped when the meaning of stored status changes; part of the execution binding. */
  controllerStateVersion: number;
  runnerProtocolVersion: number;
}

export interface MigrationEvents {
  record(regarding: PtahMigration, event: EventInput): void;
}

export interface MigrationDeps {
  client: KubeClient;
  events: MigrationEvents;
  manager: MigrationManagerIdentity;
  clock: Clock;
  /** The realm Lease of a namespace (a coordination digest names a database within one namespace). */
  lockFor(namespace: string): TargetLock;
  log: Logger;
  /** Dispatch order: a test seam for the dispatch-order tests, never configuration. */
  order?: DispatchOrder;
  /** In-process memory of result reads that keep failing, by operation ID: when the first failure was seen. */
  readFailures: Map<string, number>;
}

/** The end of a pass: when to look again, and why. */
export interface PassEnd {
  requeueAfterMs: number;
  why: string;
}

export const endPass = (why: string, requeueAfterMs = 1): PassEnd => ({ why, requeueAfterMs: Math.max(1, Math.round(requeueAfterMs)) });

export class MigrationPass {
  constructor(
    readonly deps: MigrationDeps,
    /** The resource as the API server last returned it to this pass. */
    public m: PtahMigration,
  ) {}

  get status(): PtahMigrationStatus {
    return this.m.status ?? {};
  }

  get claim(): ActiveOperation | undefined {
    return this.m.status?.activeOperation;
  }

  get namespace(): string {
    return this.m.metadata.namespace ?? '';
  }

  get name(): string {
    return this.m.metadata.name ?? '';
  }

  get uid(): string {
    return this.m.metadata.uid ?? '';
  }

  get generation(): number {
    return this.m.metadata.generation ?? 0;
  }

  get lock(): TargetLock {
    return this.deps.lockFor(this.namespace);
  }

  now(): Date {
    return this.deps.clock.now();
  }

  nowIso(): string {
    return this.now().toISOString();
  }

  ref(): ResourceRef {
    return { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: this.namespace, name: this.name };
  }

  /** The realm: the database this resource addresses, by coordination digest. */
  realm(): string {
    const { engine, coordinationKey } = this.m.spec.target;
    return coordinationDigest({ engine, namespace: this.namespace, coordinationKey });
  }

  jobRef(name: string): ResourceRef {
    return { apiVersion: 'batch/v1', kind: 'Job', namespace: this.namespace, name };
  }

  async readJob(name: string): Promise<V1Job | undefined> {
    return this.deps.client.tryGet<V1Job>(this.jobRef(name));
  }

  event(type: EventInput['type'], reason: string, note: string, action?: string): void {
    this.deps.events.record(this.m, { type, reason, note, action });
  }
}
