import t, { type Test as Tap } from 'tap';
import { createHash } from 'node:crypto';
import { canonicalJson, digest } from '../../src/shared/canonical.js';
import type { SchemaPlanDocument } from '../../src/shared/executor-report.js';
import type { RunnerOperation } from '../../src/shared/runner-env.js';
import {
  encodeFrame, encodeSummary, FRAME_END_MARKER, FRAME_MARKER, FrameError, MAX_FRAME_PAYLOAD_BYTES, MAX_SUMMARY_BYTES, mayStillArrive,
  parseResultFor, parseSummaryFor, resultProblem, RUNNER_PROTOCOL_VERSION, SUMMARY_MARKER, SummaryError, summaryFor, summaryStandsIn,
  type RunnerResult, type RunnerSummary,
} from '../../src/shared/runner-protocol.js';

const ID = `sha256:${'a'.repeat(64)}`;
const D = (c: string) => `sha256:${c.repeat(64)}`;
const hex = (text: string) => createHash('sha256').update(text).digest('hex');

const plan: SchemaPlanDocument = {
  formatVersion: 1, engine: 'postgresql', statements: ['CREATE TABLE t (id int)'], statementCount: 1, destructive: false,
  destructiveStatements: [], actualStateFingerprint: D('f'), desiredSchemaDigest: D('d'), desiredStateFingerprint: D('9'), desiredCatalogDigest: D('8'),
  privilegeChanging: false, privilegeStatements: [], lockingStatements: [], transactional: true,
};
const bindings = { protocolVersion: RUNNER_PROTOCOL_VERSION, operationId: ID, childExitCode: 0, coordinationDigest: D('c'), targetIdentityDigest: D('e') };
const applied = [{ version: '1', name: '1_a.up.sql', checksum: D('1') }, { version: '2', name: '2_b.up.sql', checksum: D('2') }];
const planned = applied.map(({ version, checksum }) => ({ version, checksum }));
/** A repair plan's sequence (spec.repair): the dirty row's version and checksum, and the resolution. */
const repairSequence = [{ ...planned[0]!, repair: 'finished' as const }];
const repaired = { version: '1', resolution: 'finished' as const };

const valid: { [O in RunnerOperation]: RunnerResult<O> } = {
  observe: {
    ...bindings, operation: 'observe', dialect: 'postgresql', drift: true, driftDigest: D('b'),
    findings: [{ category: 'missing_table', count: 2 }], actualStateFingerprint: D('f'),
  },
  plan: { ...bindings, operation: 'plan', planOutcome: 'Changes', plan, planContentDigest: digest(plan), actualStateFingerprint: D('f') },
  apply: { ...bindings, operation: 'apply', mutationStarted: true, uncertain: false, planContentDigest: digest(plan), statementsExecuted: 1 },
  'migration-history': {
    ...bindings, operation: 'migration-history',
    migrationHistory: { applied: [], pending: applied, dirty: [], modified: [], outOfOrder: [], missing: [], fingerprint: D('f') },
  },
  'migration-apply': { ...bindings, operation: 'migration-apply', mutationStarted: true, uncertain: false, migrationRun: { outcome: 'applied', applied, planned } },
  // A resolve opens no database and starts no executor: it names no realm and no target, and its exit code is -1.
  resolve: {
    protocolVersion: RUNNER_PROTOCOL_VERSION, operationId: ID, childExitCode: -1, operation: 'resolve',
    resolvedArtifact: {
      pinnedReference: `registry.example:5000/app/migrations@${D('a')}`, digest: D('a'), contentDigest: D('c'),
      artifactType: 'application/vnd.ptah-operator.migrations.v1', verificationPolicyDigest: D('5'), verifiedKeys: ['a-key', 'release'], files: 2, bytes: 40,
    },
  },
};

/** A frame around any payload text, valid or not, with a correct header. */
function rawFrame(payload: string): string {
  return `${FRAME_MARKER} ${Buffer.byteLength(payload)} ${hex(payload)}\n${payload}\n${FRAME_END_MARKER}\n`;
}

function frameError(tt: Tap, fn: () => unknown, kind: FrameError['kind'], pattern?: RegExp): FrameError | undefined {
  try {
    fn();
  } catch (error) {
    tt.type(error, FrameError);
    tt.equal((error as FrameError).kind, kind, `a ${kind} frame error`);
    if (pattern) tt.match((error as FrameError).message, pattern);
    return error as FrameError;
  }
  tt.fail(`expected a ${kind} frame error`);
  return undefined;
}


