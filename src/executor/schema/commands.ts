// `observe`, `plan` and `apply` for a declarative schema.
import { readFileSync } from 'node:fs';
import { digest, isDigest } from '../../shared/canonical.js';
import { REFUSED_BEFORE_WRITING, SCHEMA_READING_REFUSALS, type ApplyReport, type ObserveReport, type PlanReport, type SchemaPlanDocument } from '../../shared/executor-report.js';
import { EXECUTOR_ENV } from '../../shared/runner-env.js';
import { SCHEMA_APPLIES_TABLE, ensureBookkeeping } from '../bookkeeping.js';
import { disconnect, failureCode, isStatementError, qualifyNames, withReadOnlySnapshot, type Db } from '../db.js';
import { lockTimeoutMs, optionalEnv, requireDigestEnv, requireEnv, requireOperationId, type Env } from '../env.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { connectTarget, type CommandContext } from '../physical-identity.js';
import { acquireWriterLocks, connectWriter } from '../writer-lock.js';
import { catalogDifference, catalogDigest, readCatalogFacts } from './catalog.js';
import { diffModels, summarizeDrift, type Drift } from './diff.js';
import { MANAGED_NAMESPACE, introspect } from './introspect.js';
import { stateFingerprint, type SchemaModel } from './model.js';
import { loadDesired, provePlan, readDesiredSchema, withScratch, type DesiredSchema } from './scratch.js';
import { planStatements, type LockingReason, type PlannedStatement } from './statements.js';
import { refuseUnsupported } from './unsupported.js';


interface Comparison {
  actual: SchemaModel;
  desired: SchemaModel;
  desiredSource: DesiredSchema;
  /** The catalog's own facts (catalog.ts) about the target and about the desired schema as built. */
  actualFacts: string[];
  desiredFacts: string[];
}

/** Reads the target (refusing what it cannot model) and the desired schema, then hands both to `fn`. */
async function compare<T>(env: Env, context: CommandContext, fn: (c: Comparison, scratch: Db) => Promise<T>): Promise<T> {
  const desiredSource = readDesiredSchema(requireEnv(env, 'artifactDir'));
  const targetUrl = requireEnv(env, 'dbUrl');
  const target = await connectTarget(targetUrl, context);
  try {
    const { actual, actualFacts } = await withReadOnlySnapshot(target, async () => ({ actual: await readTarget(target), actualFacts: await readCatalogFacts(target) }));
    return await withScratch(target, targetUrl, optionalEnv(env, 'devUrl'), async (scratch) => {
      const built = await loadDesired(scratch, desiredSource);
      return fn({ actual, desired: built.model, desiredSource, actualFacts, desiredFacts: built.facts }, scratch);
    });
  } finally {
    await disconnect(target);
  }
}

async function readTarget(target: Db): Promise<SchemaModel> {
  await refuseUnsupported(target, 'target');
  return introspect(target);
}

/**
 * A difference the model does not see: the catalogs of the target and of the desired schema differ where the
 * model reads them equal. It is never reported as converged (nor planned: no statement of the engine changes it).
 */
function unmodelledDifference(actualFacts: readonly string[], desiredFacts: readonly string[]): ExecutorFailure | undefined {
  const difference = catalogDifference(actualFacts, desiredFacts);
  return difference === undefined ? undefined : new ExecutorFailure(SCHEMA_READING_REFUSALS.unmodelled,
    `the target's catalog differs from the desired schema's where the engine's model reads them equal, so it is not reported converged: ${difference}`);
}

export async function observe(env: Env, context: CommandContext): Promise<ObserveReport> {
  return compare(env, context, async ({ actual, desired, actualFacts, desiredFacts }) => {
    const drift = withUnmodelledDrift(summarizeDrift(diffModels(actual, desired)), actualFacts, desiredFacts);
    return {
      command: 'observe',
      dialect: 'postgresql',
      drift: drift.drift,
      driftDigest: drift.driftDigest,
      findings: drift.findings,
      actualStateFingerprint: stateFingerprint(actual),
    };
  });
}

/** Drift the model cannot see is drift still: the catalogs differ, so a Plan must look (and says why it cannot plan it). */
function withUnmodelledDrift(drift: Drift, actualFacts: readonly string[], desiredFacts: readonly string[]): Drift {
  if (drift.drift) return drift;
  const desired = new Set(desiredFacts);
  const actual = new Set(actualFacts);
  const differing = [...actualFacts.filter((f) => !desired.has(f)), ...desiredFacts.filter((f) => !actual.has(f))];
  if (differing.length === 0) return drift;
  return { drift: true, findings: [{ category: 'unmodelled_difference', count: differing.length }], driftDigest: digest({ formatVersion: 1, unmodelled: differing.sort() }) };
}

