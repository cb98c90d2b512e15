// The manager's configuration: command-line flags and PTAH_* environment variables, validated against one
// schema. Flags win over the environment; every setting has a flag and an env name, and an error names both so
// a person can find the bad value wherever it came from.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Ajv, type ErrorObject } from 'ajv';
import { DURATION_PATTERN, parseDuration } from './shared/api/duration.js';
import { INSTALL, MANAGER_USERNAME } from './shared/api/names.js';
import { ownExecutorIdentity } from './shared/executor-identity.js';
import { leaderElectionTimingProblem, type LeaderElectionTiming } from './controller/leaderelection.js';

export interface Config {
  listenHost: string;
  port: number;
  /** Port of the /metrics listener, on the same host address; 0 picks a free one. */
  metricsPort: number;
  /** Directory holding tls.crt and tls.key; absent means "generate a development certificate". */
  certDir?: string;
  /** The manager's own identity as the API server authenticates it (system:serviceaccount:<ns>:<name>). */
  managerUsername: string;
  /** Path of a kubeconfig file; absent means the default chain (KUBECONFIG, ~/.kube/config, in-cluster). */
  kubeconfig?: string;
  /** Namespace of the leader-election Lease. */
  leaseNamespace: string;
  /**
   * Reconcile the resources of this namespace only (a namespace-scoped installation, or several managers sharing one
   * control plane, as the tests do); every namespace when absent. The realm census still reads every namespace.
   */
  watchNamespace?: string;
  /** Off: this replica serves admission only. The controller never runs without holding the manager Lease. */
  leaderElection: boolean;
  /**
   * client-go's timings, as Go durations: a follower takes over a Lease left unrenewed this long, a leader that
   * cannot renew for the renew deadline stops leading, and attempts come every retry period.
   */
  leaseDuration: string;
  renewDeadline: string;
  retryPeriod: string;
  workers: number;
  controllerImage: string;
  runnerImage: string;
  /** Source revision of this manager build, recorded on every Job it dispatches. */
  revision: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Per-read timeout of the webhook's uncached API reads; below the webhooks' 10 s admission timeout. */
  readTimeoutMs: number;
}

interface Setting {
  key: keyof Config;
  flag: string;
  env: string;
  type: 'string' | 'boolean';
  /** What it sets, for --help; the default is DEFAULTS', or `unset` when there is none. */
  meaning: string;
  unset?: string;
}

const SETTINGS: readonly Setting[] = [
  { key: 'listenHost', flag: 'listen-host', env: 'PTAH_LISTEN_HOST', type: 'string', meaning: 'address the HTTPS service binds' },
  { key: 'port', flag: 'port', env: 'PTAH_PORT', type: 'string', meaning: 'its port (admission, /healthz, /readyz)' },
  { key: 'metricsPort', flag: 'metrics-port', env: 'PTAH_METRICS_PORT', type: 'string', meaning: 'port of /metrics, a listener of its own (same address and certificate)' },
  {
    key: 'certDir', flag: 'cert-dir', env: 'PTAH_CERT_DIR', type: 'string', unset: '(none)',
    meaning: 'directory with tls.crt and tls.key, reloaded when they change; without it a development certificate is generated into certs/out/',
  },
  { key: 'managerUsername', flag: 'manager-username', env: 'PTAH_MANAGER_USERNAME', type: 'string', meaning: 'the identity whose writes the controller-write webhook judges and whose status writes are admitted' },
  { key: 'kubeconfig', flag: 'kubeconfig', env: 'PTAH_KUBECONFIG', type: 'string', unset: 'in-cluster / KUBECONFIG', meaning: 'how to reach the API server' },
  { key: 'leaseNamespace', flag: 'lease-namespace', env: 'PTAH_LEASE_NAMESPACE', type: 'string', meaning: 'where the leader-election Lease (and the Leases of realms named by a PtahRealm) live' },
  { key: 'watchNamespace', flag: 'watch-namespace', env: 'PTAH_WATCH_NAMESPACE', type: 'string', unset: '(every namespace)', meaning: 'reconcile the resources of this namespace only' },
  { key: 'leaderElection', flag: 'leader-election', env: 'PTAH_LEADER_ELECTION', type: 'string', meaning: 'without it (--no-leader-election) the replica serves admission only' },
  { key: 'leaseDuration', flag: 'leader-election-lease-duration', env: 'PTAH_LEADER_ELECTION_LEASE_DURATION', type: 'string', meaning: 'a replica takes over a manager Lease left unrenewed this long (a killed leader\'s successor waits it out)' },
  { key: 'renewDeadline', flag: 'leader-election-renew-deadline', env: 'PTAH_LEADER_ELECTION_RENEW_DEADLINE', type: 'string', meaning: 'a leader that cannot renew for this long stops leading and exits; below the lease duration' },
  { key: 'retryPeriod', flag: 'leader-election-retry-period', env: 'PTAH_LEADER_ELECTION_RETRY_PERIOD', type: 'string', meaning: 'time between attempts to acquire or renew; the renew deadline must exceed it by 20 %' },
  { key: 'workers', flag: 'workers', env: 'PTAH_WORKERS', type: 'string', meaning: 'reconcile workers per controller (one key is never handled by two at once)' },
  { key: 'controllerImage', flag: 'controller-image', env: 'PTAH_CONTROLLER_IMAGE', type: 'string', meaning: 'the manager image the operation Jobs record' },
  { key: 'runnerImage', flag: 'runner-image', env: 'PTAH_RUNNER_IMAGE', type: 'string', meaning: 'the image the operation Jobs run; it must carry this release\'s executor (the runner refuses another)' },
  { key: 'revision', flag: 'revision', env: 'PTAH_REVISION', type: 'string', meaning: 'the manager revision Jobs record' },
  { key: 'logLevel', flag: 'log-level', env: 'PTAH_LOG_LEVEL', type: 'string', meaning: 'pino level; credentials are redacted at every level' },
  { key: 'readTimeoutMs', flag: 'read-timeout-ms', env: 'PTAH_READ_TIMEOUT_MS', type: 'string', meaning: 'bound on each uncached read the webhooks make' },
];

