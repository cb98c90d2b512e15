// Checks 5 to 7: the bytes the executor will act on are exactly the ones the claim bound, and the executor gets
// private verified copies of them (so a volume that changes after the check cannot change the run).
import { timingSafeEqual } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifactDigest } from '../shared/artifact.js';
import { canonicalJson, sha256Digest } from '../shared/canonical.js';
import { RUNNER_ENV } from '../shared/runner-env.js';
import { expectedSequenceDigest, RUNNER_ERROR, schemaPlanProblem, sequenceEntry, sequenceShapeProblem, type ExpectedMigration } from '../shared/runner-protocol.js';
import { isRepairResolution, REPAIR_RESOLUTIONS, type RepairResolution } from '../shared/migration-repair.js';
import type { RunnerInputs } from './contract.js';
import { MountedFilesError, readMountedFiles } from './mounted-files.js';
import { RunnerRefusal } from './refusal.js';

/** A ConfigMap holds at most 1 MiB; the bound only keeps a wrong mount from exhausting memory. */
const MAX_ARTIFACT_BYTES = 8 * 1024 * 1024;
const MAX_SEQUENCE_ENTRIES = 256;
const VERSION = /^[0-9]{1,30}$/;

export interface PreparedRun {
  /** A private directory the run owns; removed by cleanup(). */
  workDir: string;
  artifactDir?: string;
  planFile?: string;
  expectedSequenceFile?: string;
  /** The approved migration sequence, as checked. */
  sequence?: ExpectedMigration[];
  cleanup(): Promise<void>;
}

