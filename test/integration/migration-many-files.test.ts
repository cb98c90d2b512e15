// A migration directory with more pending files than one plan carries (MAX_PLANNED_MIGRATIONS), on the real control
// plane with the real runner, executor and PostgreSQL: the first plan holds the first pending files and says how
// many wait, its approval applies exactly those, and the reading after it plans the rest. The database's own
// history table is the witness that every file ran once.
import t from 'tap';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { MAX_PLANNED_MIGRATIONS } from '../../src/shared/api/migration-kinds.js';
import { jobsOf, migrationWorld, WAIT_MS } from './migration-world.js';

const FILES = 300;

t.test(`${FILES} pending files: a plan of the first ${MAX_PLANNED_MIGRATIONS}, approved and applied, then a plan of the rest`, async (t) => {
  const w = await migrationWorld(t);
  await w.startController();
  const db = await w.database('many_files');
  const secret = await w.installSample(db);
  await w.artifact('many-r1', Object.fromEntries(Array.from({ length: FILES }, (_, i) => [`${i + 1}_t${i + 1}.up.sql`, `CREATE TABLE t${i + 1} (x int);`])));
  await w.createMigration({ name: 'many', artifact: 'many-r1', secret, apply: 'OnApproval' });

  const awaiting = (m: PtahMigration) => (m.status?.phase === 'AwaitingApproval' ? m : undefined);
  const first = await w.waitFor('many', 'the first plan awaiting approval', awaiting, WAIT_MS);
  t.equal(first.status?.history?.pendingCount, FILES, 'the reading found every file pending');
  const firstPlan = await w.plan('many');
  t.same(firstPlan.spec.migrations.map((m) => m.version), Array.from({ length: MAX_PLANNED_MIGRATIONS }, (_, i) => String(i + 1)),
    `the plan holds the first ${MAX_PLANNED_MIGRATIONS}, in order`);
  const published = first.status?.conditions?.map((c) => c.message ?? '').join('\n') ?? '';
  t.match(published, new RegExp(`1 … ${MAX_PLANNED_MIGRATIONS} \\(${MAX_PLANNED_MIGRATIONS} files\\)`), 'a person is told which files it applies');

  await w.approve('many');
  const second = await w.waitFor('many', 'the second plan awaiting approval', (m) =>
    (awaiting(m) && m.status?.plan?.name !== firstPlan.metadata.name ? m : undefined), 2 * WAIT_MS);
  t.same(second.status?.lastRun?.appliedVersions?.length, MAX_PLANNED_MIGRATIONS, 'the first Apply applied exactly the approved files');
  t.equal(second.status?.history?.pendingCount, FILES - MAX_PLANNED_MIGRATIONS, 'the rest are pending');
  t.same((await w.plan('many')).spec.migrations.map((m) => m.version), Array.from({ length: FILES - MAX_PLANNED_MIGRATIONS }, (_, i) => String(MAX_PLANNED_MIGRATIONS + i + 1)),
    'the second plan holds the rest');

  await w.approve('many');
  await w.waitFor('many', 'in sync', (m) => (m.status?.phase === 'InSync' && !m.status.activeOperation ? m : undefined), 2 * WAIT_MS);
  const rows = await w.history(db);
  t.equal(rows.length, FILES, 'the history holds one row per file');
  t.equal(new Set(rows.map((r) => r.version)).size, FILES, 'each version once');
  t.equal(new Set(rows.map((r) => r.operationId)).size, 2, 'applied by two operations');
  const [{ n }] = await w.sql<{ n: string }>(db, "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'");
  t.equal(Number(n), FILES, 'every table exists');
  t.equal(jobsOf(w, 'apply', 'many').length, 2, 'two Apply Jobs');
});
