// `npx tsx bench/capacity.ts [--per-family N] [--steady-minutes M] [--batch B] [--node-option FLAG]...`: the Go operator's lab-20 profile
// (../shared/reference/anchors.md) on the local stack. N PtahSchemas and N PtahMigrations (default 10 + 10), each on
// its own database and realm, `apply: Always`, `interval: 2m`, reconciled by one compiled manager (`node
// dist/src/main.js`, info logs) behind the crash proxy. Four phases, each a window read from the cluster and /proc:
// - cold start: the manager starts with the whole fleet just created, until every resource is InSync;
// - steady: M minutes of refreshes;
// - restart: the manager SIGKILLed and started again, until it leads and every resource is InSync again;
// - change batch: B of each family moved to a new revision, until all are InSync on it.
// Per phase: Jobs created per minute (average and the busiest minute), Job done p50/p95 (creation to completion),
// manager CPU (cores) and peak RSS, API requests by method and resource; the bench process itself (the fake
// kubelet, the proxy, the watches) is reported apart.
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { V1ConfigMap, V1Job, V1Secret } from '@kubernetes/client-node';
import type { KubeObject } from '../src/shared/kube-client.js';
import { buildDist } from '../tools/stack/build.js';
import { countBy, percentile, processFigures, requestClass, type ProcessFigures } from './measure.js';
import { runOnStack } from './on-stack.js';

