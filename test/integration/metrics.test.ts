// The manager's /metrics, scraped over HTTPS from a real manager process (src/main.ts) reconciling one namespace on
// the real control plane with the real runner, executor and PostgreSQL: the phase gauges count the resources, the
// outcome counter counted the Jobs with their outcomes, the unresolved-run gauge is 1 while a run waits for a person
// and 0 once acknowledged, a deleted resource leaves the gauges, the certificate expiry is the served certificate's,
// and every series the alert rules name is served.
import { request } from 'node:https';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { readFile } from 'node:fs/promises';
import t from 'tap';
import YAML from 'yaml';
import { AdmissionregistrationV1Api, type V1Job } from '@kubernetes/client-node';
import type { PtahMigration } from '../../src/shared/api/migration-kinds.js';
import { API_VERSION, KINDS } from '../../src/shared/api/names.js';
import { sharedCluster } from '../../tools/stack/cluster.js';
import { waitFor } from '../../tools/stack/wait.js';
import { metricNames } from '../unit/metrics-promql.js';
import { crashWorld } from './crash-world.js';
import { jobsOf } from './migration-world.js';

/** The second migration of three holds the database long enough to delete its Job while it runs. */
const SLOW_FILES = {
  '0001_create_customers.up.sql': 'CREATE TABLE customers (id bigserial PRIMARY KEY);\n',
  '0002_create_orders.up.sql': 'SELECT pg_sleep(30);\nCREATE TABLE orders (id bigserial PRIMARY KEY);\n',
  '0003_create_invoices.up.sql': 'CREATE TABLE invoices (id bigserial PRIMARY KEY);\n',
};

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Scrape {
  samples: Sample[];
  /** Names with a `# TYPE` line: every registered metric, observed or not. */
  types: Set<string>;
  peer: PeerCertificate;
}

