// /mutate/stamp: on CREATE of an approval or a run acknowledgment, write who made it (from the authenticated
// request), when, and under which admission request, overwriting whatever the client put there. The patch
// touches exactly the stamped paths, so nothing else the client wrote is re-encoded.
import { rejectRequest, type AdmissionRequest, type Verdict } from './admission.js';
import { MUTATION_REQUEST_UID, decisionKindOf, decisionObjectOf } from './decision-kinds.js';
import { admissionTime, authorOf } from './identity.js';
import { WEBHOOK_PATHS } from '../shared/api/webhooks.js';
import type { AdmissionContext } from './judge.js';

const ROUTE = WEBHOOK_PATHS.stamp;

export async function judgeStamp(request: AdmissionRequest, ctx: AdmissionContext): Promise<Verdict> {
  const kind = decisionKindOf(request, ROUTE);
  if (request.operation !== 'CREATE') rejectRequest(`${ROUTE} stamps a ${kind.kind} only when it is created, not on ${request.operation}`);
  decisionObjectOf(request, kind, 'object');
  const identity = authorOf(request.userInfo, kind.noun);
  // JSON Patch `add` replaces an existing member, so a value the client wrote is overwritten.
  return {
    allowed: true,
    patch: [
      { op: 'add', path: `/spec/${kind.identityField}`, value: identity },
      { op: 'add', path: `/spec/${kind.timeField}`, value: admissionTime(ctx.now()) },
      { op: 'add', path: `/spec/${MUTATION_REQUEST_UID}`, value: request.uid },
    ],
  };
}