const say = (line: string) => process.stderr.write(`[capacity] ${line}\n`);
const { values } = parseArgs({
  options: { 'per-family': { type: 'string' }, 'steady-minutes': { type: 'string' }, batch: { type: 'string' }, 'node-option': { type: 'string', multiple: true } },
});
// Flags for the manager's node (a heap size to compare), as in scale.ts.
const nodeArgs = values['node-option'] ?? [];
const count = (v: string | undefined, fallback: number, what: string) => {
  const n = Number(v ?? fallback);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${what} must be a whole number ≥ 1, not ${v}`);
  return n;
};
const perFamily = count(values['per-family'], 10, '--per-family');
const steadyMinutes = count(values['steady-minutes'], 6, '--steady-minutes');
const batch = Math.min(perFamily, count(values.batch, 5, '--batch'));

// Migration revision k holds 0001..k+1; desired schema revision k has k columns beyond the key.
const migrationFiles = (k: number) => Object.fromEntries(Array.from({ length: k + 1 }, (_, i) => [`${String(i + 1).padStart(4, '0')}_t${i + 1}.up.sql`, `CREATE TABLE t${i + 1} (id bigserial PRIMARY KEY);\n`]));
const desiredSchema = (k: number) => `CREATE TABLE items (\n  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY${Array.from({ length: k }, (_, i) => `,\n  c${i + 1} text`).join('')}\n);\n`;

interface Resource {
  kind: 'PtahMigration' | 'PtahSchema';
  name: string;
}

type Reconciled = KubeObject & {
  status?: { phase?: string; observedGeneration?: number; activeOperation?: unknown; pendingObservation?: unknown; unresolvedRun?: unknown };
};

/** InSync on its current generation with nothing in flight, nothing owed and nothing waiting for a person. */
const converged = (r: Reconciled) => r.status?.phase === 'InSync' && r.status.observedGeneration === r.metadata?.generation &&
  !r.status.activeOperation && !r.status.pendingObservation && !r.status.unresolvedRun;

interface JobLife {
  operation: string;
  created: number;
  done?: number;
}

interface PhaseReport {
  phase: string;
  seconds: number;
  outcome: string;
  /** A fixed window: the refreshes it ended in the middle of had all finished this many seconds after it. */
  settledAfterSeconds?: number;
  jobs: { created: number; perMinute: number; busiestMinute: number; doneP50s?: number; doneP95s?: number; byOperation: Record<string, number> };
  manager: { cores: number; peakRssMiB: number; rssAtEndMiB: number };
  bench: { cores: number; rssAtEndMiB: number };
  requests: { total: number; perSecond: number; byClass: Record<string, number> };
}

await runOnStack('capacity', say, async () => {
  const { crashWorld } = await import('../test/integration/crash-world.js');
  const { SCHEMA_SAMPLE } = await import('../test/integration/schema-world.js');
  const { LEADING } = await import('../test/harness/manager-process.js');
  const { Informer } = await import('../src/controller/informer.js');
  const { sharedCluster } = await import('../tools/stack/cluster.js');
  const { sampleObjects, sampleOf, testLogger } = await import('../test/integration/operator-install.js');
  return {
    timeoutMs: (40 + steadyMinutes + perFamily) * 60_000,
    async body(tt) {
      say(`npm run build: dist/ is current (${await buildDist()} ms)`);
      const cw = await crashWorld(tt, { schemas: true, manager: { build: 'compiled', logLevel: 'info', nodeArgs } });
      const { w } = cw;
      const load = loadavg().map((l) => l.toFixed(2)).join(' ');

      // Every Job's life, from a watch of the namespace: its creation and its completion (or failure).
      const jobs = new Map<string, JobLife>();
      const jobInformer = new Informer<V1Job>({ kubeConfig: sharedCluster().kubeConfig('admin'), apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, logger: testLogger() });
      const seeJob = (job: V1Job) => {
        const uid = job.metadata?.uid;
        if (!uid) return;
        const life = jobs.get(uid) ?? { operation: job.metadata?.labels?.['operator.ptah.run/operation'] ?? '?', created: Date.parse(String(job.metadata?.creationTimestamp)) };
        const end = job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
        if (end && life.done === undefined) life.done = Date.parse(String(end.lastTransitionTime ?? job.status?.completionTime ?? new Date()));
        jobs.set(uid, life);
      };
      jobInformer.on('add', seeJob);
      jobInformer.on('update', seeJob);
      jobInformer.start();
      tt.teardown(() => jobInformer.stop());

      // The fleet: a database, Secret and first revision for each resource, all created before the manager starts.
      const samples = await sampleObjects(SCHEMA_SAMPLE);
      const schemaPolicy = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'catalog-schema-policy');
      await w.admin.create({ ...schemaPolicy, metadata: { ...schemaPolicy.metadata, namespace: w.ns } });
      const desiredSample = sampleOf<V1ConfigMap>(samples, 'ConfigMap', 'catalog-schema-r1');
      const schemaSample = sampleOf<KubeObject & { spec: Record<string, Record<string, unknown>> }>(samples, 'PtahSchema');
      const desired = (name: string, k: number) => w.admin.create<V1ConfigMap>({ ...desiredSample, metadata: { ...desiredSample.metadata, name, namespace: w.ns }, data: { 'schema.sql': desiredSchema(k) } });
      const fleet: Resource[] = [];
      for (let i = 0; i < perFamily; i += 1) {
        const mdb = await w.database(`cap-m${i}`);
        const secret = await w.installSample(mdb, `cap-m${i}-db`);
        await w.artifact(`cap-m${i}-r1`, migrationFiles(1));
        const m = await w.createMigration({ name: `cap-m${i}`, artifact: `cap-m${i}-r1`, secret, apply: 'Always', coordinationKey: `cap-m${i}` });
        await w.admin.patch(w.ref('PtahMigration', m.metadata.name!), { spec: { interval: '2m' } }, 'merge');
        fleet.push({ kind: 'PtahMigration', name: `cap-m${i}` });

        const sdb = await w.database(`cap-s${i}`);
        const s = sampleOf<V1Secret>(samples, 'Secret');
        await w.admin.create<V1Secret>({ ...s, metadata: { name: `cap-s${i}-db`, namespace: w.ns }, stringData: { url: sdb.url } });
        await desired(`cap-s${i}-r1`, 1);
        const schema = structuredClone(schemaSample);
        schema.metadata = { name: `cap-s${i}`, namespace: w.ns };
        schema.spec = {
          ...schema.spec,
          target: { ...schema.spec.target, coordinationKey: `cap-s${i}`, urlFrom: { name: `cap-s${i}-db`, key: 'url' } },
          desired: { ...schema.spec.desired, configMapRef: { name: `cap-s${i}-r1` } },
          policy: { ...schema.spec.policy, apply: 'Always' },
        };
        (schema.spec as Record<string, unknown>).interval = '2m';
        await w.admin.create(schema);
        fleet.push({ kind: 'PtahSchema', name: `cap-s${i}` });
      }
      say(`${fleet.length} resources created; load average ${load}`);

      const get = (r: Resource) => w.admin.get<Reconciled>(w.ref(r.kind, r.name));
      const allConverged = async (of: readonly Resource[] = fleet) => (await Promise.all(of.map(get))).every(converged);
      const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

      /**
       * One phase: `during` runs, then the fleet is polled every 2 s until it has converged (at most `limitMs`), or
       * for exactly `limitMs` when `fixed`; the figures cover the whole span.
       */
      async function phase(name: string, during: () => Promise<void>, limitMs: number, fixed = false): Promise<PhaseReport> {
        const started = Date.now();
        const requestsBefore = cw.proxy.requests.length;
        const benchCpu = process.cpuUsage();
        let first: ProcessFigures | undefined = cw.manager ? await processFigures(cw.manager.pid) : undefined;
        let cpuBefore = first?.cpuSeconds ?? 0;
        let cpuSpent = 0;
        let peakRss = first?.rssMiB ?? 0;
        let pid = cw.manager?.pid;
        // RSS sampled every 2 s; CPU summed over every manager process the phase saw (a restart starts a new one).
        const sample = async () => {
          if (!cw.manager) return;
          if (cw.manager.pid !== pid) {
            pid = cw.manager.pid;
            cpuBefore = 0;
          }
          const f = await processFigures(pid).catch(() => undefined);
          if (!f) return;
          first = f;
          peakRss = Math.max(peakRss, f.rssMiB);
          cpuSpent += f.cpuSeconds - cpuBefore;
          cpuBefore = f.cpuSeconds;
        };
        await during();
        let met = false;
        while (Date.now() - started < limitMs) {
          await sample();
          if (!fixed && (met = await allConverged())) break;
          await sleep(2_000);
        }
        await sample();
        const ended = Date.now();
        // A fixed window ends wherever the 2-minute refreshes stand, often with some in flight: it converged when
        // those finish (within 90 s) with nothing owed. Its figures stop at its end.
        let settledAfterSeconds: number | undefined;
        if (fixed) {
          while (!(met = await allConverged()) && Date.now() - ended < 90_000) await sleep(2_000);
          if (met) settledAfterSeconds = (Date.now() - ended) / 1000;
        }
        const seconds = (ended - started) / 1000;
        const created = [...jobs.values()].filter((j) => j.created >= started - 1_000 && j.created <= ended);
        const minutes = new Map<number, number>();
        for (const j of created) minutes.set(Math.floor((j.created - started) / 60_000), (minutes.get(Math.floor((j.created - started) / 60_000)) ?? 0) + 1);
        const done = created.filter((j) => j.done !== undefined).map((j) => (j.done! - j.created) / 1000);
        const requests = cw.proxy.requests.slice(requestsBefore);
        const bench = process.cpuUsage(benchCpu);
        const report: PhaseReport = {
          phase: name, seconds, outcome: met ? 'converged' : `not converged within ${(limitMs + (fixed ? 90_000 : 0)) / 1000} s`,
          ...(settledAfterSeconds !== undefined ? { settledAfterSeconds } : {}),
          jobs: {
            created: created.length, perMinute: created.length / (seconds / 60), busiestMinute: Math.max(0, ...minutes.values()),
            doneP50s: percentile(done, 50), doneP95s: percentile(done, 95), byOperation: countBy(created.map((j) => j.operation)),
          },
          manager: { cores: cpuSpent / seconds, peakRssMiB: peakRss, rssAtEndMiB: first?.rssMiB ?? NaN },
          bench: { cores: (bench.user + bench.system) / 1e6 / seconds, rssAtEndMiB: process.memoryUsage().rss / 1048576 },
          requests: { total: requests.length, perSecond: requests.length / seconds, byClass: countBy(requests.map((r) => requestClass(r.method, r.path))) },
        };
        say(`${name}: ${report.outcome} after ${seconds.toFixed(0)} s; ${created.length} Jobs (${report.jobs.perMinute.toFixed(1)}/min), manager ${report.manager.cores.toFixed(3)} cores, ${report.manager.peakRssMiB.toFixed(1)} MiB peak`);
        return report;
      }

      const phases: PhaseReport[] = [];
      phases.push(await phase('cold start', async () => void await cw.startManager(), 15 * 60_000));
      phases.push(await phase('steady', async () => undefined, steadyMinutes * 60_000, true));
      phases.push(await phase('restart', async () => {
        await cw.killNow();
        const next = await cw.startManager();
        await next.waitForLog(LEADING, 120_000);
      }, 10 * 60_000));
      const moved = [...fleet.filter((r) => r.kind === 'PtahMigration').slice(0, batch), ...fleet.filter((r) => r.kind === 'PtahSchema').slice(0, batch)];
      phases.push(await phase('change batch', async () => {
        for (const r of moved) {
          if (r.kind === 'PtahMigration') {
            await w.artifact(`${r.name}-r2`, migrationFiles(2));
            await w.admin.patch(w.ref('PtahMigration', r.name), { spec: { artifact: { configMapRef: { name: `${r.name}-r2` } } } }, 'merge');
          } else {
            await desired(`${r.name}-r2`, 2);
            await w.admin.patch(w.ref('PtahSchema', r.name), { spec: { desired: { configMapRef: { name: `${r.name}-r2` } } } }, 'merge');
          }
        }
      }, 15 * 60_000));

      const report = { when: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavgBefore: load, perFamily, steadyMinutes, batch, phases };
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      const failed = phases.filter((p) => p.outcome !== 'converged');
      tt.same(failed.map((p) => p.phase), [], 'every phase converged');
      return failed.length === 0;
    },
  };
}, { runner: 'compiled' });