export async function plan(env: Env, context: CommandContext): Promise<PlanReport> {
  return compare(env, context, async ({ actual, desired, desiredSource, actualFacts, desiredFacts }, scratch) => {
    const actualStateFingerprint = stateFingerprint(actual);
    const planned = planStatements(actual, desired);
    if (planned.length === 0) {
      const unmodelled = unmodelledDifference(actualFacts, desiredFacts);
      if (unmodelled) throw unmodelled;
      return { command: 'plan', outcome: 'NoChanges', actualStateFingerprint };
    }
    await provePlan(scratch, actual, desired, planned);
    const document = planDocument(planned, {
      actualStateFingerprint, desiredSchemaDigest: desiredSource.digest, desiredStateFingerprint: stateFingerprint(desired), desiredCatalogDigest: catalogDigest(desiredFacts),
    });
    return { command: 'plan', outcome: 'Changes', plan: document, planContentDigest: digest(document), actualStateFingerprint };
  });
}

/** What a plan is bound to: the state it was computed from and the state it promises, by model and by catalog. */
export type PlanDigests = Pick<SchemaPlanDocument, 'actualStateFingerprint' | 'desiredSchemaDigest' | 'desiredStateFingerprint' | 'desiredCatalogDigest'>;

/**
 * The published plan. A plan made only of index builds on existing tables runs them CONCURRENTLY, outside a
 * transaction (writes go on meanwhile); any other plan runs in one transaction, as proven.
 */
export function planDocument(planned: readonly PlannedStatement[], digests: PlanDigests): ClassifiedPlanDocument {
  const transactional = !planned.every((s) => s.concurrently !== undefined);
  const destructiveStatements = planned.flatMap((s, index) => (s.destructive ? [{ index, reason: s.destructive }] : []));
  const privilegeStatements = planned.flatMap((s, index) => (s.privilege ? [index] : []));
  // Built concurrently, an index no longer blocks writes; it still reads the whole table.
  const lockingStatements = planned.flatMap((s, index) =>
    (s.locking ? [{ index, reason: !transactional && s.locking === 'blocking_index_build' ? 'concurrent_index_build' as const : s.locking }] : []));
  return {
    formatVersion: 1,
    engine: 'postgresql',
    statements: planned.map((s) => (transactional ? s.sql : s.concurrently!)),
    statementCount: planned.length,
    destructive: destructiveStatements.length > 0,
    destructiveStatements,
    privilegeChanging: privilegeStatements.length > 0,
    privilegeStatements,
    lockingStatements,
    transactional,
    ...digests,
  };
}

/**
 * Executes exactly the plan's statements under the writer locks (writer-lock.ts), only if the target still reads as
 * the plan found it, and keeps them only if it then reads as the plan promised: in one transaction, or, for a
 * plan of concurrent index builds, one statement at a time, dropping every index it built if any fails.
 */
