import t from 'tap';
import { pino } from 'pino';
import { ManualClock } from '../../src/controller/clock.js';
import { EventRecorder, REDACTED_URL, redactNote } from '../../src/controller/events.js';
import { ApiError, type KubeClient, type KubeObject, type PatchType, type ResourceRef } from '../../src/shared/kube-client.js';

const silent = pino({ level: 'silent' });

interface Call {
  verb: 'create' | 'patch';
  body: Record<string, unknown>;
  ref?: ResourceRef;
  type?: PatchType;
}

/** Records what the recorder writes; `fail` decides per call whether (and how) it fails. */
function fakeClient(fail: (call: Call) => Error | undefined = () => undefined) {
  const calls: Call[] = [];
  let gate: Promise<void> = Promise.resolve();
  const client: Pick<KubeClient, 'create' | 'patch'> = {
    async create<T extends KubeObject>(object: T) {
      const call: Call = { verb: 'create', body: structuredClone(object) as Record<string, unknown> };
      calls.push(call);
      await gate;
      const err = fail(call);
      if (err) throw err;
      return object;
    },
    async patch<T extends KubeObject>(ref: ResourceRef, patch: unknown, type: PatchType) {
      const call: Call = { verb: 'patch', body: structuredClone(patch) as Record<string, unknown>, ref, type };
      calls.push(call);
      await gate;
      const err = fail(call);
      if (err) throw err;
      return {} as T;
    },
  };
  return {
    client,
    calls,
    /** Holds every write until the returned function is called. */
    hold(): () => void {
      let open!: () => void;
      gate = new Promise<void>((r) => (open = r));
      return () => {
        gate = Promise.resolve();
        open();
      };
    },
  };
}

const schema: KubeObject = {
  apiVersion: 'operator.ptah.run/v1alpha1',
  kind: 'PtahSchema',
  metadata: { name: 'app', namespace: 'team-a', uid: 'uid-1', resourceVersion: '42' },
};

function recorder(client: Pick<KubeClient, 'create' | 'patch'>, clock = new ManualClock()) {
  return new EventRecorder({ client, controller: 'operator.ptah.run/manager', instance: 'host_1', logger: silent, clock, aggregationWindowMs: 60_000 });
}

t.test('redactNote removes URLs and credentials and bounds the size', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['database URL', 'cannot connect to postgres://app:s3cret@db.internal:5432/app?sslmode=require now', `cannot connect to ${REDACTED_URL} now`],
    ['https URL', 'see https://example.com/x?token=abc', `see ${REDACTED_URL}`],
    ['libpq keywords', 'host=db user=app password=s3cret dbname=app', 'host=db user=app password=[REDACTED] dbname=app'],
    ['quoted value', "password='two words' next", "password='[REDACTED]' next"],
    ['colon form', 'token: abc.def ok', 'token: [REDACTED] ok'],
    ['JSON-ish', '{"password":"hunter2","user":"app"}', '{"password":"[REDACTED]","user":"app"}'],
    ['bearer header', 'Authorization: Bearer eyJhbGciOi.x.y', 'Authorization: Bearer [REDACTED]'],
    ['api key', 'API_KEY=xyz', 'API_KEY=[REDACTED]'],
    ['harmless text stays', 'plan sha256:abcd has 3 statements; passwordless login is off', 'plan sha256:abcd has 3 statements; passwordless login is off'],
  ];
  for (const [what, input, want] of cases) t.equal(redactNote(input), want, what);

  const long = 'é'.repeat(2000);
  const cut = redactNote(long);
  t.ok(Buffer.byteLength(cut) <= 1024, 'cut to 1 KiB of UTF-8');
  t.ok(cut.endsWith('…'));
  t.notOk(cut.includes('\uFFFD'), 'no broken characters');
  const emoji = redactNote('😀'.repeat(400));
  t.ok(Buffer.byteLength(emoji) <= 1024);
  t.notOk(/[\uD800-\uDBFF]…$/.test(emoji), 'no half surrogate pair before the ellipsis');
});

t.test('the first occurrence creates an events.k8s.io/v1 Event with a redacted note', async (t) => {
  const { client, calls } = fakeClient();
  const r = recorder(client);
  r.record(schema, { type: 'Warning', reason: 'TargetUnreachable', note: 'dial postgres://u:p@db:5432/x failed', action: 'Observe' });
  await r.flush();
  t.equal(calls.length, 1);
  const body = calls[0]?.body as Record<string, unknown>;
  t.match(body, {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { namespace: 'team-a', name: /^app\.[0-9a-f]{16}$/ },
    reportingController: 'operator.ptah.run/manager',
    reportingInstance: 'host_1',
    action: 'Observe',
    reason: 'TargetUnreachable',
    type: 'Warning',
    note: `dial ${REDACTED_URL} failed`,
    regarding: { apiVersion: 'operator.ptah.run/v1alpha1', kind: 'PtahSchema', name: 'app', namespace: 'team-a', uid: 'uid-1' },
  });
  t.match(body.eventTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'eventTime is a MicroTime');
  t.notOk('series' in body, 'a single occurrence has no series');
});

