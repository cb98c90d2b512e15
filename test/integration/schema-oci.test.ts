// A PtahSchema whose desired schema is an OCI artifact larger than a ConfigMap can hold (1 MiB), on the real control
// plane with a real registry, the real runner and PostgreSQL: a Resolve Job pins the tag's digest, the Observe, Plan
// and Apply Jobs fetch exactly that digest, and the database converges. The witness is pg_dump: the converged
// database dumps as one built straight from the same SQL by psql's own server. A refused artifact is Blocked with
// its reason and no database Job runs.
import t from 'tap';
import type { V1Job } from '@kubernetes/client-node';
import type { PtahSchema } from '../../src/shared/api/schema-kinds.js';
import { KINDS } from '../../src/shared/api/names.js';
import { schemaDump } from './executor-helpers.js';
import { ociWorld } from './oci-world.js';
import { sampleObjects, sampleOf } from './operator-install.js';
import { SCHEMA_SAMPLE, schemaWorld, WAIT_MS } from './schema-world.js';

const POLICY = 'version: 1\nrequiredAnnotations: [org.opencontainers.image.source]\nartifactTypes: [application/vnd.ptah-operator.schema.v1]\n';
const samples = await sampleObjects(SCHEMA_SAMPLE);
const operationOf = (job: V1Job): string | undefined => job.spec?.template?.spec?.containers?.[0]?.args?.[1];

/** About 1.1 MiB of DDL: 300 tables, each with a key, a unique column and a long comment (bytes, not objects, are the point). */
function largeSchema(): string {
  const note = 'x'.repeat(3800);
  return Array.from({ length: 300 }, (_, i) => `CREATE TABLE item_${i} (\n  id bigint PRIMARY KEY,\n  code text NOT NULL UNIQUE,\n  note text\n);\nCOMMENT ON TABLE item_${i} IS '${note} ${i}';\n`).join('');
}

t.test('a desired schema over 1 MiB converges from the registry; pg_dump matches a database built from the same SQL', async (t) => {
  const w = await schemaWorld(t);
  const o = await ociWorld(t);
  await o.install(w.admin, w.ns, POLICY);
  const db = await w.database('oci_large');
  const secret = await w.installSample(db);
  const sql = largeSchema();
  t.ok(Buffer.byteLength(sql) > 1024 * 1024, `the desired schema is ${Buffer.byteLength(sql)} bytes, more than a ConfigMap holds`);
  const digest = await o.push({ 'schema.sql': sql }, 'app/catalog:v1');
  await o.push({ '1_a.up.sql': 'CREATE TABLE a (x int);\n' }, 'app/migrations:v1');
  await w.startController();

  const create = (name: string, reference: string) => {
    const sample = sampleOf<PtahSchema>(samples, KINDS.PtahSchema.kind);
    sample.metadata = { name, namespace: w.ns };
    sample.spec.desired = { oci: o.source(reference), verificationPolicyRef: { name: 'oci-policy', key: 'policy.yaml' } };
    sample.spec.target.urlFrom.name = secret;
    sample.spec.target.coordinationKey = `oci-${name}`;
    sample.spec.policy = { ...sample.spec.policy, apply: 'Always' };
    sample.spec.execution = { ...sample.spec.execution, activeDeadlineSeconds: 600 };
    return w.admin.create(sample);
  };
  await create('catalog', 'app/catalog:v1');
  await create('wrong-type', 'app/migrations:v1');

  const synced = await w.waitFor('catalog', 'InSync after the proof', (s) => (s.status?.phase === 'InSync' && s.status.applied && !s.status.activeOperation ? s : undefined), 4 * WAIT_MS);
  t.equal(synced.status?.artifact?.oci?.manifestDigest, digest, 'the pin is the pushed digest');
  t.equal(synced.status?.artifact?.oci?.artifactType, 'application/vnd.ptah-operator.schema.v1');

  const witness = await w.database('oci_large_witness');
  await w.sql(witness, sql);
  const [converged, built] = await Promise.all([schemaDump(db.url), schemaDump(witness.url)]);
  t.ok(built.length > 300 * 4, `the witness dumps ${built.length} lines`);
  t.same(converged, built, 'pg_dump of the converged database is pg_dump of one built straight from the SQL');
  t.equal((await w.applies(db)).length, 1, 'one Apply ran');

  const jobs = [...w.jobsSeen.values()].filter((j) => j.metadata?.ownerReferences?.[0]?.name === 'catalog');
  const databaseJobs = jobs.filter((j) => operationOf(j) !== 'resolve');
  t.ok(jobs.some((j) => operationOf(j) === 'resolve'), 'a Resolve Job pinned it');
  t.ok(databaseJobs.length >= 3 && databaseJobs.every((j) => j.spec?.template?.spec?.initContainers?.[0]?.args?.[0] === '--fetch-artifact'),
    `every one of ${databaseJobs.length} database Jobs fetched the pinned digest first`);

  const refused = await w.waitFor('wrong-type', 'Blocked', (s) => (s.status?.phase === 'Blocked' ? s : undefined));
  t.match(refused.status?.conditions?.find((c) => c.type === 'ArtifactVerified'), { status: 'False', reason: 'ArtifactTypeMismatch' }, 'a migrations artifact is not a desired schema');
  t.same([...w.jobsSeen.values()].filter((j) => j.metadata?.ownerReferences?.[0]?.name === 'wrong-type').map(operationOf).filter((op) => op !== 'resolve'), [],
    'no database Job ran for it');
});
