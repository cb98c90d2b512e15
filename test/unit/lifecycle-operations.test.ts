import t from 'tap';
import {
  MIGRATION_OPERATION_TYPES,
  migrationOperation,
  SCHEMA_OPERATION_TYPES,
  schemaOperation,
  type OperationAnswers,
} from '../../src/shared/lifecycle/operations.js';
import { isRunnerOperation } from '../../src/shared/runner-env.js';

// The seed's table, row by row: mutating / holds the realm / carries out a proof, plus phase and runner operation.
const yes = true;
const no = false;
const expected: { name: string; got: () => OperationAnswers; want: OperationAnswers }[] = [
  {
    name: 'schema Apply',
    got: () => schemaOperation('Apply'),
    want: { known: yes, mutating: yes, readOnly: no, holdsRealm: yes, carriesProof: no, phase: 'Applying', runnerOperation: 'apply' },
  },
  {
    name: 'schema Apply while proving (the option changes nothing for it)',
    got: () => schemaOperation('Apply', { provingApply: true }),
    want: { known: yes, mutating: yes, readOnly: no, holdsRealm: yes, carriesProof: no, phase: 'Applying', runnerOperation: 'apply' },
  },
  {
    name: 'schema Plan',
    got: () => schemaOperation('Plan'),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: yes, carriesProof: yes, phase: 'Planning', runnerOperation: 'plan' },
  },
  {
    name: 'schema Plan while proving',
    got: () => schemaOperation('Plan', { provingApply: true }),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: yes, carriesProof: yes, phase: 'Planning', runnerOperation: 'plan' },
  },
  {
    name: 'schema Observe outside a proof holds nothing',
    got: () => schemaOperation('Observe'),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: no, carriesProof: yes, phase: 'Observing', runnerOperation: 'observe' },
  },
  {
    name: 'schema Observe with provingApply false',
    got: () => schemaOperation('Observe', { provingApply: false }),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: no, carriesProof: yes, phase: 'Observing', runnerOperation: 'observe' },
  },
  {
    name: 'schema Observe proving an Apply holds the realm',
    got: () => schemaOperation('Observe', { provingApply: true }),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: yes, carriesProof: yes, phase: 'Observing', runnerOperation: 'observe' },
  },
  {
    name: 'migration Apply',
    got: () => migrationOperation('Apply'),
    want: { known: yes, mutating: yes, readOnly: no, holdsRealm: yes, carriesProof: no, phase: 'Applying', runnerOperation: 'migration-apply' },
  },
  {
    name: 'migration History',
    got: () => migrationOperation('History'),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: no, carriesProof: no, phase: 'Reading', runnerOperation: 'migration-history' },
  },
  // A Resolve reads a registry: read-only, no realm, even while a schema Apply is being proven.
  {
    name: 'schema Resolve',
    got: () => schemaOperation('Resolve', { provingApply: true }),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: no, carriesProof: no, phase: 'Resolving', runnerOperation: 'resolve' },
  },
  {
    name: 'migration Resolve',
    got: () => migrationOperation('Resolve'),
    want: { known: yes, mutating: no, readOnly: yes, holdsRealm: no, carriesProof: no, phase: 'Resolving', runnerOperation: 'resolve' },
  },
];

t.test('the seed’s operation table', async (t) => {
  for (const row of expected) t.strictSame(row.got(), row.want, row.name);
});

t.test('every known type names a runner operation the runner accepts', async (t) => {
  for (const type of SCHEMA_OPERATION_TYPES) t.ok(isRunnerOperation(schemaOperation(type).runnerOperation), `schema ${type}`);
  for (const type of MIGRATION_OPERATION_TYPES) t.ok(isRunnerOperation(migrationOperation(type).runnerOperation), `migration ${type}`);
});

const UNKNOWN: OperationAnswers = {
  known: false,
  mutating: false,
  readOnly: false,
  holdsRealm: false,
  carriesProof: false,
  phase: undefined,
  runnerOperation: undefined,
};

t.test('a type this binary does not know answers no to every question, read-only included', async (t) => {
  const strangers = ['Verify', 'Rollback', 'apply', 'APPLY', ' Apply', 'Apply ', '', 'toString', '__proto__', 'constructor', 'hasOwnProperty'];
  for (const type of strangers) {
    t.strictSame(schemaOperation(type), UNKNOWN, `schema ${JSON.stringify(type)}`);
    t.strictSame(schemaOperation(type, { provingApply: true }), UNKNOWN, `schema ${JSON.stringify(type)} while proving`);
    t.strictSame(migrationOperation(type), UNKNOWN, `migration ${JSON.stringify(type)}`);
  }
  // Each family's types are unknown to the other.
  t.strictSame(migrationOperation('Observe'), UNKNOWN, 'Observe is not a migration operation');
  t.strictSame(migrationOperation('Plan'), UNKNOWN, 'Plan is not a migration operation');
  t.strictSame(schemaOperation('History'), UNKNOWN, 'History is not a schema operation');
});

t.test('values that are not strings, as a decoded status may carry, are unknown', async (t) => {
  for (const value of [undefined, null, 1, true, {}, ['Apply']]) {
    t.strictSame(schemaOperation(value as unknown as string), UNKNOWN, `schema ${JSON.stringify(value)}`);
    t.strictSame(migrationOperation(value as unknown as string), UNKNOWN, `migration ${JSON.stringify(value)}`);
  }
});

t.test('answers are not shared mutable state', async (t) => {
  const first = schemaOperation('Rollback');
  t.throws(() => {
    (first as { mutating: boolean }).mutating = true;
  }, 'the unknown answer is frozen');
  t.equal(schemaOperation('Rollback').mutating, false);
  const apply = migrationOperation('Apply');
  apply.mutating = false;
  t.equal(migrationOperation('Apply').mutating, true, 'a caller editing its answer changes nobody else’s');
});
