// The scratch database: where the desired schema is built to be read, and where a plan is proven before it
// is published. It is PTAH_DEV_URL when given (it must be empty), or a temporary database created on the
// target's server and always dropped. All work in it happens inside transactions that are rolled back.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Digest } from '../../shared/canonical.js';
import { SCHEMA_READING_REFUSALS } from '../../shared/executor-report.js';
import { connect, describeSqlError, disconnect, isStatementError, parseDatabaseUrl, qualifyNames, quoteIdent, type Db } from '../db.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { isTransactionControl, splitSqlStatements } from '../sql-split.js';
import { readCatalogFacts } from './catalog.js';
import { introspect } from './introspect.js';
import { stateFingerprint, type SchemaModel } from './model.js';
import { planStatements, type PlannedStatement } from './statements.js';
import { refuseUnsupported, unsupportedObjects } from './unsupported.js';

export const DESIRED_SCHEMA_FILE = 'schema.sql';
const SCRATCH_PREFIX = 'ptah_scratch_';

export interface DesiredSchema {
  sql: string;
  /** sha256 of the file's bytes. */
  digest: string;
}

export function readDesiredSchema(artifactDir: string): DesiredSchema {
  let bytes: Buffer;
  try {
    bytes = readFileSync(join(artifactDir, DESIRED_SCHEMA_FILE));
  } catch (err) {
    throw new ExecutorFailure('artifact_unreadable', `cannot read ${DESIRED_SCHEMA_FILE} from the artifact: ${errorMessage(err)}`);
  }
  const sql = bytes.toString('utf8');
  // The file is loaded inside a transaction that is rolled back; a COMMIT in it would escape that.
  const control = splitSqlStatements(sql).find(isTransactionControl);
  if (control) {
    throw new ExecutorFailure(SCHEMA_READING_REFUSALS.desiredInvalid,
      `${DESIRED_SCHEMA_FILE} line ${control.line}: ${control.leadingWords.join(' ')} is not allowed; the desired schema is plain DDL without transaction control`);
  }
  return { sql, digest: sha256Digest(bytes) };
}

/** Runs `fn` against a scratch database: the dev database when `devUrl` is set, else a temporary one next to the target. */
export async function withScratch<T>(target: Db, targetUrl: string, devUrl: string | undefined, fn: (scratch: Db) => Promise<T>): Promise<T> {
  if (devUrl !== undefined) {
    const dev = await connect(devUrl, 'dev');
    try {
      return await fn(dev);
    } finally {
      await disconnect(dev);
    }
  }
  const name = `${SCRATCH_PREFIX}${randomBytes(8).toString('hex')}`;
  try {
    await target.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE template0`);
  } catch (err) {
    throw new ExecutorFailure('scratch_database_unavailable',
      `could not create a scratch database on the target's server (${errorMessage(err)}); grant the target role CREATEDB or configure a dev database`);
  }
  try {
    const url = parseDatabaseUrl(targetUrl, 'target');
    url.pathname = `/${name}`;
    const scratch = await connect(url.toString(), 'scratch');
    try {
      return await fn(scratch);
    } finally {
      await disconnect(scratch);
    }
  } finally {
    await target.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`).catch(() => undefined);
  }
}

/** The desired schema as built: its model, and the catalog's own facts about it (catalog.ts). */
export interface BuiltSchema {
  model: SchemaModel;
  facts: string[];
}

/** Builds the desired schema in the scratch database and reads it back; nothing stays behind. */
export async function loadDesired(scratch: Db, desired: DesiredSchema): Promise<BuiltSchema> {
  return inRolledBackTransaction(scratch, async () => {
    await assertPristine(scratch);
    try {
      await scratch.query(desired.sql);
    } catch (err) {
      if (!isStatementError(err)) throw new ExecutorFailure('connection_lost', `lost the scratch database while building the desired schema: ${errorMessage(err)}`);
      throw new ExecutorFailure(SCHEMA_READING_REFUSALS.desiredInvalid, `${DESIRED_SCHEMA_FILE} failed: ${describeSqlError(err, desired.sql)}`);
    }
    await qualifyNames(scratch);
    await refuseUnsupported(scratch, 'desired');
    return { model: await introspect(scratch), facts: await readCatalogFacts(scratch) };
  });
}

/**
 * Proves a plan before it is published: in the scratch database, rebuild the target's schema from its model,
 * check that reads back as the target, run the plan, and check that reads back as the desired schema. This
 * catches an ordering or generation defect here instead of in the target.
 */
export async function provePlan(scratch: Db, actual: SchemaModel, desired: SchemaModel, statements: readonly PlannedStatement[]): Promise<void> {
  await inRolledBackTransaction(scratch, async () => {
    await qualifyNames(scratch);
    const pristine = await introspect(scratch);
    await runAll(scratch, planStatements(pristine, actual), "rebuilding the target's schema");
    if (stateFingerprint(await introspect(scratch)) !== stateFingerprint(actual)) {
      throw new ExecutorFailure('plan_verification_failed',
        "the target's schema could not be reproduced exactly in the scratch database, so the plan cannot be proven; nothing was planned");
    }
    await runAll(scratch, statements, 'running the plan');
    if (stateFingerprint(await introspect(scratch)) !== stateFingerprint(desired)) {
      throw new ExecutorFailure('plan_verification_failed',
        'the computed plan does not converge to the desired schema in the scratch database (a defect of the executor); nothing was planned');
    }
  });
}

async function runAll(scratch: Db, statements: readonly PlannedStatement[], what: string): Promise<void> {
  for (const [i, statement] of statements.entries()) {
    try {
      await scratch.query(statement.sql);
    } catch (err) {
      throw new ExecutorFailure('plan_verification_failed',
        `statement ${i + 1} of ${statements.length} failed in the scratch database while ${what}: ${errorMessage(err)}; nothing was planned`);
    }
  }
}

/** The scratch database must hold nothing in the managed schemas but an empty `public`. */
async function assertPristine(scratch: Db): Promise<void> {
  await scratch.query('SAVEPOINT pristine_check');
  await qualifyNames(scratch);
  const model = await introspect(scratch);
  const unsupported = await unsupportedObjects(scratch, { desired: false });
  await scratch.query('ROLLBACK TO SAVEPOINT pristine_check');
  const objects = [model.tables, model.views, model.sequences, model.extensions, model.enums, model.domains, model.composites, model.routines, model.policies];
  if (objects.some((list) => list.length > 0) || unsupported.length > 0 || model.schemas.some((s) => s !== 'public')) {
    throw new ExecutorFailure('dev_database_not_empty', 'the dev database must be empty (nothing but an empty public schema); it is used as scratch space');
  }
}

async function inRolledBackTransaction<T>(client: Db, fn: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    return await fn();
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
  }
}
