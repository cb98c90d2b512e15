// The generated corpus (schema-evolutions.ts): seeded random schemas, each evolved step by step with random
// changes over the kinds the engine models. Every step plans, applies and plans again to no changes, and the
// target reads, in the catalog and through pg_dump, exactly as a database built from that step's SQL. The suite
// runs a slice; bench/schema-evolutions.ts runs hundreds and times them.
import t from 'tap';
import { evolve, evolutionRoles, runEvolutions } from './schema-evolutions.js';

const SEEDS = [11, 23, 47];
const STEPS = 12;
/** Two to six changes a step, more than the bench's one to three: a step costs the same, and the slice reaches more kinds. */
const CHANGES = (rng: () => number) => 2 + Math.floor(rng() * 5);

// Grants and policies name roles, which are the server's: made once for the run, dropped after its databases.
const made = await evolutionRoles();
t.teardown(made.drop);

for (const seed of SEEDS) {
  t.test(`seed ${seed}: ${STEPS} evolutions converge`, async (t) => {
    let steps = 0;
    await runEvolutions(t, made.roles, seed, STEPS, (s) => {
      steps += 1;
      const where = `seed ${seed} step ${s.step} (${s.outcome})`;
      t.ok(s.applied, `${where}: planned and applied`, { sql: s.sql });
      if (!s.applied) return;
      t.ok(s.secondPlanEmpty, `${where}: a second plan has no changes`, { sql: s.sql });
      t.ok(s.catalogEqual, `${where}: the catalog reads as a database built from the SQL`, { sql: s.sql });
      t.ok(s.dumpEqual, `${where}: pg_dump prints it as a database built from the SQL`, { sql: s.sql });
    }, (rng, schema) => evolve(rng, schema, CHANGES(rng)));
    t.equal(steps, STEPS, 'every step ran');
  });
}