t.test('every operation round-trips through a frame', async (t) => {
  for (const [operation, result] of Object.entries(valid) as [RunnerOperation, RunnerResult][]) {
    const frame = encodeFrame(result);
    t.match(frame, new RegExp(`^${FRAME_MARKER} \\d+ [0-9a-f]{64}\\n[^\\n]+\\n${FRAME_END_MARKER}\\n$`), `${operation}: the exact layout`);
    t.strictSame(parseResultFor(frame, operation, ID), result, `${operation}: parsed back`);
    t.strictSame(parseResultFor(Buffer.from(frame), operation, ID), result, `${operation}: from bytes too`);
  }
});

t.test('the parser finds a frame among interleaved stderr lines', async (t) => {
  const frame = encodeFrame(valid.apply);
  const [header, payload, footer] = frame.split('\n');
  // A stderr line exactly as long as the payload: only the digest tells them apart.
  const decoy = 'x'.repeat(Buffer.byteLength(payload));
  const log = [
    'ptah-runner: starting', `2025-01-01T00:00:00Z stderr F prefix ${header}`, 'stderr line one', decoy, payload, 'stderr line two', decoy, footer, 'after',
  ].join('\n');
  t.strictSame(parseResultFor(log, 'apply', ID), valid.apply);
  t.strictSame(parseResultFor(frame.slice(0, -1), 'apply', ID), valid.apply, 'a reader that trimmed the last newline still gets the frame');
});

t.test('the last valid frame wins', async (t) => {
  const failed: RunnerResult<'apply'> = {
    ...bindings, operation: 'apply', childExitCode: 1, mutationStarted: true, uncertain: true, error: { code: 'statement_failed', message: 'boom' },
  };
  t.strictSame(parseResultFor(encodeFrame(valid.apply) + encodeFrame(failed), 'apply', ID), failed);
  t.strictSame(parseResultFor(encodeFrame(failed) + encodeFrame(valid.apply), 'apply', ID), valid.apply);
  const broken = encodeFrame(failed).replace('boom', 'bang');
  t.strictSame(parseResultFor(encodeFrame(valid.apply) + broken, 'apply', ID), valid.apply, 'a later frame that fails its digest is skipped');
});

t.test('a frame is accepted only for its operation and operation ID', async (t) => {
  const frame = encodeFrame(valid.observe);
  frameError(t, () => parseResultFor(frame, 'plan', ID), 'malformed', /operation observe, not plan/);
  frameError(t, () => parseResultFor(frame, 'observe', `sha256:${'b'.repeat(64)}`), 'malformed', /another operation ID/);
});

t.test('a payload whose digest does not match is never accepted', async (t) => {
  const tampered = encodeFrame(valid.apply).replace('"statementsExecuted":1', '"statementsExecuted":9');
  const error = frameError(t, () => parseResultFor(tampered, 'apply', ID), 'malformed', /does not match the digest/);
  t.notOk(mayStillArrive(error));
});

t.test('a log that ends inside a frame is incomplete, and may still arrive', async (t) => {
  const frame = encodeFrame(valid.plan);
  const headerEnd = frame.indexOf('\n');
  const payloadEnd = frame.indexOf('\n', headerEnd + 1);
  for (const [where, cut] of [
    ['in the header', 30], ['after the header', headerEnd + 1], ['in the payload', headerEnd + 20], ['before the footer', payloadEnd + 1],
    ['in the footer', payloadEnd + 5],
  ] as const) {
    const error = frameError(t, () => parseResultFor(`noise\n${frame.slice(0, cut)}`, 'plan', ID), 'incomplete');
    t.ok(mayStillArrive(error), `${where}: may still arrive`);
  }
});

t.test('no marker at all is not-found, and may still arrive', async (t) => {
  const error = frameError(t, () => parseResultFor('just logs\nmore logs\n', 'observe', ID), 'not-found');
  t.ok(mayStillArrive(error));
  t.notOk(mayStillArrive(new Error('other')), 'only frame errors may still arrive');
});

t.test('a frame declaring more than the limit is too large', async (t) => {
  const error = frameError(t, () => parseResultFor(`${FRAME_MARKER} ${MAX_FRAME_PAYLOAD_BYTES + 1} ${'0'.repeat(64)}\n{}\n`, 'observe', ID), 'too-large');
  t.notOk(mayStillArrive(error));
});

