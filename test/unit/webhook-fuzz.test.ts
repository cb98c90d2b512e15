// A seeded fuzz run of hostile admission requests through the real HTTPS listener (127.0.0.1, the service's own
// TLS certificate): valid AdmissionReviews of every route, mutated the ways a hostile client would (wrong types,
// missing fields, huge strings, deep nesting, 1e400, lone surrogates, anonymous users, huge group lists, wrong
// kinds and versions, truncated and garbage JSON). Every answer is held to an oracle simpler than the judges: a
// mutation of a field the route binds is never admitted, no malformed input is a 5xx, every request is answered
// within a stall bound, and the process's memory is back near its baseline at the end.
//
// Replay a run with PTAH_FUZZ_SEED=<seed>; PTAH_FUZZ_CASES=<n> changes the number of cases per route.
import https from 'node:https';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { V1ConfigMap, V1Job } from '@kubernetes/client-node';
import t from 'tap';
import { ANNOTATIONS } from '../../src/shared/api/names.js';
import { WEBHOOK_PATHS } from '../../src/shared/api/webhooks.js';
import type { UserInfo } from '../../src/webhook/admission.js';
import { identityOf } from '../../src/webhook/identity.js';
import { BODY_LIMIT } from '../../src/webhook/server.js';
import { MANAGER, connectTls, harness, postText, review, whenClosed, type Endpoint, type PostResult } from '../harness/webhook.js';
import {
  ALICE, API, DECISION_RESOURCE, DECISION_SPEC, GROUP, JOB_UID, NS, chunkObjects, decisionCreate, install, installDecisionWorld, projections, stampedFor, world,
  type DecisionKindName,
} from '../harness/webhook-world.js';

const SEED = Number.parseInt(process.env.PTAH_FUZZ_SEED ?? '20240817', 10) >>> 0;
const CASES_PER_ROUTE = Number.parseInt(process.env.PTAH_FUZZ_CASES ?? '750', 10);
const CONCURRENCY = 4;
/** A stall detector, not a benchmark: a healthy answer takes milliseconds; the defects this guards took 2-27 s. */
const ANSWER_BOUND_MS = 2000;
/**
 * RSS may stay this far above its warmed-up baseline once the run is over and collected: allocator slack, not
 * retained bodies (runs end 30 MiB below to 25 MiB above it; the 3 000 bodies of a run add up to ~300 MiB).
 */
const RSS_TOLERANCE = 64 * 1024 * 1024;
/** The request timeout the fuzzed service runs with, so the slow-body case ends quickly. */
const REQUEST_TIMEOUT_MS = 2000;
const DECISION_NS = 'team-d';

// ---- a small seeded generator ----

function generator(seed: number) {
  let state = seed;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let x = state;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const weighted = <T extends string>(weights: Record<T, number>): T => {
    const entries = Object.entries(weights) as [T, number][];
    let r = next() * entries.reduce((sum, [, w]) => sum + w, 0);
    for (const [key, w] of entries) if ((r -= w) < 0) return key;
    return entries[0]![0];
  };
  const word = (): string => `q${Array.from({ length: 1 + int(12) }, () => String.fromCharCode(97 + int(26))).join('')}`;
  return { int, pick, weighted, word };
}
type Random = ReturnType<typeof generator>;

// ---- JSON paths ----

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Path = string[];

const isObject = (v: unknown): v is Record<string, Json> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every node below the root (a path to it), down to `maxDepth`. */
function pathsOf(value: Json, maxDepth = 16, prefix: Path = []): Path[] {
  if (prefix.length >= maxDepth || typeof value !== 'object' || value === null) return [];
  const entries: [string, Json][] = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  return entries.flatMap(([key, child]) => [[...prefix, key], ...pathsOf(child, maxDepth, [...prefix, key])]);
}

