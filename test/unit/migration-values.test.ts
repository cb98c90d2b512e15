// The values a migration claim is bounded and bound by, and the rule that settles an unresolved run from a reading.
import t from 'tap';
import { applyDeadlines, applyLeaseDuration, applyWindowSeconds, MAX_APPLY_WINDOW_SECONDS, newOperationId, placeholderLeaseEpoch } from '../../src/controller/claim-values.js';
import { migrationInputFingerprint, type FingerprintInputs } from '../../src/controller/migration/fingerprint.js';
import { currentVersionOf, migrationPolicyFingerprint, planNameFor, planText } from '../../src/controller/migration/plan.js';
import { migrationPlanSummary } from '../../src/cli/plan-format.js';
import { withCondition } from '../../src/controller/conditions.js';
import { migrationUnresolvedRunSettledBy, type HistoryReading } from '../../src/controller/migration/unresolved.js';
import type { PtahMigration, PtahMigrationPlan, UnresolvedRun } from '../../src/shared/api/migration-kinds.js';
import { digest, isDigest, sha256Digest } from '../../src/shared/canonical.js';
import type { MigrationHistory } from '../../src/shared/executor-report.js';
import { MAX_LEASE_SECONDS } from '../../src/shared/targetlock.js';

const d = (seed: string) => sha256Digest(seed);

function migration(generation: number, activeDeadlineSeconds?: number): PtahMigration {
  return {
    apiVersion: 'operator.ptah.run/v1alpha1',
    kind: 'PtahMigration',
    metadata: { name: 'orders', namespace: 'shop', uid: 'uid-1', generation },
    spec: {
      target: { engine: 'PostgreSQL', coordinationKey: 'orders-db', urlFrom: { name: 'db', key: 'url' } },
      artifact: { configMapRef: { name: 'r1' }, verificationPolicyRef: { name: 'p', key: 'policy.yaml' }, format: 'ptah' },
      policy: { apply: 'OnApproval', lockTimeout: '5m' },
      interval: '10m',
      execution: { activeDeadlineSeconds: activeDeadlineSeconds ?? 900, failureRetryInterval: '30s', connectTimeout: '10s' },
      suspend: false,
    },
  };
}

const inputs: FingerprintInputs = {
  type: 'Apply',
  artifact: { configMapName: 'r1', configMapUID: 'cm-1', digest: d('a'), verificationPolicyUID: 'p-1', verificationPolicyDigest: d('p'), resolvedAt: '2030-01-01T00:00:00Z' },
  executionBindingID: `v1-${'a'.repeat(32)}`,
  coordinationDigest: d('realm'),
  planRef: { name: 'ptah-mplan-x', uid: 'plan-1' },
};

t.test('the policy fingerprint binds a declared format, and keeps its pre-format value for the default', async (t) => {
  const m = migration(1);
  const base = migrationPolicyFingerprint(m);
  t.equal(base, digest({ version: 1, apply: 'OnApproval', lockTimeout: '5m' }), 'the default format leaves the fingerprint plans had before formats');
  const goose: PtahMigration = { ...m, spec: { ...m.spec, artifact: { ...m.spec.artifact, format: 'goose' } } };
  t.not(migrationPolicyFingerprint(goose), base, 'a plan read in another format is another plan');
});

t.test('the policy fingerprint binds a declared adoption, and keeps its value without one', async (t) => {
  const m = migration(1);
  const base = migrationPolicyFingerprint(m);
  const adopting = (adoption: NonNullable<PtahMigration['spec']['adoption']>): PtahMigration => ({ ...m, spec: { ...m.spec, adoption } });
  const goose = migrationPolicyFingerprint(adopting({ from: 'goose' }));
  t.not(goose, base, 'a plan that adopts is another plan than one that does not');
  t.not(migrationPolicyFingerprint(adopting({ from: 'goose', table: 'ops.goose_db_version' })), goose, 'another table is another adoption');
  t.not(migrationPolicyFingerprint(adopting({ from: 'baseline', baselineVersion: '240' })), migrationPolicyFingerprint(adopting({ from: 'baseline', baselineVersion: '241' })),
    'another baseline is another adoption');
});

