// manifests/monitoring/prometheusrule.yaml: every expression names only series the manager registers (read from
// the registry the manager's modules fill, so a rename cannot leave an alert dead), promtool accepts the rules, and
// promtool's rule tests show each alert firing on the series it is about and staying quiet otherwise.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Histogram } from 'prom-client';
import t from 'tap';
import YAML from 'yaml';
// What src/main.ts wires; importing them registers every series the manager process serves.
import '../../src/controller/manager.js';
import '../../src/controller/migration/register.js';
import '../../src/controller/schema/register.js';
import '../../src/shared/tls.js';
import '../../src/webhook/server.js';
import { registry } from '../../src/shared/metrics.js';
import { metricNames } from './metrics-promql.js';

const RULE_FILE = new URL('../../manifests/monitoring/prometheusrule.yaml', import.meta.url);

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile {
  apiVersion: string;
  kind: string;
  spec: { groups: { name: string; rules: Rule[] }[] };
}

/** The series names the registry exposes (a histogram's buckets, sum and count included). */
function registeredNames(): Set<string> {
  const names = new Set<string>();
  for (const metric of registry.getMetricsAsArray()) {
    names.add(metric.name);
    if (metric instanceof Histogram) for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
  }
  return names;
}

const rules = async (): Promise<RuleFile> => YAML.parse(await readFile(RULE_FILE, 'utf8')) as RuleFile;
const allRules = (file: RuleFile): Rule[] => file.spec.groups.flatMap((g) => g.rules);

t.test('the reader of expressions finds the metric names and nothing else', async (t) => {
  t.same(metricNames('sum by (namespace, family) (rate(foo_total{a="b", c=~"x|y"}[5m])) > 0 and on () (bar == 0)'), ['foo_total', 'bar']);
  t.same(metricNames('ptah_x - time() < 7 * 86400'), ['ptah_x'], 'time() is a function');
  t.same(metricNames('max(up{job="and"}) unless ignoring(instance) down offset 5m'), ['up', 'down']);
});

t.test('every expression names only series the manager registers', async (t) => {
  const file = await rules();
  t.equal(file.apiVersion, 'monitoring.coreos.com/v1');
  t.equal(file.kind, 'PrometheusRule');
  const registered = registeredNames();
  t.ok(registered.has('ptah_operator_unresolved_runs') && registered.has('controller_runtime_reconcile_total'), 'fixture: the registry holds the manager\'s series');
  t.notOk(registered.has('ptah_operator_renamed_series'), 'fixture: the registry is not everything');
  const list = allRules(file);
  t.ok(list.length >= 7, `${list.length} alerts`);
  for (const rule of list) {
    const names = metricNames(rule.expr);
    t.ok(names.length > 0, `${rule.alert} selects a series`);
    t.same(names.filter((n) => !registered.has(n)), [], `${rule.alert}: ${names.join(', ')} are registered`);
    t.ok(rule.labels?.severity, `${rule.alert} has a severity`);
    t.ok(rule.annotations?.summary && rule.annotations.description, `${rule.alert} tells a person what happened`);
  }
  // The same check refuses a rule whose series was renamed.
  const renamed = metricNames('sum(ptah_operator_renamed_series) > 0').filter((n) => !registered.has(n));
  t.same(renamed, ['ptah_operator_renamed_series'], 'a renamed series is reported');
});

const run = promisify(execFile);