t.test('bounded search windows', async (t) => {
  const [header, payload, footer] = encodeFrame(valid.observe).split('\n');
  const filler = Array.from({ length: 70 }, () => 'y'.repeat(1023)).join('\n');
  frameError(t, () => parseResultFor([header, filler, payload, footer, ''].join('\n'), 'observe', ID), 'malformed', /no frame payload within the search window/);
  frameError(t, () => parseResultFor([header, payload, filler, footer, ''].join('\n'), 'observe', ID), 'malformed', /no frame footer within/);
  frameError(t, () => parseResultFor(`${header.slice(0, 30)}${'z'.repeat(200)}\n`, 'observe', ID), 'malformed', /not terminated within/);
  const many = Array.from({ length: 80 }, () => `${header}\n${filler.slice(0, 60_000)}\n`).join('');
  frameError(t, () => parseResultFor(many, 'observe', ID), 'malformed', /too many unusable frame candidates|search window/);
});

t.test('structural problems are malformed', async (t) => {
  frameError(t, () => parseResultFor(`${FRAME_MARKER} 12 nothex\n`, 'observe', ID), 'malformed', /does not read/);
  frameError(t, () => parseResultFor(rawFrame('not json'), 'observe', ID), 'malformed', /not JSON/);
  frameError(t, () => parseResultFor(`${FRAME_MARKER} 2 ${hex('{}')}\n${FRAME_END_MARKER}\n`, 'observe', ID), 'malformed', /footer arrived before any payload/);
});

t.test('a frame cut short by a later frame gives way to it', async (t) => {
  const cut = encodeFrame(valid.apply).slice(0, 150);
  const failed: RunnerResult<'apply'> = { ...valid.apply, childExitCode: 1, uncertain: true, error: { code: 'x', message: 'm' } };
  t.strictSame(parseResultFor(`${cut}${encodeFrame(failed)}`, 'apply', ID), failed);
});

t.test('a runner of another protocol version is told apart from a malformed frame', async (t) => {
  const refusal = { protocolVersion: 7, operation: 'apply', operationId: ID, childExitCode: -1, error: { code: 'runner_protocol_mismatch', message: 'no' } };
  const error = frameError(t, () => parseResultFor(rawFrame(JSON.stringify(refusal)), 'apply', ID), 'malformed', /speaks protocol 7/);
  t.equal(error?.foreignProtocolVersion, 7);
  const other = frameError(t, () => parseResultFor(rawFrame(JSON.stringify({ ...refusal, uncertain: true })), 'apply', ID), 'malformed');
  t.equal(other?.foreignProtocolVersion, undefined, 'only the fixed refusal shape counts');
});

