// The verification-policy format a migration artifact is held to: what parses, what is refused (with the field
// named), and which rules an artifact breaks.
import t from 'tap';
import { parseVerificationPolicy, policyViolations, PolicyFormatError, type ArtifactFacts } from '../../src/controller/verification-policy.js';

const FULL = `
version: 1
requiredLabels:
  ptah.run/artifact-type: migrations
  team: ""
requiredAnnotations: [ptah.run/source, ptah.run/revision]
maxTotalBytes: 100
fileNamePattern: '^[0-9]+_[a-z]+\\.up\\.sql$'
`;

t.test('a full policy parses, YAML or JSON', async (t) => {
  const policy = parseVerificationPolicy(FULL);
  t.same(policy.requiredLabels, { 'ptah.run/artifact-type': 'migrations', team: '' });
  t.same(policy.requiredAnnotations, ['ptah.run/source', 'ptah.run/revision']);
  t.equal(policy.maxTotalBytes, 100);
  t.ok(policy.fileNamePattern?.test('1_init.up.sql'));
  t.notOk(policy.fileNamePattern?.test('init.sql'));
  const json = parseVerificationPolicy('{"version": 1}');
  t.same({ ...json }, { version: 1, requiredLabels: {}, requiredAnnotations: [] }, 'only version is required');
});

const refusals: [string, string, RegExp][] = [
  ['not a document', 'version: [1', /not YAML or JSON/],
  ['a list', '- version: 1', /not a mapping/],
  ['no version', 'requiredLabels: {}', /version: 1/],
  ['another version', 'version: 2', /version: 1/],
  ['an unknown field', 'version: 1\nrequireLabels: {a: b}', /unknown field "requireLabels"/],
  ['labels as a list', 'version: 1\nrequiredLabels: [a]', /requiredLabels/],
  ['a label value that is not a string', 'version: 1\nrequiredLabels: {a: 1}', /requiredLabels/],
  ['annotations as a map', 'version: 1\nrequiredAnnotations: {a: b}', /requiredAnnotations/],
  ['an empty annotation key', 'version: 1\nrequiredAnnotations: [""]', /requiredAnnotations/],
  ['a zero size bound', 'version: 1\nmaxTotalBytes: 0', /maxTotalBytes/],
  ['a fractional size bound', 'version: 1\nmaxTotalBytes: 1.5', /maxTotalBytes/],
  ['a pattern that is no regular expression', 'version: 1\nfileNamePattern: "(["', /fileNamePattern is not a regular expression/],
  ['an empty pattern', 'version: 1\nfileNamePattern: ""', /fileNamePattern/],
];

for (const [what, text, message] of refusals) {
  t.test(`refused: ${what}`, async (t) => {
    t.throws(() => parseVerificationPolicy(text), PolicyFormatError);
    t.throws(() => parseVerificationPolicy(text), { message });
  });
}

const good: ArtifactFacts = {
  labels: { 'ptah.run/artifact-type': 'migrations', team: 'shop' },
  annotations: { 'ptah.run/source': 'git', 'ptah.run/revision': 'r1' },
  files: { '1_init.up.sql': 40, '2_more.up.sql': 60 },
};

t.test('an artifact meeting every rule has no violations', async (t) => {
  t.same(policyViolations(parseVerificationPolicy(FULL), good), []);
});

const broken: [string, Partial<ArtifactFacts>, RegExp][] = [
  ['a missing label', { labels: { team: 'shop' } }, /lacks the required label ptah\.run\/artifact-type/],
  ['a label with another value', { labels: { ...good.labels, 'ptah.run/artifact-type': 'schema' } }, /is "schema", not "migrations"/],
  ['a label "" requires present', { labels: { 'ptah.run/artifact-type': 'migrations' } }, /lacks the required label team/],
  ['a missing annotation', { annotations: { 'ptah.run/source': 'git' } }, /lacks the required annotation ptah\.run\/revision/],
  ['an empty annotation', { annotations: { ...good.annotations, 'ptah.run/source': '' } }, /lacks the required annotation ptah\.run\/source/],
  ['too many bytes', { files: { '1_init.up.sql': 60, '2_more.up.sql': 41 } }, /add up to 101 bytes, more than maxTotalBytes 100/],
  ['a file outside the pattern', { files: { '1_init.up.sql': 1, 'README.md': 1 } }, /README\.md does not match fileNamePattern/],
  ['no files at all', { files: {} }, /holds no files/],
];

for (const [what, change, message] of broken) {
  t.test(`violation: ${what}`, async (t) => {
    const violations = policyViolations(parseVerificationPolicy(FULL), { ...good, ...change });
    t.equal(violations.length, 1, violations.join('; '));
    t.match(violations[0], message);
  });
}