/** Runs promtool; it is a test dependency (.ci/run installs Debian's prometheus package), never skipped. */
async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args);
    return stdout + stderr;
  } catch (e) {
    const err = e as Error & { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

const series = (name: string, labels: Record<string, string>, values: string) =>
  ({ series: `${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(',')}}`, values });
const NS = { family: 'PtahMigration', namespace: 'shop' };
const QUIET = { family: 'PtahSchema', namespace: 'quiet' };
const LEASE = { name: 'ptah-operator.operator.ptah.run' };

/** Each alert against series that should fire it, and series that should not. Times are from the start of the test. */
const CASES = [
  {
    input_series: [series('ptah_operator_unresolved_runs', NS, '1x30'), series('ptah_operator_unresolved_runs', QUIET, '0x30')],
    alert_rule_test: [
      { eval_time: '5m', alertname: 'PtahUnresolvedRun', exp_alerts: [] },
      { eval_time: '15m', alertname: 'PtahUnresolvedRun', exp_alerts: [{ exp_labels: { severity: 'warning', ...NS } }] },
    ],
  },
  {
    input_series: [series('ptah_operator_overdue_claims', NS, '0x5 1x30'), series('ptah_operator_pending_lock_releases', QUIET, '1x30')],
    alert_rule_test: [
      { eval_time: '12m', alertname: 'PtahOperationOverdue', exp_alerts: [] },
      { eval_time: '20m', alertname: 'PtahOperationOverdue', exp_alerts: [{ exp_labels: { severity: 'warning', ...NS } }] },
      { eval_time: '20m', alertname: 'PtahLockReleaseOwed', exp_alerts: [{ exp_labels: { severity: 'warning', ...QUIET } }] },
    ],
  },
  {
    // Claims in flight; the leader reconciles for 15 minutes, then stops.
    input_series: [
      series('ptah_operator_claims_in_flight', { ...NS, operation: 'Apply' }, '1x60'),
      series('controller_runtime_reconcile_total', { controller: 'ptahmigration', result: 'success' }, '0+10x15 150x45'),
      series('leader_election_master_status', LEASE, '1x10 0x30'),
    ],
    alert_rule_test: [
      { eval_time: '15m', alertname: 'PtahControllerStalled', exp_alerts: [] },
      { eval_time: '40m', alertname: 'PtahControllerStalled', exp_alerts: [{ exp_labels: { severity: 'critical' } }] },
      { eval_time: '10m', alertname: 'PtahNoLeader', exp_alerts: [] },
      { eval_time: '20m', alertname: 'PtahNoLeader', exp_alerts: [{ exp_labels: { severity: 'critical' } }] },
    ],
  },
  {
    input_series: [
      series('ptah_operator_result_read_failures_total', { family: 'PtahMigration', reason: '503' }, '0+2x40'),
      series('ptah_operator_result_read_failures_total', { family: 'PtahSchema', reason: '500' }, '3x40'),
    ],
    alert_rule_test: [
      { eval_time: '30m', alertname: 'PtahResultReadFailures', exp_alerts: [{ exp_labels: { severity: 'warning', family: 'PtahMigration', reason: '503' } }] },
    ],
  },
  {
    // Expires 3 days after the test's start: a week's warning, not yet a day's.
    input_series: [series('ptah_operator_webhook_certificate_expiry_timestamp_seconds', {}, `${3 * 86400}x100`)],
    alert_rule_test: [
      { eval_time: '30m', alertname: 'PtahServingCertificateExpiresSoon', exp_alerts: [] },
      { eval_time: '90m', alertname: 'PtahServingCertificateExpiresSoon', exp_alerts: [{ exp_labels: { severity: 'warning' } }] },
    ],
  },
  {
    input_series: [series('ptah_operator_webhook_certificate_expiry_timestamp_seconds', {}, `${12 * 3600}x100`)],
    alert_rule_test: [
      { eval_time: '90m', alertname: 'PtahServingCertificateExpiresSoon', exp_alerts: [{ exp_labels: { severity: 'warning' } }, { exp_labels: { severity: 'critical' } }] },
    ],
  },
  {
    // Nothing owed, overdue, failing or expiring: no alert at all.
    input_series: [
      series('ptah_operator_unresolved_runs', NS, '0x60'),
      series('ptah_operator_overdue_claims', NS, '0x60'),
      series('ptah_operator_pending_lock_releases', NS, '0x60'),
      series('ptah_operator_claims_in_flight', { ...NS, operation: 'History' }, '1x60'),
      series('controller_runtime_reconcile_total', { controller: 'ptahmigration', result: 'success' }, '0+10x60'),
      series('leader_election_master_status', LEASE, '1x60'),
      series('ptah_operator_result_read_failures_total', { family: 'PtahMigration', reason: '503' }, '4x60'),
      series('ptah_operator_webhook_certificate_expiry_timestamp_seconds', {}, `${90 * 86400}x60`),
    ],
    alert_rule_test: ['PtahUnresolvedRun', 'PtahOperationOverdue', 'PtahLockReleaseOwed', 'PtahControllerStalled', 'PtahNoLeader', 'PtahResultReadFailures',
      'PtahServingCertificateExpiresSoon'].map((alertname) => ({ eval_time: '55m', alertname, exp_alerts: [] })),
  },
];

t.test('promtool accepts the rules, and each alert fires on its series and only then', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ptah-rules-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = await rules();
  await writeFile(join(dir, 'rules.yaml'), YAML.stringify({ groups: file.spec.groups }));
  t.match(await promtool('check', 'rules', join(dir, 'rules.yaml')), /SUCCESS: \d+ rules found/, 'promtool check rules (syntax and templates)');

  // The alert tests compare labels; annotations (checked above) are dropped so they need not be restated here.
  const bare = file.spec.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _annotations, ...rule }) => rule) }));
  await writeFile(join(dir, 'bare.yaml'), YAML.stringify({ groups: bare }));
  const alerted = new Set(CASES.flatMap((c) => c.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
  t.same([...new Set(allRules(file).map((r) => r.alert))].filter((a) => !alerted.has(a)), [], 'every alert has a case where it fires');
  await writeFile(join(dir, 'tests.yaml'), YAML.stringify({ rule_files: ['bare.yaml'], evaluation_interval: '1m', tests: CASES.map((c) => ({ interval: '1m', ...c })) }));
  t.match(await promtool('test', 'rules', join(dir, 'tests.yaml')), /SUCCESS/, 'promtool test rules');

  // The tests can fail: the same cases against a rule file whose unresolved-run alert never fires.
  const broken = bare.map((g) => ({ ...g, rules: g.rules.map((r) => (r.alert === 'PtahUnresolvedRun' ? { ...r, expr: 'sum by (namespace, family) (ptah_operator_unresolved_runs) > 1' } : r)) }));
  await writeFile(join(dir, 'bare.yaml'), YAML.stringify({ groups: broken }));
  await t.rejects(promtool('test', 'rules', join(dir, 'tests.yaml')), /PtahUnresolvedRun/, 'a rule that does not fire fails its case');
});

t.test('the ServiceMonitor selects the manager\'s Service and its https port', async (t) => {
  const monitor = YAML.parse(await readFile(new URL('../../manifests/monitoring/servicemonitor.yaml', import.meta.url), 'utf8')) as {
    kind: string; spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string; scheme: string }[] };
  };
  const docs = YAML.parseAllDocuments(await readFile(new URL('../../manifests/deployment.yaml', import.meta.url), 'utf8')).map((d) => d.toJS() as {
    kind?: string; metadata?: { labels?: Record<string, string> }; spec?: { ports?: { name: string }[] };
  });
  const services = docs.filter((d) => d.kind === 'Service');
  const selected = services.filter((s) => Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => s.metadata?.labels?.[k] === v));
  t.equal(monitor.kind, 'ServiceMonitor');
  t.equal(selected.length, 1, 'exactly the manager\'s Service is selected');
  for (const endpoint of monitor.spec.endpoints) {
    t.ok(selected[0]?.spec?.ports?.some((p) => p.name === endpoint.port), `port ${endpoint.port} is a port of that Service`);
    t.same([endpoint.scheme, endpoint.path], ['https', '/metrics'], 'over HTTPS, where the manager serves it');
  }
});