function parentOf(root: Json, path: Path): Json[] | Record<string, Json> {
  let node: Json = root;
  for (const key of path.slice(0, -1)) node = (node as Record<string, Json>)[key]!;
  return node as Json[] | Record<string, Json>;
}
const valueAt = (root: Json, path: Path): Json | undefined => (parentOf(root, path) as Record<string, Json>)[path.at(-1)!];

function setAt(root: Json, path: Path, value: Json | undefined): void {
  const parent = parentOf(root, path);
  const key = path.at(-1)!;
  if (Array.isArray(parent)) {
    if (value === undefined) parent.splice(Number(key), 1);
    else parent[Number(key)] = value;
  } else if (value === undefined) delete parent[key];
  else parent[key] = value;
}

const isEmpty = (v: Json | undefined): boolean =>
  v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0) || (isObject(v) && Object.keys(v).length === 0);

// ---- the oracle: which mutations of which fields a route must never admit ----

type Structural = 'delete' | 'retype' | 'restring' | 'huge';
const ALL: Structural[] = ['delete', 'retype', 'restring', 'huge'];

interface Rule {
  /** Segments; `*` is one segment, a trailing `**` any number (none included). */
  path: string[];
  /** The mutations that must be refused here; none means the route does not bind the field. */
  kinds: Structural[];
  /** The route compares as the API server stores: an empty value (null, '', [], {}) equals an absent one. */
  emptyIsAbsent?: boolean;
}

function matches(pattern: string[], path: Path): boolean {
  if (pattern.at(-1) === '**') return path.length >= pattern.length - 1 && pattern.slice(0, -1).every((p, i) => p === '*' || p === path[i]);
  return pattern.length === path.length && pattern.every((p, i) => p === '*' || p === path[i]);
}

/** What every route's envelope binds: the schema's required fields and types, and its length bounds. */
const ENVELOPE: Rule[] = [
  { path: ['apiVersion'], kinds: ALL },
  { path: ['kind'], kinds: ALL },
  { path: ['request'], kinds: ALL },
  { path: ['request', 'uid'], kinds: ['delete', 'retype', 'huge'] },
  { path: ['request', 'operation'], kinds: ALL },
  { path: ['request', 'userInfo'], kinds: ['delete', 'retype'] },
  { path: ['request', 'userInfo', '*'], kinds: ['retype'] },
  { path: ['request', 'userInfo', 'groups', '*'], kinds: ['retype'] },
  { path: ['request', 'name'], kinds: ['retype', 'huge'] },
  { path: ['request', 'namespace'], kinds: ['retype', 'huge'] },
  { path: ['request', 'kind'], kinds: ['delete', 'retype'] },
  { path: ['request', 'kind', '*'], kinds: ['delete', 'retype'] },
  { path: ['request', 'resource'], kinds: ['delete', 'retype'] },
  { path: ['request', 'resource', '*'], kinds: ['delete', 'retype'] },
];

/** The kind and resource a route checks exactly. */
const GVK_BOUND: Rule[] = [
  { path: ['request', 'kind', '**'], kinds: ALL },
  { path: ['request', 'resource', '**'], kinds: ALL },
];

/** A decision object: its kind, and metadata that must be an object whose namespace is the request's. */
const decisionObject = (which: 'object' | 'oldObject'): Rule[] => [
  { path: ['request', which], kinds: ['delete', 'retype'] },
  { path: ['request', which, 'apiVersion'], kinds: ALL },
  { path: ['request', which, 'kind'], kinds: ALL },
  { path: ['request', which, 'metadata'], kinds: ['retype'] },
  { path: ['request', which, 'metadata', 'namespace'], kinds: ['retype', 'restring', 'huge'] },
  { path: ['request', which, 'metadata', 'name'], kinds: ['retype'] },
  { path: ['request', which, 'spec'], kinds: ['delete', 'retype'] },
];