const apply = valid.apply;
const migration = valid['migration-apply'];
const identity = { physicalIdentityDigest: D('7'), physicalIdentityKind: 'system-identifier' } as const;
const heldByOtherRealm = { code: 'database_held_by_other_realm', message: `the realm with coordination digest ${D('b')} is writing` };
// The executor started and refused before its first write: nothing changed, so nothing started.
const refusedApply: RunnerResult<'apply'> = {
  ...bindings, operation: 'apply', childExitCode: 1, mutationStarted: false, uncertain: false, statementsExecuted: 0, error: heldByOtherRealm, ...identity,
};
const refusedMigration: RunnerResult<'migration-apply'> = {
  ...bindings, operation: 'migration-apply', childExitCode: 1, mutationStarted: false, uncertain: false, error: heldByOtherRealm, ...identity,
  migrationRun: { outcome: 'failed', applied: [], planned },
};
const refusedBeforeStart = { protocolVersion: 1, operation: 'apply', operationId: ID, childExitCode: -1, mutationStarted: false, uncertain: false, error: { code: 'invalid_plan', message: 'm' } };
const invariantCases: [string, unknown, RegExp][] = [
  ['not an object', [], /the result is not a JSON object/],
  ['another protocol version', { ...apply, protocolVersion: 2 }, /protocolVersion is not 1/],
  ['an unknown operation', { ...apply, operation: 'migrate' }, /operation is not a runner operation/],
  ['an unknown field', { ...apply, stdout: '' }, /the result holds a field this protocol does not define/],
  ['a field of another operation', { ...valid.observe, planOutcome: 'NoChanges' }, /the result holds a field this protocol does not define/],
  ['an empty operation ID', { ...apply, operationId: '' }, /operationId is not a valid operation ID/],
  ['an operation ID with a space', { ...apply, operationId: 'a b' }, /operationId is not a valid operation ID/],
  ['an exit code below -1', { ...apply, childExitCode: -2 }, /childExitCode is not -1 or an exit status/],
  ['a fractional exit code', { ...apply, childExitCode: 0.5 }, /childExitCode is not -1 or an exit status/],
  ['a malformed coordination digest', { ...apply, coordinationDigest: 'sha256:ABC' }, /coordinationDigest is not a sha256: digest/],
  ['an error without a message', { ...apply, childExitCode: 1, uncertain: true, error: { code: 'x' } }, /error\.message is empty, too long or spans lines/],
  ['an error code that is not snake_case', { ...apply, childExitCode: 1, uncertain: true, error: { code: 'Bad-Code', message: 'm' } }, /error\.code is not a lowercase snake_case code/],
  ['an error message over two lines', { ...apply, childExitCode: 1, uncertain: true, error: { code: 'x', message: 'a\nb' } }, /error\.message is empty, too long or spans lines/],
  ['inconsistent truncation flags', { ...apply, childExitCode: 1, uncertain: true, error: { code: 'x', message: 'm' }, truncation: { stdout: true, stdoutBytesDropped: 0, stderr: false, stderrBytesDropped: 0 } }, /truncation flags disagree with the dropped byte counts/],
  ['truncation that dropped nothing', { ...apply, childExitCode: 1, uncertain: true, error: { code: 'x', message: 'm' }, truncation: { stdout: false, stdoutBytesDropped: 0, stderr: false, stderrBytesDropped: 0 } }, /truncation is present but nothing was dropped/],
  ['success with a lost report', { ...apply, truncation: { stdout: true, stdoutBytesDropped: 5, stderr: false, stderrBytesDropped: 0 } }, /a successful result cannot have lost its report/],
  ['success with a nonzero exit', { ...apply, childExitCode: 1 }, /a successful result needs childExitCode 0/],
  ['success without the target identity', { ...apply, targetIdentityDigest: undefined }, /a successful result needs coordinationDigest and targetIdentityDigest/],
  ['a read-only result with mutation flags', { ...valid.observe, mutationStarted: false }, /observe is read-only and carries no mutation flags/],
  ['uncertain without mutationStarted', { ...apply, childExitCode: 1, mutationStarted: false, uncertain: true, error: { code: 'x', message: 'm' } }, /uncertain without mutationStarted/],
  ['a successful apply that is uncertain', { ...apply, uncertain: true }, /a successful result cannot be uncertain/],
  ['a successful apply that did not start', { ...apply, mutationStarted: false }, /mutationStarted disagrees with whether the executor started/],
  ['a started apply error that is not uncertain', { ...apply, childExitCode: 1, uncertain: false, error: { code: 'x', message: 'm' } }, /a started run is uncertain exactly when it erred/],
  ['mutationStarted although never started', { ...apply, childExitCode: -1, uncertain: true, error: { code: 'x', message: 'm' } }, /mutationStarted although the executor never started/],
  ['a migration run whose flags disagree with its outcome', { ...migration, mutationStarted: false }, /the mutation flags disagree with the migration run outcome/],
  ['an applied migration run with an error', { ...migration, childExitCode: 1, error: { code: 'x', message: 'm' } }, /error disagrees with the migration run outcome/],
  ['a failed migration run without an error', { ...migration, mutationStarted: false, migrationRun: { outcome: 'failed', applied: [], planned } }, /error disagrees with the migration run outcome/],
  ['a migration run whose applied files are not a prefix of the plan', { ...migration, migrationRun: { outcome: 'applied', applied: [applied[1], applied[0]], planned } }, /migrationRun\.applied is not a prefix of migrationRun\.planned/],
  ['an applied migration run that skipped a file', { ...migration, migrationRun: { outcome: 'applied', applied: [applied[0]], planned } }, /an applied run must have applied every planned migration/],
  ['a migration report before the executor started', { ...migration, childExitCode: -1, mutationStarted: false, uncertain: false, error: { code: 'x', message: 'm' }, migrationRun: { outcome: 'failed', applied: [], planned } }, /a migration run report although the executor never started/],
  ['an observe without its digest', { ...valid.observe, driftDigest: undefined }, /a successful observe needs dialect, drift, driftDigest, findings and actualStateFingerprint/],
  ['drift without findings', { ...valid.observe, findings: [] }, /drift disagrees with findings \(drift means at least one finding\)/],
  ['a repeated finding category', { ...valid.observe, findings: [{ category: 'a', count: 1 }, { category: 'a', count: 2 }] }, /findings repeats a category/],
  ['a dialect other than postgresql', { ...valid.observe, dialect: 'mysql' }, /dialect is not postgresql/],
  ['a plan whose content digest is not its digest', { ...valid.plan, planContentDigest: D('0') }, /planContentDigest is not the digest of the plan/],
  ['a NoChanges plan carrying a plan', { ...valid.plan, planOutcome: 'NoChanges' }, /a plan document is present exactly when planOutcome is Changes/],
  ['a plan with an unknown field', { ...valid.plan, plan: { ...plan, extra: 1 }, planContentDigest: digest({ ...plan, extra: 1 }) }, /plan holds a field this protocol does not define/],
  ['a plan whose count disagrees', { ...valid.plan, plan: { ...plan, statementCount: 2 }, planContentDigest: digest({ ...plan, statementCount: 2 }) }, /plan\.statementCount disagrees with plan\.statements/],
  ['an errored plan carrying a plan', { ...valid.plan, childExitCode: 1, error: { code: 'x', message: 'm' } }, /an errored plan result carries content only a successful one may/],
  ['a history without its fingerprint', { ...valid['migration-history'], migrationHistory: { ...valid['migration-history'].migrationHistory, fingerprint: 'x' } }, /migrationHistory\.fingerprint is not a sha256: digest/],
  ['a physical identity without its kind', { ...apply, physicalIdentityDigest: D('7') }, /physicalIdentityDigest and physicalIdentityKind come together/],
  ['a physical identity kind without its digest', { ...valid.observe, physicalIdentityKind: 'system-identifier' }, /physicalIdentityDigest and physicalIdentityKind come together/],
  ['a physical identity that is not a digest', { ...valid.plan, ...identity, physicalIdentityDigest: 'db-1' }, /physicalIdentityDigest is not a sha256: digest/],
  ['a physical identity of an unknown kind', { ...valid['migration-history'], ...identity, physicalIdentityKind: 'hostname' }, /physicalIdentityKind is not a known kind/],
  ['a physical identity although the executor never started', { ...refusedBeforeStart, ...identity }, /a physical identity although the executor never started/],
  ['a refusal before any write that started mutating', { ...refusedApply, mutationStarted: true, uncertain: true }, /database_held_by_other_realm is a refusal before any write, so nothing may have started/],
  ['a refusal before any write that ran a statement', { ...refusedApply, statementsExecuted: 1 }, /so no statement may have run/],
  ['a refusal before any write in a partial migration run', { ...refusedMigration, mutationStarted: true, uncertain: true, migrationRun: { outcome: 'partial', applied: [applied[0]], planned } }, /database_held_by_other_realm is a refusal before any write/],
  ['a refusal before any write without its migration run', { ...refusedMigration, migrationRun: undefined }, /database_held_by_other_realm needs a failed migration run/],
  ['a repair run that applied a file', { ...migration, migrationRun: { outcome: 'applied', applied: [applied[0]], planned: repairSequence, repaired } }, /a repair run applies no migration/],
  ['an applied repair run that names no repair', { ...migration, migrationRun: { outcome: 'applied', applied: [], planned: repairSequence } }, /an applied repair run names the repair it made/],
  ['a repair named by a run of files', { ...migration, migrationRun: { outcome: 'applied', applied, planned, repaired } }, /reported only by an applied run of a repair sequence/],
  ['a repair named by a failed run', { ...migration, mutationStarted: false, error: { code: 'repair_refused', message: 'm' }, migrationRun: { outcome: 'failed', applied: [], planned: repairSequence, repaired } }, /reported only by an applied run of a repair sequence/],
  ['another repair than the sequence approved', { ...migration, migrationRun: { outcome: 'applied', applied: [], planned: repairSequence, repaired: { version: '1', resolution: 'undone' } } }, /not the repair its sequence approved/],
  ['a repair beside another planned entry', { ...migration, migrationRun: { outcome: 'applied', applied: [], planned: [...repairSequence, planned[1]], repaired } }, /mixes a repair with other entries/],
  ['a planned repair that is no resolution', { ...migration, migrationRun: { outcome: 'applied', applied: [], planned: [{ ...planned[0], repair: 'forced' }], repaired } }, /migrationRun\.planned\[0\]\.repair is not one of finished, undone/],
  ['an adoption from an unknown tool', { ...valid['migration-history'], migrationHistory: { ...valid['migration-history'].migrationHistory, adoptable: { from: 'liquibase', files: applied } } }, /migrationHistory\.adoptable\.from is not an adoption source/],
  ['an adoption of no file', { ...valid['migration-history'], migrationHistory: { ...valid['migration-history'].migrationHistory, adoptable: { from: 'goose', files: [] } } }, /migrationHistory\.adoptable lists no file/],
  ['an adoption with an unknown field', { ...valid['migration-history'], migrationHistory: { ...valid['migration-history'].migrationHistory, adoptable: { from: 'goose', files: applied, table: 't' } } }, /migrationHistory\.adoptable holds a field this protocol does not define \("table"\)/],
  ['a resolve that names a database', { ...valid.resolve, coordinationDigest: D('c') }, /resolve opens no database, so its result names none/],
  ['a refused resolve that names a database', { ...valid.resolve, resolvedArtifact: undefined, targetIdentityDigest: D('e'), error: { code: 'registry_unreachable', message: 'm' } }, /resolve opens no database/],
  ['a resolve that started an executor', { ...valid.resolve, childExitCode: 0 }, /resolve starts no executor, so its childExitCode is -1/],
  ['a successful resolve without its artifact', { ...valid.resolve, resolvedArtifact: undefined }, /a successful resolve needs resolvedArtifact/],
  ['a refused resolve carrying an artifact', { ...valid.resolve, error: { code: 'artifact_refused', message: 'm' } }, /an errored resolve result carries content only a successful one may/],
  ['a resolve pinned by tag', { ...valid.resolve, resolvedArtifact: { ...valid.resolve.resolvedArtifact!, pinnedReference: 'registry.example:5000/app/migrations:v1' } }, /pinnedReference is not pinned to its digest alone/],
  ['a resolve pinned to another digest', { ...valid.resolve, resolvedArtifact: { ...valid.resolve.resolvedArtifact!, digest: D('b') } }, /pinnedReference is not pinned to its digest alone/],
  ['a resolve with unsorted keys', { ...valid.resolve, resolvedArtifact: { ...valid.resolve.resolvedArtifact!, verifiedKeys: ['release', 'a-key'] } }, /verifiedKeys is not a sorted list of key names/],
  ['a resolve with a field of its own', { ...valid.resolve, resolvedArtifact: { ...valid.resolve.resolvedArtifact!, annotations: {} } }, /resolvedArtifact holds a field this protocol does not define/],
  ['a resolve whose content digest is not one', { ...valid.resolve, resolvedArtifact: { ...valid.resolve.resolvedArtifact!, contentDigest: 'x' } }, /resolvedArtifact\.contentDigest is not a sha256: digest/],
  ['another started apply error that claims nothing changed', { ...refusedApply, error: { code: 'lock_timeout', message: 'm' } }, /mutationStarted disagrees with whether the executor started/],
];

