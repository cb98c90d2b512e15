#!/usr/bin/env node
// `kubectl ptah`: a kubectl plugin (kubectl runs `kubectl-ptah` from PATH) to read where a PtahSchema or
// PtahMigration stands and to decide on it as a person: approve its current plan, acknowledge its unresolved run
// (or a schema's Apply whose proof no reading finishes), say what the database holds of a dirty migration row.
// It uses the caller's kubeconfig (current context, or --kubeconfig) and never prints a credential: errors carry
// the request and the API server's Status only. Exit codes: 0 ok, 1 failure, 2 usage.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
// Only type imports of cluster.js here: its code (and @kubernetes/client-node) loads when a command needs the cluster.
import type { Command } from './cluster.js';
import { CliError } from './errors.js';
import type { MigrationRepair } from '../shared/migration-repair.js';

const USAGE = `Usage: kubectl ptah <command> [flags]

Commands:
  status [-A]                                  one line per PtahSchema and PtahMigration: phase, readiness, what it waits for
  explain <kind>/<name>                        the obligations the resource owes now, and what the next pass does
  plan <name> [--kind K] [-o yaml|sql]         the published plan; -o sql prints a schema plan's statements
  approve <name> [--kind K]                    approve the resource's current plan, as you
  acknowledge <name> [--kind K]                acknowledge a PtahMigration's unresolved run, or the Apply a
                                               PtahSchema owes a proof no reading finishes, as you
  repair <name> --version V --resolution R     ask for the repair of a PtahMigration's dirty history row, once you
                                               mended the database: R is finished (you ran the file's remaining
                                               statements) or undone (you reversed what it did); the repair plan
                                               then needs an approval (kubectl ptah approve)
  push <directory> <reference>                 pack a directory (a schema.sql, or a migration directory's files) as
                                               an artifact and push it to <registry>/<repository>:<tag>; prints
                                               the reference pinned to its digest, for spec.desired.oci or
                                               spec.artifact.oci

Flags:
  -n, --namespace NS     the namespace (default: the current context's, else "default")
  -A, --all-namespaces   status across every namespace
      --kind K           schema or migration, when a name alone is ambiguous
  -o, --output FORMAT    plan output: yaml or sql
      --version V        repair: the dirty row's migration version
      --resolution R     repair: finished or undone
      --annotation K=V   push: a manifest annotation (repeatable), e.g. org.opencontainers.image.source=URL
      --registry-config FILE  push: the Docker config holding the registry's credentials
                         (default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json)
      --ca-file FILE     push: PEM certificates the registry is trusted by (instead of the system's roots)
      --kubeconfig FILE  the kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)
  -h, --help             this text
`;

export interface RunIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const defaultIo: RunIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

// A record rather than a list, so the compiler holds it to cluster.ts's commands both ways.
const COMMANDS: Record<Command, true> = { status: true, explain: true, plan: true, approve: true, acknowledge: true, repair: true };
const isCommand = (word: string): word is Command => Object.hasOwn(COMMANDS, word);

