// The PtahMigrationPlan: the versions and checksums one Apply may run (never SQL: the SQL stays in the verified
// artifact), bound to the reading it was computed from, the artifact, the verification policy, the realm, the
// database the reading reached and the execution binding. Its name comes from its fingerprint, so publishing the
// same plan twice finds the first one, and any moved binding publishes a new plan with a new name.
import type { MigrationHistory } from '../../shared/executor-report.js';
import { MAX_PLANNED_MIGRATIONS, type MigrationHistoryStatus, type PtahMigration, type PtahMigrationPlan, type PtahMigrationPlanSpec } from '../../shared/api/migration-kinds.js';
import { API_VERSION, KINDS, LABELS } from '../../shared/api/names.js';
import type { ObjectRef } from '../../shared/api/shapes.js';
import { canonicalJson, digest } from '../../shared/canonical.js';
import { DEFAULT_MIGRATION_FORMAT } from '../../shared/migration-format.js';
import { adoptionEnvValue } from '../../shared/migration-adoption.js';
import { repairText, type MigrationRepair } from '../../shared/migration-repair.js';
import { isAlreadyExists } from '../../shared/kube-client.js';
import type { MigrationPass } from './context.js';

const NAME_PREFIX = 'ptah-mplan-';

/**
 * Digest of the policy a plan is bound to: whether and how it may run, how the artifact is read (its format
 * decides the up SQL and the transactions), what it adopts and what repair it asks for. The default format, no
 * adoption and no repair are left out, so plans published before any of them existed keep their fingerprints.
 */
export function migrationPolicyFingerprint(m: PtahMigration): string {
  const { apply, lockTimeout } = m.spec.policy;
  const { artifact: { format }, adoption, repair } = m.spec;
  return digest({
    version: 1, apply, lockTimeout,
    ...(format === DEFAULT_MIGRATION_FORMAT ? {} : { format }),
    ...(adoption ? { adoption: adoptionEnvValue(adoption) } : {}),
    ...(repair ? { repair: { version: repair.version, resolution: repair.resolution } } : {}),
  });
}

/** The highest applied version, or "" when nothing is applied. */
export function currentVersionOf(history: MigrationHistory): string {
  let highest: bigint | undefined;
  let spelled = '';
  for (const row of history.applied) {
    const value = BigInt(row.version);
    if (highest === undefined || value > highest) {
      highest = value;
      spelled = row.version;
    }
  }
  return spelled;
}

type PlanBody = Omit<PtahMigrationPlanSpec, 'fingerprint' | 'createdAt'>;

function fingerprintOf(body: PlanBody): string {
  return digest({ version: 1, ...body });
}

export function planNameFor(fingerprint: string): string {
  return `${NAME_PREFIX}${fingerprint.slice('sha256:'.length, 'sha256:'.length + 24)}`;
}

/** What a plan computed now would bind: the pin and binding in the status, and the reading (by default the status's). */
function bindingsNow(pass: MigrationPass, history = pass.status.history): Omit<PlanBody, 'migrations'> | undefined {
  const { artifact, executionBinding } = pass.status;
  if (!artifact || !history || !executionBinding) return undefined;
  return {
    migrationRef: { name: pass.name, uid: pass.uid },
    historyFingerprint: history.fingerprint,
    currentVersion: history.currentVersion,
    ...(history.adoptable ? { adopted: history.adoptable } : {}),
    artifactDigest: artifact.digest,
    coordinationDigest: pass.realm(),
    targetIdentityDigest: history.targetIdentityDigest,
    policyFingerprint: migrationPolicyFingerprint(pass.m),
    verificationPolicyUID: artifact.verificationPolicyUID,
    verificationPolicyDigest: artifact.verificationPolicyDigest,
    executionBindingID: executionBinding.epoch,
  };
}

/** A plan's versions for a message: all of a short list, the first and the last of a long one. */
export function versionsText(versions: readonly string[]): string {
  return versions.length <= 10 ? versions.join(', ') : `${versions[0]} … ${versions[versions.length - 1]} (${versions.length} files)`;
}

/** What a plan does, for a message: the files it applies, and those it records as applied by another tool, or its repair. */
export function planText(plan: PtahMigrationPlan): string {
  if (plan.spec.repair) return repairText(plan.spec.repair);
  const adopted = plan.spec.adopted;
  return versionsText(plan.spec.migrations.map((m) => m.version)) + (adopted
    ? ` and records ${adopted.count} file(s) (${adopted.firstVersion} … ${adopted.lastVersion}) as applied by ${adopted.from}, without running them`
    : '');
}

export class PlanError extends Error {
  override name = 'PlanError';
}

/**
 * The plan for a reading (its history status and the pending files it reported); undefined when nothing is
 * pending. Called in the pass that harvested the reading, the only time the pending files are known.
 */
