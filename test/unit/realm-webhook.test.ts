// /validate/realm through the real server (fastify.inject): a PtahRealm that overlaps another is refused naming the
// other and the namespaces, a bad spec is refused naming its field, the engine never changes, and a read that fails
// refuses (fail closed).
import t from 'tap';
import { API_VERSION } from '../../src/shared/api/names.js';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import { harness, review, type Harness } from '../harness/webhook.js';

const KIND = { group: 'operator.ptah.run', version: 'v1alpha1', kind: 'PtahRealm' };
const RESOURCE = { group: 'operator.ptah.run', version: 'v1alpha1', resource: 'ptahrealms' };

const realm = (name: string, spec: Record<string, unknown>) => ({ apiVersion: API_VERSION, kind: 'PtahRealm', metadata: { name }, spec });
const spec = (namespaces: string[], engine = 'PostgreSQL', sharing = 'Shared') => ({ engine, namespaces, sharing });

async function judge(h: Harness, operation: 'CREATE' | 'UPDATE', name: string, object: unknown, oldObject?: unknown) {
  return h.admit(WEBHOOK_PATHS.realm, review({ operation, kind: KIND, resource: RESOURCE, name, object, ...(oldObject ? { oldObject } : {}) }));
}

t.test('overlap: one engine and a namespace in common is refused, naming the other realm and the namespaces', async (t) => {
  const h = await harness();
  t.teardown(() => h.close());
  h.reader.put(realm('orders', spec(['shop', 'billing'])));
  const refused = await judge(h, 'CREATE', 'orders-2', realm('orders-2', spec(['billing', 'other'])));
  t.equal(refused.allowed, false);
  t.match(refused.status?.message, /^spec\.namespaces overlaps PtahRealm "orders" for engine "PostgreSQL" \(both list billing\)/);
  t.equal((await judge(h, 'CREATE', 'orders-3', realm('orders-3', spec(['billing'], 'postgresql')))).allowed, false, 'engines compare normalized');
  t.equal((await judge(h, 'CREATE', 'orders-2', realm('orders-2', spec(['other'])))).allowed, true, 'negative: no namespace in common');
  t.equal((await judge(h, 'CREATE', 'orders-2', realm('orders-2', spec(['shop'], 'MySQL')))).allowed, true, 'negative: another engine');
  const update = await judge(h, 'UPDATE', 'orders', realm('orders', spec(['shop', 'billing', 'more'])), realm('orders', spec(['shop', 'billing'])));
  t.equal(update.allowed, true, 'a realm does not overlap itself');
});

t.test('a bad spec is refused naming its field; the engine is immutable', async (t) => {
  const h = await harness();
  t.teardown(() => h.close());
  const cases: [string, unknown, RegExp][] = [
    ['no spec', { apiVersion: API_VERSION, kind: 'PtahRealm', metadata: { name: 'r' } }, /^spec is required/],
    ['engine', realm('r', spec(['shop'], '1pg')), /^spec\.engine must be a string matching/],
    ['no namespaces', realm('r', spec([])), /^spec\.namespaces must list 1 to 256 namespaces/],
    ['257 namespaces', realm('r', spec([...Array(257).keys()].map((i) => `n${i}`))), /^spec\.namespaces must list 1 to 256/],
    ['bad namespace', realm('r', spec(['Shop'])), /^spec\.namespaces holds "Shop", which is not a namespace name/],
    ['namespace twice', realm('r', spec(['shop', 'shop'])), /^spec\.namespaces lists a namespace twice/],
    ['sharing', realm('r', spec(['shop'], 'PostgreSQL', 'Sometimes')), /^spec\.sharing must be one of Exclusive, Shared/],
  ];
  for (const [what, object, message] of cases) {
    const answer = await judge(h, 'CREATE', 'r', object);
    t.equal(answer.allowed, false, what);
    t.match(answer.status?.message, message, what);
  }
  const moved = await judge(h, 'UPDATE', 'r', realm('r', spec(['shop'], 'MySQL')), realm('r', spec(['shop'])));
  t.match(moved, { allowed: false, status: { message: /^spec\.engine is immutable/ } });
  t.equal((await judge(h, 'CREATE', 'r', realm('r', spec(['shop'], 'PostgreSQL', 'Exclusive')))).allowed, true, 'negative: a good spec passes');
});

t.test('a list that fails refuses the realm', async (t) => {
  const h = await harness();
  t.teardown(() => h.close());
  h.reader.fail({ apiVersion: API_VERSION, kind: 'PtahRealm', name: '' }, 503);
  const answer = await judge(h, 'CREATE', 'r', realm('r', spec(['shop'])));
  t.match(answer, { allowed: false, status: { code: 500, message: /could not read PtahRealm/ } });
});

t.test('the route judges PtahRealm creates and updates only', async (t) => {
  const h = await harness();
  t.teardown(() => h.close());
  const other = await h.admit(WEBHOOK_PATHS.realm, review({ operation: 'CREATE', kind: { ...KIND, kind: 'PtahSchema' }, resource: RESOURCE, name: 'r', object: realm('r', spec(['shop'])) }));
  t.match(other, { allowed: false, status: { code: 400 } });
  const deletion = await h.admit(WEBHOOK_PATHS.realm, review({ operation: 'DELETE', kind: KIND, resource: RESOURCE, name: 'r', oldObject: realm('r', spec(['shop'])) }));
  t.match(deletion, { allowed: false, status: { code: 400 } });
});
