// The Jobs of an OCI-sourced resource (docs/oci-artifacts.md): a Resolve Job holds the registry Secret, the CA and the
// pinned policy and no database URL; a database Job's files come from a fetch init container that holds the
// registry Secret and no database URL, while its runner holds the database URL and never mounts the Secret. Both
// rebuild from the owner and the claim exactly as they were built, so jobclaim.match recognises them.
import t from 'tap';
import type { V1Container, V1Job } from '@kubernetes/client-node';
import { canonicalJson } from '../../src/shared/canonical.js';
import { buildOperationJob, rebuildClaimJob, type OperationJobInput, type RebuildClaimJobInput } from '../../src/shared/job/index.js';
import { CASES, claimFor, d, inputFor, MANAGER, MIGRATION_PLAN, ownerObjectFor, type Case } from './job-fixtures.js';

const [, , , migrationHistory, migrationApply] = CASES as [Case, Case, Case, Case, Case];
const resolveCase: Case = { family: 'migration', type: 'Resolve', runnerOperation: 'resolve' };
const REFERENCE = 'registry.example:5000/shop/orders:v7';
const PINNED = `registry.example:5000/shop/orders@${d('manifest')}`;
const OCI = { reference: REFERENCE, registryAuthFrom: { name: 'registry' }, caFrom: { name: 'registry-ca', key: 'ca.pem' } };
const POLICY_REF = { name: 'orders-policy', key: 'policy.yaml' };

const env = (c: V1Container | undefined) => Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
const podOf = (job: V1Job) => job.spec!.template.spec!;

function resolveInput(overrides: Partial<OperationJobInput> = {}): OperationJobInput {
  const { target: _target, artifact: _artifact, ...base } = inputFor(resolveCase, { coordinationDigest: undefined, verificationPolicy: { digest: d('policy') } });
  return {
    ...base,
    bindings: { coordinationDigest: d('realm') },
    resolve: { kind: 'migrations', reference: REFERENCE, registryAuthFrom: OCI.registryAuthFrom, caFrom: OCI.caFrom, verificationPolicyRef: POLICY_REF, verificationPolicyDigest: d('policy') },
    ...overrides,
  };
}

function ownerWithOci(input: OperationJobInput, pin?: RebuildClaimJobInput['owner']['status']): RebuildClaimJobInput['owner'] {
  const owner = ownerObjectFor({ ...input, target: input.target ?? { urlFrom: { name: 'database', key: 'url' } } });
  return { ...owner, spec: { ...owner.spec, artifact: { oci: OCI, verificationPolicyRef: POLICY_REF } }, status: pin ?? {} };
}

