import t from 'tap';
import { readFileSync } from 'node:fs';
import { ConfigError, DEFAULTS, helpText, informationRequest, leaderElectionTiming, loadConfig, versionText } from '../../src/config.js';
import { ownExecutorIdentity } from '../../src/shared/executor-identity.js';

t.test('defaults give a startable configuration', async (t) => {
  const config = loadConfig([], {});
  t.same(config, { ...DEFAULTS });
  t.equal(config.certDir, undefined, 'no cert dir means a generated development certificate');
  t.equal(config.kubeconfig, undefined);
  t.equal(config.watchNamespace, undefined, 'every namespace is reconciled unless one is named');
});

t.test('one watched namespace', async (t) => {
  t.equal(loadConfig(['--watch-namespace', 'shop'], {}).watchNamespace, 'shop');
  t.equal(loadConfig([], { PTAH_WATCH_NAMESPACE: 'team-a' }).watchNamespace, 'team-a');
});

t.test('flags and environment are read, flags win', async (t) => {
  const config = loadConfig(
    ['--port', '8444', '--cert-dir', '/certs', '--workers', '4', '--no-leader-election', '--manager-username', 'system:serviceaccount:ops:ptah-manager'],
    { PTAH_PORT: '9000', PTAH_LISTEN_HOST: '127.0.0.1', PTAH_REVISION: 'abc123', PTAH_RUNNER_IMAGE: 'registry.example/ptah@sha256:' + 'a'.repeat(64) },
  );
  t.equal(config.port, 8444, 'the flag wins over PTAH_PORT');
  t.equal(config.metricsPort, 8443, '/metrics keeps its own port');
  t.equal(config.listenHost, '127.0.0.1', 'env is read when no flag is given');
  t.equal(config.certDir, '/certs');
  t.equal(config.workers, 4);
  t.equal(config.leaderElection, false);
  t.equal(config.managerUsername, 'system:serviceaccount:ops:ptah-manager');
  t.equal(config.revision, 'abc123');
  t.match(config.runnerImage, /@sha256:a{64}$/);
});

t.test('leader-election timings: flags or environment, in milliseconds for the elector', async (t) => {
  t.same(leaderElectionTiming(loadConfig([], {})), { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }, 'client-go\'s defaults');
  const fast = loadConfig(['--leader-election-lease-duration', '5s', '--leader-election-renew-deadline', '4s'], { PTAH_LEADER_ELECTION_RETRY_PERIOD: '500ms' });
  t.same(leaderElectionTiming(fast), { leaseDurationMs: 5_000, renewDeadlineMs: 4_000, retryPeriodMs: 500 });
});

t.test('booleans from the environment', async (t) => {
  t.equal(loadConfig([], { PTAH_LEADER_ELECTION: 'false' }).leaderElection, false);
  t.equal(loadConfig(['--leader-election', 'true'], {}).leaderElection, true);
});

