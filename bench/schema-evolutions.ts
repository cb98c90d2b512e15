// The generated corpus at scale (test/integration/schema-evolutions.ts): hundreds of seeded random evolutions, each
// planned, applied, planned again and held to the catalog and to pg_dump, with plan and apply times against the
// plan's statement count; then one schema grown step by step past 1 MiB of SQL.
//   npx tsx bench/schema-evolutions.ts [--first-seed 1] [--seeds 25] [--steps 12] [--grow-to 1048576] [--grow-by 400]
import { parseArgs } from 'node:util';
import { startPostgres } from '../tools/stack/postgres.js';
import { evolutionRoles, grow, runEvolutions, type EvolutionStep } from '../test/integration/schema-evolutions.js';

const { values } = parseArgs({ options: {
  'first-seed': { type: 'string', default: '1' }, seeds: { type: 'string', default: '25' }, steps: { type: 'string', default: '12' },
  'grow-to': { type: 'string', default: String(1024 * 1024) }, 'grow-by': { type: 'string', default: '400' },
} });

const server = await startPostgres();
process.env.PTAH_TEST_PG_URL = server.url;
/** Ends the growth series once the schema is large enough. */
class GrowthDone extends Error {}
const cleanups: (() => unknown)[] = [];
const teardown = { teardown: (fn: () => unknown) => void cleanups.push(fn) };
const failed = (s: EvolutionStep) => !(s.applied && s.secondPlanEmpty && s.catalogEqual && s.dumpEqual);
const round = (ms: number) => Math.round(ms);
const made = await evolutionRoles();

try {
  const steps: EvolutionStep[] = [];
  const first = Number(values['first-seed']);
  for (let seed = first; seed < first + Number(values.seeds); seed++) await runEvolutions(teardown, made.roles, seed, Number(values.steps), (s) => steps.push(s));
  const bad = steps.filter(failed);
  const changes = steps.filter((s) => s.statements > 0);
  const buckets = [[1, 5], [6, 20], [21, 80], [81, Infinity]] as const;
  const median = (xs: number[]) => ([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0);
  console.log(JSON.stringify({ evolutions: steps.length, withChanges: changes.length, failed: bad.length }));
  for (const [low, high] of buckets) {
    const inBucket = changes.filter((s) => s.statements >= low && s.statements <= high);
    if (inBucket.length === 0) continue;
    console.log(JSON.stringify({ statements: `${low}-${high === Infinity ? '' : high}`, steps: inBucket.length,
      planMsMedian: round(median(inBucket.map((s) => s.planMs))), applyMsMedian: round(median(inBucket.map((s) => s.applyMs))) }));
  }
  for (const s of bad.slice(0, 3)) console.log(JSON.stringify({ failedSeed: s.seed, step: s.step, outcome: s.outcome }));

  // Growth: each step adds --grow-by tables to the schema, until its SQL passes --grow-to bytes.
  let lastBytes = 0;
  await runEvolutions(teardown, made.roles, 9001, 1000, (s) => {
    lastBytes = Buffer.byteLength(s.sql);
    console.log(JSON.stringify({ grow: true, bytes: lastBytes, statements: s.statements, planMs: round(s.planMs), applyMs: round(s.applyMs), converged: !failed(s) }));
    if (lastBytes >= Number(values['grow-to'])) throw new GrowthDone();
  }, (rng, schema) => grow(rng, schema, Number(values['grow-by']))).catch((err: unknown) => { if (!(err instanceof GrowthDone)) throw err; });
} finally {
  for (const fn of cleanups.reverse()) await fn();
  await made.drop();
  await server.stop();
}