/** A manager write is held to what it rebuilds to: every field of `bound` (API-server empty semantics). */
const managerWrite = (bound: string[]): Rule[] => [
  { path: ['request', 'object', 'metadata', 'uid'], kinds: [] },
  { path: ['request', 'object', 'metadata', 'namespace'], kinds: ['retype', 'restring', 'huge'] },
  ...bound.map((field): Rule => ({ path: ['request', 'object', field, '**'], kinds: ALL, emptyIsAbsent: true })),
  { path: ['request', 'object'], kinds: ['delete', 'retype'] },
  { path: ['request', 'object', 'apiVersion'], kinds: ALL },
  { path: ['request', 'object', 'kind'], kinds: ALL },
  { path: ['request', 'name'], kinds: ALL },
  { path: ['request', 'namespace'], kinds: ALL },
  ...GVK_BOUND,
];

interface Base {
  name: string;
  route: string;
  review: Json;
  /** First match wins; ENVELOPE is appended. */
  rules: Rule[];
  /** A caller named system:anonymous must be refused. */
  callerBound: boolean;
  /** A caller in the group system:unauthenticated must be refused (the route authors a decision for it). */
  groupBound: boolean;
  /** An absurd group list must be refused (the route builds an identity from it). */
  identityBound: boolean;
  /** A request kind of another version must be refused. */
  kindBound: boolean;
  /** Makes an anonymous caller's request otherwise valid (a decision re-stamped for it). */
  restamp?: (review: Json, user: UserInfo) => void;
}

const asJson = (value: unknown): Json => JSON.parse(JSON.stringify(value)) as Json;
const identityField = (kind: DecisionKindName) => (kind === 'PtahMigrationRunAcknowledgment' ? 'acknowledgedBy' : 'approver');

/** What both passes over a decision CREATE check, and who may author one. */
const AUTHORED_CREATE = {
  rules: [...decisionObject('object'), { path: ['request', 'namespace'], kinds: ['retype', 'restring', 'huge'] } as Rule, ...GVK_BOUND],
  callerBound: true,
  groupBound: true,
  identityBound: true,
  kindBound: true,
};

function stampBase(kind: DecisionKindName): Base {
  return {
    ...AUTHORED_CREATE,
    name: `stamp ${kind}`,
    route: WEBHOOK_PATHS.stamp,
    review: asJson(decisionCreate(kind, DECISION_SPEC[kind], ALICE, 'req-1', DECISION_NS)),
    rules: [
      { path: ['request', 'userInfo', 'username'], kinds: ['delete', 'retype', 'huge'] },
      { path: ['request', 'userInfo', 'uid'], kinds: ['retype', 'huge'] },
      { path: ['request', 'userInfo', 'groups', '*'], kinds: ['retype', 'huge'] },
      ...AUTHORED_CREATE.rules,
    ],
  };
}

function decisionCreateBase(kind: DecisionKindName): Base {
  return {
    ...AUTHORED_CREATE,
    name: `decision CREATE ${kind}`,
    route: WEBHOOK_PATHS.decision,
    review: asJson(decisionCreate(kind, { ...DECISION_SPEC[kind], ...stampedFor(kind, ALICE, 'req-1') }, ALICE, 'req-1', DECISION_NS)),
    rules: [
      // Required, never compared: the API server gives each webhook call its own uid.
      { path: ['request', 'object', 'spec', 'mutationRequestUID'], kinds: ['delete', 'retype'] },
      { path: ['request', 'object', 'spec', '**'], kinds: ALL },
      // The caller must be exactly the stamped identity.
      { path: ['request', 'userInfo', '**'], kinds: ALL },
      ...AUTHORED_CREATE.rules,
    ],
    restamp: (review, user) => setAt(review, ['request', 'object', 'spec', identityField(kind)], asJson(identityOf(user))),
  };
}

