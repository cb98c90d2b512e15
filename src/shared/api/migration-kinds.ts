// The versioned family: PtahMigration, its immutable plans (versions and checksums, no SQL), the approvals
// that authorize an Apply, and the acknowledgments by which a person settles a run nobody could account for.
import { DEFAULT_MIGRATION_FORMAT, MIGRATION_FORMATS } from '../migration-format.js';
import { ADOPTION_SOURCES, BASELINE_VERSION_PATTERN, HISTORY_TABLE_PATTERN } from '../migration-adoption.js';
import { REPAIR_RESOLUTIONS } from '../migration-repair.js';
import { acknowledgmentKind } from './acknowledgment-kind.js';
import { approvalKind } from './approval-kind.js';
import { duration } from './duration.js';
import { conditionReason, defineKind, NAME_AT_MOST_63, type ResourceOf } from './kind.js';
import { array, boolean, integer, object, oneOf, optional, string, withDefault, type Input, type Static } from './schema.js';
import {
  ARTIFACT_SOURCE_DESCRIPTION,
  ARTIFACT_SOURCE_RULES,
  activeOperation,
  applyPolicy,
  artifactSourceFields,
  bindingEpoch,
  conditions,
  conditionsStatus,
  count,
  databaseTarget,
  dnsLabel,
  executionBinding,
  executionSpec,
  identity,
  interval,
  managerRecord,
  objectRef,
  pendingLockRelease,
  pinnedArtifact,
  refusedReading,
  sha256,
  specTimeoutRules,
  timestamp,
  uid,
} from './shapes.js';

export const MIGRATION_PHASES = [
  'Pending',
  'Resolving',
  'Reading',
  'Planning',
  'AwaitingApproval',
  'Blocked',
  'Applying',
  'VerifyingHistory',
  'InSync',
  'Suspended',
  'Failed',
] as const;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];

export const MAX_PLANNED_MIGRATIONS = 256;

const VERSION_PATTERN = '[0-9]{1,32}';
const migrationVersion = () => string({ maxLength: 32, pattern: `^${VERSION_PATTERN}$` });
/** Where the history stands: the highest applied version, or "" when nothing is applied. */
const currentVersion = () => string({ maxLength: 32, pattern: `^(${VERSION_PATTERN})?$`, description: 'Empty when nothing is applied.' });
const versionList = () => array(migrationVersion(), { maxItems: MAX_PLANNED_MIGRATIONS });

const migrationPolicy = object(
  {
    apply: applyPolicy(),
    lockTimeout: withDefault(duration({ min: '1s', max: '1h', description: 'Wait for the database’s own migration lock.' }), '5m'),
  },
  { description: 'Safety decisions.' },
);

const migrationArtifactSource = object(
  {
    ...artifactSourceFields,
    format: withDefault(oneOf(MIGRATION_FORMATS, {
      description: 'How the directory is written: ptah (<version>_<name>.up.sql), golang-migrate, goose (SQL files), dbmate or flyway ' +
        '(V<version>__<description>.sql); each keeps its own version order and transaction rules, and down sections never run ' +
        '(docs/executor.md).',
    }), DEFAULT_MIGRATION_FORMAT),
  },
  { description: ARTIFACT_SOURCE_DESCRIPTION, rules: ARTIFACT_SOURCE_RULES },
);

const migrationAdoption = object(
  {
    from: oneOf(ADOPTION_SOURCES, {
      description: 'The tool whose history table names the files already applied (golang-migrate, goose, dbmate, flyway), or baseline: ' +
        'every file at or below baselineVersion.',
    }),
    table: optional(string({ maxLength: 127, pattern: HISTORY_TABLE_PATTERN, description: 'The tool’s history table, table or schema.table; default the tool’s own name.' })),
    baselineVersion: optional(string({ maxLength: 30, pattern: BASELINE_VERSION_PATTERN, description: 'from: baseline only.' })),
  },
  {
    description: 'Adopt a database another tool migrated: while the history records nothing, the files this names count as applied. ' +
      'The plan shows them; the approved Apply records them without running them (docs/executor.md).',
    rules: [{
      rule: 'self.from == \'baseline\' ? has(self.baselineVersion) && !has(self.table) : !has(self.baselineVersion)',
      message: 'from: baseline needs baselineVersion and reads no table; a history tool takes no baselineVersion',
    }],
  },
);

/** What an adoption counts as applied, for a person to read: how many files, from where, and their range. */
const adoptedFiles = object(
  {
    from: oneOf(ADOPTION_SOURCES),
    count: count(),
    firstVersion: migrationVersion(),
    lastVersion: migrationVersion(),
  },
  { description: 'Files spec.adoption counts as applied, not yet recorded; the history fingerprint binds exactly which.' },
);

