// What the catalog witness (src/executor/schema/catalog.ts) costs a plan: reading the catalog's facts about a
// schema of N generated tables, against reading the model (introspect) of the same database in the same run.
//   npx tsx bench/catalog-witness.ts [--tables 200] [--runs 5]
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { connect, disconnect, qualifyNames } from '../src/executor/db.js';
import { readCatalogFacts } from '../src/executor/schema/catalog.js';
import { introspect } from '../src/executor/schema/introspect.js';
import { createTestDatabase, startPostgres } from '../tools/stack/postgres.js';

const { values } = parseArgs({ options: { tables: { type: 'string', default: '200' }, runs: { type: 'string', default: '5' } } });
const tables = Number(values.tables);
const runs = Number(values.runs);

/** Six statements a table: the table with its keys, two indexes, a comment, a grant-free view every tenth table. */
function schema(n: number): { sql: string; statements: number } {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const fk = i > 0 ? `, parent_id bigint REFERENCES public.t${i - 1} (id)` : '';
    out.push(`CREATE TABLE public.t${i} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL, n integer CHECK (n >= 0), at timestamptz DEFAULT now()${fk})`);
    out.push(`CREATE INDEX t${i}_name ON public.t${i} (lower(name))`);
    out.push(`CREATE UNIQUE INDEX t${i}_at ON public.t${i} (at, id) WHERE n > 0`);
    out.push(`COMMENT ON TABLE public.t${i} IS 'table ${i}'`);
    out.push(`COMMENT ON COLUMN public.t${i}.name IS 'name of ${i}'`);
    out.push(i % 10 === 0 ? `CREATE VIEW public.v${i} AS SELECT id, name FROM public.t${i}` : `ALTER TABLE public.t${i} ALTER COLUMN n SET DEFAULT ${i}`);
  }
  return { sql: out.join(';\n'), statements: out.length };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const server = await startPostgres();
try {
  const db = await createTestDatabase(server.url, 'bench_catalog');
  const { sql, statements } = schema(tables);
  const client = await connect(db.url, 'target');
  try {
    await client.query(sql);
    const time = async (read: () => Promise<unknown>) => {
      const ms: number[] = [];
      for (let i = 0; i < runs; i++) {
        await client.query('BEGIN');
        await qualifyNames(client);
        const started = performance.now();
        await read();
        ms.push(performance.now() - started);
        await client.query('ROLLBACK');
      }
      return median(ms);
    };
    const model = await time(() => introspect(client));
    const facts = await time(() => readCatalogFacts(client));
    await client.query('BEGIN');
    await qualifyNames(client);
    const count = (await readCatalogFacts(client)).length;
    await client.query('ROLLBACK');
    console.log(JSON.stringify({ tables, statements, bytes: Buffer.byteLength(sql), facts: count, runs, modelMs: Math.round(model), factsMs: Math.round(facts), ratio: Number((facts / model).toFixed(2)) }));
  } finally {
    await disconnect(client);
    await db.drop();
  }
} finally {
  await server.stop();
}