t.test('a Resolve Job: registry Secret, CA and pinned policy, no database', async (t) => {
  const input = resolveInput();
  const job = buildOperationJob(input);
  const pod = podOf(job);
  const runner = pod.containers[0];
  t.same(runner?.args, ['--operation', 'resolve']);
  t.equal(pod.initContainers, undefined, 'no init container');
  const vars = env(runner);
  t.notOk('PTAH_DB_URL' in vars || 'PTAH_DEV_URL' in vars || 'PTAH_COORDINATION_DIGEST' in vars, 'no database URL and no realm');
  t.notOk(JSON.stringify(job).includes('secretKeyRef'), 'no Secret key reaches the environment');
  t.match(vars, {
    PTAH_OCI_REFERENCE: REFERENCE, PTAH_OCI_ARTIFACT_KIND: 'migrations', DOCKER_CONFIG: '/registry-auth', PTAH_OCI_CA_FILE: '/registry-ca/ca.pem',
    PTAH_VERIFICATION_POLICY_FILE: '/verification-policy/policy', PTAH_EXPECTED_VERIFICATION_POLICY_DIGEST: d('policy'),
  });
  t.same(pod.volumes?.find((v) => v.name === 'registry-auth')?.secret, { secretName: 'registry', items: [{ key: '.dockerconfigjson', path: 'config.json' }], defaultMode: 0o440 });
  t.same(pod.volumes?.find((v) => v.name === 'verification-policy')?.configMap, { name: 'orders-policy', items: [{ key: 'policy.yaml', path: 'policy' }], defaultMode: 0o440 });
  t.notOk(pod.volumes?.some((v) => v.name === 'artifact'), 'no artifact volume');
  t.equal(pod.automountServiceAccountToken, false);

  const rebuilt = rebuildClaimJob({ owner: ownerWithOci(input), claim: input.claim, manager: MANAGER, coordinationDigest: d('realm') });
  t.equal(canonicalJson(rebuilt), canonicalJson(job), 'the rebuild from the owner\'s spec.artifact.oci and the claim is the build');

  const refusals: [string, Partial<OperationJobInput>, RegExp][] = [
    ['a database URL', { target: { urlFrom: { name: 'database', key: 'url' } } }, /Resolve Job is given a database or an artifact/],
    ['an artifact', { artifact: { configMapName: 'x', digest: d('a') } }, /Resolve Job is given a database or an artifact/],
    ['another policy digest than the claim pinned', { resolve: { ...input.resolve!, verificationPolicyDigest: d('other') } }, /not the one the claim pinned/],
    ['no reference', { resolve: { ...input.resolve!, reference: '' } }, /names no reference/],
    ['an unknown kind', { resolve: { ...input.resolve!, kind: 'images' as 'schema' } }, /not schema or migrations/],
    ['a database binding', { bindings: { coordinationDigest: d('realm'), historyFingerprint: d('h') } }, /historyFingerprint is given to a resolve Job/],
  ];
  for (const [name, change, message] of refusals) t.throws(() => buildOperationJob({ ...input, ...change }), { name: 'JobBuildError', message }, name);
  t.throws(() => buildOperationJob({ ...inputFor(migrationHistory), resolve: input.resolve }), { message: /is given a Resolve's inputs/ }, 'a database Job given a Resolve\'s inputs');
  t.throws(() => rebuildClaimJob({ owner: { ...ownerWithOci(input), spec: { ...ownerWithOci(input).spec, artifact: { verificationPolicyRef: POLICY_REF } } }, claim: input.claim, manager: MANAGER, coordinationDigest: d('realm') }),
    { message: /the spec names no registry/ }, 'a Resolve of a spec that names no registry');
});

t.test('a database Job of an OCI pin: the fetch init container holds the registry Secret, the runner the database URL', async (t) => {
  for (const c of [migrationHistory, migrationApply]) {
    const pin = { oci: { pinnedReference: PINNED }, digest: d('content') };
    const base = inputFor(c, { artifact: pin });
    const input: OperationJobInput = { ...base, artifact: { oci: { kind: 'migrations', registryAuthFrom: OCI.registryAuthFrom, caFrom: OCI.caFrom, pinnedReference: PINNED }, digest: d('content') } };
    const job = buildOperationJob(input);
    const pod = podOf(job);
    const [fetch] = pod.initContainers ?? [];
    const runner = pod.containers[0]!;
    t.same(fetch?.args, ['--fetch-artifact'], `${c.type}: a fetch init container`);
    t.equal(fetch?.image, runner.image, 'of the runner\'s image');
    t.same(fetch?.securityContext, runner.securityContext, 'hardened as the runner is');
    t.match(env(fetch), { PTAH_OCI_REFERENCE: PINNED, PTAH_EXPECTED_ARTIFACT_DIGEST: d('content'), PTAH_ARTIFACT_DIR: '/artifact', DOCKER_CONFIG: '/registry-auth' }, 'it fetches the pinned digest');
    t.notOk('PTAH_DB_URL' in env(fetch), 'the fetch holds no database URL');
    t.ok(fetch?.volumeMounts?.some((m) => m.name === 'registry-auth'), 'the fetch mounts the registry Secret');
    t.ok(fetch?.volumeMounts?.some((m) => m.name === 'artifact' && !m.readOnly), 'and writes the artifact volume');
    t.ok('PTAH_DB_URL' in env(runner), 'the runner holds the database URL');
    t.notOk(runner.volumeMounts?.some((m) => m.name === 'registry-auth' || m.name === 'registry-ca'), 'and never mounts the registry Secret or CA');
    t.ok(runner.volumeMounts?.some((m) => m.name === 'artifact' && m.readOnly), 'it reads the fetched files read-only');
    t.same(pod.volumes?.find((v) => v.name === 'artifact')?.emptyDir, { medium: 'Memory', sizeLimit: '16Mi' }, 'from memory');
    t.equal(env(runner).PTAH_EXPECTED_ARTIFACT_DIGEST, d('content'), 'and checks them against the pinned content digest');

    const plan = c.type === 'Apply' ? { plan: MIGRATION_PLAN } : {};
    const rebuilt = rebuildClaimJob({ owner: ownerWithOci(input, { artifact: pin }), claim: input.claim, manager: MANAGER, ...plan });
    t.equal(canonicalJson(rebuilt), canonicalJson(job), `${c.type}: the rebuild from the owner's spec and pin is the build`);
    t.throws(() => buildOperationJob({ ...input, claim: claimFor(c, { artifact: { oci: { pinnedReference: `registry.example:5000/shop/orders@${d('other')}` }, digest: d('content') } }) }),
      { message: /not the one the claim pinned/ }, `${c.type}: another digest than the claim pinned`);
  }
});
