// The contract between the service and its admission routes: what a judge is given and what it returns. Its own
// module so that the routes depend on it, not on the server that composes them.
import type { FastifyBaseLogger } from 'fastify';
import type { UncachedReader } from '../shared/kube.js';
import type { AdmissionRequest, Verdict } from './admission.js';

/** The images and revision this manager records on the Jobs it builds; a rebuild takes a live Job's own first. */
export interface ManagerImages {
  controllerImage: string;
  controllerRevision: string;
  runnerImage: string;
}

export interface AdmissionContext {
  reader: UncachedReader;
  managerUsername: string;
  manager: ManagerImages;
  now: () => Date;
  log: FastifyBaseLogger;
}

export type Judge = (request: AdmissionRequest, ctx: AdmissionContext) => Promise<Verdict>;
