// `kubectl ptah push` of a directory to a test registry, in-process, with the registry's credentials and CA: the one
// way tests and the fixture maker put an artifact of ours into a registry.
import { join } from 'node:path';
import { run } from '../../src/cli/kubectl-ptah.js';
import type { RunningRegistry } from '../../tools/stack/registry.js';

/** Pushes `directory` to `<registry>/<reference>` with the annotations; returns the digest push printed. */
export async function pushDirectory(registry: RunningRegistry, directory: string, reference: string, annotations: Record<string, string> = {}): Promise<string> {
  const out: string[] = [];
  const flags = Object.entries(annotations).flatMap(([key, value]) => ['--annotation', `${key}=${value}`]);
  const code = await run(['push', directory, `${registry.host}/${reference}`, '--registry-config', join(registry.dockerConfigDir, 'config.json'), '--ca-file', registry.caFile, ...flags],
    { out: (line) => out.push(line), err: (line) => out.push(line) });
  const digest = /@(sha256:[a-f0-9]{64})$/.exec(out[0] ?? '')?.[1];
  if (code !== 0 || !digest) throw new Error(`kubectl ptah push ${directory} ${reference} failed (${code}): ${out.join('\n')}`);
  return digest;
}