const repairFields = {
  version: migrationVersion(),
  resolution: oneOf(REPAIR_RESOLUTIONS, {
    description: 'finished: the file\'s remaining statements were run by hand, so its row is marked applied; undone: what it did was ' +
      'reversed by hand, so its row is removed and the file runs again.',
  }),
};

const migrationRepair = object(repairFields, {
  description: 'Repair the dirty history row of a no-transaction file that stopped partway, once a person has mended the database: the ' +
    'reading proposes the repair in a plan, which always needs an approval, and the approved Apply records it in ptah_migrations.repairs ' +
    '(docs/executor.md).',
});

export const ptahMigrationSpec = object(
  {
    target: databaseTarget,
    artifact: migrationArtifactSource,
    adoption: optional(migrationAdoption),
    repair: optional(migrationRepair),
    policy: withDefault(migrationPolicy, {}),
    interval: interval(),
    execution: withDefault(executionSpec, {}),
    suspend: withDefault(boolean({ description: 'No new Jobs; a running Apply is still followed to its end.' }), false),
  },
  { description: 'A directory of versioned migrations (the artifact ConfigMap, one key per file) and the database it applies to.', rules: specTimeoutRules },
);
export type PtahMigrationSpec = Static<typeof ptahMigrationSpec>;
export type PtahMigrationSpecInput = Input<typeof ptahMigrationSpec>;

export const migrationHistoryStatus = object(
  {
    observedAt: timestamp(),
    currentVersion: currentVersion(),
    appliedCount: count(),
    pendingCount: count(),
    fingerprint: sha256('Digest of the applied history.'),
    targetIdentityDigest: sha256('Which database the reading reached.'),
    physicalIdentityDigest: optional(sha256('Which physical database the reading opened, whatever URL reached it (the realm census).')),
    dirty: boolean({ description: 'A recorded run started and did not finish.' }),
    modifiedVersions: versionList(),
    outOfOrderVersions: versionList(),
    adoptable: optional(adoptedFiles),
  },
  { description: 'The last History reading.' },
);
export type MigrationHistoryStatus = Static<typeof migrationHistoryStatus>;

export const LAST_RUN_OUTCOMES = ['UpToDate', 'Applied', 'Failed', 'Partial', 'Unknown'] as const;
export type LastRunOutcome = (typeof LAST_RUN_OUTCOMES)[number];
export const UNRESOLVED_OUTCOMES = ['Partial', 'Unknown'] as const;
export type UnresolvedOutcome = (typeof UNRESOLVED_OUTCOMES)[number];
export const RUN_RESOLUTIONS = ['ResolvedByHistoryRead', 'ResolvedByAcknowledgment'] as const;
export type RunResolution = (typeof RUN_RESOLUTIONS)[number];

export const lastRun = object(
  {
    outcome: oneOf(LAST_RUN_OUTCOMES),
    operationID: sha256(),
    jobName: dnsLabel(),
    jobUID: optional(uid()),
    startedAt: timestamp(),
    finishedAt: optional(timestamp()),
    appliedVersions: versionList(),
    message: optional(string({ maxLength: 1024, description: 'Never SQL or row data.' })),
    dispatchedBy: optional(managerRecord),
  },
  { description: 'The last Apply and what it reported.' },
);
export type LastRun = Static<typeof lastRun>;

export const unresolvedRun = object(
  {
    outcome: oneOf(UNRESOLVED_OUTCOMES),
    operationID: sha256(),
    jobName: optional(dnsLabel()),
    jobUID: optional(uid()),
    planRef: optional(objectRef),
    targetIdentityDigest: optional(sha256()),
    recordedAt: timestamp(),
    dispatchedBy: optional(managerRecord),
  },
  { description: 'An Apply whose effect nobody established. While present nothing is planned and nothing runs.' },
);
export type UnresolvedRun = Static<typeof unresolvedRun>;

export const resolvedRun = object(
  {
    operationID: sha256(),
    outcome: oneOf(UNRESOLVED_OUTCOMES),
    resolution: oneOf(RUN_RESOLUTIONS),
    acknowledgmentRef: optional(objectRef),
    acknowledgedBy: optional(identity),
    resolvedAt: timestamp(),
  },
  { description: 'How and by whom the last unresolved run was settled.' },
);
export type ResolvedRun = Static<typeof resolvedRun>;

export const ptahMigrationStatus = object({
  observedGeneration: optional(integer({ minimum: 0, format: 'int64' })),
  phase: optional(oneOf(MIGRATION_PHASES, { description: 'A summary; decisions read conditions.' })),
  conditions: optional(conditions()),
  artifact: optional(pinnedArtifact),
  executionBinding: optional(executionBinding),
  activeOperation: optional(activeOperation),
  history: optional(migrationHistoryStatus),
  refusedReading: optional(refusedReading),
  plan: optional(objectRef),
  lastRun: optional(lastRun),
  unresolvedRun: optional(unresolvedRun),
  resolvedRun: optional(resolvedRun),
  pendingLockRelease: optional(pendingLockRelease),
  nextReconciliationTime: optional(timestamp()),
});
export type PtahMigrationStatus = Static<typeof ptahMigrationStatus>;