function decisionUpdateBase(): Base {
  const kind: DecisionKindName = 'PtahSchemaApproval';
  const object = { apiVersion: API, kind, metadata: { name: 'd1', namespace: DECISION_NS }, spec: { ...DECISION_SPEC[kind], ...stampedFor(kind, ALICE, 'req-1') } };
  return {
    name: 'decision UPDATE (spec unchanged)',
    route: WEBHOOK_PATHS.decision,
    review: asJson(review({
      operation: 'UPDATE',
      kind: { group: GROUP, version: 'v1alpha1', kind },
      resource: { group: GROUP, version: 'v1alpha1', resource: DECISION_RESOURCE[kind] },
      namespace: DECISION_NS,
      name: 'd1',
      object,
      oldObject: structuredClone(object),
      userInfo: { username: 'bob' },
    })),
    rules: [
      // A spec never changes: any difference between the two is refused.
      { path: ['request', 'object', 'spec', '**'], kinds: ALL },
      { path: ['request', 'oldObject', 'spec', '**'], kinds: ALL },
      ...decisionObject('object'),
      ...decisionObject('oldObject'),
      { path: ['request', 'namespace'], kinds: ['retype', 'restring', 'huge'] },
      ...GVK_BOUND,
    ],
    callerBound: false,
    groupBound: false,
    identityBound: false,
    kindBound: true,
  };
}

function controllerWrite(name: string, object: V1Job | V1ConfigMap, kind: { group: string; version: string; kind: string }, resource: string, bound: string[]): Base {
  return {
    name,
    route: WEBHOOK_PATHS.controllerWrite,
    review: asJson(review({
      operation: 'CREATE',
      kind,
      resource: { group: kind.group, version: kind.version, resource },
      namespace: object.metadata?.namespace,
      name: object.metadata?.name,
      object,
      userInfo: { username: MANAGER, groups: ['system:serviceaccounts', 'system:authenticated'] },
    })),
    rules: managerWrite(bound),
    // Anyone but the manager is admitted by this route and judged by other rules.
    callerBound: false,
    groupBound: false,
    identityBound: false,
    kindBound: true,
  };
}

function ptahMigrationUpdate(username: string, before: string, after: string): Json {
  const migration = (annotation: string) => ({ apiVersion: API, kind: 'PtahMigration', metadata: { name: 'billing', namespace: NS, uid: 'uid-billing', annotations: { [ANNOTATIONS.unresolvedRun]: annotation } }, spec: {} });
  return asJson(review({
    operation: 'UPDATE',
    kind: { group: GROUP, version: 'v1alpha1', kind: 'PtahMigration' },
    resource: { group: GROUP, version: 'v1alpha1', resource: 'ptahmigrations' },
    namespace: NS,
    name: 'billing',
    object: migration(after),
    oldObject: migration(before),
    userInfo: { username },
  }));
}

const annotationRules = (kinds: Structural[]): Rule[] =>
  (['object', 'oldObject'] as const).flatMap((which): Rule[] => [
    { path: ['request', which, 'metadata', 'annotations', ANNOTATIONS.unresolvedRun], kinds },
    { path: ['request', which, 'metadata', 'annotations'], kinds: ['retype'] },
    { path: ['request', which, 'metadata'], kinds: ['retype'] },
    { path: ['request', which], kinds: ['delete', 'retype'] },
  ]);