export async function prepareRun(inputs: RunnerInputs, maxPlanBytes: number): Promise<PreparedRun> {
  const planBytes = inputs.plan ? await readPlan(inputs.plan, maxPlanBytes) : undefined;
  const artifact = inputs.artifact ? await readArtifact(inputs.artifact) : undefined;
  const sequence = inputs.migrationSequence ? readSequence(inputs.migrationSequence) : undefined;

  const workDir = await mkdtemp(join(tmpdir(), 'ptah-runner-')).catch((error: NodeJS.ErrnoException) => {
    throw new RunnerRefusal(RUNNER_ERROR.preparationFailed, `no private work directory could be made in ${tmpdir()} (${error.code ?? 'error'})`);
  });
  const prepared: PreparedRun = { workDir, sequence, cleanup: () => rm(workDir, { recursive: true, force: true }) };
  try {
    if (artifact) {
      prepared.artifactDir = join(workDir, 'artifact');
      await mkdir(prepared.artifactDir);
      for (const [name, bytes] of artifact) await writeFile(join(prepared.artifactDir, name), bytes);
    }
    if (planBytes) {
      prepared.planFile = join(workDir, 'plan.json');
      await writeFile(prepared.planFile, planBytes);
    }
    if (sequence) {
      prepared.expectedSequenceFile = join(workDir, 'expected-sequence.json');
      await writeFile(prepared.expectedSequenceFile, canonicalJson(sequence));
    }
  } catch (error) {
    await prepared.cleanup();
    throw new RunnerRefusal(RUNNER_ERROR.preparationFailed, `the verified inputs could not be written to the work directory (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return prepared;
}

function sameDigest(actual: string, expected: string): boolean {
  const a = Buffer.from(actual);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

async function readFilesOrRefuse(dir: string, maxBytes: number, what: string, code: string): Promise<Map<string, Buffer>> {
  try {
    return await readMountedFiles(dir, maxBytes, what);
  } catch (error) {
    if (error instanceof MountedFilesError) throw new RunnerRefusal(code, error.message);
    throw error;
  }
}

/** Check 5: the plan's bytes, put back together in file-name order, are the approved plan, in canonical form. */
async function readPlan(plan: NonNullable<RunnerInputs['plan']>, maxPlanBytes: number): Promise<Buffer> {
  const files = await readFilesOrRefuse(plan.dir, maxPlanBytes, 'plan', RUNNER_ERROR.invalidPlan);
  if (files.size === 0) throw new RunnerRefusal(RUNNER_ERROR.invalidPlan, `the plan directory ${plan.dir} holds no plan files`);
  const bytes = Buffer.concat([...files.values()]);
  if (!sameDigest(sha256Digest(bytes), plan.expectedDigest)) {
    throw new RunnerRefusal(
      RUNNER_ERROR.planDigestMismatch,
      `the plan files in ${plan.dir} are not the approved plan (${RUNNER_ENV.expectedPlanContentDigest}); nothing was run`,
    );
  }
  let text: string;
  let document: unknown;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    document = JSON.parse(text);
  } catch {
    throw new RunnerRefusal(RUNNER_ERROR.invalidPlan, 'the plan is not UTF-8 JSON');
  }
  const problem = schemaPlanProblem(document);
  if (problem) throw new RunnerRefusal(RUNNER_ERROR.invalidPlan, `the plan is not a schema plan document: ${problem}`);
  // Its digest is both sha256(bytes) and digest(document) only when the bytes are the canonical form.
  if (canonicalJson(document) !== text) throw new RunnerRefusal(RUNNER_ERROR.invalidPlan, 'the plan bytes are not the canonical JSON of the plan document');
  return bytes;
}

/** Check 6: the artifact files are the ones the controller pinned. */
async function readArtifact(artifact: NonNullable<RunnerInputs['artifact']>): Promise<Map<string, Buffer>> {
  const files = await readFilesOrRefuse(artifact.dir, MAX_ARTIFACT_BYTES, 'artifact', RUNNER_ERROR.invalidArtifact);
  if (!sameDigest(artifactDigest(files), artifact.expectedDigest)) {
    throw new RunnerRefusal(
      RUNNER_ERROR.artifactDigestMismatch,
      `the artifact files in ${artifact.dir} are not the pinned artifact (${RUNNER_ENV.expectedArtifactDigest}); nothing was run`,
    );
  }
  return files;
}

/** Check 7: the approved migration sequence is well-formed and is the one its digest names. */
function readSequence(sequence: NonNullable<RunnerInputs['migrationSequence']>): ExpectedMigration[] {
  const name = RUNNER_ENV.expectedMigrationSequence;
  const invalid = (why: string) => new RunnerRefusal(RUNNER_ERROR.invalidMigrationSequence, `${name} ${why}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(sequence.json);
  } catch {
    throw invalid('is not JSON');
  }
  if (!Array.isArray(parsed) || parsed.length > MAX_SEQUENCE_ENTRIES) throw invalid(`is not a list of at most ${MAX_SEQUENCE_ENTRIES} migrations`);
  const entries = parsed.map((entry: unknown, i): ExpectedMigration => {
    const { version, checksum, repair, ...rest } = (typeof entry === 'object' && entry !== null && !Array.isArray(entry) ? entry : { rest: true }) as Record<string, unknown>;
    const ok = Object.keys(rest).length === 0 && typeof version === 'string' && VERSION.test(version) &&
      typeof checksum === 'string' && checksum !== '' && (repair === undefined || isRepairResolution(repair));
    if (!ok) throw invalid(`entry ${i} is not {version: digits, checksum} or, for a repair, {version, checksum, repair: ${REPAIR_RESOLUTIONS.join(' | ')}}`);
    return sequenceEntry({ version: version as string, checksum: checksum as string, ...(repair === undefined ? {} : { repair: repair as RepairResolution }) });
  });
  const shape = sequenceShapeProblem(entries);
  if (shape) throw invalid(shape);
  if (!sameDigest(expectedSequenceDigest(entries), sequence.expectedDigest)) {
    throw new RunnerRefusal(
      RUNNER_ERROR.migrationSequenceDigestMismatch,
      `${name} is not the approved sequence (${RUNNER_ENV.expectedMigrationSequenceDigest}); nothing was run`,
    );
  }
  return entries;
}