export const ptahMigrationKind = defineKind('PtahMigration', {
  description: 'A sequence of versioned migrations, applied to one database after an approval, exactly once.',
  spec: ptahMigrationSpec,
  status: ptahMigrationStatus,
  rootRules: [NAME_AT_MOST_63],
  printerColumns: [
    { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
    { name: 'Current', type: 'string', jsonPath: '.status.history.currentVersion' },
    { name: 'Pending', type: 'integer', jsonPath: '.status.history.pendingCount' },
    { name: 'Outcome', type: 'string', jsonPath: '.status.lastRun.outcome' },
    { name: 'Reason', type: 'string', jsonPath: conditionReason('Ready') },
    { name: 'Digest', type: 'string', jsonPath: '.status.artifact.digest', priority: 1 },
  ],
});
export type PtahMigration = ResourceOf<typeof ptahMigrationKind>;

export const plannedMigration = object({
  version: migrationVersion(),
  name: string({ minLength: 1, maxLength: 256 }),
  checksum: sha256('sha256 of the file’s bytes.'),
});
export type PlannedMigration = Static<typeof plannedMigration>;

export const ptahMigrationPlanSpec = object({
  migrationRef: objectRef,
  fingerprint: sha256('The approval identity: digest of every binding below.'),
  migrations: array(plannedMigration, { maxItems: MAX_PLANNED_MIGRATIONS, description: 'Execution order; empty in a repair plan.' }),
  historyFingerprint: sha256('The reading the plan was computed from.'),
  currentVersion: currentVersion(),
  adopted: optional(adoptedFiles),
  repair: optional(object({ ...repairFields, checksum: sha256('The dirty row’s checksum: the file it started.') }, {
    description: 'A repair plan: the dirty row spec.repair names, and what the approved Apply does to it; it runs no migration.',
  })),
  artifactDigest: sha256(),
  coordinationDigest: sha256(),
  targetIdentityDigest: sha256(),
  policyFingerprint: sha256(),
  verificationPolicyUID: uid(),
  verificationPolicyDigest: sha256(),
  executionBindingID: bindingEpoch(),
  createdAt: timestamp(),
}, {
  rules: [{
    rule: 'has(self.repair) ? size(self.migrations) == 0 && !has(self.adopted) : size(self.migrations) > 0',
    message: 'a plan runs at least one migration, or is a repair plan, which runs none and adopts nothing',
  }],
});
export type PtahMigrationPlanSpec = Static<typeof ptahMigrationPlanSpec>;

export const ptahMigrationPlanKind = defineKind('PtahMigrationPlan', {
  description: 'An immutable plan: the versions and checksums one Apply may run, bound to the reading it was computed from.',
  spec: ptahMigrationPlanSpec,
  status: conditionsStatus,
  immutableSpec: 'a plan is immutable; publish a new plan instead',
  printerColumns: [
    { name: 'Migration', type: 'string', jsonPath: '.spec.migrationRef.name' },
    { name: 'From', type: 'string', jsonPath: '.spec.currentVersion' },
    { name: 'Fingerprint', type: 'string', jsonPath: '.spec.fingerprint', priority: 1 },
  ],
});
export type PtahMigrationPlan = ResourceOf<typeof ptahMigrationPlanKind>;

export const ptahMigrationApprovalKind = approvalKind('PtahMigrationApproval', {
  plan: 'PtahMigrationPlan',
  refField: 'migrationRef',
  refColumn: 'Migration',
  conditionColumns: ['Consumed'],
});
export const ptahMigrationApprovalSpec = ptahMigrationApprovalKind.spec;
export type PtahMigrationApprovalSpec = Static<typeof ptahMigrationApprovalSpec>;
export type PtahMigrationApproval = ResourceOf<typeof ptahMigrationApprovalKind>;

export const ptahMigrationRunAcknowledgmentKind = acknowledgmentKind('PtahMigrationRunAcknowledgment', {
  description: 'A person’s statement that an unresolved run has been accounted for, which lets the migration read and plan again.',
  refField: 'migrationRef',
  refColumn: 'Migration',
  operation: 'Must name the migration’s status.unresolvedRun.operationID.',
});
export const ptahMigrationRunAcknowledgmentSpec = ptahMigrationRunAcknowledgmentKind.spec;
export type PtahMigrationRunAcknowledgmentSpec = Static<typeof ptahMigrationRunAcknowledgmentSpec>;
export type PtahMigrationRunAcknowledgment = ResourceOf<typeof ptahMigrationRunAcknowledgmentKind>;