t.test('results that break an invariant are neither written nor read', async (t) => {
  for (const [name, value, problem] of invariantCases) {
    t.match(resultProblem(value), problem, name);
    frameError(t, () => encodeFrame(value as RunnerResult), 'malformed', /refusing to frame/);
    const operation = ((value as RunnerResult).operation ?? 'apply') as RunnerOperation;
    frameError(t, () => parseResultFor(rawFrame(JSON.stringify(value)), operation, ID), 'malformed');
  }
  for (const [operation, result] of Object.entries(valid)) t.equal(resultProblem(result), undefined, `${operation}: the valid result has none`);
  for (const [operation, result] of Object.entries(valid)) {
    if (operation === 'resolve') continue;
    t.equal(resultProblem({ ...result, ...identity }), undefined, `${operation}: with the physical identity too`);
  }
  t.match(resultProblem({ ...valid.resolve, ...identity }), /a physical identity although the executor never started/, 'a resolve reads no database, so it has no physical identity');
  t.equal(resultProblem({ ...valid.resolve, resolvedArtifact: undefined, error: { code: 'registry_unauthorized', message: 'm' } }), undefined, 'a refused resolve names nothing');
  t.equal(resultProblem({ ...valid.observe, ...identity, physicalIdentityKind: 'server-address' }), undefined, 'the weaker kind is a kind');
  t.equal(resultProblem(refusedApply), undefined, 'an apply refused before any write changed nothing');
  t.equal(resultProblem(refusedMigration), undefined, 'so did a migration run refused before any write');
  const repairRun = { ...valid['migration-apply'], migrationRun: { outcome: 'applied', applied: [], planned: repairSequence, repaired } };
  t.equal(resultProblem(repairRun), undefined, 'an applied repair run applies no file and names its repair');
  const adoption = { ...valid['migration-history'], migrationHistory: { ...valid['migration-history'].migrationHistory, adoptable: { from: 'goose', files: applied } } };
  t.equal(resultProblem(adoption), undefined, 'a history may name the files an adoption counts as applied');
  t.equal(resultProblem(refusedBeforeStart), undefined, 'a refusal before the start carries no physical identity');
  const refusal = { protocolVersion: 1, operation: 'apply', operationId: ID, childExitCode: -1, error: { code: 'runner_protocol_mismatch', message: 'm' } };
  t.equal(resultProblem(refusal), undefined, 'a refusal before the start needs no flags');
});

