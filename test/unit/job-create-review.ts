// The manager's CREATE of a claim's Job as validating admission sees it (the API server has assigned the UID by
// then): the request of bench/webhook.ts and of the webhook tests that need the costliest admission there is.
import { MANAGER, review } from '../harness/webhook.js';
import { JOB_UID, type World } from '../harness/webhook-world.js';

/** The review of creating `w.job`; under `name` instead, when given, it is a Job no claim reserves. */
export function jobCreateReview(w: World, options: { name?: string; uid?: string } = {}): ReturnType<typeof review> {
  const job = { ...w.job, metadata: { ...w.job.metadata, uid: JOB_UID, ...(options.name ? { name: options.name } : {}) } };
  return review({
    operation: 'CREATE',
    kind: { group: 'batch', version: 'v1', kind: 'Job' },
    resource: { group: 'batch', version: 'v1', resource: 'jobs' },
    namespace: job.metadata.namespace,
    name: job.metadata.name,
    object: job,
    userInfo: { username: MANAGER, groups: ['system:serviceaccounts'] },
    ...(options.uid ? { uid: options.uid } : {}),
  });
}
