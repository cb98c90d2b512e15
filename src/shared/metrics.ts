// The process's one prom-client Registry, and the webhook's series. The webhook series use controller-runtime's
// names and labels so stock dashboards and alerts for Go operators read this one unchanged. Other parts of the
// manager (the controller) register their own metrics into `registry`.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const registry = new Registry();

let defaultsEnabled = false;
/** process_* and nodejs_* series; called once by main, never by tests (it starts an event-loop monitor). */
export function enableDefaultMetrics(): void {
  if (defaultsEnabled) return;
  defaultsEnabled = true;
  collectDefaultMetrics({ register: registry });
}

/**
 * The registry's exposition, as bytes so that no answer encodes it again. At most one render runs at a time: the
 * scrapes that arrive while one runs share the render that starts once it ends, so however many scrapes wait they
 * cost two renders, and every answer was rendered after its request arrived (a test or an alert that acts and then
 * scrapes never reads a value from before it acted).
 */
export function coalescedScrape(): () => Promise<Buffer> {
  let running: Promise<Buffer> | undefined;
  let next: Promise<Buffer> | undefined;
  const start = (): Promise<Buffer> => {
    const render = registry.metrics().then((text) => Buffer.from(text));
    running = render;
    const done = () => {
      if (running === render) running = undefined;
    };
    render.then(done, done);
    return render;
  };
  return () => {
    if (!running) return start();
    next ??= running.then(
      () => undefined,
      () => undefined,
    ).then(() => {
      next = undefined;
      return start();
    });
    return next;
  };
}

export type AdmissionDecision = 'allowed' | 'denied' | 'errored';

export const webhookMetrics = {
  requests: new Counter({
    name: 'controller_runtime_webhook_requests_total',
    help: 'Total number of admission requests by HTTP status code.',
    labelNames: ['webhook', 'code'] as const,
    registers: [registry],
  }),
  latency: new Histogram({
    name: 'controller_runtime_webhook_latency_seconds',
    help: 'Histogram of the latency of processing admission requests.',
    labelNames: ['webhook'] as const,
    registers: [registry],
  }),
  inFlight: new Gauge({
    name: 'controller_runtime_webhook_requests_in_flight',
    help: 'Current number of admission requests being served.',
    labelNames: ['webhook'] as const,
    registers: [registry],
  }),
  decisions: new Counter({
    name: 'ptah_operator_admission_decisions_total',
    help: 'Admission answers by route and decision (allowed, denied, errored).',
    labelNames: ['webhook', 'decision'] as const,
    registers: [registry],
  }),
  certificateExpiry: new Gauge({
    name: 'ptah_operator_webhook_certificate_expiry_timestamp_seconds',
    help: 'Not-after time of the serving certificate currently in use, as a Unix timestamp.',
    registers: [registry],
  }),
  certificateReadFailures: new Counter({
    name: 'ptah_operator_webhook_certificate_read_failures_total',
    help: 'Failed attempts to read or validate the serving certificate files; the previous certificate stays in use.',
    registers: [registry],
  }),
};
