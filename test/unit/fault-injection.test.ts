// The crash proxy's fault draws (test/harness/fault-injection.ts) and its namespace scoping (crash-proxy.ts).
import t from 'tap';
import { scopedPath } from '../harness/crash-proxy.js';
import { faultInjector, type FaultRates } from '../harness/fault-injection.js';

const RATES: FaultRates = { error: 0.1, reset: 0.1, latency: 0.1, watchDrop: 0.5, latencyMs: [100, 200], watchDropAfterMs: [1_000, 3_000] };
const draws = (...values: number[]) => () => values.shift() ?? 0.99;

t.test('each band of a draw is one fault; a draw above them is none', async (t) => {
  t.same(faultInjector(RATES, draws(0.05)).decide({ method: 'PUT', watch: false }), { kind: 'error' });
  t.same(faultInjector(RATES, draws(0.15)).decide({ method: 'PUT', watch: false }), { kind: 'reset' });
  t.same(faultInjector(RATES, draws(0.25, 0.5)).decide({ method: 'GET', watch: false }), { kind: 'latency', ms: 150 });
  t.equal(faultInjector(RATES, draws(0.35)).decide({ method: 'GET', watch: false }), undefined);
});

t.test('only a watch is dropped, after a delay within its range', async (t) => {
  t.same(faultInjector(RATES, draws(0.35, 0.2, 0)).decide({ method: 'GET', watch: true }), { kind: 'watchDrop', afterMs: 1_000 });
  t.equal(faultInjector(RATES, draws(0.35, 0.6)).decide({ method: 'GET', watch: true }), undefined, 'the second draw above the watch rate');
});

t.test('a fault is counted when the proxy applies it, not when it is drawn', async (t) => {
  const injector = faultInjector(RATES, draws(0.05));
  injector.decide({ method: 'PUT', watch: false });
  t.same(injector.counts, { error: 0, reset: 0, latency: 0, watchDrop: 0 });
  injector.applied('error');
  t.equal(injector.counts.error, 1);
});

t.test('cluster-wide lists of namespaced kinds are scoped to the namespace; the cluster-scoped PtahRealm is not', async (t) => {
  t.equal(scopedPath('/apis/operator.ptah.run/v1alpha1/ptahmigrations?watch=true', 'ns1'), '/apis/operator.ptah.run/v1alpha1/namespaces/ns1/ptahmigrations?watch=true');
  t.equal(scopedPath('/api/v1/pods', 'ns1'), '/api/v1/namespaces/ns1/pods');
  t.equal(scopedPath('/apis/operator.ptah.run/v1alpha1/ptahrealms?watch=true', 'ns1'), '/apis/operator.ptah.run/v1alpha1/ptahrealms?watch=true');
  t.equal(scopedPath('/apis/operator.ptah.run/v1alpha1/ptahrealmsx', 'ns1'), '/apis/operator.ptah.run/v1alpha1/namespaces/ns1/ptahrealmsx');
});
