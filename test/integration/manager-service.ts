// The manager's real admission service, run inside a test process on 127.0.0.1 and registered with the shared API
// server, so the API server itself calls it over TLS. Wired as src/main.ts wires it (uncached reader on the
// manager's credentials, ServingCertificate, buildServer), with a per-run certificate whose only name is 127.0.0.1.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateCertificates } from '../../certs/generate.js';
import { MANAGER_USERNAME } from '../../src/shared/api/names.js';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { systemClock } from '../../src/shared/clock.js';
import { createUncachedReader } from '../../src/shared/kube.js';
import { ServingCertificate } from '../../src/shared/tls.js';
import { buildServer, type ManagerImages } from '../../src/webhook/server.js';
import { sharedCluster, type SharedCluster } from '../../tools/stack/cluster.js';
import { registerWebhooks } from '../../tools/stack/webhooks.js';

/** The manager release the service believes it is; Jobs a test builds for its claims record the same. */
export const TEST_MANAGER_IMAGES: ManagerImages = {
  controllerImage: `registry.example/ptah-operator@sha256:${'c'.repeat(64)}`,
  controllerRevision: 'integration-test',
  runnerImage: `registry.example/ptah-runner@sha256:${'d'.repeat(64)}`,
};

// Below the webhooks' 10 s admission timeout, so a slow read refuses with a reason instead of timing out.
const READ_TIMEOUT_MS = 5_000;

export interface ManagerService {
  /** https://127.0.0.1:<port> */
  url: string;
  /** Admission requests the service has answered. */
  answered(): number;
  /** Unregisters the webhooks, then closes the service and removes its certificate. */
  stop(): Promise<void>;
}

export interface ManagerServiceOptions {
  /** The only namespace whose requests the API server sends to this service. */
  namespace: string;
  cluster?: SharedCluster;
}

const ADMISSION_PATHS = new Set<string>(Object.values(WEBHOOK_PATHS));

/**
 * Starts the service and registers the project's webhook configurations for it, scoped to `namespace`; returns
 * once the API server has called it. manifests/rbac.yaml must be applied (the registration probe and the
 * service's reads run as the manager).
 */
export async function startManagerService(options: ManagerServiceOptions): Promise<ManagerService> {
  const cluster = options.cluster ?? sharedCluster();
  const dir = await mkdtemp(join(tmpdir(), 'ptah-manager-service-'));
  const cleanups: (() => Promise<unknown> | unknown)[] = [() => rm(dir, { recursive: true, force: true })];
  const stop = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  };
  try {
    const files = await generateCertificates({ outDir: dir, sans: ['IP:127.0.0.1'], commonName: 'ptah-webhook-integration-test' });
    const certificate = await ServingCertificate.load(dir);
    const app = await buildServer({
      reader: createUncachedReader(cluster.kubeConfig('manager'), READ_TIMEOUT_MS),
      config: { managerUsername: MANAGER_USERNAME, manager: TEST_MANAGER_IMAGES },
      logger: false,
      clock: systemClock,
      certificate,
    });
    let answered = 0;
    app.addHook('onResponse', async (request) => {
      if (ADMISSION_PATHS.has(request.routeOptions.url ?? '')) answered += 1;
    });
    cleanups.push(() => app.close());
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const hooks = await registerWebhooks(url, await readFile(files.caCert, 'utf8'), {
      answered: () => answered,
      namespace: options.namespace,
      name: `ptah-test-admission-${options.namespace}`,
      cluster,
    });
    // Unregistered before the service closes, so the API server never calls a closed service (it fails closed).
    cleanups.push(() => hooks.unregister());
    return { url, answered: () => answered, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
