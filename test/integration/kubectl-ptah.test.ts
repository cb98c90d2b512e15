// `kubectl ptah` against the real local control plane: the CLI runs as a child process with the approver's and
// the admin's kubeconfig files, next to a PtahSchema and a PtahMigration the real controllers drive to
// AwaitingApproval. It lists both, explains the approval they wait for, prints the schema plan's SQL from its
// chunks, approves as the approver (the controller consumes the approval and the resources reach InSync) and
// refuses a missing resource and an acknowledgment with nothing unresolved. The Argo CD health check is run on the
// very status objects the controllers wrote.
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import type { PtahMigrationApproval } from '../../src/shared/api/migration-kinds.js';
import type { PtahSchemaApproval } from '../../src/shared/api/schema-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { REPO_ROOT } from '../../tools/stack/paths.js';
import { migrationWorld } from './migration-world.js';
import { schemaWorld } from './schema-world.js';

const cluster = sharedCluster();
const run = promisify(execFile);

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI as `identity` (a child process, so the controllers in this process keep running meanwhile). */
async function ptah(identity: 'admin' | 'approver', args: string[]): Promise<CliResult> {
  const argv = ['--import', 'tsx', 'src/cli/kubectl-ptah.ts', '--kubeconfig', cluster.state.kubeconfigs[identity], ...args];
  try {
    const { stdout, stderr } = await run(process.execPath, argv, { cwd: REPO_ROOT, timeout: 60_000, env: { ...process.env, KUBECONFIG: '' } });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const failed = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** The Argo CD health check on one object, through the Lua harness that decodes it from JSON. */
async function health(object: unknown): Promise<string> {
  const child = spawn('lua5.4', [join(REPO_ROOT, 'manifests/argocd/harness.lua'), join(REPO_ROOT, 'manifests/argocd/health.lua')], { stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stdin.end(JSON.stringify(object));
  const code = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c) => resolve(c ?? 1));
  });
  if (code !== 0) throw new Error(`lua5.4 exited ${code}`);
  return Buffer.concat(out).toString('utf8').split('\t')[0]!;
}

const R1 = `CREATE TABLE products (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  title text NOT NULL
);
`;