function bases(): Base[] {
  const schemaApply = world('schema', 'Apply');
  const history = world('migration', 'History');
  const copy = JSON.stringify({ operationID: `sha256:${'ab'.repeat(32)}`, outcome: 'Unknown' });
  const other = JSON.stringify({ operationID: `sha256:${'cd'.repeat(32)}`, outcome: 'Partial' });
  const jobKind = { group: 'batch', version: 'v1', kind: 'Job' };
  return [
    stampBase('PtahSchemaApproval'),
    stampBase('PtahMigrationRunAcknowledgment'),
    decisionCreateBase('PtahSchemaApproval'),
    decisionCreateBase('PtahMigrationRunAcknowledgment'),
    decisionUpdateBase(),
    controllerWrite('controller-write schema Apply Job', { ...schemaApply.job, metadata: { ...schemaApply.job.metadata, uid: JOB_UID } }, jobKind, 'jobs', ['metadata', 'spec']),
    controllerWrite('controller-write migration History Job', history.job, jobKind, 'jobs', ['metadata', 'spec']),
    controllerWrite('controller-write projection', projections(schemaApply.plan!)[1]!, { group: '', version: 'v1', kind: 'ConfigMap' }, 'configmaps', ['metadata', 'binaryData', 'immutable', 'data']),
    {
      name: 'status-write PtahSchema status by the manager',
      route: WEBHOOK_PATHS.statusWrite,
      review: asJson(review({
        operation: 'UPDATE',
        kind: { group: GROUP, version: 'v1alpha1', kind: 'PtahSchema' },
        resource: { group: GROUP, version: 'v1alpha1', resource: 'ptahschemas' },
        subResource: 'status',
        namespace: NS,
        name: 'orders',
        object: { apiVersion: API, kind: 'PtahSchema', metadata: { name: 'orders', namespace: NS }, status: { observedGeneration: 2 } },
        oldObject: { apiVersion: API, kind: 'PtahSchema', metadata: { name: 'orders', namespace: NS }, status: { observedGeneration: 1 } },
        userInfo: { username: MANAGER },
      })),
      rules: [
        { path: ['request', 'userInfo', 'username'], kinds: ALL },
        { path: ['request', 'subResource'], kinds: ALL },
        { path: ['request', 'resource', 'group'], kinds: ALL },
      ],
      callerBound: true,
      groupBound: false,
      identityBound: false,
      kindBound: false,
    },
    {
      name: 'status-write PtahMigration update leaving the unresolved-run copy alone',
      route: WEBHOOK_PATHS.statusWrite,
      review: ptahMigrationUpdate('alice', copy, copy),
      rules: [...annotationRules(ALL), { path: ['request', 'resource', 'group'], kinds: ALL }, { path: ['request', 'resource', 'resource'], kinds: ALL }],
      callerBound: false,
      groupBound: false,
      identityBound: false,
      kindBound: false,
    },
    {
      name: 'status-write PtahMigration copy changed by the manager',
      route: WEBHOOK_PATHS.statusWrite,
      review: ptahMigrationUpdate(MANAGER, copy, other),
      rules: [
        { path: ['request', 'userInfo', 'username'], kinds: ALL },
        ...annotationRules(['retype']),
        { path: ['request', 'resource', 'group'], kinds: ALL },
        { path: ['request', 'resource', 'resource'], kinds: ALL },
      ],
      callerBound: true,
      groupBound: false,
      identityBound: false,
      kindBound: false,
    },
  ];
}

// ---- mutations ----

interface Case {
  base: Base;
  text: string;
  what: string;
  /** The oracle: this request must not be admitted. */
  mustRefuse: boolean;
}

const RAW = '@@raw@@';
const HOSTILE_VALUES: Record<'deep' | 'infinity' | 'surrogate' | 'proto', (r: Random) => string> = {
  deep: (r) => {
    const depth = r.pick([101, 1000, 20_000]);
    return r.int(2) ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  },
  infinity: (r) => r.pick(['1e400', '-1e400', '1e309', '[1,2,1e999]']),
  surrogate: (r) => r.pick(['"\\ud800"', '"x\\udfffy"', '"\\udc00\\ud800"', '{"k":"\\ud83d"}']),
  proto: (r) => r.pick(['{"__proto__":{"polluted":true}}', '{"constructor":{"prototype":{"polluted":true}}}']),
};

function retypeOf(value: Json | undefined, r: Random): Json {
  const type = (v: Json | undefined) => (Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v);
  const candidates: Json[] = [42, -1, 0.5, true, false, null, 'qz', [], {}, [1, 'x'], { a: 1 }, { toString: 1, valueOf: 1 } as unknown as Json];
  return r.pick(candidates.filter((c) => type(c) !== type(value)));
}