t.test('repeats within the window grow one series; repeats during a write fold into the next', async (t) => {
  const clock = new ManualClock();
  const { client, calls, hold } = fakeClient();
  const r = recorder(client, clock);
  const event = { type: 'Warning' as const, reason: 'ApplyFailed', note: 'relation "x" does not exist' };
  const release = hold();
  r.record(schema, event);
  clock.advance(1000);
  r.record(schema, event);
  r.record(schema, event);
  await new Promise((res) => setImmediate(res));
  t.equal(calls.length, 1, 'one write in flight; the repeats wait for it');
  release();
  await r.flush();
  t.equal(calls.length, 2);
  t.match(calls[1], { verb: 'patch', type: 'merge', ref: { apiVersion: 'events.k8s.io/v1', kind: 'Event', namespace: 'team-a' }, body: { series: { count: 3 } } });
  t.equal(calls[1]?.ref?.name, (calls[0]?.body.metadata as { name: string }).name, 'the same Event is patched');

  clock.advance(30_000);
  r.record(schema, event);
  await r.flush();
  t.match(calls[2], { verb: 'patch', body: { series: { count: 4 } } });

  r.record(schema, { ...event, note: 'another message' });
  await r.flush();
  t.match(calls[3], { verb: 'create', body: { note: 'another message' } }, 'a different note is a different Event');

  clock.advance(60_000);
  r.record(schema, event);
  await r.flush();
  t.match(calls[4], { verb: 'create', body: { reason: 'ApplyFailed' } }, 'after the window a fresh Event starts');
  t.notOk('series' in (calls[4]?.body ?? {}));
});

t.test('an Event that vanished is recreated carrying the series so far', async (t) => {
  const clock = new ManualClock();
  const { client, calls } = fakeClient((call) => (call.verb === 'patch' ? new ApiError({ code: 404, reason: 'NotFound' }, 'PATCH') : undefined));
  const r = recorder(client, clock);
  const event = { type: 'Normal' as const, reason: 'Waiting', note: 'realm held by another resource' };
  r.record(schema, event);
  await r.flush();
  r.record(schema, event);
  await r.flush();
  t.same(calls.map((c) => c.verb), ['create', 'patch', 'create']);
  t.match(calls[2]?.body, { series: { count: 2 } });
  t.not((calls[2]?.body.metadata as { name: string }).name, (calls[0]?.body.metadata as { name: string }).name);
});

t.test('recording never throws: failed writes and bad input are logged and dropped', async (t) => {
  const { client, calls } = fakeClient(() => new ApiError({ code: 403, reason: 'Forbidden' }, 'POST'));
  const r = recorder(client);
  t.doesNotThrow(() => r.record(schema, { type: 'Normal', reason: 'Applied', note: 'ok' }));
  await r.flush();
  t.equal(calls.length, 1, 'the failing create was attempted');

  const bad: Array<[string, KubeObject, Parameters<EventRecorder['record']>[1]]> = [
    ['lower-case reason', schema, { type: 'Normal', reason: 'applied', note: '' }],
    ['empty reason', schema, { type: 'Normal', reason: '', note: '' }],
    ['reason too long', schema, { type: 'Normal', reason: `A${'b'.repeat(128)}`, note: '' }],
    ['unknown type', schema, { type: 'Error' as 'Normal', reason: 'Applied', note: '' }],
    ['action too long', schema, { type: 'Normal', reason: 'Applied', note: '', action: 'x'.repeat(129) }],
    ['regarding without kind', { apiVersion: 'v1', metadata: { name: 'x' } }, { type: 'Normal', reason: 'Applied', note: '' }],
  ];
  for (const [what, regarding, event] of bad) t.doesNotThrow(() => r.record(regarding, event), what);
  await r.flush();
  t.equal(calls.length, 1, 'invalid events are not written');
  t.throws(() => new EventRecorder({ client, controller: '', instance: 'x', logger: silent }), /reporting controller and instance/);
});

t.test('a cluster-scoped object gets its Event in the default namespace', async (t) => {
  const { client, calls } = fakeClient();
  const r = recorder(client);
  r.record({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' } }, { type: 'Normal', reason: 'Seen', note: '' });
  await r.flush();
  t.match(calls[0]?.body, { metadata: { namespace: 'default' }, regarding: { kind: 'Node', name: 'node-1' } });
  t.notOk('namespace' in ((calls[0]?.body.regarding ?? {}) as object));
});
