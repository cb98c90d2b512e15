// The words `kubectl ptah explain` and `status` derive from a status object alone, on hand-written statuses that
// carry each obligation of the seed (and statuses that carry none, which must not be mistaken for one), plus the
// pure pieces of `plan` and the argument parsing.
import t from 'tap';
import { formatExplanation, nextPass, obligationsOf, statusRow, waitingFor, formatTable, type PtahResource } from '../../src/cli/explain.js';
import { kindOf, parseTarget } from '../../src/cli/commands.js';
import { CliError } from '../../src/cli/errors.js';
import { planSql } from '../../src/cli/plan-format.js';
import { run } from '../../src/cli/kubectl-ptah.js';
import { leaseNameFor } from '../../src/shared/realm.js';

const NOW = new Date('2026-12-01T12:00:00Z');
const d = (c: string) => `sha256:${c.repeat(64)}`;
const EPOCH = `v1-${'a'.repeat(32)}`;
const ready = (status: 'True' | 'False', reason: string, message = reason) =>
  ({ type: 'Ready', status, reason, message, lastTransitionTime: '2026-12-01T11:00:00Z', observedGeneration: 1 });

function schema(status: Record<string, unknown> | undefined, spec: Record<string, unknown> = {}): PtahResource {
  return { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', metadata: { name: 'catalog', namespace: 'shop', generation: 1, uid: 'u1' }, spec, status } as unknown as PtahResource;
}
function migration(status: Record<string, unknown> | undefined, spec: Record<string, unknown> = {}): PtahResource {
  return { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahMigration', metadata: { name: 'orders', namespace: 'shop', generation: 1, uid: 'u2' }, spec, status } as unknown as PtahResource;
}

const claim = (extra: Record<string, unknown> = {}) => ({
  type: 'Apply', id: d('1'), inputFingerprint: d('2'), jobName: 'ptah-apply-abc', startedAt: '2026-12-01T11:59:00Z', attempt: 1, executionBindingID: EPOCH, ...extra,
});
const plan = { name: 'catalog-plan-1', uid: 'p1', fingerprint: d('3'), contentDigest: d('4'), destructive: false, statementCount: 1 };
const pendingObservation = (extra: Record<string, unknown> = {}) => ({
  outcome: 'OutcomeUnknown', applyOperationID: d('5'), applyJobName: 'ptah-apply-def', applyGeneration: 1, plan, recordedAt: '2026-12-01T11:58:00Z', ...extra,
});
const release = { coordinationDigest: d('6'), operationID: d('7'), leaseDurationSeconds: 60, leaseEpoch: EPOCH };
const unresolved = { outcome: 'Partial', operationID: d('8'), jobName: 'ptah-apply-ghi', recordedAt: '2026-12-01T11:00:00Z' };

t.test('an owed release is named and comes before anything else', async (t) => {
  const r = schema({ phase: 'Pending', observedGeneration: 1, pendingLockRelease: release, activeOperation: claim({ dispatchStarted: true }) });
  const owes = obligationsOf(r);
  t.match(owes[0], /^An owed release \(status\.pendingLockRelease\): operation sha256:7{64}/);
  t.match(owes[0], leaseNameFor(release.coordinationDigest));
  t.equal(nextPass(r, NOW), `releases the realm Lease ${leaseNameFor(release.coordinationDigest)} before anything else`);
  t.equal(waitingFor(r, NOW), 'realm Lease release');
  const m = migration({ phase: 'Blocked', pendingLockRelease: release, unresolvedRun: unresolved });
  t.match(nextPass(m, NOW), /^releases the realm Lease .* before anything else$/, 'for a migration too, before its unresolved run');
});

t.test('a dispatched claim is supervised, never created again; an undispatched one continues the dispatch', async (t) => {
  const dispatched = schema({ phase: 'Applying', activeOperation: claim({ dispatchStarted: true, jobUID: 'j1' }) });
  const owes = obligationsOf(dispatched);
  t.equal(owes.length, 2);
  t.match(owes[0], /^A claim in flight \(status\.activeOperation\): Apply operation sha256:1{64}, attempt 1, Job ptah-apply-abc \(UID j1\)/);
  t.match(owes[1], /^A dispatch marker \(status\.activeOperation\.dispatchStarted\): Job ptah-apply-abc may exist/);
  t.equal(nextPass(dispatched, NOW), 'supervises Job ptah-apply-abc; it is never created again');
  t.equal(waitingFor(dispatched, NOW), 'Job ptah-apply-abc');

  const undispatched = migration({ phase: 'Applying', activeOperation: claim() });
  const mowes = obligationsOf(undispatched);
  t.equal(mowes.length, 1, 'no dispatch marker without dispatchStarted');
  t.notMatch(mowes.join(' '), /dispatch marker/);
  t.match(nextPass(undispatched, NOW), /^continues the dispatch sequence of the Apply claim/);
  t.equal(waitingFor(undispatched, NOW), 'dispatch of Apply');
  const falseMarker = schema({ phase: 'Observing', activeOperation: claim({ type: 'Observe', dispatchStarted: false }) });
  t.notMatch(obligationsOf(falseMarker).join(' '), /dispatch marker/, 'dispatchStarted false is no marker');
});

t.test('a pending observation: before observeAfter it waits, then claims the Observe, or the Plan when planRequired', async (t) => {
  const waiting = schema({ phase: 'VerifyingConvergence', pendingObservation: pendingObservation({ observeAfter: '2026-12-01T12:05:00Z' }) });
  const owes = obligationsOf(waiting);
  t.equal(owes.length, 1);
  t.match(owes[0], /^A pending observation \(status\.pendingObservation\): Apply sha256:5{64} \(Job ptah-apply-def\) ended OutcomeUnknown/);
  t.match(owes[0], 'no proof before 2026-12-01T12:05:00Z');
  const settles = `; a PtahSchemaRunAcknowledgment naming Apply ${d('5')} ends it instead, should no reading finish it`;
  t.equal(nextPass(waiting, NOW), `waits until 2026-12-01T12:05:00Z, then claims the Observe${settles}`);
  t.equal(waitingFor(waiting, NOW), 'proof after 2026-12-01T12:05:00Z');

  const planRequired = schema({ phase: 'VerifyingConvergence', pendingObservation: pendingObservation({ observeAfter: '2026-12-01T12:05:00Z', planRequired: true }) });
  t.equal(nextPass(planRequired, NOW), `waits until 2026-12-01T12:05:00Z, then claims the Plan${settles}`);
  const past = schema({ phase: 'VerifyingConvergence', pendingObservation: pendingObservation({ outcome: 'ApplySucceeded', observeAfter: '2026-12-01T11:00:00Z' }) });
  t.equal(nextPass(past, NOW), `claims the Observe that proves Apply ${d('5')}${settles}`, 'an observeAfter in the past is no wait');
  const suspended = schema({ phase: 'Suspended', pendingObservation: pendingObservation() }, { suspend: true });
  t.equal(nextPass(suspended, NOW), `claims the Observe that proves Apply ${d('5')}${settles}`, 'suspension does not hold the proof up');
  const proving = schema({ phase: 'VerifyingConvergence', pendingObservation: pendingObservation(), activeOperation: claim({ type: 'Observe', dispatchStarted: true, proofOf: d('5') }) });
  t.equal(nextPass(proving, NOW), 'supervises Job ptah-apply-abc; it is never created again', 'the proof reading in flight comes first');
  t.equal(obligationsOf(proving).length, 3);
});

t.test('an unresolved run waits for a clean History reading or an acknowledgment naming it', async (t) => {
  const m = migration({ phase: 'Blocked', conditions: [ready('False', 'ApplyOutcomeUnknown')], unresolvedRun: unresolved });
  const owes = obligationsOf(m);
  t.equal(owes.length, 1);
  t.match(owes[0], /^An unresolved run \(status\.unresolvedRun\): Apply sha256:8{64} \(Job ptah-apply-ghi\) ended Partial/);
  t.equal(nextPass(m, NOW), `nothing is planned until a History reading of the same database finds nothing pending or a PtahMigrationRunAcknowledgment names operation ${d('8')}`);
  const resolved = migration({ phase: 'InSync', conditions: [ready('True', 'HistoryMatched')], resolvedRun: { operationID: d('8'), outcome: 'Partial', resolution: 'ResolvedByAcknowledgment', resolvedAt: '2026-12-01T11:30:00Z' } });
  t.same(obligationsOf(resolved), [], 'a resolved run owes nothing');
});

t.test('a binding retirement is named with what it still owes', async (t) => {
  const r = schema({ phase: 'Pending', pendingBindingRetirement: { retiredEpoch: EPOCH, plan: { name: 'catalog-plan-0', uid: 'p0', fingerprint: d('9') }, job: { operation: 'Plan', name: 'ptah-plan-x' } } });
  const owes = obligationsOf(r);
  t.match(owes[0], /^A binding retirement \(status\.pendingBindingRetirement\): execution binding v1-a{32} .*plan catalog-plan-0 stale and adopting Plan Job ptah-plan-x/);
  t.match(nextPass(r, NOW), /^finishes the binding retirement of epoch v1-a{32}/);
});

t.test('AwaitingApproval waits for an approval of the plan; idle statuses owe nothing', async (t) => {
  const awaiting = schema({ phase: 'AwaitingApproval', observedGeneration: 1, conditions: [ready('False', 'PlanReady', 'plan catalog-plan-1 holds 1 statement(s): approve it')], plan });
  t.same(obligationsOf(awaiting), [], 'awaiting an approval is not an obligation of the lifecycle');
  t.equal(nextPass(awaiting, NOW), 'waits for an approval of plan catalog-plan-1');
  const lines = formatExplanation(awaiting, NOW);
  t.equal(lines[0], 'ptahschema/catalog (namespace shop): phase AwaitingApproval');
  t.ok(lines.includes('- It owes no obligation of the mutation lifecycle now.'));
  t.ok(lines.includes('It awaits an approval (phase AwaitingApproval, status.plan): plan catalog-plan-1 is published and nothing runs until a person approves exactly it.'));
  t.equal(lines.at(-1), 'next pass: waits for an approval of plan catalog-plan-1');

  const insync = schema({ phase: 'InSync', observedGeneration: 1, conditions: [ready('True', 'NoChanges')], nextReconciliationTime: '2026-12-01T12:10:00Z' });
  t.same(obligationsOf(insync), []);
  t.equal(nextPass(insync, NOW), 'reads the database again at 2026-12-01T12:10:00Z');
  t.same(statusRow(insync, NOW), { namespace: 'shop', kind: 'PtahSchema', name: 'catalog', phase: 'InSync', ready: 'True', reason: 'NoChanges', waitingFor: 'next reading 2026-12-01T12:10:00Z' });
  t.same(obligationsOf(schema(undefined)), [], 'no status yet owes nothing');
  t.match(nextPass(schema(undefined), NOW), /first time/);
  t.match(nextPass(schema({ phase: 'Blocked', conditions: [ready('False', 'DestructiveChangesDisabled')] }), NOW), 'stays Blocked (DestructiveChangesDisabled)');
  t.equal(nextPass(migration({ phase: 'InSync' }, { suspend: true }), NOW), 'reads and runs nothing while spec.suspend is true');
  t.equal(nextPass(schema({ phase: 'ReadyToApply', plan }), NOW), 'claims the Apply of plan catalog-plan-1');
  t.match(nextPass(migration({ phase: 'Failed', nextReconciliationTime: '2026-12-01T12:01:00Z' }), NOW), 'retries after spec.execution.failureRetryInterval (not before 2026-12-01T12:01:00Z)');
  const stale = schema({ phase: 'InSync', observedGeneration: 0, conditions: [ready('True', 'NoChanges')] });
  t.ok(formatExplanation(stale, NOW).some((l) => l.startsWith('The spec changed (metadata.generation 1, status.observedGeneration 0)')));
});

t.test('the status table aligns its columns and adds NAMESPACE only across namespaces', async (t) => {
  const rows = [statusRow(schema({ phase: 'InSync', conditions: [ready('True', 'NoChanges')] }), NOW), statusRow(migration({ phase: 'Blocked', unresolvedRun: unresolved }), NOW)];
  const table = formatTable(rows, false);
  t.match(table[0], /^KIND\s+NAME\s+PHASE\s+READY\s+REASON\s+WAITING-FOR$/);
  t.match(table[2], /^PtahMigration\s+orders\s+Blocked\s+-\s+-\s+acknowledgment of sha256:8{12}…$/);
  t.equal(table[0]!.indexOf('NAME'), table[1]!.indexOf('catalog'));
  t.match(formatTable(rows, true)[1], /^shop\s+PtahSchema/);
});

t.test('plan SQL: each statement once, terminated, annotated with why it locks, drops or grants', async (t) => {
  const sql = planSql({
    statements: ['CREATE TABLE a (id int)', 'DROP TABLE b;', 'GRANT SELECT ON a TO r'],
    destructiveStatements: [{ index: 1, reason: 'drop_table' }],
    lockingStatements: [{ index: 1, reason: 'access_exclusive' }],
    privilegeStatements: [2],
    transactional: true,
  });
  t.equal(sql, 'CREATE TABLE a (id int);\n\n-- destructive: drop_table\n-- locking: access_exclusive\nDROP TABLE b;\n\n-- changes privileges\nGRANT SELECT ON a TO r;\n');
});

t.test('targets and kinds; usage errors exit 2 before any kubeconfig is read', async (t) => {
  t.same(parseTarget('ptahschema/catalog', undefined), { kind: 'PtahSchema', name: 'catalog' });
  t.same(parseTarget('ptahm/orders', undefined), { kind: 'PtahMigration', name: 'orders' });
  t.same(parseTarget('orders', 'migration'), { kind: 'PtahMigration', name: 'orders' });
  t.same(parseTarget('orders', undefined), { kind: undefined, name: 'orders' });
  t.equal(kindOf('ptahschemas.operator.ptah.run'), 'PtahSchema');
  t.throws(() => kindOf('job'), CliError);
  t.throws(() => parseTarget('ptahschema/catalog', 'migration'), /contradicts/);
  const err: string[] = [];
  const io = { out: () => undefined, err: (l: string) => void err.push(l) };
  t.equal(await run(['bogus'], io), 2);
  t.equal(await run(['plan'], io), 2, 'plan without a name');
  t.equal(await run(['explain', 'ptahschema/a', '-A'], io), 2, '-A outside status');
  t.equal(await run(['status', '--frobnicate'], io), 2, 'an unknown flag');
  t.equal(await run(['status', '--kubeconfig', '/nonexistent/kubeconfig'], io), 1, 'a kubeconfig that cannot be read is a failure, not usage');
  // repair's flags are checked before any kubeconfig is read: each of these is usage (2), never a failure (1).
  const repairUsage: [string[], string][] = [
    [['repair', 'orders'], 'repair takes --version'],
    [['repair', 'orders', '--version', '4'], 'repair takes --version'],
    [['repair', 'orders', '--version', 'v4', '--resolution', 'finished'], '--version "v4" is not a migration version'],
    [['repair', 'orders', '--version', '4', '--resolution', 'forced'], '--resolution "forced" is not one of finished, undone'],
    [['approve', 'orders', '--version', '4'], '--version and --resolution are for repair only'],
  ];
  for (const [argv, message] of repairUsage) {
    err.length = 0;
    t.equal(await run([...argv, '--kubeconfig', '/nonexistent/kubeconfig'], io), 2, argv.join(' '));
    t.match(err.join('\n'), message, `${argv.join(' ')}: ${message}`);
  }
  t.equal(await run(['repair', 'orders', '--version', '4', '--resolution', 'undone', '--kubeconfig', '/nonexistent/kubeconfig'], io), 1,
    'well-formed repair flags reach the kubeconfig');
  err.length = 0;
  t.equal(await run(['bogus'], io), 2);
  t.match(err.join('\n'), 'unknown command "bogus"');
  t.equal(await run(['--help'], { out: (l) => void err.push(l), err: () => undefined }), 0);
});

t.test('a refused artifact is an obligation explain names, with what to change', async (t) => {
  const refusedReading = { artifactDigest: d('9'), generation: 1, executionBindingID: EPOCH, code: 'migration_invalid', message: 'migration 00001_users.sql is not named <version>_<name>.up.sql', refusedAt: '2026-12-01T11:50:00Z' };
  const m = migration({ phase: 'Blocked', conditions: [ready('False', 'ArtifactRefused')], refusedReading });
  const owes = obligationsOf(m);
  t.equal(owes.length, 1, 'one obligation');
  t.match(owes[0], /^A refused artifact \(status\.refusedReading\): a History reading refused artifact sha256:9{64} as generation 1 reads it \(migration_invalid: migration 00001_users\.sql/);
  t.match(owes[0], /not read again until the artifact, the spec or the execution binding changes/);
  t.equal(nextPass(m, NOW), 'stays Blocked (ArtifactRefused) until the spec or what it names changes');
  t.same(obligationsOf(migration({ phase: 'Blocked', conditions: [ready('False', 'ApplyDisabled')] })), [], 'a Blocked migration without the record owes nothing of the kind');
  const s = schema({ phase: 'Blocked', conditions: [ready('False', 'ReadingRefused')], nextReconciliationTime: '2026-12-01T12:10:00Z',
    refusedReading: { ...refusedReading, code: 'desired_schema_invalid', message: 'schema.sql failed: relation "customers" does not exist' } });
  t.same(obligationsOf(s), [`A refused reading (status.refusedReading): a reading of desired schema ${d('9')} under generation 1 was refused (desired_schema_invalid: schema.sql failed: relation "customers" does not exist); the database is read again at 2026-12-01T12:10:00Z, or at once when the desired schema or the spec changes.`], 'a schema\'s refusal says when it is read again');
  t.equal(nextPass(s, NOW), 'stays Blocked (ReadingRefused) until 2026-12-01T12:10:00Z, then reads the database again (at once when the spec or what it names changes)');
  const adoption = migration({ phase: 'Blocked', conditions: [ready('False', 'AdoptionRefused')], nextReconciliationTime: '2026-12-01T12:10:00Z',
    refusedReading: { ...refusedReading, code: 'adoption_refused', message: 'no table goose_db_version in the search_path (public)' } });
  t.same(obligationsOf(adoption), ['A refused adoption (status.refusedReading): a History reading refused spec.adoption (adoption_refused: no table goose_db_version in the search_path (public)); ' +
    'the other tool\'s history is read again at 2026-12-01T12:10:00Z, or at once when the artifact or the spec changes.'], 'a refused adoption is read again in time, unlike a refused artifact');
  t.equal(nextPass(adoption, NOW), 'stays Blocked (AdoptionRefused) until 2026-12-01T12:10:00Z, then reads the database again (at once when the spec or what it names changes)');
  const dirty = migration({ phase: 'Blocked', conditions: [ready('False', 'HistoryDirty')] });
  t.equal(nextPass(dirty, NOW), 'stays Blocked (HistoryDirty) until spec.repair names the dirty row (kubectl ptah repair, once the database is mended); ' +
    'then it reads the history again and publishes a repair plan, which runs only once approved', 'a dirty history names the repair');
});

t.test('explain says where the artifact was pinned: an OCI reference with its digest and keys, or a ConfigMap', async (t) => {
  const oci = { reference: 'registry.example:5000/shop/orders:v7', pinnedReference: `registry.example:5000/shop/orders@${d('a')}`, manifestDigest: d('a'),
    artifactType: 'application/vnd.ptah-operator.migrations.v1', verifiedKeys: ['release'] };
  const lines = formatExplanation(migration({ phase: 'InSync', artifact: { oci, digest: d('b'), verificationPolicyUID: 'p', verificationPolicyDigest: d('c'), resolvedAt: '2026-12-01T11:00:00Z' } }), NOW);
  t.ok(lines.includes(`The artifact (status.artifact): registry.example:5000/shop/orders:v7 resolved to registry.example:5000/shop/orders@${d('a')} at 2026-12-01T11:00:00Z ` +
    `(application/vnd.ptah-operator.migrations.v1, signed with release); every plan, approval and Job binds that digest and content ${d('b')}.`), 'the reference, the digest and the key that verified');
  const unsigned = formatExplanation(migration({ phase: 'InSync', artifact: { oci: { ...oci, verifiedKeys: [] }, digest: d('b'), verificationPolicyUID: 'p', verificationPolicyDigest: d('c'), resolvedAt: '2026-12-01T11:00:00Z' } }), NOW);
  t.ok(unsigned.some((l) => l.includes('no signature required')), 'an artifact no key had to sign says so');
  const configMap = formatExplanation(migration({ phase: 'InSync', artifact: { configMapName: 'orders-r1', configMapUID: 'u', digest: d('b'), verificationPolicyUID: 'p', verificationPolicyDigest: d('c'), resolvedAt: '2026-12-01T11:00:00Z' } }), NOW);
  t.ok(configMap.includes(`The artifact (status.artifact): ConfigMap orders-r1 (uid u), content ${d('b')}.`), 'a ConfigMap pin names the ConfigMap');
  t.notOk(formatExplanation(migration({ phase: 'Pending' }), NOW).some((l) => l.startsWith('The artifact')), 'no pin, no line');
});