t.test('frames over the size limit are not written', async (t) => {
  const huge = { ...valid.plan, plan: { ...plan, statements: ['x'.repeat(MAX_FRAME_PAYLOAD_BYTES)] } };
  huge.planContentDigest = digest(huge.plan);
  frameError(t, () => encodeFrame(huge), 'too-large');
});

const summaries: { [O in RunnerOperation]: RunnerSummary } = Object.fromEntries(
  Object.entries(valid).map(([operation, result]) => [operation, summaryFor(result)]),
) as { [O in RunnerOperation]: RunnerSummary };

t.test('summaries name their frame and round-trip', async (t) => {
  for (const [operation, summary] of Object.entries(summaries) as [RunnerOperation, RunnerSummary][]) {
    const frame = encodeFrame(valid[operation]);
    t.equal(summary.frameDigest, `sha256:${frame.split(' ')[2].split('\n')[0]}`, `${operation}: frameDigest is the header's digest`);
    const line = encodeSummary(summary);
    t.match(line, new RegExp(`^${SUMMARY_MARKER} \\{[^\\n]*\\}\\n$`));
    t.strictSame(parseSummaryFor(line, operation, ID), summary);
    t.strictSame(parseSummaryFor(`kubelet: ${line}`, operation, ID), summary, 'text before the marker is allowed');
    t.strictSame(parseSummaryFor(line.trimEnd(), operation, ID), summary, 'so is a missing final newline');
  }
  t.strictSame(summaries['migration-apply'].migration, { outcome: 'applied', appliedCount: 2, firstApplied: '1', lastApplied: '2' });
  t.strictSame(summaries.apply, {
    protocolVersion: 1, operation: 'apply', operationId: ID, frameDigest: summaries.apply.frameDigest, mutationStarted: true, uncertain: false,
    coordinationDigest: D('c'), targetIdentityDigest: D('e'),
  });
});

