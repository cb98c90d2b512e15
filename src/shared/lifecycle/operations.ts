// Which obligations a claim carries, by operation type, for both families (the seed's
// mutationlifecycle.SchemaOperation and MigrationOperation). Every site that asks "is this mutating", "does it
// hold the realm", "does it carry out a proof" asks here, so the answers cannot drift between sites.
import type { MigrationPhase } from '../api/migration-kinds.js';
import type { SchemaPhase } from '../api/schema-kinds.js';
import type { RunnerOperation } from '../runner-env.js';

export const SCHEMA_OPERATION_TYPES = ['Resolve', 'Observe', 'Plan', 'Apply'] as const;
export type SchemaOperationType = (typeof SCHEMA_OPERATION_TYPES)[number];
export const MIGRATION_OPERATION_TYPES = ['Resolve', 'History', 'Apply'] as const;
export type MigrationOperationType = (typeof MIGRATION_OPERATION_TYPES)[number];

export interface OperationAnswers {
  /** This binary defines the type. */
  known: boolean;
  /** It may change the database. */
  mutating: boolean;
  /** Known and not mutating. An unknown type is not read-only: a site acting on "not mutating" would act on it. */
  readOnly: boolean;
  /** It takes the database realm's Lease before dispatch. */
  holdsRealm: boolean;
  /** It is one of the readings that settle a schema Apply's proof. */
  carriesProof: boolean;
  /** The phase a claim of this type publishes. */
  phase: SchemaPhase | MigrationPhase | undefined;
  /** What the runner is told to perform. */
  runnerOperation: RunnerOperation | undefined;
}

const UNKNOWN: OperationAnswers = Object.freeze({
  known: false,
  mutating: false,
  readOnly: false,
  holdsRealm: false,
  carriesProof: false,
  phase: undefined,
  runnerOperation: undefined,
});

type Row<P> = { mutating: boolean; holdsRealm: boolean | 'whileProving'; carriesProof: boolean; phase: P; runnerOperation: RunnerOperation };

// A Resolve reads a registry, never a database (docs/oci-artifacts.md): read-only, and it holds no realm.
const SCHEMA: Record<SchemaOperationType, Row<SchemaPhase>> = {
  Resolve: { mutating: false, holdsRealm: false, carriesProof: false, phase: 'Resolving', runnerOperation: 'resolve' },
  Observe: { mutating: false, holdsRealm: 'whileProving', carriesProof: true, phase: 'Observing', runnerOperation: 'observe' },
  Plan: { mutating: false, holdsRealm: true, carriesProof: true, phase: 'Planning', runnerOperation: 'plan' },
  Apply: { mutating: true, holdsRealm: true, carriesProof: false, phase: 'Applying', runnerOperation: 'apply' },
};

const MIGRATION: Record<MigrationOperationType, Row<MigrationPhase>> = {
  Resolve: { mutating: false, holdsRealm: false, carriesProof: false, phase: 'Resolving', runnerOperation: 'resolve' },
  History: { mutating: false, holdsRealm: false, carriesProof: false, phase: 'Reading', runnerOperation: 'migration-history' },
  Apply: { mutating: true, holdsRealm: true, carriesProof: false, phase: 'Applying', runnerOperation: 'migration-apply' },
};

function answer<P extends SchemaPhase | MigrationPhase>(table: Record<string, Row<P>>, type: unknown, provingApply: boolean): OperationAnswers {
  // Own keys only: a type such as "toString" or "__proto__" is as unknown as any other.
  if (typeof type !== 'string' || !Object.hasOwn(table, type)) return UNKNOWN;
  const row = table[type]!;
  return {
    known: true,
    mutating: row.mutating,
    readOnly: !row.mutating,
    holdsRealm: row.holdsRealm === 'whileProving' ? provingApply : row.holdsRealm,
    carriesProof: row.carriesProof,
    phase: row.phase,
    runnerOperation: row.runnerOperation,
  };
}

/**
 * The answers for a PtahSchema claim of `type`. `provingApply`: the claim serves the proof a schema Apply owes
 * (an Observe then holds the realm under the Apply's epoch; outside a proof it holds nothing).
 */
export function schemaOperation(type: string, opts: { provingApply?: boolean } = {}): OperationAnswers {
  return answer(SCHEMA, type, opts.provingApply === true);
}

/** The answers for a PtahMigration claim of `type`. */
export function migrationOperation(type: string): OperationAnswers {
  return answer(MIGRATION, type, false);
}
