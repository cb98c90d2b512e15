// A PtahSchema whose desired schema does not build, on the real control plane, runner and PostgreSQL: the reading's
// refusal is recorded (status.refusedReading) and reported Blocked, and no scratch database is built again every
// retry interval; a new desired schema is read at once and converges. The database is the witness that nothing ran.
import t from 'tap';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { sleep } from '../../tools/stack/wait.js';
import { schemaJobsOf, schemaWorld, switchDesired } from './schema-world.js';

// A foreign key to a table the file never creates: PostgreSQL refuses to build it, whatever is retried.
const BROKEN = 'CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint REFERENCES customers (id));\n';
const FIXED = 'CREATE TABLE customers (id bigint PRIMARY KEY);\nCREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint REFERENCES customers (id));\n';

t.test('a desired schema that does not build is refused once and Blocked until it changes, instead of a reading every retry interval', async (t) => {
  const w = await schemaWorld(t);
  await w.startController();
  const db = await w.database('refused');
  const secret = await w.installSample(db);
  await w.desired('broken', BROKEN);
  // The shortest retry interval: a refusal that were retried would show several readings within the window below.
  await w.createSchema({ name: 'catalog', artifact: 'broken', secret, apply: 'Always', failureRetryInterval: '5s' });
  const refused = await w.waitFor('catalog', 'the reading refused', (s) => (s.status?.refusedReading ? s : undefined));
  const ready = refused.status?.conditions?.find((c) => c.type === 'Ready');
  t.equal(refused.status?.phase, 'Blocked', 'reported Blocked, not Failed and retried');
  t.equal(ready?.reason, 'ReadingRefused', 'with the reason');
  t.match(ready?.message, /^desired_schema_invalid: schema\.sql failed: .*customers/, 'and what PostgreSQL refused');
  t.equal(refused.status?.refusedReading?.artifactDigest, refused.status?.artifact?.digest, 'status records which desired schema was refused');
  t.ok(Date.parse(refused.status?.nextReconciliationTime ?? '') - Date.parse(refused.status?.refusedReading?.refusedAt ?? '') >= 9 * 60_000,
    'it is read again at spec.interval (10 minutes by default), not at the retry interval');

  // Three retry intervals later: no second reading.
  await sleep(16_000);
  const later = await w.admin.get<PtahSchema>({ apiVersion: API_VERSION, kind: KINDS.PtahSchema.kind, namespace: w.ns, name: 'catalog' });
  t.equal(schemaJobsOf(w, 'observe', 'catalog').length + schemaJobsOf(w, 'plan', 'catalog').length, 1, 'one reading, not one every retry interval');
  t.equal(later.status?.phase, 'Blocked', 'still Blocked');
  t.notOk(later.status?.activeOperation, 'with no reading claimed');
  t.same(await w.tables(db), [], 'nothing was created in the database');

  // A new desired schema is read at once, and converges.
  await w.desired('fixed', FIXED);
  await switchDesired(w, 'catalog', 'fixed');
  const synced = await w.waitFor('catalog', 'InSync with the new desired schema', (s) => (s.status?.phase === 'InSync' && s.status.applied ? s : undefined));
  t.notOk(synced.status?.refusedReading, 'the refusal record is gone with the reading that succeeded');
  t.same(await w.tables(db), ['customers', 'orders'], 'the database holds the new desired schema');
});