export function migrationPlanFor(pass: MigrationPass, history: MigrationHistoryStatus, pending: MigrationHistory['pending']): PtahMigrationPlan | undefined {
  if (pending.length === 0) return undefined;
  const bindings = bindingsNow(pass, history);
  if (!bindings) throw new PlanError('a plan needs a pinned artifact, a reading and an execution binding');
  // One plan carries the first MAX_PLANNED_MIGRATIONS pending files; the executor applies exactly those, and the
  // reading after them plans the next ones.
  const planned = pending.slice(0, MAX_PLANNED_MIGRATIONS);
  return planObject(pass, { ...bindings, migrations: planned.map(({ version, name, checksum }) => ({ version, name, checksum })) });
}

/** The plan object for a body: named after its fingerprint, owned by the migration. */
function planObject(pass: MigrationPass, body: PlanBody): PtahMigrationPlan {
  const fingerprint = fingerprintOf(body);
  return {
    apiVersion: API_VERSION,
    kind: KINDS.PtahMigrationPlan.kind,
    metadata: {
      name: planNameFor(fingerprint),
      namespace: pass.namespace,
      labels: { [LABELS.migration]: pass.name },
      ownerReferences: [{ apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, name: pass.name, uid: pass.uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: { ...body, fingerprint, createdAt: pass.nowIso() },
  };
}

/**
 * The repair plan for a reading whose only dirty row is the one spec.repair names: no migration, the row's version
 * and checksum, and the resolution. It runs only with an approval, whatever spec.policy.apply says (idle.ts).
 */
export function migrationRepairPlanFor(pass: MigrationPass, history: MigrationHistoryStatus, row: { version: string; checksum: string }, repair: MigrationRepair): PtahMigrationPlan {
  const bindings = bindingsNow(pass, history);
  if (!bindings) throw new PlanError('a plan needs a pinned artifact, a reading and an execution binding');
  return planObject(pass, { ...bindings, migrations: [], repair: { version: row.version, checksum: row.checksum, resolution: repair.resolution } });
}

/** Creates the plan, or finds the one already published under its name; either way returns it by name and UID. */
export async function publishMigrationPlan(pass: MigrationPass, plan: PtahMigrationPlan): Promise<ObjectRef> {
  let stored: PtahMigrationPlan;
  try {
    stored = await pass.deps.client.create(plan);
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    stored = await pass.deps.client.get<PtahMigrationPlan>({ apiVersion: API_VERSION, kind: KINDS.PtahMigrationPlan.kind, namespace: pass.namespace, name: plan.metadata.name! });
    if (stored.spec.fingerprint !== plan.spec.fingerprint || stored.spec.migrationRef.uid !== pass.uid) {
      throw new PlanError(`a PtahMigrationPlan named ${plan.metadata.name} exists but is not this plan`);
    }
  }
  return { name: stored.metadata.name!, uid: stored.metadata.uid! };
}

export type CurrentPlan = { ok: true; plan: PtahMigrationPlan } | { ok: false; why: string };

/**
 * The plan status.plan names, read uncached and held to every binding it was computed under, as the status now
 * stands. Any binding having moved discards the plan (a re-read, never a cached comparison). `read`: a plan the
 * same step has just read uncached (the claim's), which stands for the read when it is under the name status.plan
 * gives.
 */
export async function currentMigrationPlan(pass: MigrationPass, read?: PtahMigrationPlan): Promise<CurrentPlan> {
  const ref = pass.status.plan;
  if (!ref) return { ok: false, why: 'no plan is published' };
  const plan = read?.metadata.name === ref.name ? read
    : await pass.deps.client.tryGet<PtahMigrationPlan>({ apiVersion: API_VERSION, kind: KINDS.PtahMigrationPlan.kind, namespace: pass.namespace, name: ref.name });
  if (!plan) return { ok: false, why: `plan ${ref.name} no longer exists` };
  if (plan.metadata.uid !== ref.uid) return { ok: false, why: `plan ${ref.name} was replaced` };
  const { fingerprint, createdAt: _createdAt, migrations, ...bound } = plan.spec;
  if (fingerprintOf({ ...bound, migrations }) !== fingerprint) return { ok: false, why: `plan ${ref.name} does not hash to its fingerprint` };
  const now = bindingsNow(pass);
  if (!now) return { ok: false, why: 'the status holds no reading, pin or execution binding to hold the plan to' };
  for (const [key, value] of Object.entries(now) as [keyof typeof now, unknown][]) {
    if (canonicalJson(bound[key]) !== canonicalJson(value)) return { ok: false, why: `plan ${ref.name} was computed for another ${key}` };
  }
  return { ok: true, plan };
}
