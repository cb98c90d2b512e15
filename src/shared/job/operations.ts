// The operation table's answers by family (src/shared/lifecycle/operations.ts holds the table): which runner
// operation a claim's type runs and whether it may change the database. A type this binary does not know has no
// runner operation, so no Job is ever built or recognised for it.
import { migrationOperation, schemaOperation } from '../lifecycle/operations.js';
import type { Family } from '../naming.js';
import type { RunnerOperation } from '../runner-env.js';

export function runnerOperationFor(family: Family, type: string): RunnerOperation | undefined {
  return (family === 'schema' ? schemaOperation(type) : migrationOperation(type)).runnerOperation;
}

/** True only for a known operation that may change the database; an unknown one is neither this nor read-only. */
export function isMutatingOperation(family: Family, type: string): boolean {
  return (family === 'schema' ? schemaOperation(type) : migrationOperation(type)).mutating;
}
