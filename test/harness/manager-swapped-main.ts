// A test-only manager: wired as src/main.ts wires it (same config, webhook service, controller manager, schema and
// migration controllers) except that the dispatch order has two steps exchanged (`--swap a,b`, swapped() in
// src/shared/lifecycle/dispatch.ts). The crash-window tests run it to see their assertions fail against a wrong
// order. It lives under test/ so no production build can start it; src/ reads no switch for it.
import { leaderElectionTiming, loadConfig } from '../../src/config.js';
import { startController } from '../../src/controller/manager.js';
import { migrationControllerRegistration } from '../../src/controller/migration/register.js';
import { schemaControllerRegistration } from '../../src/controller/schema/register.js';
import { systemClock } from '../../src/shared/clock.js';
import { restClient } from '../../src/shared/kube-client.js';
import { createUncachedReader, loadKubeConfig } from '../../src/shared/kube.js';
import { ORDER, swapped, type DispatchStep } from '../../src/shared/lifecycle/dispatch.js';
import { createLogger } from '../../src/shared/logger.js';
import { ServingCertificate } from '../../src/shared/tls.js';
import { buildMetricsServer, buildServer } from '../../src/webhook/server.js';

function swapOf(argv: string[]): [DispatchStep, DispatchStep] {
  const at = argv.indexOf('--swap');
  const steps = (at >= 0 ? argv[at + 1] ?? '' : '').split(',');
  const known = (s: string | undefined): s is DispatchStep => (ORDER as readonly string[]).includes(s ?? '');
  if (steps.length !== 2 || !known(steps[0]) || !known(steps[1])) throw new Error(`--swap wants two of ${ORDER.join(', ')}, got ${JSON.stringify(argv[at + 1])}`);
  argv.splice(at, 2);
  return [steps[0], steps[1]];
}

const argv = process.argv.slice(2);
const [a, b] = swapOf(argv);
const order = swapped(a, b);
const config = loadConfig(argv, {});
const logger = createLogger({ level: config.logLevel, base: { component: 'ptah-manager', swapped: `${a}<->${b}` } });
const kubeConfig = loadKubeConfig(config.kubeconfig);
const certificate = await ServingCertificate.load(config.certDir ?? '', { logger });
const manager = { controllerImage: config.controllerImage, controllerRevision: config.revision, runnerImage: config.runnerImage };
const server = await buildServer({
  reader: createUncachedReader(kubeConfig, config.readTimeoutMs),
  config: { managerUsername: config.managerUsername, manager },
  logger,
  clock: systemClock,
  certificate,
});
await server.listen({ host: config.listenHost, port: config.port });
await (await buildMetricsServer({ logger, certificate })).listen({ host: config.listenHost, port: config.metricsPort });
startController({
  kubeConfig,
  client: await restClient(kubeConfig),
  logger,
  leaseNamespace: config.leaseNamespace,
  leaseName: 'ptah-operator.operator.ptah.run',
  leaderElection: leaderElectionTiming(config),
  workers: config.workers,
  controllers: [schemaControllerRegistration({ manager, order, namespace: config.watchNamespace, leaseNamespace: config.leaseNamespace }), migrationControllerRegistration({ manager, order, namespace: config.watchNamespace, leaseNamespace: config.leaseNamespace })],
});
logger.info({ order }, 'manager started with a swapped dispatch order');