const bad: [string, string[], NodeJS.ProcessEnv, RegExp][] = [
  ['port out of range', ['--port', '70000'], {}, /--port \(PTAH_PORT\) must be <= 65535/],
  ['port not a number', [], { PTAH_PORT: 'https' }, /--port \(PTAH_PORT\) must be integer/],
  ['manager username not a service account', ['--manager-username', 'admin'], {}, /--manager-username \(PTAH_MANAGER_USERNAME\) must match pattern/],
  ['manager username with an empty namespace', ['--manager-username', 'system:serviceaccount::x'], {}, /--manager-username/],
  ['zero workers', ['--workers', '0'], {}, /--workers \(PTAH_WORKERS\) must be >= 1/],
  ['lease namespace not a DNS label', [], { PTAH_LEASE_NAMESPACE: 'Bad_NS' }, /--lease-namespace \(PTAH_LEASE_NAMESPACE\)/],
  ['watched namespace not a DNS label', ['--watch-namespace', 'a,b'], {}, /--watch-namespace \(PTAH_WATCH_NAMESPACE\) must match pattern/],
  ['leader election not a boolean', [], { PTAH_LEADER_ELECTION: 'maybe' }, /--leader-election \(PTAH_LEADER_ELECTION\) must be boolean/],
  ['image with whitespace', ['--controller-image', 'a b'], {}, /--controller-image \(PTAH_CONTROLLER_IMAGE\)/],
  ['unknown log level', ['--log-level', 'loud'], {}, /--log-level \(PTAH_LOG_LEVEL\) must be equal to one of the allowed values/],
  ['unknown flag', ['--prot', '1'], {}, /invalid command line: .*--prot/],
  ['contradicting leader-election flags', ['--leader-election', 'true', '--no-leader-election'], {}, /contradict/],
  ['/metrics on the admission port', ['--port', '8443'], {}, /--port \(PTAH_PORT\) and --metrics-port \(PTAH_METRICS_PORT\) are both 8443/],
  ['metrics port out of range', [], { PTAH_METRICS_PORT: '65536' }, /--metrics-port \(PTAH_METRICS_PORT\) must be <= 65535/],
  ['lease duration not a duration', ['--leader-election-lease-duration', '15'], {}, /--leader-election-lease-duration \(PTAH_LEADER_ELECTION_LEASE_DURATION\) must match pattern/],
  ['renew deadline not below the lease duration', ['--leader-election-renew-deadline', '15s'], {},
    /lease duration \(15000 ms\) must be greater than the renew deadline \(15000 ms\); set --leader-election-lease-duration \(PTAH_LEADER_ELECTION_LEASE_DURATION\)/],
  ['retry period too close to the renew deadline', [], { PTAH_LEADER_ELECTION_RETRY_PERIOD: '9s' }, /renew deadline \(10000 ms\) must be greater than the retry period \(9000 ms\)/],
  ['lease duration under a second', ['--leader-election-lease-duration', '900ms', '--leader-election-renew-deadline', '500ms', '--leader-election-retry-period', '100ms'], {}, /at least 1 s/],
  ['read timeout above the admission timeout', ['--read-timeout-ms', '60000'], {}, /--read-timeout-ms/],
];

for (const [name, argv, env, message] of bad) {
  t.test(`refuses: ${name}`, async (t) => {
    t.throws(() => loadConfig(argv, env), { name: 'ConfigError', message });
  });
}

t.test('several bad settings are all named in one error', async (t) => {
  try {
    loadConfig(['--port=-1', '--workers', '100'], {});
    t.fail('expected a ConfigError');
  } catch (e) {
    t.ok(e instanceof ConfigError);
    t.match((e as Error).message, /--port.*--workers|--workers.*--port/);
  }
});

t.test('--help and --version, alone, are answered instead of starting', async (t) => {
  t.equal(informationRequest(['--help']), 'help');
  t.equal(informationRequest(['-h']), 'help');
  t.equal(informationRequest(['--version']), 'version');
  t.equal(informationRequest(['--help', '--port', '1']), undefined, 'with other flags it is not a request: loadConfig refuses it');
  t.throws(() => loadConfig(['--help', '--port', '1'], {}), ConfigError);
  t.equal(informationRequest([]), undefined);
  const help = helpText();
  const flags = [...help.matchAll(/^  --([a-z-]+) +(PTAH_[A-Z_]+) +default (.*)$/gm)];
  t.same(flags.map((m) => m[1]), ['listen-host', 'port', 'metrics-port', 'cert-dir', 'manager-username', 'kubeconfig', 'lease-namespace', 'watch-namespace', 'leader-election',
    'leader-election-lease-duration', 'leader-election-renew-deadline', 'leader-election-retry-period', 'workers', 'controller-image', 'runner-image', 'revision', 'log-level', 'read-timeout-ms'], 'every flag, in order');
  for (const [, flag, env] of flags) t.doesNotThrow(() => loadConfig([], { [env!]: undefined }), `${flag} names its variable ${env}`);
  t.match(help, new RegExp(`--port +PTAH_PORT +default ${DEFAULTS.port}\n`), 'with its default');
  t.equal(new Set(flags.map((m) => m[0]!.indexOf('PTAH_'))).size, 1, 'the variables stand in one column');
  t.match(help, /--cert-dir +PTAH_CERT_DIR +default \(none\)/, 'and says when there is none');
  const version = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version as string;
  t.equal(versionText(), `ptah-manager ${version}\nexecutor ${ownExecutorIdentity()}\n`, '--version: the release and the executor identity');
});