function fromText(base: Base, text: string, what: string): Case {
  return { base, text, what, mustRefuse: true };
}

function mutate(base: Base, r: Random): Case {
  const review = structuredClone(base.review);
  const kind = r.weighted({
    delete: 15, retype: 15, restring: 15, huge: 8,
    deep: 6, infinity: 6, surrogate: 5, surrogateKey: 2, proto: 3,
    anonymous: 5, groups: 4, kindVersion: 4, truncate: 4, garbage: 2,
  });
  const serialized = (): string => JSON.stringify(review);
  const userInfo = () => (valueAt(review, ['request', 'userInfo']) ?? {}) as Record<string, Json>;

  switch (kind) {
    case 'anonymous': {
      const current = userInfo();
      const named = r.int(2) === 0;
      const user: UserInfo = named
        ? { username: 'system:anonymous', groups: ['system:unauthenticated'] }
        : { username: typeof current.username === 'string' ? current.username : 'bob', ...(typeof current.uid === 'string' ? { uid: current.uid } : {}), groups: [...((current.groups as string[] | undefined) ?? []), 'system:unauthenticated'] };
      setAt(review, ['request', 'userInfo'], asJson(user));
      base.restamp?.(review, user);
      return { base, text: serialized(), what: `anonymous caller ${JSON.stringify(user)}`, mustRefuse: named ? base.callerBound : base.groupBound };
    }
    case 'groups': {
      const count = 1025 + r.int(20_000);
      const current = userInfo();
      setAt(review, ['request', 'userInfo'], { ...current, groups: Array.from({ length: count }, (_, i) => `g${i}-${r.word()}`) });
      return { base, text: serialized(), what: `${count} groups`, mustRefuse: base.identityBound };
    }
    case 'kindVersion':
      setAt(review, ['request', 'kind', 'version'], r.pick(['v9', 'v1beta1', 'v2alpha7']));
      return { base, text: serialized(), what: 'a request kind of another version', mustRefuse: base.kindBound };
    case 'truncate': {
      const text = serialized();
      const at = 1 + r.int(text.length - 1);
      return fromText(base, text.slice(0, at), `truncated at ${at} of ${text.length}`);
    }
    case 'garbage':
      return fromText(base, r.pick(['', 'null', '[]', '"x"', '{"apiVersion":', '\u0000\u0001\u0002', '{"a":1}{"b":2}', `{${'"k":1,'.repeat(1000)}}`, Buffer.from([0xff, 0xfe, 0x7b]).toString('latin1')]), 'garbage JSON');
    default:
      break;
  }

  const path = r.pick(pathsOf(review));
  const old = valueAt(review, path);
  const where = path.join('.');
  if (kind === 'deep' || kind === 'infinity' || kind === 'surrogate' || kind === 'proto') {
    setAt(review, path, RAW);
    const raw = HOSTILE_VALUES[kind](r);
    return fromText(base, serialized().replace(JSON.stringify(RAW), raw), `${kind} at ${where}: ${raw.slice(0, 40)}`);
  }
  if (kind === 'surrogateKey') {
    setAt(review, path, { [RAW]: 1 });
    return fromText(base, serialized().replace(JSON.stringify(RAW), '"k\\udc00"'), `a lone surrogate in a key at ${where}`);
  }

  let structural: Structural = kind;
  let value: Json | undefined;
  if (kind === 'delete') value = undefined;
  else if (kind === 'restring' && typeof old === 'string') value = r.word();
  else if (kind === 'huge' && typeof old === 'string') value = 'h'.repeat(r.pick([4 * 1024, 64 * 1024, 300 * 1024, BODY_LIMIT]));
  else {
    structural = 'retype';
    value = retypeOf(old, r);
  }
  setAt(review, path, value);
  const text = serialized();
  const rule = [...base.rules, ...ENVELOPE].find((candidate) => matches(candidate.path, path));
  const bound = rule !== undefined && rule.kinds.includes(structural) && !(rule.emptyIsAbsent && isEmpty(old) && isEmpty(value));
  const shown = value === undefined ? 'deleted' : JSON.stringify(value).slice(0, 40);
  return { base, text, what: `${structural} at ${where}: ${shown}`, mustRefuse: bound || Buffer.byteLength(text) > BODY_LIMIT };
}

