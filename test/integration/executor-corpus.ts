// The corpus of realistic schemas (test/fixtures/schemas/<case>/NN-<label>.sql, with expect.json), run in shards
// (executor-corpus-N.test.ts) so that its cases run side by side rather than as one long file: each version in
// turn is planned, applied and planned again against one target, which must then report no changes, and the
// target must read, straight from the catalog and through pg_dump, exactly as a database built from that version's file. Each plan's
// classification (destructive reasons, privilege change, locking reasons, transactional) is what the case expects,
// and a version the engine cannot model is refused with its kinds named, the target untouched.
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ApplyReport, PlanReport } from '../../src/shared/executor-report.js';
import type { ClassifiedPlanDocument } from '../../src/executor/schema/commands.js';
import { sharedPostgresUrl } from '../../tools/stack/postgres.js';
import { COORDINATION_DIGEST, artifactDir, builtFrom, catalogFacts, jsonFile, operationId, queryOnce, roleDatabase, runExecutor, schemaDump } from './executor-helpers.js';

const CORPUS = fileURLToPath(new URL('../fixtures/schemas', import.meta.url));

interface Step {
  destructive?: string[];
  privilege?: boolean;
  locking?: string[];
  transactional?: boolean;
  /** The version is refused with this error code, its message naming these kinds. */
  refused?: string;
  kinds?: string[];
}

const unique = (values: readonly string[]) => [...new Set(values)].sort();
/** The cases whose index in the sorted corpus is `shard` modulo `shards`, each on its own target. */
export function corpusTests(t: Test, shard: number, shards: number): void {
  const suffix = randomBytes(4).toString('hex');
  const roles = { reader: `corpus_reader_${suffix}`, writer: `corpus_writer_${suffix}` };
  const withRoles = (sql: string) => sql.replace(/\{\{(reader|writer)\}\}/g, (_, r: keyof typeof roles) => `"${roles[r]}"`);

  t.before(async () => {
    for (const role of Object.values(roles)) await queryOnce(sharedPostgresUrl(), `CREATE ROLE "${role}" NOLOGIN`);
  });
  t.teardown(async () => {
    for (const role of Object.values(roles)) await queryOnce(sharedPostgresUrl(), `DROP ROLE IF EXISTS "${role}"`);
  });

  const all = readdirSync(CORPUS).sort();
  t.ok(all.length >= 20, 'the corpus holds its cases');
  const cases = all.filter((_, i) => i % shards === shard);
  t.ok(cases.length > 0, `shard ${shard + 1} of ${shards} holds cases`);

  for (const name of cases) {
    t.test(name, async (t) => {
      const dir = join(CORPUS, name);
      const steps = (JSON.parse(readFileSync(join(dir, 'expect.json'), 'utf8')) as { steps: Step[] }).steps;
      const versions = readdirSync(dir).filter((f) => f.endsWith('.sql')).sort();
      t.equal(steps.length, versions.length, 'one expectation per version');
      const db = await roleDatabase(t, 'corpus');
      for (const [i, file] of versions.entries()) {
        const step = steps[i]!;
        const sql = withRoles(readFileSync(join(dir, file), 'utf8'));
        const env = { dbUrl: db.url, artifactDir: artifactDir(t, { 'schema.sql': sql }) };
        const factsBefore = await catalogFacts(db.url);
        const started = Date.now();
        const planned = await runExecutor<PlanReport>('plan', env);
        const planMs = Date.now() - started;
        if (step.refused !== undefined) {
          t.equal(planned.error?.code, step.refused, `${file} is refused`);
          for (const kind of step.kinds ?? []) t.match(planned.error?.message, kind, `${file}: the refusal names ${kind}`);
          t.same(await catalogFacts(db.url), factsBefore, `${file}: nothing was touched`);
          continue;
        }
        if (!t.equal(planned.outcome, 'Changes', `${file} plans changes ${JSON.stringify(planned.error)}`)) break;
        const plan = planned.plan as ClassifiedPlanDocument;
        t.same(unique(plan.destructiveStatements.map((d) => d.reason)), step.destructive ?? [], `${file}: destructive reasons`);
        t.equal(plan.privilegeChanging, step.privilege ?? false, `${file}: privilege-changing`);
        if (step.locking !== undefined) t.same(unique(plan.lockingStatements.map((l) => l.reason)), step.locking, `${file}: locking reasons`);
        t.equal(plan.transactional, step.transactional ?? true, `${file}: transactional`);

        const applyStarted = Date.now();
        const applied = await runExecutor<ApplyReport>('apply',
          { dbUrl: db.url, planFile: jsonFile(t, plan), operationId: operationId(`${name}-${i}`), coordinationDigest: COORDINATION_DIGEST });
        if (!t.equal(applied.outcome, 'applied', `${file} applies ${JSON.stringify(applied.error)} ${JSON.stringify(plan.statements)}`)) break;
        t.comment(`${name}/${file}: ${plan.statementCount} statements, plan ${planMs} ms, apply ${Date.now() - applyStarted} ms`);

        const again = await runExecutor<PlanReport>('plan', env);
        t.same({ outcome: again.outcome, error: again.error }, { outcome: 'NoChanges', error: undefined }, `${file}: a second plan has no changes`);

        // The witness: a database built from the file itself, by the same role, reads exactly as the target.
        const witness = await builtFrom(db, `w${i}`, sql);
        t.same(await catalogFacts(db.url), await catalogFacts(witness), `${file}: the target's catalog equals a database built from the file`);
        t.same(await schemaDump(db.url), await schemaDump(witness), `${file}: pg_dump prints the target as it prints a database built from the file`);
      }
    });
  }
}