t.test('the physical identity and a refusal before any write travel in frame and summary', async (t) => {
  for (const result of [{ ...valid.plan, ...identity }, refusedApply, refusedMigration] as RunnerResult[]) {
    t.strictSame(parseResultFor(encodeFrame(result), result.operation, ID), result, `${result.operation}: parsed back`);
    const summary = summaryFor(result);
    t.equal(summary.physicalIdentityDigest, D('7'));
    t.equal(summary.physicalIdentityKind, 'system-identifier');
    t.strictSame(parseSummaryFor(encodeSummary(summary), result.operation, ID), summary, `${result.operation}: its summary too`);
  }
  t.same([summaryFor(refusedMigration).mutationStarted, summaryFor(refusedMigration).uncertain], [false, false]);
  t.equal(summaryFor(valid.plan).physicalIdentityDigest, undefined, 'absent when the frame has none');
  t.throws(() => encodeSummary({ ...summaryFor(refusedApply), mutationStarted: true, uncertain: true }), /refusal before any write/,
    'a summary of a refusal before any write cannot say something started');
  t.throws(() => encodeSummary({ ...summaryFor(refusedApply), physicalIdentityKind: undefined }), /come together/);
});

t.test('the largest possible summary fits its 2048 bytes', async (t) => {
  const long = (n: number) => `9${'9'.repeat(n - 1)}`;
  const summary: RunnerSummary = {
    protocolVersion: 1, operation: 'migration-apply', operationId: `A${'-'.repeat(255)}`, frameDigest: D('1'), mutationStarted: true,
    uncertain: true, errorCode: `e${'_'.repeat(63)}`, coordinationDigest: D('2'), targetIdentityDigest: D('3'),
    physicalIdentityDigest: D('4'), physicalIdentityKind: 'system-identifier',
    migration: { outcome: 'partial', appliedCount: Number.MAX_SAFE_INTEGER, firstApplied: long(128), lastApplied: long(128) },
  };
  t.ok(Buffer.byteLength(encodeSummary(summary)) <= MAX_SUMMARY_BYTES);
});

function summaryError(tt: Tap, fn: () => unknown, kind: SummaryError['kind'], pattern: RegExp): void {
  try {
    fn();
    tt.fail('expected a summary error');
  } catch (error) {
    tt.type(error, SummaryError);
    tt.equal((error as SummaryError).kind, kind);
    tt.match((error as SummaryError).message, pattern);
  }
}

