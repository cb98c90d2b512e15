// The judge alone, per call, on the Job the webhook bench admits (a schema Apply's, stored by the API server):
// jobclaim.match against the comparison it replaced (test/unit/jobclaim-reference.ts), and the rebuild the webhook
// runs before it. In-process, no HTTP; see bench/README.md.
//   npx tsx bench/match.ts [--calls 5000]
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { V1Job } from '@kubernetes/client-node';
import { rebuildClaimJob, type ClaimOwnerObject } from '../src/shared/job/index.js';
import { match, type JobClaim, type MatchMode } from '../src/shared/jobclaim.js';
import { MANAGER_IMAGES } from '../test/harness/webhook.js';
import { BINDING, JOB_UID, REALM, world } from '../test/harness/webhook-world.js';
import { referenceMatch } from '../test/unit/jobclaim-reference.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '5000' } } });
const calls = Number(values.calls);
if (!Number.isInteger(calls) || calls < 1) throw new Error(`--calls must be a whole number of at least 1, not "${values.calls}"`);

const w = world('schema', 'Apply');
// As the webhook sees the create: the API server has assigned the UID; decoded from JSON.
const job = JSON.parse(JSON.stringify({ ...w.job, metadata: { ...w.job.metadata, uid: JOB_UID } })) as V1Job;
const claim = w.owner.status.activeOperation as JobClaim;
const binding = { epoch: BINDING.epoch, controllerStateVersion: BINDING.controllerStateVersion };
const rebuild = () => rebuildClaimJob({
  owner: w.owner as unknown as ClaimOwnerObject,
  claim: claim as never,
  plan: w.plan as never,
  coordinationDigest: REALM,
  manager: { ...MANAGER_IMAGES, executorIdentity: BINDING.executorIdentity, controllerStateVersion: BINDING.controllerStateVersion, runnerProtocolVersion: BINDING.runnerProtocolVersion },
  liveJob: job,
});
const mode: MatchMode = { kind: 'rebuild', rebuilt: rebuild(), submitted: true };
for (const [name, judge] of [['match', match], ['reference', referenceMatch]] as const) {
  const verdict = judge(job, claim, mode, binding);
  if (!verdict.ok) throw new Error(`${name} refuses the bench's Job: ${verdict.reason}`);
}

/** Mean microseconds per call over `calls` calls, after a tenth as many to warm up. */
function time(f: () => unknown): number {
  for (let i = 0; i < Math.ceil(calls / 10); i++) f();
  const started = performance.now();
  for (let i = 0; i < calls; i++) f();
  return ((performance.now() - started) / calls) * 1000;
}

console.log(`node ${process.version}, ${cpus().length} CPUs, loadavg ${loadavg().map((l) => l.toFixed(2)).join(' ')}; ${calls} calls each, Job ${JSON.stringify(job).length} bytes of JSON`);
const fast = time(() => match(job, claim, mode, binding));
const slow = time(() => referenceMatch(job, claim, mode, binding));
console.log(`jobclaim.match            ${fast.toFixed(1).padStart(8)} us`);
console.log(`reference comparison      ${slow.toFixed(1).padStart(8)} us   (${(slow / fast).toFixed(1)}x)`);
console.log(`rebuildClaimJob           ${time(rebuild).toFixed(1).padStart(8)} us`);
