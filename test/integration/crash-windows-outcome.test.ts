// The seed's crash-window rows from the run's end to its record's settlement, each proved by killing a real
// manager process right after the row's first write is stored and asking a new manager (the real src/main.ts)
// what it makes of it. The rows after an unresolved run kill twice: first on the dispatch marker (which leaves an
// Apply nobody can account for), then on the row's own write.
import t from 'tap';
import type { V1Lease } from '@kubernetes/client-node';
import type { PtahMigration, PtahMigrationStatus } from '../../src/shared/api/migration-kinds.js';
import { ANNOTATIONS } from '../../src/shared/api/names.js';
import { canonicalJson } from '../../src/shared/canonical.js';
import { holderIdentityFor, leaseNameFor } from '../../src/shared/realm.js';
import { waitFor } from '../../tools/stack/wait.js';
import {
  applyClaim, appliedOnce, applyJobs, NAME, outcomeOf, recoveryWrites, recoveryWritesTo, statusWrite, writeTo, testRows, type CrashRow, type RowRun,
} from './crash-world.js';

type JsonPatch = { op?: string; path?: string; value?: unknown }[];
const annotationIn = (body: unknown): string | null | undefined =>
  (body as { metadata?: { annotations?: Record<string, string | null> } } | undefined)?.metadata?.annotations?.[ANNOTATIONS.unresolvedRun];

/** Cleanup TTL → outcome patch: "the next pass re-reads the same terminal Job and reaches the same verdict". */
const TTL_THEN_OUTCOME: CrashRow = {
  armAt: 'approval',
  trigger: writeTo('the Apply Job\'s cleanup TTL', 'PATCH', /\/jobs\/ptah-m-apply-[^/]+$/,
    (body) => Array.isArray(body) && (body as JsonPatch).some((op) => op.path === '/spec/ttlSecondsAfterFinished')),
  async verdict(run) {
    const claim = applyClaim(run.atKill.status);
    if (!claim?.jobUID) return ['no dispatched Apply claim stood at the kill'];
    const problems: string[] = [];
    if (run.jobAtKill?.spec?.ttlSecondsAfterFinished === undefined) problems.push('the Job had no cleanup TTL at the kill');
    return [...problems, ...(await appliedOnce(run, claim))];
  },
};

const outcomeStaged = (s: PtahMigrationStatus) => !s.activeOperation && s.lastRun !== undefined && s.pendingLockRelease !== undefined;

/**
 * The outcome patch → release, and pendingLockRelease → release (one write for a migration): "either a live claim
 * or a retained record, never both and never neither" and "the realm still claimed, with a record saying so. The
 * next pass releases it before doing anything else".
 */
const OUTCOME_THEN_RELEASE: CrashRow = {
  armAt: 'approval',
  trigger: statusWrite('the outcome patch', outcomeStaged),
  async verdict(run) {
    const s = run.atKill.status;
    const owed = s?.pendingLockRelease;
    if (!s || !owed) return ['no release was staged at the kill'];
    const problems: string[] = [];
    if (s.activeOperation) problems.push('a live claim stood beside the record');
    if (s.lastRun?.operationID !== owed.operationID || s.lastRun.outcome !== 'Applied') problems.push(`the record is ${s.lastRun?.outcome} of ${s.lastRun?.operationID}, not the Applied run that owes the release`);
    const leaseRef = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: run.cw.w.ns, name: leaseNameFor(owed.coordinationDigest) };
    const holder = holderIdentityFor(run.atKill.metadata.uid!, owed.operationID);
    const leaseAtKill = run.leasesAtKill.find((l) => l.metadata?.name === leaseRef.name);
    if (leaseAtKill?.spec?.holderIdentity !== holder) problems.push(`the realm was held by ${leaseAtKill?.spec?.holderIdentity ?? 'nobody'} at the kill, not by the run`);
    const m = await run.cw.w.waitFor(NAME, 'the owed release to be cleared', (x) => (x.status?.pendingLockRelease ? undefined : x));
    const lease = await run.cw.w.admin.get<V1Lease>(leaseRef);
    if (lease.spec?.holderIdentity) problems.push(`the realm is still held by ${lease.spec.holderIdentity}`);
    // Before anything else: the first writes of the new manager, besides its own election Lease, are the release
    // and then the record's clearing.
    const writes = recoveryWrites(run).filter((r) => !r.path.endsWith('/ptah-operator.operator.ptah.run'));
    const [first, second] = writes;
    if (first?.method !== 'PUT' || first.path !== `/apis/coordination.k8s.io/v1/namespaces/${run.cw.w.ns}/leases/${leaseRef.name}`) problems.push(`the new manager's first write was ${first?.method} ${first?.path}, not the release`);
    if (!second?.path.endsWith(`/ptahmigrations/${NAME}/status`)) problems.push(`the new manager's second write was ${second?.method} ${second?.path}, not the record's clearing`);
    if (outcomeOf(m, owed.operationID) !== 'Applied') problems.push(`after the release the record says ${outcomeOf(m, owed.operationID)}`);
    if (applyJobs(run, s.lastRun?.jobName ?? '').creates !== 1) problems.push('the Apply Job was not created exactly once');
    return problems;
  },
};

