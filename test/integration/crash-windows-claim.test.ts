// The seed's crash-window rows from the claim to the admission snapshot, each proved by killing a real manager
// process right after the row's first write is stored and asking a new manager (the real src/main.ts) what it
// makes of it. Rows inside the dispatch sequence are also run against a manager whose dispatch order is wrong,
// where the same verdict must find the problem.
import t from 'tap';
import { FINALIZERS } from '../../src/shared/api/names.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import { LEASE_EPOCH_ANNOTATION } from '../../src/shared/targetlock.js';
import { waitFor } from '../../tools/stack/wait.js';
import { applyClaim, appliedOnce, dispatchedClaim, NAME, recoveryWritesTo, statusWrite, writeTo, testRows, type CrashRow } from './crash-world.js';

type JsonPatch = { op?: string; path?: string; value?: unknown }[];
const patchOps = (body: unknown): JsonPatch => (Array.isArray(body) ? (body as JsonPatch) : []);

/** Finalizer → claim: "a finalizer with no claim, which the next pass removes before anything else". */
const FINALIZER_THEN_CLAIM: CrashRow = {
  armAt: 'create',
  trigger: writeTo('the finalizer patch', 'PATCH', new RegExp(`/ptahmigrations/${NAME}$`),
    (body) => patchOps(body).some((op) => op.op === 'add' && op.path?.startsWith('/metadata/finalizers') === true)),
  async verdict(run) {
    const problems: string[] = [];
    if (!run.atKill.metadata.finalizers?.includes(FINALIZERS.migration)) problems.push('the finalizer was not stored at the kill');
    if (run.atKill.status?.activeOperation) problems.push('a claim stood beside the finalizer at the kill');
    const first = await waitFor(async () => recoveryWritesTo(run)[0], { what: 'the new manager\'s first write to the migration', timeoutMs: 60_000 });
    const removes = patchOps(first.body).some((op) => op.op === 'remove' && op.path?.startsWith('/metadata/finalizers/') === true);
    if (!removes) problems.push(`the new manager's first write was ${first.method} ${first.path} ${JSON.stringify(first.body).slice(0, 200)}, not the finalizer's removal`);
    // And then it goes on: a claim, a reading, a plan waiting for approval.
    await run.cw.w.waitFor(NAME, 'the migration to go on to its plan', (m) => (m.status?.phase === 'AwaitingApproval' ? true : undefined));
    return problems;
  },
};

/** activeOperation → pass end: "a claim with no dispatch marker and no Job under the reserved name, which proceeds". */
const CLAIM_THEN_PASS_END: CrashRow = {
  armAt: 'approval',
  trigger: statusWrite('the Apply claim', (s) => applyClaim(s) !== undefined),
  async verdict(run) {
    const claim = run.claim;
    if (!claim) return ['no Apply claim stood at the kill'];
    const problems: string[] = [];
    if (claim.dispatchStarted || claim.admissionSnapshot || claim.jobUID) problems.push('the claim at the kill had begun its dispatch');
    if (run.jobAtKill) problems.push('a Job stood under the reserved name at the kill');
    return [...problems, ...(await appliedOnce(run, claim))];
  },
};

const MANAGER_LEASE = 'ptah-operator.operator.ptah.run';
const leaseName = (path: string, body: unknown): string => (body as { metadata?: { name?: string } } | undefined)?.metadata?.name ?? path.split('/').pop() ?? '';

/**
 * Lease write → leaseEpoch: "the Lease held under an epoch the status does not name. The next pass acquires with
 * the stale expectation, which is adopted before dispatch".
 */
const LEASE_THEN_EPOCH: CrashRow = {
  armAt: 'approval',
  trigger: { what: 'the realm Lease write', match: (w) => (w.method === 'POST' || w.method === 'PUT') && w.path.includes('/apis/coordination.k8s.io/v1/') && leaseName(w.path, w.body) !== MANAGER_LEASE },
  async verdict(run) {
    const claim = run.claim;
    if (!claim?.coordinationDigest) return ['no Apply claim with a realm stood at the kill'];
    const problems: string[] = [];
    const realmLease = leaseNameFor(claim.coordinationDigest);
    const lease = run.leasesAtKill.find((l) => l.metadata?.name === realmLease);
    const epoch = lease?.metadata?.annotations?.[LEASE_EPOCH_ANNOTATION];
    if (lease?.spec?.holderIdentity !== holderIdentityFor(run.atKill.metadata.uid!, claim.id)) problems.push(`the Lease at the kill was held by ${lease?.spec?.holderIdentity}, not the claim`);
    if (!epoch || epoch === claim.leaseEpoch) problems.push(`the status named the Lease's epoch ${epoch} at the kill: the window was not open`);
    problems.push(...(await appliedOnce(run, claim)));
    const dispatched = dispatchedClaim(run, claim.id);
    if (dispatched?.leaseEpoch !== epoch) problems.push(`the claim dispatched under epoch ${dispatched?.leaseEpoch}, not the Lease's ${epoch}`);
    if (dispatched?.leaseContinuityLost) problems.push('the adopted epoch was taken for continuity loss');
    return problems;
  },
};

/** admissionSnapshot → pass end: "no Job can exist yet. The next pass rebuilds the Job" (and the digest agrees). */
const SNAPSHOT_THEN_PASS_END: CrashRow = {
  armAt: 'approval',
  trigger: statusWrite('the admission snapshot', (s) => applyClaim(s)?.admissionSnapshot !== undefined),
  async verdict(run) {
    const claim = run.claim;
    if (!claim?.admissionSnapshot) return ['no Apply claim with a snapshot stood at the kill'];
    const problems: string[] = [];
    if (run.jobAtKill) problems.push('a Job stood under the reserved name at the kill');
    problems.push(...(await appliedOnce(run, claim)));
    if (dispatchedClaim(run, claim.id)?.admissionSnapshot?.templateDigest !== claim.admissionSnapshot.templateDigest) problems.push('the claim dispatched under another snapshot');
    return problems;
  },
};

testRows(t, [
  { title: 'finalizer → claim: killed after the finalizer patch, the new manager first removes it, then goes on', row: FINALIZER_THEN_CLAIM },
  { title: 'activeOperation → pass end: killed after the claim, the new manager dispatches it and applies once', row: CLAIM_THEN_PASS_END },
  {
    title: 'Lease write → leaseEpoch: killed after the Lease write, the new manager adopts the epoch and applies once', row: LEASE_THEN_EPOCH,
    wrongOrder: { swap: ['lease', 'mark'], against: 'marks before it takes the Lease', caught: 'not Applied' },
  },
  {
    title: 'admissionSnapshot → pass end: killed after the snapshot, the new manager rebuilds the Job and applies once', row: SNAPSHOT_THEN_PASS_END,
    wrongOrder: { swap: ['snapshot', 'mark'], against: 'marks before the snapshot', caught: 'not Applied' },
  },
]);
