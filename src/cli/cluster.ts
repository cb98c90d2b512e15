// The part of `kubectl ptah` that talks to the cluster: the caller's kubeconfig, a KubeClient on it, and the command.
// The entry point imports this module only once the arguments are known good, so `--help` and a usage error never
// pay for loading @kubernetes/client-node and the commands' dependencies (issue #23: 0.9 s a call before).
import { KubeConfig } from '@kubernetes/client-node';
import { restClient } from '../shared/kube-client.js';
import { acknowledgeCommand, approveCommand, explainCommand, planCommand, repairCommand, statusCommand, type Context } from './commands.js';
import type { MigrationRepair } from '../shared/migration-repair.js';
import { CliError } from './errors.js';

export type Command = 'status' | 'explain' | 'plan' | 'approve' | 'acknowledge' | 'repair';

/** One checked invocation: the command, its single argument (empty for status) and the flags it may use. */
export interface Invocation {
  command: Command;
  target: string;
  namespace: string | undefined;
  allNamespaces: boolean;
  kind: string | undefined;
  output: string | undefined;
  kubeconfig: string | undefined;
  /** repair only: the checked --version and --resolution. */
  repair?: MigrationRepair;
}

/**
 * The caller's kubeconfig, through client-node rather than the manager's loader: a person's kubeconfig often
 * authenticates with an exec plugin or an auth provider (EKS, GKE, OIDC), which only client-node runs. kubectl-ptah
 * is a short-lived process, so client-node's memory (the manager's reason to drop it) does not matter here.
 */
function callerKubeConfig(file: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  const named = file ? ` ${file}` : '';
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
  } catch (e) {
    throw new CliError(`cannot load the kubeconfig${named}: ${(e as Error).message}`);
  }
  if (!kc.getCurrentCluster()) throw new CliError(`the kubeconfig${named} names no current cluster; pass --kubeconfig`);
  return kc;
}

/** Runs one command as the kubeconfig's user; failures are thrown for the entry point to report. */
export async function runOnCluster(call: Invocation, out: (line: string) => void): Promise<void> {
  const kc = callerKubeConfig(call.kubeconfig);
  const namespace = call.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
  const ctx: Context = { client: await restClient(kc, { fieldManager: 'kubectl-ptah', timeoutMs: 15_000 }), namespace, out };
  switch (call.command) {
    case 'status': return statusCommand(ctx, call.allNamespaces);
    case 'explain': return explainCommand(ctx, call.target, call.kind);
    case 'plan': return planCommand(ctx, call.target, call.kind, call.output);
    case 'approve': return approveCommand(ctx, call.target, call.kind);
    case 'acknowledge': return acknowledgeCommand(ctx, call.target, call.kind);
    case 'repair': return repairCommand(ctx, call.target, call.kind, call.repair!);
  }
}