t.test('the summary parse is strict', async (t) => {
  const line = encodeSummary(summaries['migration-apply']);
  const json = line.slice(SUMMARY_MARKER.length + 1, -1);
  const withJson = (value: unknown) => `${SUMMARY_MARKER} ${canonicalJson(value)}\n`;
  const parsed = JSON.parse(json) as Record<string, unknown>;
  summaryError(t, () => parseSummaryFor('no summary here', 'migration-apply', ID), 'not-found', /holds no runner summary/);
  summaryError(t, () => parseSummaryFor(line + line, 'migration-apply', ID), 'refused', /more than one/);
  summaryError(t, () => parseSummaryFor(`${line}trailing`, 'migration-apply', ID), 'refused', /followed by more text/);
  summaryError(t, () => parseSummaryFor(`${SUMMARY_MARKER} ${json.replace(',', ', ')}\n`, 'migration-apply', ID), 'refused', /not canonical/);
  summaryError(t, () => parseSummaryFor(`${SUMMARY_MARKER} {${'"a":1,'.repeat(400)}"b":2}\n`, 'migration-apply', ID), 'refused', /over 2048 bytes/);
  summaryError(t, () => parseSummaryFor(`${SUMMARY_MARKER} {not json\n`, 'migration-apply', ID), 'refused', /not JSON/);
  summaryError(t, () => parseSummaryFor(withJson({ ...parsed, extra: 1 }), 'migration-apply', ID), 'refused', /does not define/);
  summaryError(t, () => parseSummaryFor(line, 'apply', ID), 'refused', /not apply/);
  summaryError(t, () => parseSummaryFor(line, 'migration-apply', D('b')), 'refused', /another operation ID/);
  const invalid: [string, Record<string, unknown>][] = [
    ['flags that disagree with the outcome', { ...parsed, uncertain: true, errorCode: 'x' }],
    ['an outcome that needs an error', { ...parsed, mutationStarted: true, migration: { outcome: 'partial', appliedCount: 1, firstApplied: '1', lastApplied: '1' }, uncertain: true }],
    ['a count without versions', { ...parsed, migration: { outcome: 'applied', appliedCount: 2 } }],
    ['one applied file named twice', { ...parsed, migration: { outcome: 'applied', appliedCount: 1, firstApplied: '1', lastApplied: '2' } }],
    ['versions without a count', { ...parsed, errorCode: 'x', mutationStarted: false, uncertain: false, migration: { outcome: 'failed', appliedCount: 0, firstApplied: '1', lastApplied: '1' } }],
    ['a successful run without its migration', { ...parsed, migration: undefined }],
  ];
  for (const [name, value] of invalid) summaryError(t, () => parseSummaryFor(withJson(value), 'migration-apply', ID), 'refused', /breaks its invariants/);
  const observe = JSON.parse(encodeSummary(summaries.observe).slice(SUMMARY_MARKER.length + 1)) as Record<string, unknown>;
  summaryError(t, () => parseSummaryFor(withJson({ ...observe, mutationStarted: false }), 'observe', ID), 'refused', /read-only/);
  summaryError(t, () => parseSummaryFor(withJson({ ...observe, migration: parsed.migration }), 'observe', ID), 'refused', /only a migration-apply/);
  t.throws(() => encodeSummary({ ...summaries.apply, uncertain: true }), SummaryError, 'an invalid summary is not written either');
});

t.test('a summary stands in only when the log holds no frame and agrees with every header in it', async (t) => {
  const result = valid['migration-apply'];
  const summary = summaries['migration-apply'];
  const frame = encodeFrame(result);
  const header = frame.slice(0, frame.indexOf('\n') + 1);
  t.ok(summaryStandsIn(summary, undefined), 'the log is gone');
  t.ok(summaryStandsIn(summary, 'ptah-runner: starting\n'), 'the log holds no frame');
  t.ok(summaryStandsIn(summary, `noise\n${frame.slice(0, frame.length - 40)}`), 'the log ends inside the same frame');
  t.ok(summaryStandsIn(summary, `noise\n${FRAME_MARKER} 12`), 'an incomplete header says nothing');
  t.notOk(summaryStandsIn(summary, frame), 'a readable frame is read instead');
  t.notOk(summaryStandsIn(summary, `${FRAME_MARKER} 10 ${'0'.repeat(64)}\n`), 'a header with another digest disagrees');
  t.notOk(summaryStandsIn(summary, `${header}${'x'.repeat(10)}\n${FRAME_END_MARKER}\n`), 'a frame that can no longer arrive is not replaced');
  t.notOk(summaryStandsIn(summaries.apply, undefined), 'only a migration Apply is ever read from its summary');
});
