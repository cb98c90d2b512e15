// What one API request costs the process that sends it, on this machine: the floor under the manager's CPU per
// Job (issue #10). A child process with nothing else in it GETs a ConfigMap of each size from the real API server
// of a fresh stack, one request at a time, through restClient (src/shared/kube-client.ts), through a bare
// node:https request with the same keep-alive agent and credentials, and through one HTTP/2 session (client-go's
// transport); its own CPU time (process.cpuUsage) over N requests, divided by N. JSON.parse of the same answer
// alone is printed beside them. Rounds alternate the clients. See bench/README.md.
//   npx tsx bench/request-floor.ts [--requests 1000] [--rounds 3]
import { fork } from 'node:child_process';
import http2 from 'node:http2';
import https from 'node:https';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { loadKubeConfig } from '../src/shared/kubeconfig.js';
import { restClient, type ResourceRef } from '../src/shared/kube-client.js';

const SIZES = [1_000, 8_000, 64_000];
const WARMUP = 300;
const { values } = parseArgs({ options: { requests: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '3' }, child: { type: 'string' } } });
const requests = Number(values.requests);
const rounds = Number(values.rounds);
if (!Number.isSafeInteger(requests) || requests < 1 || requests > 100_000) throw new Error('--requests takes a whole number from 1 to 100000');
if (!Number.isSafeInteger(rounds) || rounds < 1 || rounds > 20) throw new Error('--rounds takes a whole number from 1 to 20');

const refOf = (size: number): ResourceRef => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: `floor-${size}` });

/** The child: measures each client on each size and prints one line per measurement. */
async function measureIn(kubeconfig: string): Promise<void> {
  const kc = loadKubeConfig(kubeconfig);
  const client = await restClient(kc);
  const tls: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(tls);
  const server = new URL(kc.getCurrentCluster()!.server);
  const agent = new https.Agent({ keepAlive: true, maxSockets: 16 });
  const session = http2.connect(server, { ca: tls.ca, cert: tls.cert, key: tls.key });
  const read = (send: (done: (text: string) => void, fail: (e: Error) => void) => void) => new Promise<unknown>((resolve, reject) => {
    send((text) => resolve(JSON.parse(text)), reject);
  });
  const bareHttps = (path: string) => () => read((done, fail) => {
    const req = https.request({ ...tls, agent, hostname: server.hostname, port: server.port, method: 'GET', path, headers: { accept: 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
    });
    req.on('error', fail);
    req.end();
  });
  const overHttp2 = (path: string) => () => read((done, fail) => {
    const req = session.request({ ':method': 'GET', ':path': path, accept: 'application/json' });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
    req.on('error', fail);
    req.end();
  });
  const cpuPer = async (f: () => Promise<unknown>): Promise<number> => {
    for (let i = 0; i < WARMUP; i++) await f();
    const start = process.cpuUsage();
    for (let i = 0; i < requests; i++) await f();
    const used = process.cpuUsage(start);
    return (used.user + used.system) / requests;
  };
  for (let round = 1; round <= rounds; round++) {
    for (const size of SIZES) {
      const ref = refOf(size);
      const path = `/api/v1/namespaces/default/configmaps/${ref.name}`;
      const text = JSON.stringify(await client.get(ref));
      const row = {
        round,
        size,
        answerBytes: Buffer.byteLength(text),
        restClient: await cpuPer(() => client.get(ref)),
        https: await cpuPer(bareHttps(path)),
        http2: await cpuPer(overHttp2(path)),
        parse: await cpuPer(async () => JSON.parse(text)),
      };
      process.send!(row);
    }
  }
  session.close();
  agent.destroy();
}

type Row = { round: number; size: number; answerBytes: number; restClient: number; https: number; http2: number; parse: number };

async function main(): Promise<void> {
  const { startStack } = await import('../tools/stack/stack.js');
  const say = (line: string) => process.stderr.write(`[request-floor] ${line}\n`);
  const stack = await startStack({ postgres: false, log: say });
  try {
    const client = await restClient(loadKubeConfig(stack.controlPlane.kubeconfigs.admin));
    for (const size of SIZES) {
      const ref = refOf(size);
      await client.create({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace }, data: { x: 'a'.repeat(size) } });
    }
    console.log(`node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), loadavg before ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log(`${requests} GETs per cell after ${WARMUP} to warm up, one at a time; client CPU µs per request (user + system)`);
    console.log('round  object  answer B  restClient  bare https  http2  JSON.parse alone');
    const rows: Row[] = [];
    await new Promise<void>((resolve, reject) => {
      const child = fork(fileURLToPath(import.meta.url), ['--child', stack.controlPlane.kubeconfigs.admin, '--requests', String(requests), '--rounds', String(rounds)], { execArgv: ['--import', 'tsx'] });
      const deadline = setTimeout(() => child.kill('SIGKILL'), 15 * 60_000);
      child.on('message', (row: Row) => {
        rows.push(row);
        const us = (n: number) => n.toFixed(0).padStart(10);
        console.log(`${String(row.round).padStart(5)}  ${String(row.size).padStart(6)}  ${String(row.answerBytes).padStart(8)}  ${us(row.restClient)}  ${us(row.https)}  ${us(row.http2).slice(-5)}  ${us(row.parse)}`);
      });
      child.on('exit', (code) => {
        clearTimeout(deadline);
        if (code === 0 && rows.length === rounds * SIZES.length) resolve();
        else reject(new Error(`the measuring child ended with ${code} after ${rows.length} rows`));
      });
    });
    console.log(`loadavg after ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    await stack.stop();
  }
}

if (values.child) await measureIn(values.child);
else await main();