t.test('the input fingerprint moves with every input, and not with the resolution time', async (t) => {
  const base = migrationInputFingerprint(migration(1), inputs);
  t.ok(isDigest(base));
  t.equal(migrationInputFingerprint(migration(1), { ...inputs, artifact: { ...inputs.artifact!, resolvedAt: '2031-01-01T00:00:00Z' } }), base, 'resolvedAt is not an input');
  const moved: [string, string][] = [
    ['generation (any spec edit, a suspension included)', migrationInputFingerprint(migration(2), inputs)],
    ['type', migrationInputFingerprint(migration(1), { ...inputs, type: 'History' })],
    ['artifact digest', migrationInputFingerprint(migration(1), { ...inputs, artifact: { ...inputs.artifact!, digest: d('b') } })],
    ['artifact UID', migrationInputFingerprint(migration(1), { ...inputs, artifact: { ...inputs.artifact!, configMapUID: 'cm-2' } })],
    ['policy digest', migrationInputFingerprint(migration(1), { ...inputs, artifact: { ...inputs.artifact!, verificationPolicyDigest: d('q') } })],
    ['execution binding', migrationInputFingerprint(migration(1), { ...inputs, executionBindingID: `v1-${'b'.repeat(32)}` })],
    ['realm', migrationInputFingerprint(migration(1), { ...inputs, coordinationDigest: d('other') })],
    ['plan', migrationInputFingerprint(migration(1), { ...inputs, planRef: { name: 'ptah-mplan-x', uid: 'plan-2' } })],
  ];
  for (const [what, value] of moved) t.not(value, base, what);
});

t.test('the Apply Lease outlives the window by the Job grace and the lease grace', async (t) => {
  t.equal(applyLeaseDuration(900), 1020);
  t.equal(applyLeaseDuration(30), 150);
  t.equal(applyWindowSeconds(migration(1, 600)), 600);
  t.equal(applyWindowSeconds(migration(1, 86400)), MAX_APPLY_WINDOW_SECONDS, 'a window whose Lease would not fit is cut');
  t.equal(applyLeaseDuration(MAX_APPLY_WINDOW_SECONDS), MAX_LEASE_SECONDS, 'the longest window just fits the Lease bound');
  const deadlines = applyDeadlines(new Date('2030-01-01T00:00:00.250Z'), 300);
  t.same(deadlines, { dispatchNotAfter: '2030-01-01T00:05:00.250Z', executionNotAfter: '2030-01-01T00:05:00.250Z' });
});

t.test('operation IDs are fresh digests; the placeholder epoch is an epoch derived from the ID', async (t) => {
  const a = newOperationId();
  t.ok(isDigest(a));
  t.not(newOperationId(), a);
  t.match(placeholderLeaseEpoch(a), /^v1-[0-9a-f]{32}$/);
  t.equal(placeholderLeaseEpoch(a), `v1-${a.slice(7, 39)}`);
});

t.test('plan names come from the fingerprint; the current version is the highest applied', async (t) => {
  t.equal(planNameFor(`sha256:${'0123456789abcdef'.repeat(4)}`), 'ptah-mplan-0123456789abcdef01234567');
  const history = (versions: string[]): MigrationHistory => ({
    applied: versions.map((version) => ({ version, name: 'x', checksum: d(version), operationId: 'op', appliedAt: '2030-01-01T00:00:00Z' })),
    pending: [], dirty: [], modified: [], outOfOrder: [], missing: [], fingerprint: d('h'),
  });
  t.equal(currentVersionOf(history([])), '');
  t.equal(currentVersionOf(history(['1', '10', '9'])), '10', 'numeric order, not string order');
  t.equal(currentVersionOf(history(['0002', '3'])), '3');
});