t.test('kubectl ptah lists, explains, prints and approves on the real control plane', async (t) => {
  const [w, m] = await Promise.all([schemaWorld(t), migrationWorld(t)]);
  const [db, mdb] = await Promise.all([w.database('cli_schema'), m.database('cli_migration')]);
  const [secret, msecret] = await Promise.all([w.installSample(db), m.installSample(mdb)]);
  await Promise.all([w.desired('catalog-r1', R1), m.sampleArtifact()]);
  await Promise.all([w.startController(), m.startController()]);
  await w.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret, apply: 'OnApproval' });
  await m.createMigration({ name: 'orders', artifact: 'orders-migrations-r1', secret: msecret, apply: 'OnApproval' });
  const [schema, migration] = await Promise.all([
    w.waitFor('catalog', 'a plan awaiting approval', (s) => (s.status?.phase === 'AwaitingApproval' && s.status.plan ? s : undefined)),
    m.waitFor('orders', 'a plan awaiting approval', (x) => (x.status?.phase === 'AwaitingApproval' && x.status.plan ? x : undefined)),
  ]);
  const plan = await w.plan('catalog');

  await t.test('status lists both kinds with their phase', async (t) => {
    const all = await ptah('admin', ['status', '-A']);
    t.equal(all.code, 0, all.stderr);
    t.comment(all.stdout);
    t.match(all.stdout, /^NAMESPACE\s+KIND\s+NAME\s+PHASE\s+READY\s+REASON\s+WAITING-FOR/);
    t.match(all.stdout, new RegExp(`${w.ns}\\s+PtahSchema\\s+catalog\\s+AwaitingApproval\\s+False\\s+PlanReady\\s+approval of ${plan.metadata.name}`));
    t.match(all.stdout, new RegExp(`${m.ns}\\s+PtahMigration\\s+orders\\s+AwaitingApproval\\s+False`));
    const one = await ptah('approver', ['status', '-n', w.ns]);
    t.equal(one.code, 0, one.stderr);
    t.match(one.stdout, /PtahSchema\s+catalog\s+AwaitingApproval/);
    t.notMatch(one.stdout, /NAMESPACE|orders/, 'one namespace, no namespace column');
  });

  await t.test('explain names the approval awaited and what the next pass does', async (t) => {
    const out = await ptah('approver', ['explain', 'ptahschema/catalog', '-n', w.ns]);
    t.equal(out.code, 0, out.stderr);
    t.comment(out.stdout);
    t.match(out.stdout, `It awaits an approval (phase AwaitingApproval, status.plan): plan ${plan.metadata.name}`);
    t.match(out.stdout, `next pass: waits for an approval of plan ${plan.metadata.name}`);
    t.match(out.stdout, 'It owes no obligation of the mutation lifecycle now.');
    const mout = await ptah('approver', ['explain', 'ptahmigration/orders', '-n', m.ns]);
    t.equal(mout.code, 0, mout.stderr);
    t.match(mout.stdout, `next pass: waits for an approval of plan ${migration.status!.plan!.name}`);
  });

  await t.test('plan prints the summary, the SQL from the chunks, and a migration plan\'s versions', async (t) => {
    const summary = await ptah('approver', ['plan', 'catalog', '-n', w.ns]);
    t.equal(summary.code, 0, summary.stderr);
    t.match(summary.stdout, new RegExp(`statements:\\s+${plan.spec.statementCount}`));
    t.match(summary.stdout, /destructive:\s+false/);
    const sql = await ptah('approver', ['plan', 'catalog', '-n', w.ns, '-o', 'sql']);
    t.equal(sql.code, 0, sql.stderr);
    t.comment(sql.stdout);
    t.match(sql.stdout, /CREATE TABLE ("?public"?\.)?"?products"? \(/i, 'the CREATE TABLE statement');
    const mplan = await ptah('approver', ['plan', 'orders', '--kind', 'migration', '-n', m.ns]);
    t.equal(mplan.code, 0, mplan.stderr);
    const planned = (await m.plan('orders')).spec.migrations;
    for (const p of planned) t.match(mplan.stdout, new RegExp(`${p.version}\\s+${p.checksum}`), `version ${p.version} and its checksum`);
  });

  await t.test('errors: a missing resource, nothing unresolved, a wrong kind, bad usage', async (t) => {
    // [arguments, exit code, what stderr says], run as the approver
    const cases: [string[], number, string][] = [
      [['explain', 'ptahschema/nope', '-n', w.ns], 1, `ptahschema/nope not found in namespace ${w.ns}`],
      [['approve', 'nope', '-n', w.ns], 1, 'no ptahschema or ptahmigration named nope'],
      [['acknowledge', 'orders', '-n', m.ns], 1, 'has nothing unresolved'],
      [['acknowledge', 'catalog', '-n', w.ns], 1, 'owes no proof (no status.pendingObservation); there is nothing to acknowledge'],
      [['explain', 'job/catalog', '-n', w.ns], 2, 'not a kind kubectl ptah knows'],
      [['plan'], 2, 'plan takes <name>'],
    ];
    for (const [args, code, says] of cases) {
      const r = await ptah('approver', args);
      t.equal(r.code, code, `${args.join(' ')} exits ${code}`);
      t.match(r.stderr, says);
      t.notMatch(r.stderr + r.stdout, /BEGIN|PRIVATE KEY|client-key|token/i, 'no credential in the output');
    }
    t.same(await m.admin.list(API_VERSION, KINDS.PtahMigrationRunAcknowledgment.kind, m.ns), [], 'no acknowledgment was created');
    t.same(await w.admin.list(API_VERSION, KINDS.PtahSchemaRunAcknowledgment.kind, w.ns), [], 'no schema acknowledgment was created');
  });

  await t.test('the Argo CD health check reads the real AwaitingApproval status as Progressing', async (t) => {
    t.equal(await health(await w.get('catalog')), 'Progressing');
    t.equal(await health(await m.get('orders')), 'Progressing');
    t.equal(schema.status?.conditions?.find((c) => c.type === 'ApprovalRequired')?.status, 'True', 'fixture: the real status carries ApprovalRequired');
  });

  await t.test('approve creates approvals as the caller that the controllers consume', async (t) => {
    const approved = await ptah('approver', ['approve', 'catalog', '-n', w.ns]);
    t.equal(approved.code, 0, approved.stderr);
    t.match(approved.stdout, `approves plan ${plan.metadata.name} (${plan.spec.fingerprint}) as alice`);
    const mapproved = await ptah('approver', ['approve', 'orders', '--kind', 'migration', '-n', m.ns]);
    t.equal(mapproved.code, 0, mapproved.stderr);
    const approvals = await w.admin.list<PtahSchemaApproval>(API_VERSION, KINDS.PtahSchemaApproval.kind, w.ns);
    t.equal(approvals.length, 1);
    t.equal(approvals[0]?.spec.approver?.username, 'alice', 'admission stamped the caller');
    t.same(approvals[0]?.spec.planRef, { name: plan.metadata.name, uid: plan.metadata.uid });
    t.equal(approvals[0]?.spec.planFingerprint, plan.spec.fingerprint);
    const mapprovals = await m.admin.list<PtahMigrationApproval>(API_VERSION, KINDS.PtahMigrationApproval.kind, m.ns);
    t.equal(mapprovals[0]?.spec.planRef.uid, migration.status?.plan?.uid);

    const [synced, msynced] = await Promise.all([
      w.waitFor('catalog', 'InSync after the approved Apply and its proof', (s) => (s.status?.phase === 'InSync' && s.status.applied && !s.status.pendingLockRelease ? s : undefined)),
      m.waitFor('orders', 'InSync after the approved Apply', (x) => (x.status?.phase === 'InSync' && x.status.lastRun?.outcome === 'Applied' && !x.status.activeOperation && !x.status.pendingLockRelease ? x : undefined)),
    ]);
    t.same(await w.tables(db), ['products'], 'the approved plan ran');
    t.equal(await health(synced), 'Healthy', 'the health check reads the real InSync schema as Healthy');
    t.equal(await health(msynced), 'Healthy', 'the health check reads the real InSync migration as Healthy');
    const after = await ptah('approver', ['status', '-n', w.ns]);
    t.match(after.stdout, /PtahSchema\s+catalog\s+InSync\s+True/);
    const noPlan = await ptah('approver', ['approve', 'catalog', '-n', w.ns]);
    t.equal(noPlan.code, 1, 'nothing to approve once in sync');
    t.match(noPlan.stderr, 'has no current plan');
  });
});
