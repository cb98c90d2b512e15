// What a pinned artifact contributes to a claim's input fingerprint (src/controller/claim-values.ts): a ConfigMap pin
// exactly the five fields it always folded (a claim in flight across an upgrade keeps its fingerprint), an OCI pin
// also the manifest digest its reference resolved to, so two pins of the same files under different digests are
// different inputs; the resolution time never.
import t from 'tap';
import { pinIdentity } from '../../src/controller/claim-values.js';
import { digest } from '../../src/shared/canonical.js';

const d = (c: string) => `sha256:${c.repeat(64)}`;
const base = { digest: d('c'), verificationPolicyUID: 'policy-uid', verificationPolicyDigest: d('p'), resolvedAt: '2026-12-05T10:00:00Z' };
const configMap = { ...base, configMapName: 'orders-r1', configMapUID: 'cm-uid' };
const oci = (manifest: string) => ({
  ...base,
  oci: { reference: 'registry.example:5000/shop/orders:r1', pinnedReference: `registry.example:5000/shop/orders@${d(manifest)}`, manifestDigest: d(manifest), artifactType: 'application/vnd.ptah-operator.migrations.v1', verifiedKeys: [] },
});

t.test('a ConfigMap pin folds the five fields it always did', async (t) => {
  t.strictSame(pinIdentity(configMap), { configMapName: 'orders-r1', configMapUID: 'cm-uid', digest: d('c'), verificationPolicyUID: 'policy-uid', verificationPolicyDigest: d('p') });
  t.equal(digest(pinIdentity({ ...configMap, resolvedAt: '2030-01-01T00:00:00Z' })), digest(pinIdentity(configMap)), 'the resolution time is not an input');
  t.equal(pinIdentity(undefined), null);
});

t.test('an OCI pin folds the manifest digest it resolved to', async (t) => {
  t.not(digest(pinIdentity(oci('a'))), digest(pinIdentity(oci('b'))), 'the same files under another manifest digest are another input');
  t.equal(digest(pinIdentity({ ...oci('a'), resolvedAt: '2030-01-01T00:00:00Z' })), digest(pinIdentity(oci('a'))), 'a re-resolution of the same digest is the same input');
  t.not(digest(pinIdentity(oci('a'))), digest(pinIdentity(configMap)), 'and an OCI pin is never a ConfigMap pin');
});