/** `--help` or `--version` given alone: what to print instead of starting. */
export function informationRequest(argv: readonly string[]): 'help' | 'version' | undefined {
  if (argv.length !== 1) return undefined;
  if (argv[0] === '--help' || argv[0] === '-h') return 'help';
  if (argv[0] === '--version') return 'version';
  return undefined;
}

/**
 * The release as `--version` prints it: package.json's version (beside src/ in a checkout, beside dist/ in a build
 * and in the image) and the executor identity its execution bindings bind.
 */
export function versionText(): string {
  const packageJson = new URL(import.meta.url.endsWith('.ts') ? '../package.json' : '../../package.json', import.meta.url);
  let version = 'unknown (no package.json beside the build)';
  try {
    version = (JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: string }).version ?? version;
  } catch {
    // A build copied without its package.json still says which executor it carries.
  }
  return `ptah-manager ${version}\nexecutor ${ownExecutorIdentity()}\n`;
}

/** Every flag with its variable, default and meaning (a flag wins over its variable). */
export function helpText(): string {
  const lines = [
    'usage: ptah-manager [flags]   (each flag may instead be given as its environment variable)',
    '       ptah-manager --help | --version',
    '',
  ];
  const flagWidth = Math.max(...SETTINGS.map((s) => s.flag.length));
  const envWidth = Math.max(...SETTINGS.map((s) => s.env.length));
  for (const s of SETTINGS) {
    const value = (DEFAULTS as Partial<Record<keyof Config, unknown>>)[s.key];
    lines.push(`  --${s.flag.padEnd(flagWidth)} ${s.env.padEnd(envWidth)} default ${value === undefined ? s.unset ?? '(none)' : String(value)}`, `      ${s.meaning}`);
  }
  return `${lines.join('\n')}\n`;
}

const DNS_LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const DNS_SUBDOMAIN = `${DNS_LABEL}(?:\\.${DNS_LABEL})*`;
// An image reference: no whitespace, no scheme; the registry/name/tag/digest grammar is left to the kubelet.
const IMAGE = '^[a-z0-9][A-Za-z0-9._/:@-]{0,511}$';

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['listenHost', 'port', 'metricsPort', 'managerUsername', 'leaseNamespace', 'leaderElection', 'leaseDuration', 'renewDeadline', 'retryPeriod', 'workers', 'controllerImage', 'runnerImage', 'revision', 'logLevel', 'readTimeoutMs'],
  properties: {
    listenHost: { type: 'string', minLength: 1, maxLength: 253 },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    metricsPort: { type: 'integer', minimum: 0, maximum: 65535 },
    certDir: { type: 'string', minLength: 1 },
    managerUsername: { type: 'string', pattern: `^system:serviceaccount:${DNS_LABEL}:${DNS_SUBDOMAIN}$`, maxLength: 330 },
    kubeconfig: { type: 'string', minLength: 1 },
    leaseNamespace: { type: 'string', pattern: `^${DNS_LABEL}$` },
    watchNamespace: { type: 'string', pattern: `^${DNS_LABEL}$`, maxLength: 63 },
    leaderElection: { type: 'boolean' },
    leaseDuration: { type: 'string', pattern: DURATION_PATTERN, maxLength: 32 },
    renewDeadline: { type: 'string', pattern: DURATION_PATTERN, maxLength: 32 },
    retryPeriod: { type: 'string', pattern: DURATION_PATTERN, maxLength: 32 },
    workers: { type: 'integer', minimum: 1, maximum: 64 },
    controllerImage: { type: 'string', pattern: IMAGE },
    runnerImage: { type: 'string', pattern: IMAGE },
    revision: { type: 'string', pattern: '^[A-Za-z0-9._+-]{1,64}$' },
    logLevel: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
    readTimeoutMs: { type: 'integer', minimum: 100, maximum: 30000 },
  },
} as const;

