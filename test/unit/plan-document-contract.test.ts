// The plan document is a contract between the executor that writes it and the runner that refuses any plan it
// cannot read exactly (src/shared/runner-protocol.ts schemaPlanProblem): every plan the executor writes passes the
// runner's check, and each classification field is held to its statements.
import t from 'tap';
import { planDocument } from '../../src/executor/schema/commands.js';
import type { PlannedStatement } from '../../src/executor/schema/statements.js';
import { sha256Digest } from '../../src/shared/canonical.js';
import { schemaPlanProblem } from '../../src/shared/runner-protocol.js';

const d = (seed: string) => sha256Digest(seed);
const digests = { actualStateFingerprint: d('actual'), desiredSchemaDigest: d('desired-source'), desiredStateFingerprint: d('desired-state'), desiredCatalogDigest: d('desired-catalog') };
const planned: PlannedStatement[] = [
  { sql: 'CREATE TABLE t (id int)' },
  { sql: 'ALTER TABLE u ALTER COLUMN n TYPE bigint', locking: 'table_rewrite' },
  { sql: 'GRANT SELECT ON t TO reporting', privilege: true },
  { sql: 'DROP TABLE old', destructive: 'drop_table' },
];

t.test('every plan the executor writes passes the runner\'s check', async (t) => {
  const document = planDocument(planned, digests);
  t.equal(schemaPlanProblem(document), undefined, 'a classified plan');
  const concurrent = planDocument([{ sql: 'CREATE INDEX i ON t (id)', locking: 'blocking_index_build', concurrently: 'CREATE INDEX CONCURRENTLY i ON t (id)' }], digests);
  t.equal(concurrent.transactional, false, 'fixture: a plan of concurrent builds');
  t.equal(schemaPlanProblem(concurrent), undefined, 'a concurrent plan');
});

t.test('each classification field is held to the statements it names', async (t) => {
  const document = planDocument(planned, digests);
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['no desired state fingerprint', { desiredStateFingerprint: undefined }, /desiredStateFingerprint/],
    ['no desired catalog digest', { desiredCatalogDigest: undefined }, /desiredCatalogDigest/],
    ['a privilege flag without privilege statements', { privilegeStatements: [] }, /privilegeChanging disagrees/],
    ['a privilege statement out of range', { privilegeStatements: [9] }, /privilegeStatements names an index/],
    ['privilege statements out of order', { privilegeStatements: [2, 1] }, /privilegeStatements is not in statement order/],
    ['a locking reason that is not a word', { lockingStatements: [{ index: 1, reason: 'Table Rewrite!' }] }, /lockingStatements\[0\]\.reason/],
    ['a locking entry with an extra field', { lockingStatements: [{ index: 1, reason: 'table_rewrite', sql: 'x' }] }, /lockingStatements\[0\]/],
    ['transactional that is not a boolean', { transactional: 'yes' }, /transactional is not a boolean/],
    ['an unknown field', { comment: 'hi' }, /comment/],
  ];
  for (const [name, change, problem] of cases) {
    const changed: Record<string, unknown> = { ...document, ...change };
    for (const [key, value] of Object.entries(change)) if (value === undefined) delete changed[key];
    t.match(schemaPlanProblem(changed), problem, name);
  }
});