/** Runs one invocation; returns the exit code instead of exiting so tests can call it in-process. */
export async function run(argv: readonly string[], io: RunIo = defaultIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        namespace: { type: 'string', short: 'n' },
        'all-namespaces': { type: 'boolean', short: 'A' },
        kind: { type: 'string' },
        output: { type: 'string', short: 'o' },
        version: { type: 'string' },
        resolution: { type: 'string' },
        annotation: { type: 'string', multiple: true },
        'registry-config': { type: 'string' },
        'ca-file': { type: 'string' },
        kubeconfig: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    io.err(`error: ${(e as Error).message}`);
    io.err(USAGE);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') {
    io.out(USAGE);
    return 0;
  }
  const expect = (count: number, what: string): string => {
    if (rest.length !== count) throw new CliError(`${command} takes ${what}`, 2);
    return rest[0] ?? '';
  };
  try {
    if (!command) throw new CliError('no command given', 2);
    if (values['all-namespaces'] && command !== 'status') throw new CliError('-A is for status only', 2);
    if (values.output !== undefined && command !== 'plan') throw new CliError('-o is for plan only', 2);
    if (command !== 'repair' && (values.version !== undefined || values.resolution !== undefined)) throw new CliError('--version and --resolution are for repair only', 2);
    if (command === 'push') return await pushCommand(rest, values, io);
    if (values.annotation !== undefined || values['registry-config'] !== undefined || values['ca-file'] !== undefined) {
      throw new CliError('--annotation, --registry-config and --ca-file are for push only', 2);
    }
    if (!isCommand(command)) throw new CliError(`unknown command ${JSON.stringify(command)}`, 2);
    const repair = command === 'repair' ? await repairFlags(values.version, values.resolution) : undefined;
    // Arguments are checked before the kubeconfig is read, so a usage error never depends on the cluster, and
    // before the cluster client is loaded, so it costs no more than node's start.
    const target = command === 'status' ? expect(0, 'no argument') : expect(1, command === 'explain' ? '<kind>/<name>' : '<name>');
    const { runOnCluster } = await import('./cluster.js');
    await runOnCluster({
      command, target, namespace: values.namespace, allNamespaces: values['all-namespaces'] ?? false,
      kind: values.kind, output: values.output, kubeconfig: values.kubeconfig, ...(repair ? { repair } : {}),
    }, io.out);
    return 0;
  } catch (e) {
    if (e instanceof CliError) {
      io.err(`error: ${e.message}`);
      if (e.exitCode === 2) io.err('Run `kubectl ptah --help` for usage.');
      return e.exitCode;
    }
    // An ApiError says which request failed and what the API server answered; nothing of the kubeconfig.
    io.err(`error: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

/** push works on a directory and a registry, never on the cluster: its module is loaded for it alone. */
async function pushCommand(rest: string[], values: { kind?: string; annotation?: string[]; 'registry-config'?: string; 'ca-file'?: string; namespace?: string }, io: RunIo): Promise<number> {
  if (rest.length !== 2) throw new CliError('push takes <directory> <reference>', 2);
  if (values.kind !== undefined && values.kind !== 'schema' && values.kind !== 'migration') throw new CliError(`--kind ${JSON.stringify(values.kind)} is not schema or migration`, 2);
  if (values.namespace !== undefined) throw new CliError('-n is not for push: it talks to a registry, not the cluster', 2);
  const { push } = await import('./push.js');
  await push({
    directory: rest[0]!, reference: rest[1]!, annotations: values.annotation ?? [],
    ...(values.kind ? { kind: values.kind } : {}),
    ...(values['registry-config'] ? { registryConfig: values['registry-config'] } : {}),
    ...(values['ca-file'] ? { caFile: values['ca-file'] } : {}),
  }, io.out);
  return 0;
}

/**
 * repair's flags, checked before the cluster is reached: both given, a version of digits, a known resolution. The
 * resolutions are loaded only here, so that no other command, nor --help, loads a shared module.
 */
async function repairFlags(version: string | undefined, resolution: string | undefined): Promise<MigrationRepair> {
  const { isRepairResolution, REPAIR_RESOLUTIONS } = await import('../shared/migration-repair.js');
  if (version === undefined || resolution === undefined) throw new CliError('repair takes --version <the dirty row\'s version> and --resolution finished|undone', 2);
  if (!/^[0-9]{1,32}$/.test(version)) throw new CliError(`--version ${JSON.stringify(version)} is not a migration version (digits)`, 2);
  if (!isRepairResolution(resolution)) throw new CliError(`--resolution ${JSON.stringify(resolution)} is not one of ${REPAIR_RESOLUTIONS.join(', ')}`, 2);
  return { version, resolution };
}

// Run only when executed, not when a test imports run(); the launcher may reach this file through a symlink.
const invoked = process.argv[1] ? realpathSync(process.argv[1]) : '';
if (invoked === realpathSync(fileURLToPath(import.meta.url))) {
  const code = await run(process.argv.slice(2));
  process.exitCode = code;
}