const MARK = statusWrite('the dispatch marker', (s) => applyClaim(s)?.dispatchStarted === true && !applyClaim(s)?.jobUID);

/** Waits for the migration's stored unresolved-run copy to agree with its status record, and returns it. */
async function recordAndCopy(run: RowRun): Promise<PtahMigration> {
  return run.cw.w.waitFor(NAME, 'the unresolved run and its copy to agree', (m) => {
    const copy = m.metadata.annotations?.[ANNOTATIONS.unresolvedRun];
    return m.status?.unresolvedRun && copy === canonicalJson(m.status.unresolvedRun) ? m : undefined;
  });
}

/**
 * The unresolved-run annotation copy → the status record: the claim in flight is the run's account until the
 * record is stored, so the next pass removes the copy written ahead of it and records the run again.
 */
const COPY_THEN_RECORD: CrashRow = {
  armAt: 'approval',
  trigger: MARK,
  then: { trigger: writeTo('the unresolved-run copy', 'PATCH', new RegExp(`/ptahmigrations/${NAME}$`), (body) => typeof annotationIn(body) === 'string') },
  async verdict(run) {
    const claim = run.claim;
    if (!claim) return ['no Apply claim stood at the first kill'];
    const problems: string[] = [];
    if (applyClaim(run.atKill.status)?.id !== claim.id) problems.push('the claim was no longer in flight at the second kill');
    if (run.atKill.status?.unresolvedRun) problems.push('the status record was already stored at the second kill');
    if (!run.atKill.metadata.annotations?.[ANNOTATIONS.unresolvedRun]) problems.push('the copy was not stored at the second kill');
    const m = await recordAndCopy(run);
    const first = await waitFor(async () => recoveryWritesTo(run)[0], { what: 'the new manager\'s first write to the migration', timeoutMs: 30_000 });
    if (annotationIn(first.body) !== null) problems.push(`the new manager's first write was ${first.method} ${first.path} ${JSON.stringify(first.body).slice(0, 160)}, not the copy's removal`);
    if (m.status?.unresolvedRun?.operationID !== claim.id || m.status.unresolvedRun.outcome !== 'Unknown') problems.push(`the record is ${m.status?.unresolvedRun?.outcome} of ${m.status?.unresolvedRun?.operationID}, not Unknown of the claim`);
    const { seen, creates } = applyJobs(run, claim.jobName);
    if (seen.length > 0 || creates > 0) problems.push('an Apply Job was created');
    return problems;
  },
};

/** The settling write → the copy's removal: a copy left beside a settled run is removed, never restored. */
const SETTLE_THEN_REMOVAL: CrashRow = {
  armAt: 'approval',
  trigger: MARK,
  then: {
    trigger: statusWrite('the settling write', (s) => s.unresolvedRun === undefined && s.resolvedRun !== undefined),
    // The run's account is settled by a person's acknowledgment, once the new manager has recorded it and its copy.
    act: async (w, claim) => {
      await w.waitFor(NAME, 'the unresolved run and its copy', (m) => (m.status?.unresolvedRun && m.metadata.annotations?.[ANNOTATIONS.unresolvedRun] ? true : undefined));
      return w.acknowledge(NAME, claim?.id ?? '');
    },
  },
  async verdict(run) {
    const claim = run.claim;
    if (!claim) return ['no Apply claim stood at the first kill'];
    const problems: string[] = [];
    if (run.atKill.status?.resolvedRun?.operationID !== claim.id) problems.push('the run was not settled at the second kill');
    if (!run.atKill.metadata.annotations?.[ANNOTATIONS.unresolvedRun]) problems.push('the copy was already removed at the second kill');
    const m = await run.cw.w.waitFor(NAME, 'the copy to be removed', (x) => (x.metadata.annotations?.[ANNOTATIONS.unresolvedRun] === undefined ? x : undefined));
    const first = recoveryWritesTo(run)[0];
    if (!first || annotationIn(first.body) !== null) problems.push(`the new manager's first write was ${first?.method} ${first?.path}, not the copy's removal`);
    if (m.status?.unresolvedRun) problems.push(`the run was restored from the copy (${m.status.unresolvedRun.operationID})`);
    if (m.status?.resolvedRun?.operationID !== claim.id) problems.push('the settlement was lost');
    return problems;
  },
};

testRows(t, [
  { title: 'cleanup TTL → outcome patch: killed after the TTL, the new manager reaches the same verdict from the same Job', row: TTL_THEN_OUTCOME },
  { title: 'outcome patch → release: killed after the outcome patch, the new manager releases the realm before anything else', row: OUTCOME_THEN_RELEASE },
  { title: 'unresolved-run copy → status record: killed after the copy, the new manager removes it and records the run again', row: COPY_THEN_RECORD },
  { title: 'settling write → copy removal: killed after the settlement, the new manager removes the copy and keeps it settled', row: SETTLE_THEN_REMOVAL },
]);
