// Self-contained kubeconfig files (CA, client certificate and key embedded), one per identity, so a test, kubectl
// or `npm run local` can use any of them without the harness's other files.
import { readFile, writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import type { CertFiles } from './pki.js';

export interface KubeconfigInput {
  server: string;
  caPem: string;
  /** A client certificate, or a bearer token (a ServiceAccount's, from the TokenRequest API). */
  client: CertFiles | { token: string };
  /** Names the user, cluster and context entries inside the file. */
  name: string;
}

export async function writeKubeconfig(file: string, input: KubeconfigInput): Promise<void> {
  const b64 = (data: string | Buffer) => Buffer.from(data).toString('base64');
  const { client } = input;
  const user = 'token' in client ? { token: client.token }
    : { 'client-certificate-data': b64(await readFile(client.cert)), 'client-key-data': b64(await readFile(client.key)) };
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'ptah-test', cluster: { server: input.server, 'certificate-authority-data': b64(input.caPem) } }],
    users: [{ name: input.name, user }],
    contexts: [{ name: input.name, context: { cluster: 'ptah-test', user: input.name } }],
    'current-context': input.name,
  };
  await writeFile(file, stringify(doc), { mode: 0o600 });
}