export async function apply(env: Env, context: CommandContext): Promise<ApplyReport> {
  const operationId = requireOperationId(env);
  const coordinationDigest = requireDigestEnv(env, 'coordinationDigest');
  const timeoutMs = lockTimeoutMs(env);
  const document = readPlanDocument(requireEnv(env, 'planFile'));
  const planContentDigest = digest(document);
  let statementsExecuted = 0;
  const failed = (error: ExecutorFailure): ApplyReport =>
    ({ command: 'apply', outcome: 'failed', planContentDigest, statementsExecuted, error: error.toReport() });
  let startedAt: Date | undefined;
  const record = () => target.query(`INSERT INTO ${SCHEMA_APPLIES_TABLE} (operation_id, plan_content_digest, desired_schema_digest, statement_count, started_at) VALUES ($1, $2, $3, $4, $5)`,
    [operationId, planContentDigest, document.desiredSchemaDigest, document.statementCount, startedAt]);
  const run = async (i: number, sql: string, after: string) => {
    try {
      await target.query(sql);
    } catch (err) {
      throw new ExecutorFailure(failureCode(err, 'statement_failed'), `statement ${i + 1} of ${document.statementCount} failed: ${errorMessage(err)}; ${after}`);
    }
    statementsExecuted += 1;
  };
  const refuseMoved = (model: SchemaModel) => {
    if (stateFingerprint(model) !== document.actualStateFingerprint) {
      throw new ExecutorFailure(REFUSED_BEFORE_WRITING.targetChanged, 'the target schema changed after this plan was computed; plan again; nothing was changed');
    }
  };
  const notConverged = (what: string) => new ExecutorFailure('convergence_failed', `after the plan ran, the target does not read as the desired schema; ${what}`);

  const target = await connectWriter(requireEnv(env, 'dbUrl'), coordinationDigest, context);
  try {
    const lock = await acquireWriterLocks(target, coordinationDigest, timeoutMs);
    try {
      // The database's clock, as applied_at is: the run's start is recorded with its end.
      startedAt = (await target.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows[0]?.now;
      if (!document.transactional) {
        return await applyConcurrently(target, document, { run, record, refuseMoved, notConverged, failed, executed: () => statementsExecuted, planContentDigest });
      }
      await target.query('BEGIN');
      try {
        await qualifyNames(target);
        refuseMoved(await readTarget(target));
        for (const [i, sql] of document.statements.entries()) await run(i, sql, 'the transaction was rolled back, nothing was changed');
        if (!(await readsAsPromised(target, document))) throw notConverged('the transaction was rolled back, nothing was changed');
        await ensureBookkeeping(target);
        await record();
      } catch (err) {
        await target.query('ROLLBACK').catch(() => undefined);
        // Nothing commits without the COMMIT below, so any failure up to here changed nothing.
        return failed(err instanceof ExecutorFailure ? err
          : new ExecutorFailure(failureCode(err, 'statement_failed'), `the apply failed before commit: ${errorMessage(err)}; nothing was changed`));
      }
      try {
        await target.query('COMMIT');
      } catch (err) {
        if (isStatementError(err)) return failed(new ExecutorFailure('statement_failed', `the plan failed at commit: ${errorMessage(err)}; nothing was changed`));
        return {
          command: 'apply', outcome: 'unknown', planContentDigest, statementsExecuted,
          error: new ExecutorFailure('commit_unknown', `the connection failed while the plan committed; whether it applied is unknown: ${errorMessage(err)}`).toReport(),
        };
      }
      return { command: 'apply', outcome: 'applied', planContentDigest, statementsExecuted };
    } finally {
      await lock.release();
    }
  } finally {
    await disconnect(target);
  }
}

/** After the plan ran: the model reads as the desired schema, and so does the catalog itself (catalog.ts). */
async function readsAsPromised(target: Db, document: ClassifiedPlanDocument): Promise<boolean> {
  return stateFingerprint(await introspect(target)) === document.desiredStateFingerprint &&
    catalogDigest(await readCatalogFacts(target)) === document.desiredCatalogDigest;
}

interface ConcurrentSteps {
  run(i: number, sql: string, after: string): Promise<void>;
  record(): Promise<unknown>;
  refuseMoved(model: SchemaModel): void;
  notConverged(what: string): ExecutorFailure;
  failed(error: ExecutorFailure): ApplyReport;
  executed(): number;
  planContentDigest: string;
}

const MANAGED_INDEXES = `SELECT c.oid::text AS oid, format('%I.%I', n.nspname, c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'i' AND ${MANAGED_NAMESPACE}`;

/**
 * CREATE INDEX CONCURRENTLY cannot run in a transaction. Each build commits on its own; if one fails (leaving
 * an invalid index) or the result does not converge, every index that was not there before is dropped again,
 * concurrently, so a failed apply still leaves the target as it was.
 */
async function applyConcurrently(target: Db, document: ClassifiedPlanDocument, steps: ConcurrentSteps): Promise<ApplyReport> {
  const before = await withReadOnlySnapshot(target, async () => {
    steps.refuseMoved(await readTarget(target));
    return new Set((await target.query<{ oid: string }>(MANAGED_INDEXES)).rows.map((r) => r.oid));
  });
  const undo = async () => {
    for (const index of (await target.query<{ oid: string; name: string }>(MANAGED_INDEXES)).rows.filter((r) => !before.has(r.oid))) {
      await target.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index.name}`);
    }
  };
  try {
    for (const [i, sql] of document.statements.entries()) await steps.run(i, sql, 'every index this plan built was dropped again, nothing was changed');
    if (!(await withReadOnlySnapshot(target, () => readsAsPromised(target, document)))) {
      throw steps.notConverged('every index this plan built was dropped again, nothing was changed');
    }
  } catch (err) {
    try {
      await undo();
    } catch (undoErr) {
      return {
        command: 'apply', outcome: 'unknown', planContentDigest: steps.planContentDigest, statementsExecuted: steps.executed(),
        error: new ExecutorFailure('undo_failed', `the plan failed (${errorMessage(err)}) and the indexes it built could not all be dropped again: ${errorMessage(undoErr)}; inspect the target's indexes`).toReport(),
      };
    }
    return steps.failed(err instanceof ExecutorFailure ? err : new ExecutorFailure(failureCode(err, 'statement_failed'), `the apply failed: ${errorMessage(err)}; nothing was changed`));
  }
  await target.query('BEGIN');
  try {
    await ensureBookkeeping(target);
    await steps.record();
    await target.query('COMMIT');
  } catch (err) {
    await target.query('ROLLBACK').catch(() => undefined);
    return {
      command: 'apply', outcome: 'unknown', planContentDigest: steps.planContentDigest, statementsExecuted: steps.executed(),
      error: new ExecutorFailure('record_failed', `the indexes were built but the apply could not be recorded: ${errorMessage(err)}`).toReport(),
    };
  }
  return { command: 'apply', outcome: 'applied', planContentDigest: steps.planContentDigest, statementsExecuted: steps.executed() };
}

