// The realm census on the real stack (issue #14, its cluster half): a PtahMigration and a PtahSchema in two
// namespaces reach one PostgreSQL database through two URL spellings (127.0.0.1 and localhost), so they hold two
// different coordination digests and would take two Leases. Once their readings name the same physical database,
// both are Blocked RealmConflict before anything is applied; when one of them stops reaching it, the other applies.
import t from 'tap';
import { sleep } from '../../tools/stack/wait.js';
import { jobsOf, migrationWorld } from './migration-world.js';
import { schemaJobsOf, schemaWorld } from './schema-world.js';

const localhost = (url: string) => url.replace('@127.0.0.1:', '@localhost:').replace('//127.0.0.1:', '//localhost:');

t.test('two resources in two namespaces reaching one database under two realms are both Blocked until only one reaches it', async (t) => {
  const m = await migrationWorld(t);
  const s = await schemaWorld(t);
  const db = await m.database('census');
  t.not(localhost(db.url), db.url, 'fixture: the second spelling differs from the first');
  const mSecret = await m.installSample(db);
  await m.sampleArtifact();
  await s.installSample({ ...db, url: localhost(db.url) });
  await s.desired('catalog-r1', 'CREATE TABLE products (id bigint PRIMARY KEY);\n');
  await m.startController();
  await s.startController();
  await m.createMigration({ name: 'orders', artifact: 'orders-migrations-r1', secret: mSecret, apply: 'OnApproval' });
  await m.waitFor('orders', 'its first reading', (x) => (x.status?.history?.physicalIdentityDigest ? x : undefined));
  await s.createSchema({ name: 'catalog', artifact: 'catalog-r1', secret: 'catalog-db', apply: 'Always' });

  const blockedSchema = await s.waitFor('catalog', 'Blocked by the census after its first reading', (x) =>
    (x.status?.conditions?.find((c) => c.type === 'Ready')?.reason === 'RealmConflict' ? x : undefined));
  const migration = await m.get('orders');
  t.equal(blockedSchema.status?.target?.physicalIdentityDigest, migration.status?.history?.physicalIdentityDigest, 'both readings name one physical database');
  t.not(blockedSchema.status?.target?.identityDigest, migration.status?.history?.targetIdentityDigest, 'through two URL spellings');
  t.match(blockedSchema.status?.conditions?.find((c) => c.type === 'Ready')?.message, `PtahMigration ${m.ns}/orders`, 'it names the other resource');
  t.notMatch(blockedSchema.status?.conditions?.find((c) => c.type === 'Ready')?.message ?? '', /postgres(ql)?:\/\//, 'never a URL');

  // The migration's approval wakes it: the census holds it too, so nothing is applied by either.
  await m.approve('orders');
  const blockedMigration = await m.waitFor('orders', 'Blocked by the census', (x) => (x.status?.phase === 'Blocked' && x.status.conditions?.find((c) => c.type === 'Blocked')?.reason === 'RealmConflict' ? x : undefined));
  t.match(blockedMigration.status?.conditions?.find((c) => c.type === 'Blocked')?.message, `PtahSchema ${s.ns}/catalog`);
  await sleep(5_000);
  t.equal(jobsOf(m, 'apply').length, 0, 'no migration Apply was claimed');
  t.equal(schemaJobsOf(s, 'apply').length, 0, 'no schema Apply was claimed');
  t.same(await m.history(db), [], 'the database history is untouched');
  t.same(await s.tables(db), [], 'and no table was created');

  // Negative: with the schema gone, only one realm reaches the database, and the approved migration applies.
  await s.admin.delete(s.ref('PtahSchema', 'catalog'));
  const applied = await m.waitFor('orders', 'applied once the other realm is gone', (x) => (x.status?.phase === 'InSync' && x.status.lastRun?.outcome === 'Applied' ? x : undefined), 240_000);
  t.same((await m.history(db)).map((r) => r.version), ['0001', '0002', '0003'], 'each version applied once');
  t.equal(jobsOf(m, 'apply').length, 1, 'by one Apply');
  t.equal(applied.status?.lastRun?.operationID, (await m.history(db))[0]?.operationId);
});
