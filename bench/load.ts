// The load client of bench/webhook.ts, run in a child process (fork) so its CPU is not the server's event loop.
// Closed loop: `connections` keep-alive HTTPS connections, each with one request in flight; a warm-up, then a fixed
// number of timed requests. Every answer must be HTTP 200 and an AdmissionReview response for the request's uid
// with the expected `allowed`; anything else is counted as an error. The child exits by itself, at the latest
// when its deadline passes.
import https from 'node:https';

export interface LoadJob {
  url: string;
  /** PEM of the CA that signed the server's certificate. */
  ca: string;
  /** The AdmissionReview JSON; every occurrence of `uidToken` is replaced by a fresh uid per request. */
  body: string;
  uidToken: string;
  connections: number;
  warmup: number;
  requests: number;
  expectAllowed: boolean;
  deadlineMs: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  /** Latency percentiles of the timed requests, milliseconds. */
  p50: number;
  p90: number;
  p99: number;
  /** Wrong or failed answers, warm-up included. */
  errors: number;
  /** The first few distinct error descriptions. */
  errorSamples: string[];
}

const REQUEST_TIMEOUT_MS = 10_000;
const MAX_ERROR_SAMPLES = 5;

interface Answer {
  status: number;
  text: string;
}

function post(agent: https.Agent, url: URL, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Why this answer is not the expected one, or undefined when it is. */
function problemWith(answer: Answer, uid: string, expectAllowed: boolean): string | undefined {
  if (answer.status !== 200) return `HTTP ${answer.status}: ${answer.text.slice(0, 300)}`;
  let response: { uid?: unknown; allowed?: unknown; status?: { message?: unknown } } | undefined;
  try {
    response = (JSON.parse(answer.text) as { response?: typeof response }).response;
  } catch {
    return `the answer is not JSON: ${answer.text.slice(0, 300)}`;
  }
  if (response?.uid !== uid) return `the answer is for uid ${String(response?.uid)}, not ${uid}`;
  if (response.allowed !== expectAllowed) return `allowed=${String(response.allowed)} (expected ${expectAllowed}): ${String(response.status?.message ?? 'no message')}`;
  return undefined;
}

/** Nearest-rank percentile of sorted values. */
const percentile = (sorted: Float64Array, p: number): number => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

/** `onTimed` is called as the timed requests start (the parent then starts counting its CPU time). */
export async function runLoad(job: LoadJob, onTimed: () => void = () => {}): Promise<LoadResult> {
  const url = new URL(job.url);
  const agent = new https.Agent({ keepAlive: true, maxSockets: job.connections, ca: job.ca });
  const [head, ...tail] = job.body.split(job.uidToken);
  if (tail.length === 0) throw new Error(`the request body does not contain the uid token ${job.uidToken}`);
  let sent = 0;
  let errors = 0;
  const errorSamples = new Set<string>();

  // Runs `count` requests over the connections; latency of request i goes to latencies[i] when given.
  async function phase(count: number, latencies?: Float64Array): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < count) {
        const i = next++;
        const uid = `bench-${sent++}`;
        const started = process.hrtime.bigint();
        let problem: string | undefined;
        try {
          problem = problemWith(await post(agent, url, head + tail.map((part) => uid + part).join('')), uid, job.expectAllowed);
        } catch (e) {
          problem = `request failed: ${(e as Error).message}`;
        }
        if (latencies) latencies[i] = Number(process.hrtime.bigint() - started) / 1e6;
        if (problem !== undefined) {
          errors++;
          if (errorSamples.size < MAX_ERROR_SAMPLES) errorSamples.add(problem);
        }
      }
    };
    await Promise.all(Array.from({ length: job.connections }, worker));
  }

  try {
    await phase(job.warmup);
    const latencies = new Float64Array(job.requests);
    onTimed();
    const start = process.hrtime.bigint();
    await phase(job.requests, latencies);
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    latencies.sort();
    return {
      requests: job.requests,
      seconds,
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      errors,
      errorSamples: [...errorSamples],
    };
  } finally {
    agent.destroy();
  }
}

// As a forked child: one job in over IPC, a note when the timed requests start, one result (or an error message)
// out, then exit.
if (process.send) {
  process.once('message', (job: LoadJob) => {
    const deadline = setTimeout(() => {
      console.error(`load client: not finished after ${job.deadlineMs} ms; giving up`);
      process.exit(2);
    }, job.deadlineMs);
    runLoad(job, () => process.send!({ timed: true })).then(
      (result) => process.send!({ result }, () => process.exit(0)),
      (e: Error) => process.send!({ error: e.message }, () => process.exit(1)),
    );
    deadline.unref();
  });
}
