// A `node --cpu-prof` profile, read once: its nodes by id, each node's parent, and where a node's code lives.
// bench/profile.ts (the webhook) and bench/manager-profile.ts (the manager) read profiles through this.

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  byId: Map<number, ProfileNode>;
  parent: Map<number, number>;
}

export function readCpuProfile(text: string): CpuProfile {
  const raw = JSON.parse(text) as Pick<CpuProfile, 'nodes' | 'samples' | 'timeDeltas'>;
  const parent = new Map<number, number>();
  for (const n of raw.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  return { ...raw, byId: new Map(raw.nodes.map((n) => [n.id, n])), parent };
}

/** A package under node_modules, a node: module, a file of this repository, or the VM's own entry ((garbage collector), a RegExp). */
export function sourceOf(n: ProfileNode): string {
  const { url, functionName } = n.callFrame;
  if (!url) return functionName.startsWith('RegExp:') ? '(regular expressions)' : functionName;
  const packageName = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (packageName) return packageName[1]!;
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  return url.replace(/^file:\/\//, '').replace(`${process.cwd()}/`, '');
}
