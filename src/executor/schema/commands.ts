// `observe`, `plan` and `apply` for a declarative schema.
import { readFileSync } from 'node:fs';
import { digest, isDigest } from '../../shared/canonical.js';
import type { ApplyReport, ObserveReport, PlanReport, SchemaPlanDocument } from '../../shared/executor-report.js';
import { EXECUTOR_ENV } from '../../shared/runner-env.js';
import { SCHEMA_APPLIES_TABLE, ensureBookkeeping } from '../bookkeeping.js';
import { acquireRealmLock, connect, disconnect, failureCode, isStatementError, qualifyNames, withReadOnlySnapshot, type Db } from '../db.js';
import { lockTimeoutMs, optionalEnv, requireDigestEnv, requireEnv, requireOperationId, type Env } from '../env.js';
import { ExecutorFailure, errorMessage } from '../failure.js';
import { diffModels, summarizeDrift } from './diff.js';
import { introspect } from './introspect.js';
import { stateFingerprint, type SchemaModel } from './model.js';
import { loadDesired, provePlan, readDesiredSchema, withScratch, type DesiredSchema } from './scratch.js';
import { planStatements } from './statements.js';
import { refuseUnsupported } from './unsupported.js';


interface Comparison {
  actual: SchemaModel;
  desired: SchemaModel;
  desiredSource: DesiredSchema;
}

/** Reads the target (refusing what it cannot model) and the desired schema, then hands both to `fn`. */
async function compare<T>(env: Env, fn: (c: Comparison, scratch: Db) => Promise<T>): Promise<T> {
  const desiredSource = readDesiredSchema(requireEnv(env, 'artifactDir'));
  const targetUrl = requireEnv(env, 'dbUrl');
  const target = await connect(targetUrl, 'target');
  try {
    const actual = await withReadOnlySnapshot(target, () => readTarget(target));
    return await withScratch(target, targetUrl, optionalEnv(env, 'devUrl'), async (scratch) =>
      fn({ actual, desired: await loadDesired(scratch, desiredSource), desiredSource }, scratch));
  } finally {
    await disconnect(target);
  }
}

async function readTarget(target: Db): Promise<SchemaModel> {
  await refuseUnsupported(target, 'target');
  return introspect(target);
}

export async function observe(env: Env): Promise<ObserveReport> {
  return compare(env, async ({ actual, desired }) => {
    const drift = summarizeDrift(diffModels(actual, desired));
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

export async function plan(env: Env): Promise<PlanReport> {
  return compare(env, async ({ actual, desired, desiredSource }, scratch) => {
    const actualStateFingerprint = stateFingerprint(actual);
    const planned = planStatements(actual, desired);
    if (planned.length === 0) return { command: 'plan', outcome: 'NoChanges', actualStateFingerprint };
    await provePlan(scratch, actual, desired, planned);
    const destructiveStatements = planned.flatMap((s, index) => (s.destructive ? [{ index, reason: s.destructive }] : []));
    const document: SchemaPlanDocument = {
      formatVersion: 1,
      engine: 'postgresql',
      statements: planned.map((s) => s.sql),
      statementCount: planned.length,
      destructive: destructiveStatements.length > 0,
      destructiveStatements,
      actualStateFingerprint,
      desiredSchemaDigest: desiredSource.digest,
      desiredStateFingerprint: stateFingerprint(desired),
    };
    return { command: 'plan', outcome: 'Changes', plan: document, planContentDigest: digest(document), actualStateFingerprint };
  });
}

/**
 * Executes exactly the plan's statements in one transaction, under the realm's advisory lock, only if the
 * target still reads as the plan found it, and commits only if it then reads as the plan promised.
 */
export async function apply(env: Env): Promise<ApplyReport> {
  const operationId = requireOperationId(env);
  const coordinationDigest = requireDigestEnv(env, 'coordinationDigest');
  const timeoutMs = lockTimeoutMs(env);
  const document = readPlanDocument(requireEnv(env, 'planFile'));
  const planContentDigest = digest(document);
  let statementsExecuted = 0;
  const failed = (error: ExecutorFailure): ApplyReport =>
    ({ command: 'apply', outcome: 'failed', planContentDigest, statementsExecuted, error: error.toReport() });

  const target = await connect(requireEnv(env, 'dbUrl'), 'target');
  try {
    const lock = await acquireRealmLock(target, coordinationDigest, timeoutMs);
    try {
      await target.query('BEGIN');
      try {
        await qualifyNames(target);
        const before = await readTarget(target);
        if (stateFingerprint(before) !== document.actualStateFingerprint) {
          throw new ExecutorFailure('target_changed', 'the target schema changed after this plan was computed; plan again; nothing was changed');
        }
        for (const [i, sql] of document.statements.entries()) {
          try {
            await target.query(sql);
          } catch (err) {
            throw new ExecutorFailure(failureCode(err, 'statement_failed'),
              `statement ${i + 1} of ${document.statementCount} failed: ${errorMessage(err)}; the transaction was rolled back, nothing was changed`);
          }
          statementsExecuted += 1;
        }
        if (stateFingerprint(await introspect(target)) !== document.desiredStateFingerprint) {
          throw new ExecutorFailure('convergence_failed', 'after the plan ran, the target does not read as the desired schema; the transaction was rolled back, nothing was changed');
        }
        await ensureBookkeeping(target);
        await target.query(`INSERT INTO ${SCHEMA_APPLIES_TABLE} (operation_id, plan_content_digest, desired_schema_digest, statement_count) VALUES ($1, $2, $3, $4)`,
          [operationId, planContentDigest, document.desiredSchemaDigest, document.statementCount]);
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

type PlanWithConvergence = SchemaPlanDocument & { desiredStateFingerprint: string };

/** Reads and checks the plan document; refuses anything that is not a complete plan this executor wrote. */
export function readPlanDocument(path: string): PlanWithConvergence {
  const name = EXECUTOR_ENV.planFile;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ExecutorFailure('invalid_plan', `cannot read the plan (${name}): ${errorMessage(err)}`);
  }
  const p = (parsed ?? {}) as Partial<Record<keyof SchemaPlanDocument, unknown>>;
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
    : undefined;
  if (problem !== undefined) throw new ExecutorFailure('invalid_plan', `the plan (${name}) is not a valid schema plan: ${problem}`);
  return parsed as PlanWithConvergence;
}