/**
 * The plan document this executor writes: the shared SchemaPlanDocument plus its classification. The controller
 * reads `privilegeChanging` (a plan that grants, revokes, or changes row-level security or a policy always
 * needs an approval) and shows `lockingStatements` (statements that rewrite, scan or block a table) to the
 * approver.
 */
export interface ClassifiedPlanDocument extends SchemaPlanDocument {
  desiredStateFingerprint: string;
  privilegeChanging: boolean;
  /** Indexes of the statements that change privileges, in order. */
  privilegeStatements: number[];
  lockingStatements: { index: number; reason: LockingReason | 'concurrent_index_build' }[];
  /** False for a plan of concurrent index builds, run one statement at a time outside a transaction. */
  transactional: boolean;
}

/** Reads and checks the plan document; refuses anything that is not a complete plan this executor wrote. */
export function readPlanDocument(path: string): ClassifiedPlanDocument {
  const name = EXECUTOR_ENV.planFile;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ExecutorFailure('invalid_plan', `cannot read the plan (${name}): ${errorMessage(err)}`);
  }
  const p = (parsed ?? {}) as Partial<Record<keyof ClassifiedPlanDocument, unknown>>;
  const problem =
    typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) ? 'it is not a JSON object'
    : p.formatVersion !== 1 ? 'formatVersion must be 1'
    : p.engine !== 'postgresql' ? 'engine must be postgresql'
    : !Array.isArray(p.statements) || !p.statements.every((s) => typeof s === 'string' && s.trim() !== '') ? 'statements must be non-empty strings'
    : p.statementCount !== p.statements.length ? 'statementCount does not match the statements'
    : !Array.isArray(p.destructiveStatements) || typeof p.destructive !== 'boolean' || p.destructive !== (p.destructiveStatements.length > 0)
      ? 'destructive does not match destructiveStatements'
    : !isDigest(p.actualStateFingerprint) ? 'actualStateFingerprint is not a digest'
    : !isDigest(p.desiredSchemaDigest) ? 'desiredSchemaDigest is not a digest'
    : !isDigest(p.desiredStateFingerprint) ? 'desiredStateFingerprint is missing (the plan was not written by this executor)'
    : !isDigest(p.desiredCatalogDigest) ? 'desiredCatalogDigest is missing (the plan was not written by this executor)'
    : !isIndexList(p.privilegeStatements, p.statementCount) || p.privilegeChanging !== (p.privilegeStatements.length > 0)
      ? 'privilegeChanging does not match privilegeStatements'
    : !Array.isArray(p.lockingStatements) || !isIndexList(p.lockingStatements.map((l: { index?: unknown }) => l?.index), p.statementCount)
      ? 'lockingStatements must name statements'
    : typeof p.transactional !== 'boolean' ? 'transactional must be true or false'
    : undefined;
  if (problem !== undefined) throw new ExecutorFailure('invalid_plan', `the plan (${name}) is not a valid schema plan: ${problem}`);
  return parsed as ClassifiedPlanDocument;
}

const isIndexList = (value: unknown, count: number): value is number[] =>
  Array.isArray(value) && value.every((i, n) => Number.isInteger(i) && i >= 0 && i < count && (n === 0 || i > (value[n - 1] as number)));