// ---- the run ----

interface Outcome {
  status: number;
  allowed?: boolean;
  code?: number;
  message?: string;
  uid?: unknown;
  ms: number;
}

async function send(endpoint: Endpoint, route: string, text: string): Promise<Outcome> {
  const start = performance.now();
  const res: PostResult = await postText(endpoint, route, text, 10_000);
  const ms = performance.now() - start;
  let parsed: { response?: { uid?: unknown; allowed?: boolean; status?: { code?: number; message?: string } }; message?: string } = {};
  try {
    parsed = JSON.parse(res.body);
  } catch {
    // A non-JSON answer is judged by its HTTP status alone.
  }
  return { status: res.status, allowed: parsed.response?.allowed, code: parsed.response?.status?.code, message: parsed.response?.status?.message ?? parsed.message, uid: parsed.response?.uid, ms };
}

function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) gc();
}

t.test('hostile admission requests through the real HTTPS listener', async (t) => {
  t.comment(`fuzz seed ${SEED} (PTAH_FUZZ_SEED=${SEED} replays this run), ${CASES_PER_ROUTE} cases per route`);
  const h = await harness({ limits: { requestTimeoutMs: REQUEST_TIMEOUT_MS } });
  t.teardown(h.close);
  const schemaApply = world('schema', 'Apply');
  install(h.reader, schemaApply);
  for (const chunk of chunkObjects(schemaApply.plan!)) h.reader.put(chunk);
  install(h.reader, world('migration', 'History'));
  installDecisionWorld(h.reader, DECISION_NS);
  const endpoint = await h.listen();
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  t.teardown(() => agent.destroy());
  const client = { ...endpoint, agent };

  const all = bases();
  for (const base of all) {
    const answer = await send(client, base.route, JSON.stringify(base.review));
    t.equal(answer.allowed, true, `the unmutated ${base.name} is admitted (${answer.message ?? ''})`);
  }
  // Warm up, then take the baseline the end of the run is compared with.
  for (let i = 0; i < 5; i++) for (const base of all) await send(client, base.route, JSON.stringify(base.review));
  collectGarbage();
  const baseline = process.memoryUsage().rss;

  // Cases are made one at a time as a worker takes the next, in index order, so the run is the same for a seed
  // whatever the timing, and none of the (up to 1 MiB) bodies outlives its request.
  const r = generator(SEED);
  const routes = [...new Set(all.map((b) => b.route))];
  const total = routes.length * CASES_PER_ROUTE;
  const caseAt = (index: number): Case => mutate(r.pick(all.filter((b) => b.route === routes[index % routes.length])), r);
  let refusals = 0;

  const problems: string[] = [];
  const tally = new Map<string, number>();
  let slowest = 0;
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const index = next++;
      const c = caseAt(index);
      if (c.mustRefuse) refusals++;
      const label = `#${index} ${c.base.name}: ${c.what}`;
      let answer: Outcome;
      try {
        answer = await send(client, c.base.route, c.text);
      } catch (e) {
        problems.push(`${label}: no answer (${(e as Error).message})`);
        continue;
      }
      slowest = Math.max(slowest, answer.ms);
      const outcome = answer.status !== 200 ? `HTTP ${answer.status}` : answer.allowed ? 'allowed' : `denied ${answer.code}`;
      tally.set(`${c.base.route} ${outcome}`, (tally.get(`${c.base.route} ${outcome}`) ?? 0) + 1);
      const detail = `${outcome} in ${answer.ms.toFixed(0)} ms: ${String(answer.message ?? '').slice(0, 160)}`;
      if (answer.status >= 500 || (answer.code ?? 0) >= 500) problems.push(`${label}: a 5xx for malformed input: ${detail}`);
      if (c.mustRefuse && answer.allowed === true) problems.push(`${label}: admitted, but the route binds what was changed: ${detail}`);
      if (Buffer.byteLength(c.text) > BODY_LIMIT && answer.status !== 413) problems.push(`${label}: a body over the limit is not 413: ${detail}`);
      if (answer.status === 200 && answer.uid !== valueAt(JSON.parse(c.text) as Json, ['request', 'uid'])) problems.push(`${label}: the uid is not echoed: ${detail}`);
      if (answer.ms > ANSWER_BOUND_MS) problems.push(`${label}: answered after ${answer.ms.toFixed(0)} ms (stall bound ${ANSWER_BOUND_MS} ms)`);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (performance.now() - start) / 1000;

  t.comment(`${total} cases in ${seconds.toFixed(1)} s, slowest answer ${slowest.toFixed(0)} ms; ${[...tally].sort().map(([k, n]) => `${k}: ${n}`).join(', ')}`);
  t.same(problems.slice(0, 25), [], `no crash, no 5xx, nothing admitted that its route forbids, every answer within ${ANSWER_BOUND_MS} ms (${problems.length} problems)`);
  t.ok(refusals > total / 3, `${refusals} of ${total} mutations break something the route binds: the oracle is not vacuous`);
  t.ok([...tally.keys()].some((k) => k.endsWith('allowed')), 'and some mutations are admitted: the routes are not refusing everything');

  const health = await postText(client, '/healthz', '').catch(() => undefined);
  t.not(health, undefined, 'the service still answers');
  agent.destroy();
  collectGarbage();
  await new Promise((resolve) => setTimeout(resolve, 200));
  collectGarbage();
  const { rss, heapUsed, external } = process.memoryUsage();
  t.comment(`RSS ${(baseline / 2 ** 20).toFixed(0)} MiB before the run, ${(rss / 2 ** 20).toFixed(0)} MiB after it (heap ${(heapUsed / 2 ** 20).toFixed(0)} MiB, external ${(external / 2 ** 20).toFixed(0)} MiB)`);
  t.ok(rss <= baseline + RSS_TOLERANCE, `RSS is back within ${RSS_TOLERANCE / 2 ** 20} MiB of its baseline`);
});