/** GET /metrics over HTTPS, trusting only `caPem`; returns the parsed exposition and the certificate it was served with. */
function scrape(url: string, caPem: string): Promise<Scrape> {
  return new Promise((resolve, reject) => {
    // A connection of its own (no agent, no resumed session), so the peer certificate is the one this scrape was served.
    const req = request(`${url}/metrics`, { ca: caPem, timeout: 5_000, agent: false }, (res) => {
      const peer = (res.socket as TLSSocket).getPeerCertificate();
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`/metrics answered ${res.statusCode}`));
        const samples: Sample[] = [];
        const types = new Set<string>();
        for (const line of body.split('\n')) {
          const type = /^# TYPE (\S+) /.exec(line);
          if (type) types.add(type[1]!);
          const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
          if (!m) continue;
          const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
          samples.push({ name: m[1]!, labels, value: Number(m[3]) });
        }
        resolve({ samples, types, peer });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** The samples of `name` whose labels include `labels`. */
const matching = (s: Scrape, name: string, labels: Record<string, string>) =>
  s.samples.filter((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
/** The one sample of `name` with `labels` (undefined when there is none). */
const value = (s: Scrape, name: string, labels: Record<string, string>): number | undefined => {
  const found = matching(s, name, labels);
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`);
  return found[0]?.value;
};
const sum = (s: Scrape, name: string, labels: Record<string, string>) => matching(s, name, labels).reduce((n, x) => n + x.value, 0);

t.test('the manager\'s /metrics reports resources, Job outcomes, an unresolved run and the serving certificate', async (t) => {
  const cw = await crashWorld(t);
  const w = cw.w;
  const fam = { family: KINDS.PtahMigration.kind, namespace: w.ns };

  const [fastDb, slowDb] = await Promise.all([w.database('metrics_fast'), w.database('metrics_slow')]);
  const fastSecret = await w.installSample(fastDb, 'db-fast');
  const slowSecret = await w.installSample(slowDb, 'db-slow');
  await w.sampleArtifact();
  await w.artifact('slow-r1', SLOW_FILES);
  await w.createMigration({ name: 'orders', artifact: 'orders-migrations-r1', secret: fastSecret, apply: 'Always', coordinationKey: 'fast-db' });
  await w.createMigration({ name: 'slow', artifact: 'slow-r1', secret: slowSecret, apply: 'OnApproval', coordinationKey: 'slow-db', activeDeadlineSeconds: 120, lockTimeout: '1m' });
  const manager = await cw.startManager();

  // The CA the API server was told to trust for this manager's webhooks is the one /metrics is checked against.
  const hooks = await sharedCluster().kubeConfig('admin').makeApiClient(AdmissionregistrationV1Api).readValidatingWebhookConfiguration({ name: `ptah-crash-${w.ns}` });
  const caPem = Buffer.from(hooks.webhooks![0]!.clientConfig.caBundle!, 'base64').toString('utf8');
  /** Scrapes until `ready` holds: the gauges follow the manager's cache, which follows the API server a moment later. */
  const scrapeUntil = (what: string, ready: (s: Scrape) => boolean) =>
    waitFor(async () => {
      const s = await scrape(manager.metricsUrl, caPem);
      return ready(s) ? s : undefined;
    }, { what: `/metrics: ${what}`, timeoutMs: 15_000, intervalMs: 250 });

  await w.waitFor('orders', 'applied and in sync', (m) => (m.status?.phase === 'InSync' && m.status.lastRun?.outcome === 'Applied' ? m : undefined));
  await w.waitFor('slow', 'a plan awaiting approval', (m) => (m.status?.phase === 'AwaitingApproval' ? m : undefined));

  const first = await scrapeUntil('both resources counted by phase', (s) =>
    value(s, 'ptah_operator_resources', { ...fam, phase: 'InSync' }) === 1 && value(s, 'ptah_operator_resources', { ...fam, phase: 'AwaitingApproval' }) === 1);
  t.equal(sum(first, 'ptah_operator_resources', fam), (await w.admin.list<PtahMigration>(API_VERSION, KINDS.PtahMigration.kind, w.ns)).length, 'the phases add up to the resources there are');
  t.equal(value(first, 'ptah_operator_resources', { ...fam, phase: 'Applying' }), 0, 'a phase nobody is in reads 0');
  t.equal(value(first, 'ptah_operator_unresolved_runs', fam), 0, 'no unresolved run yet');
  const applyJobs = jobsOf(w, 'apply');
  t.equal(applyJobs.length, 1, 'fixture: one Apply Job ran');
  t.equal(value(first, 'ptah_operator_job_outcomes_total', { family: fam.family, operation: 'Apply', outcome: 'Applied' }), 1, 'the Apply Job counted as Applied');
  t.ok((value(first, 'ptah_operator_job_outcomes_total', { family: fam.family, operation: 'History', outcome: 'HistoryRead' }) ?? 0) >= 3,
    'the History readings counted: before and after the Apply of orders, and the reading of slow');
  t.equal(sum(first, 'ptah_operator_job_outcomes_total', { family: KINDS.PtahSchema.kind }), 0, 'nothing counted for a family that ran nothing');
  t.equal(sum(first, 'ptah_operator_job_outcomes_total', { outcome: 'Other' }), 0, 'every outcome is a word from code');

  // The certificate gauge is the certificate this very connection was served with.
  const notAfter = Date.parse(first.peer.valid_to) / 1000;
  t.ok(Number.isFinite(notAfter) && notAfter > Date.now() / 1000, `fixture: the served certificate is valid until ${first.peer.valid_to}`);
  t.equal(value(first, 'ptah_operator_webhook_certificate_expiry_timestamp_seconds', {}), notAfter, 'the expiry gauge is the served certificate\'s notAfter');

  // Every series an alert rule names is one this process serves.
  const rules = YAML.parse(await readFile(new URL('../../manifests/monitoring/prometheusrule.yaml', import.meta.url), 'utf8')) as { spec: { groups: { rules: { alert: string; expr: string }[] }[] } };
  for (const rule of rules.spec.groups.flatMap((g) => g.rules)) {
    t.same(metricNames(rule.expr).filter((n) => !first.types.has(n)), [], `${rule.alert}: the manager serves what it names`);
  }

  // An Apply in flight, then its Job deleted under it: a run nobody can account for.
  await w.approve('slow');
  const dispatched = await w.waitFor('slow', 'an Apply dispatched with its Job UID recorded', (m) =>
    (m.status?.activeOperation?.type === 'Apply' && m.status.activeOperation.jobUID ? m : undefined));
  const claim = dispatched.status!.activeOperation!;
  const inFlight = await scrapeUntil('the Apply in flight', (s) => value(s, 'ptah_operator_claims_in_flight', { ...fam, operation: 'Apply' }) === 1);
  const age = value(inFlight, 'ptah_operator_oldest_claim_age_seconds', fam) ?? -1;
  t.ok(age > 0 && age <= (Date.now() - Date.parse(claim.startedAt)) / 1000 + 1, `the oldest claim's age is the Apply's (${age} s)`);
  t.equal(value(inFlight, 'ptah_operator_overdue_claims', fam), 0, 'inside its window it is not overdue');

  await w.admin.delete({ apiVersion: 'batch/v1', kind: 'Job', namespace: w.ns, name: claim.jobName }, { propagationPolicy: 'Background' });
  const recorded = await w.waitFor('slow', 'the run recorded unresolved', (m) => (m.status?.unresolvedRun && !m.status.activeOperation ? m : undefined));
  const run = recorded.status!.unresolvedRun!;
  t.equal(run.outcome, 'Unknown', 'fixture: the run is Unknown');
  // The record is written Blocked, then a History reading (phase Reading) may try to settle it and leaves it Blocked
  // again: wait for a scrape outside that reading.
  const owed = await scrapeUntil('the unresolved run, no reading in flight', (s) => value(s, 'ptah_operator_unresolved_runs', fam) === 1 &&
    (value(s, 'ptah_operator_claims_in_flight', { ...fam, operation: 'History' }) ?? 0) === 0);
  t.equal(value(owed, 'ptah_operator_unresolved_runs', fam), 1, 'the unresolved-run gauge is 1 while the run waits for a person');
  t.equal(value(owed, 'ptah_operator_job_outcomes_total', { family: fam.family, operation: 'Apply', outcome: 'Unknown' }), 1, 'the deleted Job counted as Unknown');
  t.equal(value(owed, 'ptah_operator_job_outcomes_total', { family: fam.family, operation: 'Apply', outcome: 'Applied' }), 1, 'the earlier Applied stays counted once');
  t.equal(value(owed, 'ptah_operator_resources', { ...fam, phase: 'Blocked' }), 1, 'the blocked resource is counted Blocked');
  await w.sql(slowDb, 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');

  await w.acknowledge('slow', run.operationID);
  await w.waitFor('slow', 'settled by the acknowledgment', (m) => (!m.status?.unresolvedRun && m.status?.resolvedRun?.operationID === run.operationID ? m : undefined));
  const settled = await scrapeUntil('the settled run', (s) => value(s, 'ptah_operator_unresolved_runs', fam) === 0);
  t.equal(value(settled, 'ptah_operator_unresolved_runs', fam), 0, 'the unresolved-run gauge is 0 once the run is acknowledged');

  // A deleted resource leaves the gauges at the next scrape; nothing but the cache could have told them.
  await w.admin.delete(w.ref('PtahMigration', 'orders'));
  await waitFor(async () => ((await w.admin.tryGet(w.ref('PtahMigration', 'orders'))) ? undefined : true), { what: 'orders to be gone', timeoutMs: 60_000 });
  const after = await scrapeUntil('orders gone from the gauges', (s) => value(s, 'ptah_operator_resources', { ...fam, phase: 'InSync' }) === 0);
  t.equal(sum(after, 'ptah_operator_resources', fam), 1, 'one resource left');
  t.equal(jobsOf(w, 'apply').filter((j: V1Job) => j.metadata?.labels?.['operator.ptah.run/migration'] === 'slow').length, 1, 'fixture: slow ran one Apply Job');
});
