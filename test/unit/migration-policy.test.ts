// The verification-policy format a migration artifact is held to: what parses, what is refused (with the field
// named), and which rules an artifact breaks.
import t from 'tap';
import { parseVerificationPolicy, policyViolations, PolicyFormatError, type ArtifactFacts } from '../../src/shared/verification-policy.js';

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
  t.same({ ...json }, { version: 1, requiredLabels: {}, requiredAnnotations: [], signatureKeys: [] }, 'only version is required');
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
  ['an empty list of artifact types', 'version: 1\nartifactTypes: []', /artifactTypes must be a non-empty list/],
  ['an artifact type that is not a string', 'version: 1\nartifactTypes: [1]', /artifactTypes/],
  ['allowTags as a string', 'version: 1\nallowTags: "no"', /allowTags must be true or false/],
  ['signature keys as a map', 'version: 1\nsignatureKeys: {a: b}', /signatureKeys must be a list/],
  ['an empty list of signature keys', 'version: 1\nsignatureKeys: []', /signatureKeys must be a list/],
  ['a signature key without a name', `version: 1\nsignatureKeys: [{publicKey: "${'-----BEGIN PUBLIC KEY-----'}"}]`, /entry 0: its name/],
  ['two keys of one name', `version: 1\nsignatureKeys: [{name: a, publicKey: "${'-----BEGIN PUBLIC KEY-----'}"}, {name: a, publicKey: "${'-----BEGIN PUBLIC KEY-----'}"}]`, /entry 1: its name/],
  ['a key that is not PEM', 'version: 1\nsignatureKeys: [{name: release, publicKey: abc}]', /release: its publicKey is not PEM/],
  ['a key with an unknown field', `version: 1\nsignatureKeys: [{name: a, publicKey: "${'-----BEGIN PUBLIC KEY-----'}", keyless: true}]`, /entry 0/],
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

const OCI_POLICY = `
version: 1
requiredAnnotations: [org.opencontainers.image.source]
artifactTypes: [application/vnd.ptah-operator.migrations.v1]
allowTags: false
signatureKeys:
  - name: release
    publicKey: |
      -----BEGIN PUBLIC KEY-----
      MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
      -----END PUBLIC KEY-----
`;
const ociGood: ArtifactFacts = {
  labels: {},
  annotations: { 'org.opencontainers.image.source': 'https://git.example/app' },
  files: { '1_init.up.sql': 40 },
  oci: { artifactType: 'application/vnd.ptah-operator.migrations.v1', namedByTag: false, verifiedKeys: ['release'], signatureProblems: [] },
};

t.test('an OCI artifact meeting every OCI rule has no violations', async (t) => {
  const policy = parseVerificationPolicy(OCI_POLICY);
  t.same(policy.signatureKeys.map((k) => k.name), ['release']);
  t.equal(policy.allowTags, false);
  t.same(policyViolations(policy, ociGood), []);
});

const ociBroken: [string, ArtifactFacts, RegExp][] = [
  ['another artifact type', { ...ociGood, oci: { ...ociGood.oci!, artifactType: 'application/vnd.oci.image.config.v1+json' } }, /artifact type application\/vnd\.oci\.image\.config\.v1\+json is not one of artifactTypes/],
  ['named by a tag', { ...ociGood, oci: { ...ociGood.oci!, namedByTag: true } }, /named by a tag, and allowTags is false/],
  ['unsigned', { ...ociGood, oci: { ...ociGood.oci!, verifiedKeys: [] } }, /no signature over its digest verifies with signatureKeys \(release\): it carries no signature/],
  ['wrongly signed', { ...ociGood, oci: { ...ociGood.oci!, verifiedKeys: [], signatureProblems: ['signature 1 (sigstore bundle, via referrers API): verifies with none of the policy\'s keys (release)'] } }, /verifies with signatureKeys \(release\): signature 1 \(sigstore bundle/],
  ['a missing manifest annotation', { ...ociGood, annotations: {} }, /lacks the required annotation org\.opencontainers\.image\.source/],
];

for (const [what, facts, message] of ociBroken) {
  t.test(`OCI violation: ${what}`, async (t) => {
    const violations = policyViolations(parseVerificationPolicy(OCI_POLICY), facts);
    t.equal(violations.length, 1, violations.join('; '));
    t.match(violations[0], message);
  });
}

t.test('a rule the source cannot meet refuses it, never loosens', async (t) => {
  const configMap = { ...ociGood, oci: undefined };
  t.same(policyViolations(parseVerificationPolicy(OCI_POLICY), configMap).sort(), [
    'it is a ConfigMap, which cannot be signed: signatureKeys can only be met by an OCI artifact',
    'it is a ConfigMap, which has no artifact type: artifactTypes can only be met by an OCI artifact',
  ], 'a policy asking for signatures refuses a ConfigMap; allowTags: false does not (a ConfigMap is pinned by UID and digest)');
  t.same(policyViolations(parseVerificationPolicy(FULL), { ...good, oci: ociGood.oci }), ['it is an OCI artifact, which carries no labels: requiredLabels cannot be met']);
  t.same(policyViolations(parseVerificationPolicy('version: 1'), { ...ociGood, oci: { ...ociGood.oci!, namedByTag: true, verifiedKeys: [] } }), [], 'a policy without OCI rules: tags allowed, no signature needed');
});