t.test('a slow body is cut off at the request timeout, and a body over the limit is 413', async (t) => {
  const h = await harness({ limits: { requestTimeoutMs: REQUEST_TIMEOUT_MS } });
  t.teardown(h.close);
  const endpoint = await h.listen();
  const socket = await connectTls(endpoint);
  const since = performance.now();
  socket.write(`POST ${WEBHOOK_PATHS.decision} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 500000\r\n\r\n{"apiVersion":"admission.k8s.io/v1","request":{"uid":"`);
  socket.write('x'.repeat(100_000));
  const closed = await whenClosed(socket, since, REQUEST_TIMEOUT_MS + 8000).catch((e: Error) => ({ afterMs: Infinity, received: e.message }));
  // Node checks expired requests once per check interval (1 s), so the server may take up to a second more.
  t.ok(closed.afterMs <= REQUEST_TIMEOUT_MS + 2500, `the stalled client was disconnected after ${closed.afterMs.toFixed(0)} ms (timeout ${REQUEST_TIMEOUT_MS} ms)`);
  t.match(closed.received, /^HTTP\/1\.1 408/, 'with 408 Request Timeout');

  const over = await postText(endpoint, WEBHOOK_PATHS.decision, JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'x', pad: 'p'.repeat(BODY_LIMIT) } }));
  t.equal(over.status, 413, 'a body over the limit is 413');
});
