// DESIGN §8, webhook: Job-create admission over HTTPS (the real buildServer, jobclaim.match and the rebuild, its
// uncached reads served from memory) as a ratio to a bare Fastify HTTPS endpoint that answers `allowed: true`,
// both driven in the same run by the same bounded load from a child process. See bench/README.md.
//   npx tsx bench/webhook.ts [--connections 16] [--warmup 1000] [--requests 10000] [--denied]
import { fork } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { WEBHOOK_PATHS } from '../src/shared/api/webhooks.js';
import type { AdmissionReview } from '../src/webhook/admission.js';
import { BODY_LIMIT } from '../src/webhook/server.js';
import { harness } from '../test/harness/webhook.js';
import { install, world } from '../test/harness/webhook-world.js';
import { jobCreateReview } from '../test/unit/job-create-review.js';
import type { LoadJob, LoadResult } from './load.js';

const ROUTE = WEBHOOK_PATHS.controllerWrite;
const UID_TOKEN = '@@uid@@';
/** The load client gives up after this long, whatever happens to the servers. */
const CLIENT_DEADLINE_MS = 5 * 60_000;

interface Options {
  connections: number;
  warmup: number;
  requests: number;
  denied: boolean;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '16' },
      warmup: { type: 'string', default: '1000' },
      requests: { type: 'string', default: '10000' },
      denied: { type: 'boolean', default: false },
    },
  });
  const count = (name: 'connections' | 'warmup' | 'requests', min: number): number => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number of at least ${min}, not "${values[name]}"`);
    return n;
  };
  return { connections: count('connections', 1), warmup: count('warmup', 0), requests: count('requests', 1), denied: values.denied };
}

/**
 * The manager's CREATE of the Job a schema Apply claim builds (the costliest create: owner and plan are read and
 * the Job rebuilt), or with --denied the same Job under a name no claim reserves (refused after the owner read).
 */
function jobCreate(denied: boolean) {
  const w = world('schema', 'Apply');
  const body = jobCreateReview(w, { uid: UID_TOKEN, ...(denied ? { name: 'ptah-unclaimed-job' } : {}) });
  return { world: w, body: JSON.stringify(body) };
}

/** What one target's load measured, and the CPU time this process (the servers) spent during its timed requests. */
interface Measured extends LoadResult {
  cpuMicros: number;
}

/** Runs one load job in a fresh child process and returns what it measured. */
function measure(job: LoadJob): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const child = fork(new URL('./load.ts', import.meta.url), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let answered = false;
    let cpuAtStart: NodeJS.CpuUsage | undefined;
    child.on('message', (m: { timed?: true; result?: LoadResult; error?: string }) => {
      if (m.timed) {
        cpuAtStart = process.cpuUsage();
        return;
      }
      answered = true;
      const cpu = process.cpuUsage(cpuAtStart);
      if (m.result) resolve({ ...m.result, cpuMicros: cpu.user + cpu.system });
      else reject(new Error(`the load client failed: ${m.error}`));
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (!answered) reject(new Error(`the load client exited (${signal ?? `code ${code}`}) without a result`));
    });
    child.send(job);
  });
}

const ms = (x: number) => x.toFixed(2).padStart(8);
/** The servers' CPU time (user + system, every thread of this process) per timed request, microseconds. */
const cpuPerRequest = (m: Measured) => m.cpuMicros / m.requests;
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');

async function main(): Promise<void> {
  const opts = options();
  const { world: w, body } = jobCreate(opts.denied);

  const webhook = await harness(); // the real buildServer over a freshly generated certificate, MemoryReader inside
  install(webhook.reader, w);
  const { cert, key } = webhook.certificate.current;
  const bare = Fastify({ https: { key, cert, minVersion: 'TLSv1.2' }, logger: false, bodyLimit: BODY_LIMIT });
  bare.post('/*', async (req) => ({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid: (req.body as AdmissionReview).request.uid, allowed: true },
  }));

  try {
    const ca = await readFile(webhook.files.caCert, 'utf8');
    const base = { ca, body, uidToken: UID_TOKEN, connections: opts.connections, warmup: opts.warmup, requests: opts.requests, deadlineMs: CLIENT_DEADLINE_MS };
    const targets = [
      { name: 'bare', url: `${await bare.listen({ port: 0, host: '127.0.0.1' })}${ROUTE}`, expectAllowed: true },
      { name: 'webhook', url: `${await webhook.app.listen({ port: 0, host: '127.0.0.1' })}${ROUTE}`, expectAllowed: !opts.denied },
    ];

    console.log(`Job CREATE admission, ${opts.denied ? 'denied (a Job no claim names)' : 'allowed (the Job a schema Apply claim names)'}; body ${Buffer.byteLength(body)} bytes`);
    console.log(`node ${process.version}, ${cpus().length} CPUs, loadavg ${load()}`);
    console.log(`${opts.connections} keep-alive connections, ${opts.warmup} warm-up + ${opts.requests} timed requests per target\n`);
    console.log('target      req/s   p50 ms   p90 ms   p99 ms  errors  server CPU us/req');

    const results = new Map<string, Measured>();
    for (const target of targets) {
      const result = await measure({ ...base, url: target.url, expectAllowed: target.expectAllowed });
      results.set(target.name, result);
      const rps = result.requests / result.seconds;
      console.log(
        `${target.name.padEnd(8)} ${rps.toFixed(0).padStart(8)} ${ms(result.p50)} ${ms(result.p90)} ${ms(result.p99)} ${String(result.errors).padStart(7)} ${cpuPerRequest(result).toFixed(0).padStart(18)}`,
      );
      for (const sample of result.errorSamples) console.log(`  error: ${sample}`);
      if (result.errors > 0) process.exitCode = 1;
    }

    const b = results.get('bare')!;
    const h = results.get('webhook')!;
    const throughput = b.seconds / h.seconds; // same request count, so the ratio of requests/s
    console.log(`\nwebhook/bare: throughput ${throughput.toFixed(3)}x, p99 ${(h.p99 / b.p99).toFixed(2)}x, server CPU per request ${(cpuPerRequest(h) / cpuPerRequest(b)).toFixed(2)}x`);
    console.log(`uncached reads served per webhook request: ${(webhook.reader.reads.length / (opts.warmup + opts.requests)).toFixed(2)}`);
    console.log(`loadavg after: ${load()}`);
  } finally {
    await bare.close();
    await webhook.close();
  }
}

main().catch((e: Error) => {
  console.error(`bench/webhook: ${e.message}`);
  process.exitCode = 1;
});