t.test('a condition keeps its transition time while its status holds', async (t) => {
  const first = withCondition(undefined, 'Ready', 'False', 'Reading', 'a', 1, '2030-01-01T00:00:00Z');
  const same = withCondition(first, 'Ready', 'False', 'AwaitingApproval', 'b', 2, '2030-01-01T00:01:00Z');
  t.equal(same[0]!.lastTransitionTime, '2030-01-01T00:00:00Z');
  t.match(same[0], { reason: 'AwaitingApproval', message: 'b', observedGeneration: 2 });
  const flipped = withCondition(same, 'Ready', 'True', 'HistoryMatched', 'c', 2, '2030-01-01T00:02:00Z');
  t.equal(flipped[0]!.lastTransitionTime, '2030-01-01T00:02:00Z');
  t.equal(withCondition(flipped, 'Blocked', 'False', 'x', 'y', 2, 'now').length, 2, 'one entry per type');
});

t.test('only a reading of the same database with nothing pending settles an unresolved run', async (t) => {
  const run: UnresolvedRun = { outcome: 'Unknown', operationID: d('op'), targetIdentityDigest: d('db-1'), recordedAt: '2030-01-01T00:00:00Z' };
  const clean: MigrationHistory = { applied: [], pending: [], dirty: [], modified: [], outOfOrder: [], missing: [], fingerprint: d('h') };
  const reading = (change: Partial<MigrationHistory>, target = d('db-1')): HistoryReading => ({ targetIdentityDigest: target, history: { ...clean, ...change } });
  t.ok(migrationUnresolvedRunSettledBy(run, reading({})), 'same database, nothing pending');
  const file = { version: '2', name: 'x', checksum: d('2') };
  const refused: [string, HistoryReading, UnresolvedRun?][] = [
    ['another database', reading({}, d('db-2'))],
    ['a pending file', reading({ pending: [file] })],
    ['a dirty row', reading({ dirty: ['2'] })],
    ['a modified file', reading({ modified: ['2'] })],
    ['an out-of-order file', reading({ outOfOrder: ['2'] })],
    ['an applied version the artifact lacks', reading({ missing: ['2'] })],
    ['a record that names no database', reading({}), { ...run, targetIdentityDigest: undefined }],
  ];
  for (const [what, r, record] of refused) t.notOk(migrationUnresolvedRunSettledBy(record ?? run, r), what);
});

t.test('a plan that adopts says so wherever a person reads it: the Ready message and kubectl ptah plan', async (t) => {
  const spec = {
    migrationRef: { name: 'orders', uid: 'uid-1' }, fingerprint: sha256Digest('f'), historyFingerprint: sha256Digest('h'), currentVersion: '',
    migrations: [{ version: '241', name: 'next', checksum: sha256Digest('241') }, { version: '242', name: 'after', checksum: sha256Digest('242') }],
    artifactDigest: sha256Digest('a'), coordinationDigest: sha256Digest('c'), targetIdentityDigest: sha256Digest('t'), policyFingerprint: sha256Digest('p'),
    verificationPolicyUID: 'vp', verificationPolicyDigest: sha256Digest('v'), executionBindingID: 'e', createdAt: '2026-12-04T00:00:00Z',
  };
  const plan = { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigrationPlan', metadata: { name: 'ptah-mplan-x' }, spec } as PtahMigrationPlan;
  t.equal(planText(plan), '241, 242', 'a plan that adopts nothing reads as before');
  t.notOk(migrationPlanSummary(plan).some((line) => line.startsWith('adopts:')), 'and kubectl ptah plan prints no adoption');
  const adopting = { ...plan, spec: { ...spec, adopted: { from: 'flyway' as const, count: 240, firstVersion: '1', lastVersion: '240' } } };
  t.equal(planText(adopting), '241, 242 and records 240 file(s) (1 … 240) as applied by flyway, without running them');
  t.ok(migrationPlanSummary(adopting).includes('adopts:       240 file(s), 1 … 240, as applied by flyway (recorded in the history by this Apply, never run)'));
});
