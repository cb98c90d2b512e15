// PtahMigrations whose artifacts are other tools' directories (spec.artifact.format), on the real control plane
// with the real runner, executor and PostgreSQL: each converges with one Apply, records each file once, runs no
// down section, and builds what psql builds from the up SQL (migration-format-fixtures.ts).
import t, { type Test } from 'tap';
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { MigrationFormat } from '../../src/shared/migration-format.js';
import { catalogFacts } from './executor-helpers.js';
import { LAYOUTS, STEPS, TOOL_HISTORY, adoptedWitness, psqlRuns, recorded, witness, type Tool } from './migration-format-fixtures.js';
import { jobsOf, migrationWorld, type MigrationWorld } from './migration-world.js';

const POLICY = 'formats-policy';

/** The sample's verification policy, but for file names of every format (the sample's pattern is the ptah one). */
async function installFormatsPolicy(w: MigrationWorld): Promise<void> {
  const policy = ['version: 1', 'requiredLabels:', '  ptah.run/artifact-type: migrations', 'maxTotalBytes: 524288',
    "fileNamePattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$'", ''].join('\n');
  await w.admin.create<V1ConfigMap>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: POLICY, namespace: w.ns }, immutable: true, data: { 'policy.yaml': policy } });
}

for (const format of ['goose', 'dbmate', 'flyway'] as const satisfies readonly MigrationFormat[]) {
  t.test(`a ${format} directory converges through PtahMigration, each file once`, async (t) => {
    const w = await migrationWorld(t);
    await w.startController();
    const db = await w.database(`fmt_${format}`);
    const secret = await w.installSample(db);
    await installFormatsPolicy(w);
    await w.artifact(`orders-${format}`, LAYOUTS[format](STEPS));
    const created = await w.createMigration({ name: 'orders', artifact: `orders-${format}`, secret, apply: 'Always', format, verificationPolicy: POLICY });
    t.equal(created.spec.artifact.format, format, 'fixture: the resource declares the format');
    const done = await w.waitFor('orders', 'applied and in sync', (m) =>
      (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
    t.same(done.status?.lastRun?.appliedVersions?.map((v) => BigInt(v).toString()), STEPS.map((s) => recorded(format, s)), 'the run applied every file, in version order');
    const history = await w.history(db);
    t.same(history.map((r) => BigInt(r.version).toString()), STEPS.map((s) => recorded(format, s)), 'the history table holds each version once');
    t.same(new Set(history.map((r) => r.operationId)).size, 1, 'under one operation');
    t.equal(jobsOf(w, 'apply').length, 1, 'one Apply Job');
    t.same(await catalogFacts(db.url), await catalogFacts((await witness(t, STEPS)).url), 'the database equals what psql builds from the up SQL');
  });
}

t.test('a directory read in the format the resource does not declare is refused once, Blocked until the spec changes, and nothing runs', async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('fmt_undeclared');
  const secret = await w.installSample(db);
  await installFormatsPolicy(w);
  await w.artifact('orders-goose', LAYOUTS.goose(STEPS));
  // The shortest retry interval: a refusal that were retried would show several readings within the window below.
  await w.createMigration({ name: 'orders', artifact: 'orders-goose', secret, apply: 'Always', verificationPolicy: POLICY, failureRetryInterval: '5s' });
  const refused = await w.waitFor('orders', 'the reading refused', (m) => {
    const ready = m.status?.conditions?.find((c) => c.type === 'Ready');
    return ready?.message?.includes('00001_users.sql') ? m : undefined;
  });
  const ready = refused.status?.conditions?.find((c) => c.type === 'Ready');
  t.match(ready?.message, /not named <version>_<name>\.up\.sql.*spec\.artifact\.format/, 'the message names the files and the field that would read them');
  t.equal(refused.status?.phase, 'Blocked', 'the refusal is reported Blocked, not as a reading in progress');
  t.equal(ready?.reason, 'ArtifactRefused', 'with the reason');
  t.equal(refused.status?.refusedReading?.code, 'invalid_migration_name', 'status records what refused the artifact');
  t.equal(refused.status?.refusedReading?.artifactDigest, refused.status?.artifact?.digest, 'and which artifact');

  // Three retry intervals later: no second reading, still Blocked.
  await new Promise((resolve) => setTimeout(resolve, 16_000));
  const later = await w.admin.get<PtahMigration>({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: w.ns, name: 'orders' });
  t.equal(jobsOf(w, 'history', 'orders').length, 1, 'the same artifact under the same spec is read once, not every retry interval');
  t.equal(later.status?.phase, 'Blocked', 'and stays Blocked');
  t.notOk(later.status?.activeOperation, 'with no reading claimed');
  t.equal(jobsOf(w, 'apply').length, 0, 'no Apply Job');
  t.same(await w.history(db), [], 'nothing was recorded');

  // Declaring the format the directory is in is a spec change: read again, and it converges.
  await w.admin.patch({ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: w.ns, name: 'orders' }, { spec: { artifact: { format: 'goose' } } }, 'merge');
  const done = await w.waitFor('orders', 'applied and in sync once the format is declared', (m) =>
    (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
  t.notOk(done.status?.refusedReading, 'the refusal record is gone with the reading that succeeded');
  t.same((await w.history(db)).map((r) => BigInt(r.version).toString()), STEPS.map((s) => recorded('goose', s)), 'each file once');
});

/** A world whose database holds what `tool` built from the first two files (its table is the test's to write), and the tool's artifact of every file. */
async function migratedBy(t: Test, tool: Tool, prefix: string) {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database(prefix);
  const secret = await w.installSample(db);
  await installFormatsPolicy(w);
  const files = LAYOUTS[tool](STEPS);
  await w.artifact(`orders-${tool}`, files);
  const ranByTool = STEPS.slice(0, 2);
  await psqlRuns(t, db.url, ranByTool);
  return { w, db, secret, files, ranByTool };
}

for (const tool of Object.keys(TOOL_HISTORY) as Tool[]) {
  t.test(`a database ${tool} migrated is adopted: the first plan lists only the files after its head, and the approved Apply runs only those`, async (t) => {
    const { w, db, secret, files, ranByTool } = await migratedBy(t, tool, `fmt_adopt_${tool.replace('-', '_')}`);
    await w.sql(db, TOOL_HISTORY[tool](ranByTool, files));
    await w.createMigration({ name: 'orders', artifact: `orders-${tool}`, secret, apply: 'OnApproval', format: tool, verificationPolicy: POLICY, adoption: { from: tool } });

    const awaiting = await w.waitFor('orders', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
    const plan = await w.plan('orders');
    const pending = STEPS.slice(2).map((s) => recorded(tool, s));
    t.same(plan.spec.migrations.map((m) => BigInt(m.version).toString()), pending, `the plan lists only the files after ${tool}'s head`);
    const adopted = plan.spec.adopted;
    t.same(adopted && { ...adopted, firstVersion: BigInt(adopted.firstVersion).toString(), lastVersion: BigInt(adopted.lastVersion).toString() },
      { from: tool, count: 2, firstVersion: recorded(tool, STEPS[0]!), lastVersion: recorded(tool, STEPS[1]!) }, 'and shows what it adopts');
    t.same(awaiting.status?.history?.adoptable, adopted, 'as the reading does');
    const published = awaiting.status?.conditions?.find((c) => c.type === 'Ready');
    t.match(published?.message, new RegExp(`plan ptah-mplan-\\S+ applies ${plan.spec.migrations.map((m) => m.version).join(', ')} and records 2 file\\(s\\) ` +
      `\\(${adopted?.firstVersion} … ${adopted?.lastVersion}\\) as applied by ${tool}, without running them; create a PtahMigrationApproval`),
    'the resource says what the approval would allow, the adoption too');
    t.same(await w.history(db), [], 'nothing is recorded before the approval');

    await w.approve('orders');
    const done = await w.waitFor('orders', 'applied and in sync', (m) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
    t.same(done.status?.lastRun?.appliedVersions?.map((v) => BigInt(v).toString()), pending, 'the run applied only the pending files');
    const rows = await w.sql<{ version: string; adopted_from: string | null; operation_id: string }>(db,
      'SELECT version_order::text AS version, adopted_from, operation_id FROM ptah_migrations.history ORDER BY version_order');
    t.same(rows.map((r) => [r.version, r.adopted_from]), STEPS.map((s, i) => [recorded(tool, s), i < 2 ? tool : null]), 'each version once, the first two adopted');
    t.equal(new Set(rows.map((r) => r.operation_id)).size, 1, 'all recorded by the one approved Apply');
    t.same(await w.sql(db, 'SELECT email FROM users ORDER BY id'), [{ email: 'a@example.org' }, { email: 'semi;colon@example.org' }], `the data file ${tool} ran did not run again`);
    t.same(await catalogFacts(db.url), await catalogFacts((await adoptedWitness(t, tool, ranByTool, files)).url), 'the database equals psql\'s build of every up section');
    t.equal(done.status?.history?.adoptable, undefined, 'the reading after the run adopts nothing more: the history records it all');
  });
}

t.test('a refused adoption is Blocked/AdoptionRefused, read again at spec.interval rather than every retry, and plans once the database is mended', async (t) => {
  const { w, db, secret, files, ranByTool: ranByGoose } = await migratedBy(t, 'goose', 'fmt_adopt_refused');
  await w.createMigration({
    name: 'orders', artifact: 'orders-goose', secret, apply: 'OnApproval', format: 'goose', verificationPolicy: POLICY, adoption: { from: 'goose' },
    interval: '20s', failureRetryInterval: '5s',
  });
  const refused = await w.waitFor('orders', 'the adoption refused', (m) => (m.status?.refusedReading ? m : undefined));
  const ready = refused.status?.conditions?.find((c) => c.type === 'Ready');
  t.equal(refused.status?.phase, 'Blocked');
  t.equal(ready?.reason, 'AdoptionRefused', 'with its own reason');
  t.match(ready?.message, /^adoption_refused: no table goose_db_version/, 'naming the table it looked for');
  t.notOk(refused.status?.plan, 'no plan is published');

  // Two retry intervals later, well inside spec.interval: no second reading.
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  t.equal(jobsOf(w, 'history', 'orders').length, 1, 'the refusal is not retried every failureRetryInterval');
  t.same(await w.history(db), [], 'nothing was recorded');

  // A person writes goose's table as goose left it; the next reading (at spec.interval) adopts it.
  await w.sql(db, TOOL_HISTORY.goose(ranByGoose, files));
  const awaiting = await w.waitFor('orders', 'a plan once the table exists', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));
  t.notOk(awaiting.status?.refusedReading, 'the refusal record is gone with the reading that succeeded');
  t.same(awaiting.status?.history?.adoptable, { from: 'goose', count: 2, firstVersion: '00001', lastVersion: '00002' }, 'and the reading adopts what goose ran');
  t.equal(jobsOf(w, 'history', 'orders').length, 2, 'after exactly one more reading');
});