export const DEFAULTS = {
  listenHost: '0.0.0.0',
  port: 9443,
  metricsPort: 8443,
  managerUsername: MANAGER_USERNAME,
  leaseNamespace: INSTALL.namespace,
  leaderElection: true,
  leaseDuration: '15s',
  renewDeadline: '10s',
  retryPeriod: '2s',
  workers: 2,
  controllerImage: 'localhost/ptah-operator:dev',
  runnerImage: 'localhost/ptah-operator:dev',
  revision: 'dev',
  logLevel: 'info',
  readTimeoutMs: 8000,
} as const satisfies Partial<Config>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

// Strings from flags/env are coerced to the schema's types here and only here.
const validate = new Ajv({ allErrors: true, coerceTypes: true, useDefaults: false, strict: true }).compile(SCHEMA);

/** Reads flags (argv without the node/script prefix) and env into a validated Config; throws ConfigError. */
export function loadConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Config {
  let flags: Record<string, string | boolean | undefined>;
  try {
    flags = parseArgs({
      args: [...argv],
      options: Object.fromEntries([
        ...SETTINGS.map((s) => [s.flag, { type: s.type }] as const),
        ['no-leader-election', { type: 'boolean' }] as const,
      ]),
      strict: true,
      allowPositionals: false,
    }).values as Record<string, string | boolean | undefined>;
  } catch (e) {
    throw new ConfigError(`invalid command line: ${(e as Error).message}`);
  }

  const raw: Record<string, unknown> = { ...DEFAULTS };
  for (const s of SETTINGS) {
    const value = flags[s.flag] ?? env[s.env];
    if (value !== undefined && value !== '') raw[s.key] = value;
  }
  if (flags['no-leader-election'] === true) {
    if (flags['leader-election'] !== undefined) throw new ConfigError('--leader-election and --no-leader-election contradict each other');
    raw.leaderElection = false;
  }

  if (!validate(raw)) throw new ConfigError(`invalid configuration: ${describe(validate.errors ?? [])}`);
  const config = raw as unknown as Config;
  if (config.port !== 0 && config.port === config.metricsPort) {
    throw new ConfigError(`invalid configuration: --port (PTAH_PORT) and --metrics-port (PTAH_METRICS_PORT) are both ${config.port}; /metrics needs a port of its own`);
  }
  const problem = leaderElectionTimingProblem(leaderElectionTiming(config));
  if (problem) {
    const flags = SETTINGS.filter((s) => ['leaseDuration', 'renewDeadline', 'retryPeriod'].includes(s.key)).map((s) => `--${s.flag} (${s.env})`);
    throw new ConfigError(`invalid configuration: ${problem}; set ${flags.join(', ')} accordingly`);
  }
  return config;
}

/** The leader-election timings in milliseconds, as the elector takes them. */
export function leaderElectionTiming(config: Pick<Config, 'leaseDuration' | 'renewDeadline' | 'retryPeriod'>): LeaderElectionTiming {
  return { leaseDurationMs: parseDuration(config.leaseDuration), renewDeadlineMs: parseDuration(config.renewDeadline), retryPeriodMs: parseDuration(config.retryPeriod) };
}

function describe(errors: ErrorObject[]): string {
  return errors
    .map((e) => {
      const key = e.instancePath.split('/')[1] ?? '';
      const setting = SETTINGS.find((s) => s.key === key);
      const name = setting ? `--${setting.flag} (${setting.env})` : key || 'configuration';
      return `${name} ${e.message ?? 'is invalid'}`;
    })
    .join('; ');
}
