// The manager process, wiring only: config → logger → kube → certificates → HTTPS service → controller (on the
// replica that holds the manager Lease), and an orderly shutdown. Every decision lives in the modules it wires.
import closeWithGrace from 'close-with-grace';
import { ensureDevCertificates } from '../certs/generate.js';
import { ConfigError, helpText, informationRequest, leaderElectionTiming, loadConfig, versionText, type Config } from './config.js';
import { startController, type ManagerHandle } from './controller/manager.js';
import { registerMigrationController } from './controller/migration/register.js';
import { registerSchemaController } from './controller/schema/register.js';
import { systemClock } from './shared/clock.js';
import { restClient } from './shared/kube-client.js';
import { createUncachedReader, loadKubeConfig } from './shared/kube.js';
import { createLogger } from './shared/logger.js';
import { enableDefaultMetrics } from './shared/metrics.js';
import { ServingCertificate } from './shared/tls.js';
import { buildMetricsServer, buildServer } from './webhook/server.js';

/** The Lease the manager replicas contend for; its holder runs the controllers. */
const MANAGER_LEASE = 'ptah-operator.operator.ptah.run';

async function main(): Promise<void> {
  const asked = informationRequest(process.argv.slice(2));
  if (asked) {
    process.stdout.write(asked === 'help' ? helpText() : versionText());
    return;
  }
  let config: Config;
  try {
    config = loadConfig(process.argv.slice(2), process.env);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`ptah-manager: ${e.message}\n`);
    process.exitCode = 2;
    return;
  }
  const logger = createLogger({ level: config.logLevel, base: { component: 'ptah-manager' } });
  enableDefaultMetrics();

  const kubeConfig = loadKubeConfig(config.kubeconfig);
  logger.info({ server: kubeConfig.getCurrentCluster().server, kubeconfig: kubeConfig.source }, 'API server');
  const reader = createUncachedReader(kubeConfig, config.readTimeoutMs);

  let certDir = config.certDir;
  if (!certDir) {
    certDir = (await ensureDevCertificates()).dir;
    logger.warn({ certDir }, 'no --cert-dir given: serving a generated development certificate (never use this in a cluster)');
  }
  const certificate = await ServingCertificate.load(certDir, { logger });
  certificate.start();

  let controller: ManagerHandle | undefined;
  let controllerFailed = false;
  const server = await buildServer({
    reader,
    config: {
      managerUsername: config.managerUsername,
      manager: { controllerImage: config.controllerImage, controllerRevision: config.revision, runnerImage: config.runnerImage },
    },
    logger,
    clock: systemClock,
    certificate,
    // Readiness is about admission, which every replica serves: a leader whose informers are still syncing must
    // not drop out of the webhook Service, or its own fail-closed writes would be refused.
    ready: () => !controllerFailed,
  });
  const metricsServer = await buildMetricsServer({ logger, certificate });

  const closer = closeWithGrace({ delay: 20_000, logger }, async ({ signal, err }) => {
    if (err) logger.error({ err }, 'shutting down after an unexpected error');
    else logger.info({ signal }, 'shutting down');
    // The controller first (it stops reconciling, then releases the Lease), then the service it depends on.
    await controller?.stop();
    certificate.stop();
    await Promise.all([server.close(), metricsServer.close()]);
  });

  await server.listen({ host: config.listenHost, port: config.port });
  await metricsServer.listen({ host: config.listenHost, port: config.metricsPort });

  // The controller starts after the webhook listens, so the writes the elected leader makes meet a serving webhook.
  if (config.leaderElection) {
    const manager = { controllerImage: config.controllerImage, controllerRevision: config.revision, runnerImage: config.runnerImage };
    const scope = { leaseNamespace: config.leaseNamespace, ...(config.watchNamespace ? { namespace: config.watchNamespace } : {}) };
    registerSchemaController({ manager, ...scope });
    registerMigrationController({ manager, ...scope });
    try {
      controller = startController({
        kubeConfig,
        client: await restClient(kubeConfig),
        logger,
        leaseNamespace: config.leaseNamespace,
        leaseName: MANAGER_LEASE,
        leaderElection: leaderElectionTiming(config),
        workers: config.workers,
        // As controller-runtime does: a replica that lost its Lease exits, and its restart contends again.
        onLeadershipLost: () => closer.close(),
      });
    } catch (e) {
      controllerFailed = true;
      logger.error({ err: e }, 'the controller could not start; this replica serves admission only and reports not ready');
    }
  } else {
    logger.warn('leader election is off: this replica serves admission only and runs no controller');
  }
  logger.info({ revision: config.revision, leaderElection: config.leaderElection, workers: config.workers, watchNamespace: config.watchNamespace ?? '(all)' }, 'manager started');
}

main().catch((e: unknown) => {
  process.stderr.write(`ptah-manager: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
