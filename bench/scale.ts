// `npx tsx bench/scale.ts [--resources N] [--idle-seconds S] [--node-option FLAG]...`: the manager with N resources and its informers
// synced, no Jobs (issue #10: "N = 1,000 resources: manager RSS ≤ 100 MiB, and the time for one reconcile sweep").
// N/2 PtahMigrations and N/2 PtahSchemas, all `suspend: true` (each pass reads nothing and runs nothing; it only
// reports Suspended), are created in one namespace while no manager runs. Then the compiled manager
// (`node dist/src/main.js`, info logs, behind the crash proxy that counts its requests) starts, and the run reports:
// - the sweep: from the manager leading to every resource reporting Suspended for its generation;
// - the manager's RSS and peak (VmRSS, VmHWM) then, and after S seconds idle, with its CPU over both spans;
// - its API requests in each span by method and resource, from the proxy;
// - at each of those moments, its V8 heap by space (used of allocated) and external memory, from its /metrics, so
//   the RSS can be told apart into live objects, garbage not yet collected, and what is not heap at all.
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { KubeObject } from '../src/shared/kube-client.js';
import { buildDist } from '../tools/stack/build.js';
import { countBy, processFigures, requestClass } from './measure.js';
import { runOnStack } from './on-stack.js';

const say = (line: string) => process.stderr.write(`[scale] ${line}\n`);
const MiB = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/** The heap figures of prom-client's default metrics in a /metrics text, in MiB: per space `used / allocated`. */
function heapOf(metrics: string): Record<string, string | number> {
  const value = (name: string, space?: string) => {
    const line = metrics.split('\n').find((l) => l.startsWith(space ? `${name}{space="${space}"}` : `${name} `));
    return line ? Number(line.split(' ').pop()) : NaN;
  };
  const spaces = [...metrics.matchAll(/^nodejs_heap_space_size_total_bytes\{space="([^"]+)"\}/gm)].map((m) => m[1]!);
  return {
    heap: `${MiB(value('nodejs_heap_size_used_bytes'))} / ${MiB(value('nodejs_heap_size_total_bytes'))}`,
    external: MiB(value('nodejs_external_memory_bytes')),
    ...Object.fromEntries(spaces.map((space) => [space, `${MiB(value('nodejs_heap_space_size_used_bytes', space))} / ${MiB(value('nodejs_heap_space_size_total_bytes', space))}`])),
  };
}
const { values } = parseArgs({ options: { resources: { type: 'string' }, 'idle-seconds': { type: 'string' }, 'node-option': { type: 'string', multiple: true } } });
// Flags for the manager's node (heap sizes to try), before its entry.
const nodeArgs = values['node-option'] ?? [];
const resources = Number(values.resources ?? 1000);
const idleSeconds = Number(values['idle-seconds'] ?? 120);
if (!Number.isInteger(resources) || resources < 2) throw new Error(`--resources must be an integer ≥ 2, not ${values.resources}`);
if (!Number.isFinite(idleSeconds) || idleSeconds < 0) throw new Error(`--idle-seconds must be a number ≥ 0, not ${values['idle-seconds']}`);

await runOnStack('scale', say, async () => {
  const { crashWorld } = await import('../test/integration/crash-world.js');
  const { sampleObjects, sampleOf } = await import('../test/integration/operator-install.js');
  const { SAMPLE } = await import('../test/integration/migration-world.js');
  const { SCHEMA_SAMPLE } = await import('../test/integration/schema-world.js');
  const { LEADING } = await import('../test/harness/manager-process.js');
  return {
    timeoutMs: (30 + idleSeconds / 60 + resources / 50) * 60_000,
    async body(tt) {
      say(`npm run build: dist/ is current (${await buildDist()} ms)`);
      const cw = await crashWorld(tt, { schemas: true, manager: { build: 'compiled', logLevel: 'info', nodeArgs } });
      const { w } = cw;
      const migration = sampleOf<KubeObject & { spec: { suspend?: boolean } }>(await sampleObjects(SAMPLE), 'PtahMigration');
      const schema = sampleOf<KubeObject & { spec: { suspend?: boolean } }>(await sampleObjects(SCHEMA_SAMPLE), 'PtahSchema');
      const objects = Array.from({ length: resources }, (_, i) => {
        const o = structuredClone(i % 2 ? schema : migration);
        o.metadata = { name: `${i % 2 ? 's' : 'm'}-${String(i).padStart(5, '0')}`, namespace: w.ns };
        o.spec.suspend = true;
        return o;
      });
      const created = Date.now();
      for (let i = 0; i < objects.length; i += 16) await Promise.all(objects.slice(i, i + 16).map((o) => w.admin.create(o)));
      say(`${resources} resources created in ${((Date.now() - created) / 1000).toFixed(1)} s; starting the manager${nodeArgs.length ? ` (node ${nodeArgs.join(' ')})` : ''}`);

      const load = loadavg().map((l) => l.toFixed(2)).join(' ');
      const manager = await cw.startManager();
      const leading = await manager.waitForLog(LEADING, 120_000);
      const atLead = await processFigures(manager.pid);
      const heapAtLead = heapOf(await cw.managerMetrics());
      const requestsBefore = cw.proxy.requests.length;
      // By the Ready condition's observedGeneration, which both families set: before 995ce0c a suspended PtahSchema
      // recorded no status.observedGeneration (the runs in bench/README.md predate that).
      const suspended = (r: KubeObject & { status?: { phase?: string; conditions?: { type: string; observedGeneration?: number }[] } }) =>
        r.status?.phase === 'Suspended' && r.status.conditions?.find((c) => c.type === 'Ready')?.observedGeneration === r.metadata?.generation;
      let swept = 0;
      let sweptAt = 0;
      while (Date.now() - leading < resources * 1_000) {
        const all = [...await w.admin.list<KubeObject>(migration.apiVersion!, 'PtahMigration', w.ns), ...await w.admin.list<KubeObject>(schema.apiVersion!, 'PtahSchema', w.ns)];
        swept = all.filter(suspended).length;
        if (Math.floor((Date.now() - leading) / 10_000) !== Math.floor((Date.now() - leading - 1_000) / 10_000)) {
          const waiting = all.find((r) => !suspended(r));
          say(`${swept} of ${all.length} listed report Suspended${waiting ? `; ${waiting.metadata?.name} shows ${JSON.stringify((waiting as { status?: unknown }).status ?? {}).slice(0, 200)}` : ''}`);
        }
        if (swept === resources) {
          sweptAt = Date.now();
          break;
        }
        await new Promise((r) => setTimeout(r, 1_000));
      }
      const afterSweep = await processFigures(manager.pid);
      const heapAfterSweep = heapOf(await cw.managerMetrics());
      const sweepRequests = cw.proxy.requests.slice(requestsBefore);
      await new Promise((r) => setTimeout(r, idleSeconds * 1_000));
      const afterIdle = await processFigures(manager.pid);
      const heapAfterIdle = heapOf(await cw.managerMetrics());
      const idleRequests = cw.proxy.requests.slice(requestsBefore + sweepRequests.length);

      const sweepSeconds = (sweptAt - leading) / 1000;
      const report = {
        when: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavgBefore: load, resources,
        sweep: sweptAt ? { seconds: sweepSeconds, managerCpuSeconds: afterSweep.cpuSeconds - atLead.cpuSeconds, resourcesPerSecond: resources / sweepSeconds } : { notFinished: `${swept} of ${resources} reported Suspended` },
        rssMiB: { atLeading: atLead.rssMiB, afterSweep: afterSweep.rssMiB, afterIdle: afterIdle.rssMiB, peak: afterIdle.peakMiB },
        heapMiB: { atLeading: heapAtLead, afterSweep: heapAfterSweep, afterIdle: heapAfterIdle },
        idle: { seconds: idleSeconds, managerCores: idleSeconds ? (afterIdle.cpuSeconds - afterSweep.cpuSeconds) / idleSeconds : 0 },
        requests: {
          sweep: { total: sweepRequests.length, byClass: countBy(sweepRequests.map((r) => requestClass(r.method, r.path))) },
          idle: { total: idleRequests.length, byClass: countBy(idleRequests.map((r) => requestClass(r.method, r.path))) },
        },
      };
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      tt.equal(swept, resources, 'every resource was reconciled in the sweep');
      return swept === resources;
    },
  };
});
