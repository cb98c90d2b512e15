// A seeded property test: the cheap judge (jobclaim.match and the plain-JSON helpers under it) decides exactly as
// the comparison it replaced (./jobclaim-reference.ts) on random Jobs, claims, modes and bindings and on random
// mutations of each: labels, annotations, owner references, env, volumes, images, resources, securityContext, key
// order, numeric and string quantities, extra and removed fields, and hostile values (lone surrogates, NaN, -0,
// class instances, toJSON, nesting past the canonical depth bound). Agreement is on the whole outcome: the verdict
// with its reason, or the error thrown. Beside agreement, an oracle of its own: a mutation that changes nothing
// the judge binds leaves the answer as it was, and one that changes what it binds is refused. The answers kept
// for the next caller (quantity values, the hashes in Job names and operation-ID labels, lockTimeout) are held to
// computing them afresh, on repeats near and far back, past what is kept, and on inputs too long to keep.
//
// Replay a run with PTAH_PROPERTY_SEED=<seed>; PTAH_PROPERTY_CASES=<n> changes the number of cases per property.
import type { V1Job } from '@kubernetes/client-node';
import t from 'tap';
import { canonicalJson, digest, MAX_CANONICAL_DEPTH, recentSha256Hex, sha256Hex } from '../../src/shared/canonical.js';
import { DurationError, parseDuration } from '../../src/shared/api/duration.js';
import { buildOperationJob, JobBuildError, operationIdLabelValue, type ClaimedOperation, type OperationJobInput } from '../../src/shared/job/index.js';
import { jsonEqual, plainObject, toPlain } from '../../src/shared/job/plain.js';
import { quantityValue, withQuantityValues } from '../../src/shared/job/quantity.js';
import { CLEANUP_TTL_SECONDS, match, type BindingInForce, type ClaimOwner, type JobClaim, type MatchMode } from '../../src/shared/jobclaim.js';
import { jobNameFor, type JobNameInput } from '../../src/shared/naming.js';
import { MAX_LOCK_TIMEOUT_MS } from '../../src/shared/runner-env.js';
import { normalizedPodSpec, resolveSnapshot, templateDigestOf } from '../../src/shared/podintent.js';
import { CASES, EPOCH, inputFor, JOB_UID, snapshotted, stored } from './job-fixtures.js';
import * as reference from './jobclaim-reference.js';

const SEED = Number.parseInt(process.env.PTAH_PROPERTY_SEED ?? '20261201', 10) >>> 0;
const CASES_PER_PROPERTY = Number.parseInt(process.env.PTAH_PROPERTY_CASES ?? '3000', 10);
const OTHER_EPOCH = `v1-${'c'.repeat(32)}`;

// ---- a small seeded generator (the fuzz test's) ----

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
  const chance = (p: number): boolean => next() < p;
  const shuffle = <T>(items: T[]): T[] => {
    for (let i = items.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  };
  return { int, pick, chance, shuffle };
}
type Random = ReturnType<typeof generator>;

/** A Job, claim or value as the mutations see it: JSON-shaped data whose fields they read and write freely. */
type Tree = Record<string, any>;

type Outcome = { verdict: unknown } | { threw: string };
function outcome(f: () => unknown): Outcome {
  try {
    return { verdict: f() };
  } catch (e) {
    return { threw: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
  }
}
const same = (a: Outcome, b: Outcome): boolean => JSON.stringify(a) === JSON.stringify(b);
const isOk = (o: Outcome): boolean => 'verdict' in o && (o.verdict as { ok?: boolean }).ok === true;

/** A structural fingerprint of what a judge was given, to show it wrote none of it. */
function fingerprint(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? `#${v}` : v === undefined ? '#undefined' : v));
}

/** A value as data, with what JSON.stringify does not show: -0, prototypes (by their own shape), key order. */
function shape(value: unknown): unknown {
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : value;
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return { array: value.map(shape) };
  const proto: unknown = Object.getPrototypeOf(value);
  return { proto: proto === Object.prototype ? 'Object' : proto === null ? 'null' : shape(proto), entries: Object.entries(value).map(([k, v]) => [k, shape(v)]) };
}

/** A copy that keeps class instances, Dates and functions as they are (the mutations add them on purpose). */
function copyTree<T>(value: T): T {
  if (Array.isArray(value)) {
    const out: unknown[] = new Array(value.length);
    for (let i = 0; i < value.length; i++) if (i in value) out[i] = copyTree(value[i]);
    return out as T;
  }
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Tree = {};
    for (const [k, v] of Object.entries(value)) out[k] = copyTree(v);
    return out as T;
  }
  return value;
}

// ---- hostile and exotic values ----

class Resource {
  constructor(public name: string, public amount: number) {}
}
class Stamped {
  toJSON(): string {
    return 'stamped';
  }
}

function nested(depth: number, leaf: unknown, arrays: boolean): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = arrays ? [value] : { n: value };
  return value;
}

function randomString(r: Random): string {
  return r.pick(['', 'a', 'payments', 'Ünïcödé', '\u{1F600}', 'lone \uD800 surrogate', '\uDC00', 'x'.repeat(300), '250m', '0.25', '1', 'null', 'toJSON']);
}

function randomNumber(r: Random): number {
  return r.pick([0, -0, 1, -1, 0.25, 600, 65532, 1e21, 2 ** 53 + 2, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]);
}

/**
 * Any value a hostile request or a careless caller could hand over; bigints and `__proto__` keys only where asked.
 * A `__proto__` key never reaches the judge (Fastify refuses such a body with 400, onProtoPoisoning: 'error', and
 * the client's deserializer knows only declared fields), and the old comparison itself was inconsistent on one
 * (structuredClone dropped the prototype JSON.parse's copy had set, or canonical JSON refused it), so the match
 * property leaves them out; toPlain and jsonEqual are held to the reference on them too.
 */
function randomValue(r: Random, depth = 0, exotic = false): unknown {
  const leaf = depth > 3;
  switch (r.int(leaf ? 6 : 16)) {
    case 0: return randomString(r);
    case 1: return randomNumber(r);
    case 2: return r.chance(0.5);
    case 3: return null;
    case 4: return undefined;
    case 5: return r.pick([
      new Date(0), new Resource('cpu', 1), new Stamped(), new Map([[1, 2]]), Object(1), Object('s'), Symbol('s'), () => 1,
      // A toJSON of its own, enumerable or not.
      { a: 1, toJSON: () => 'own' }, Object.defineProperty({ a: 1 }, 'toJSON', { value: () => 'hidden', enumerable: false }), { a: 1 }, { b: 2 },
      // A `__proto__` key of its own, as JSON.parse makes one.
      ...(exotic ? [10n, JSON.parse('{"__proto__":{}}') as unknown, JSON.parse('{"__proto__":{"a":1},"b":2}') as unknown] : []),
    ]);
    case 6: case 7: case 8: {
      const out: Tree = r.chance(0.1) ? Object.create(null) as Tree : {};
      const n = r.int(5);
      for (let i = 0; i < n; i++) out[r.pick(['a', 'b', 'c', '1', '0', 'toJSON', 'lone\uD800', 'name', 'value'])] = randomValue(r, depth + 1, exotic);
      return out;
    }
    case 9: case 10: {
      const n = r.int(4);
      const out: unknown[] = [];
      for (let i = 0; i < n; i++) out.push(randomValue(r, depth + 1, exotic));
      if (r.chance(0.1)) out.length += 2; // holes
      return out;
    }
    case 11: return nested(MAX_CANONICAL_DEPTH - 2 + r.int(4), randomValue(r, 4, exotic), r.chance(0.5));
    default: return randomValue(r, depth + 1, exotic);
  }
}

// ---- the Jobs, claims and modes ----

const ALT_QUANTITY: Record<string, (string | number)[]> = {
  '250m': ['0.25', '250m', 0.25, '.25'],
  '0.25': ['250m', 0.25],
  '256Mi': ['268435456', 268435456, '0.25Gi'],
  '512Mi': ['0.5Gi', '536870912', 536870912, '524288Ki'],
  '0.5Gi': ['512Mi', 536870912],
  '1': [1, '1000m', '1e0'],
};

function randomInput(r: Random): OperationJobInput {
  const c = r.pick(CASES);
  const input = inputFor(c);
  const execution = { ...input.execution };
  execution.activeDeadlineSeconds = r.pick([60, 600, 3600]);
  execution.resources = r.pick([
    { requests: { cpu: '0.25', memory: '256Mi' }, limits: { memory: '0.5Gi' } },
    { requests: { cpu: '250m' }, limits: { cpu: '1', memory: '512Mi' } },
    {},
  ]) as typeof execution.resources;
  if (r.chance(0.3)) delete execution.tolerations;
  if (r.chance(0.3)) execution.nodeSelector = { 'disk': r.pick(['ssd', 'hdd']) };
  if (r.chance(0.3)) execution.serviceAccountName = r.pick(['migrator', 'default']);
  if (r.chance(0.2)) execution.runtimeClassName = 'gvisor';
  if (r.chance(0.2)) execution.priorityClassName = 'batch-low';
  const labels: Record<string, string> = {};
  const annotations: Record<string, string> = {};
  for (let i = r.int(4); i > 0; i--) labels[r.pick(['team', 'tier', 'example.com/cost-center', 'app'])] = r.pick(['payments', 'db', 'a-b.c']);
  for (let i = r.int(4); i > 0; i--) annotations[r.pick(['example.com/owner', 'note', 'example.com/ticket'])] = r.pick(['payments', 'free text', '']);
  execution.podMetadata = { labels, annotations };
  return snapshotted({ ...input, execution });
}

interface Scenario {
  job: Tree;
  claim: Tree;
  mode: MatchMode;
  binding?: BindingInForce;
  /** The rebuilt Job of a rebuild mode (mutated in place), for the fingerprint. */
  rebuilt?: Tree;
  owner?: Tree;
}

function scenario(r: Random, input: OperationJobInput, built: V1Job): Scenario {
  let job: Tree;
  const variant = r.pick(['stored', 'review', 'submitted', 'submitted-uid', 'ttl'] as const);
  if (variant === 'stored') job = stored(built) as Tree;
  else if (variant === 'review') job = JSON.parse(JSON.stringify(stored(built))) as Tree;
  else if (variant === 'submitted') job = structuredClone(built) as Tree;
  else if (variant === 'submitted-uid') job = { ...structuredClone(built), metadata: { ...structuredClone(built.metadata), uid: JOB_UID } } as Tree;
  else {
    job = stored(built) as Tree;
    job.spec.ttlSecondsAfterFinished = r.pick([CLEANUP_TTL_SECONDS, CLEANUP_TTL_SECONDS + 1]);
  }
  let claim: Tree = structuredClone(input.claim) as Tree;
  if (r.chance(0.3)) claim.jobUID = JOB_UID;
  if (r.chance(0.15)) claim = { ...claim, inputFingerprint: undefined, attempt: undefined };
  const binding = r.pick<BindingInForce | undefined>([undefined, undefined, { epoch: EPOCH, controllerStateVersion: 1 }, { epoch: EPOCH }, { epoch: OTHER_EPOCH }, { epoch: EPOCH, controllerStateVersion: 2 }]);
  if (r.chance(0.55)) {
    const rebuilt = structuredClone(built) as Tree;
    const submitted = variant.startsWith('submitted') ? r.chance(0.9) : r.chance(0.2);
    return { job, claim, mode: { kind: 'rebuild', rebuilt: rebuilt as V1Job, submitted }, binding, rebuilt };
  }
  const owner: Tree = { kind: input.owner.kind, name: input.owner.name, namespace: input.owner.namespace, uid: input.owner.uid };
  return { job, claim, mode: { kind: 'claim-fixed', owner: owner as ClaimOwner }, binding, owner };
}

// ---- mutations ----

type Effect = 'neutral' | 'refuse' | 'any';

/** Every plain object (not array) inside `root`, with `root` itself. */
function objectsIn(root: unknown, out: Tree[] = []): Tree[] {
  if (Array.isArray(root)) for (const item of root) objectsIn(item, out);
  else if (root !== null && typeof root === 'object' && Object.getPrototypeOf(root) === Object.prototype) {
    out.push(root as Tree);
    for (const value of Object.values(root)) objectsIn(value, out);
  }
  return out;
}

const podSpecOf = (job: Tree): Tree => job.spec.template.spec;
const containerOf = (job: Tree): Tree => podSpecOf(job).containers[0];

/** The same keys in another order, in place. */
function reorder(r: Random, object: Tree): void {
  const entries = r.shuffle(Object.entries(object));
  for (const [key] of entries) delete object[key];
  for (const [key, value] of entries) object[key] = value;
}

let nullKeys = 0;

/** Mutations of a Job (the submitted one, or the rebuild); each says what it does to an answer that was yes. */
const JOB_MUTATIONS: [name: string, effect: Effect, apply: (r: Random, job: Tree) => void][] = [
  ['reorder the keys of an object', 'neutral', (r, job) => reorder(r, r.pick(objectsIn(job)))],
  ['add a null or undefined property', 'neutral', (r, job) => void (r.pick(objectsIn(job))[`x-null-${nullKeys++}`] = r.chance(0.5) ? null : undefined)],
  ['respell a quantity', 'neutral', (r, job) => {
    const resources = containerOf(job).resources ?? {};
    for (const list of Object.values(resources) as Tree[]) {
      for (const [name, amount] of Object.entries(list)) {
        const alternatives = ALT_QUANTITY[String(amount)];
        if (alternatives) list[name] = r.pick(alternatives);
      }
    }
  }],
  ['fill in the deprecated serviceAccount alias', 'neutral', (_r, job) => void (podSpecOf(job).serviceAccount = podSpecOf(job).serviceAccountName)],
  ['change the status', 'neutral', (r, job) => void (job.status = r.pick([{ active: 1 }, { failed: 1, conditions: [{ type: 'Failed' }] }, {}]))],
  ['another image', 'refuse', (_r, job) => void (containerOf(job).image = 'registry.example/evil:latest')],
  ['another command', 'refuse', (_r, job) => void (containerOf(job).command = ['/bin/sh', '-c', 'psql'])],
  ['another env value', 'refuse', (r, job) => void (r.pick(containerOf(job).env as Tree[]).value = 'changed')],
  ['an extra env entry', 'refuse', (_r, job) => void containerOf(job).env.push({ name: 'EXTRA', value: '1' })],
  ['one env entry fewer', 'refuse', (r, job) => void containerOf(job).env.splice(r.int(containerOf(job).env.length), 1)],
  ['the first env entry moved last', 'refuse', (_r, job) => void containerOf(job).env.push(containerOf(job).env.shift())],
  ['an extra volume', 'refuse', (_r, job) => void podSpecOf(job).volumes.push({ name: 'host', hostPath: { path: '/' } })],
  ['one volume fewer', 'refuse', (r, job) => void podSpecOf(job).volumes.splice(r.int(podSpecOf(job).volumes.length), 1)],
  ['another volume source', 'refuse', (_r, job) => void (podSpecOf(job).volumes[0] = { name: podSpecOf(job).volumes[0].name, hostPath: { path: '/etc' } })],
  ['a weaker container securityContext', 'refuse', (r, job) => {
    const context = containerOf(job).securityContext;
    if (r.chance(0.5)) context.runAsNonRoot = false;
    else context.privileged = true;
  }],
  ['another Pod user', 'refuse', (_r, job) => void (podSpecOf(job).securityContext.runAsUser = 0)],
  ['another cpu amount', 'refuse', (_r, job) => {
    const resources = containerOf(job).resources ??= {};
    (resources.requests ??= {}).cpu = '300m';
  }],
  ['another owner UID', 'refuse', (_r, job) => void (job.metadata.ownerReferences[0].uid = 'someone-else')],
  ['an owner that is not the controller', 'refuse', (_r, job) => void (job.metadata.ownerReferences[0].controller = false)],
  ['a second owner', 'refuse', (_r, job) => void job.metadata.ownerReferences.push({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'y' })],
  ['another name', 'refuse', (_r, job) => void (job.metadata.name = 'ptah-other-job')],
  ['another namespace', 'refuse', (_r, job) => void (job.metadata.namespace = 'team-b')],
  ['an extra metadata field beside equal labels', 'any', (r, job) => void (job.metadata[r.pick(['finalizers', 'generateName', 'deletionGracePeriodSeconds'])] = r.pick([['x'], 'ptah-', 0]))],
  ['another Job-level field', 'refuse', (r, job) => void (job.spec[r.pick(['backoffLimit', 'parallelism', 'completions'])] = 3)],
  ['a suspended Job', 'refuse', (_r, job) => void (job.spec.suspend = true)],
  ['a host-network Pod', 'refuse', (_r, job) => void (podSpecOf(job).hostNetwork = true)],
  ['a Pod field removed', 'refuse', (r, job) => void delete podSpecOf(job)[r.pick(['restartPolicy', 'automountServiceAccountToken', 'securityContext', 'volumes'])]],
  ['another label on Job and Pod', 'refuse', (_r, job) => {
    job.metadata.labels = { ...job.metadata.labels, 'app.kubernetes.io/component': 'intruder' };
    job.spec.template.metadata.labels = { ...job.spec.template.metadata.labels, 'app.kubernetes.io/component': 'intruder' };
  }],
  ['another Pod annotation', 'refuse', (_r, job) => {
    job.spec.template.metadata.annotations = { ...job.spec.template.metadata.annotations, 'example.com/owner': 'intruder' };
  }],
  ['a random field set', 'any', (r, job) => void (r.pick(objectsIn(job))[r.pick(['name', 'value', 'image', 'labels', 'uid', 'extra', 'spec', 'cpu', '0'])] = randomValue(r))],
  ['a random field removed', 'any', (r, job) => {
    const object = r.pick(objectsIn(job));
    const keys = Object.keys(object);
    if (keys.length > 0) delete object[r.pick(keys)];
  }],
  ['a hostile value', 'any', (r, job) => {
    const object = r.pick(objectsIn(job.spec.template));
    const keys = Object.keys(object);
    object[keys.length > 0 && r.chance(0.7) ? r.pick(keys) : 'hostile'] = r.pick([
      'lone \uD800', Number.NaN, -0, Number.POSITIVE_INFINITY, new Date(1), new Resource('x', 1), new Stamped(), [undefined], [, 1],
      nested(MAX_CANONICAL_DEPTH + 10, 'deep', r.chance(0.5)), nested(20, 'shallow', false), Object.create(null) as Tree,
    ]);
  }],
  ['a number spelled as a string', 'any', (_r, job) => void (job.spec.activeDeadlineSeconds = String(job.spec.activeDeadlineSeconds))],
  ['a list where a map was', 'any', (_r, job) => void (job.metadata.labels = Object.entries(job.metadata.labels ?? {}))],
  ['a generated identity tampered with', 'any', (r, job) => {
    if (r.chance(0.5)) job.spec.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': r.pick([JOB_UID, 'other-uid']) }, ...(r.chance(0.2) ? { matchExpressions: [{ key: 'a', operator: 'Exists' }] } : {}) };
    else job.spec.template.metadata.labels = { ...job.spec.template.metadata.labels, [r.pick(['job-name', 'controller-uid', 'batch.kubernetes.io/job-name'])]: r.pick([JOB_UID, job.metadata.name, 'other']) };
  }],
  ['a cleanup TTL', 'any', (r, job) => void (job.spec.ttlSecondsAfterFinished = r.pick([CLEANUP_TTL_SECONDS, 1, undefined]))],
  ['another UID', 'any', (r, job) => void (job.metadata.uid = r.pick([JOB_UID, 'other-uid', '', undefined]))],
  ['another epoch annotation', 'any', (_r, job) => void (job.metadata.annotations = { ...job.metadata.annotations, 'operator.ptah.run/execution-binding-id': OTHER_EPOCH })],
  ['another controller state version', 'any', (r, job) => {
    for (const metadata of [job.metadata, job.spec.template.metadata]) metadata.annotations = { ...metadata.annotations, 'operator.ptah.run/controller-state-version': r.pick(['2', '01', 'x']) };
  }],
  ['a declared label added on Job and Pod', 'any', (r, job) => {
    const key = r.pick(['extra', 'operator.ptah.run/extra', 'example.com/x']);
    for (const metadata of [job.metadata, job.spec.template.metadata]) metadata.labels = { ...metadata.labels, [key]: 'v' };
  }],
];

const CLAIM_MUTATIONS: [name: string, apply: (r: Random, claim: Tree, input: OperationJobInput) => void][] = [
  ['a malformed operation ID', (_r, c) => void (c.id = 'not-a-digest')],
  ['another epoch', (_r, c) => void (c.executionBindingID = OTHER_EPOCH)],
  ['another Job name', (_r, c) => void (c.jobName = 'ptah-other-job')],
  ['another Job UID', (r, c) => void (c.jobUID = r.pick(['other-uid', JOB_UID, '']))],
  ['another attempt', (_r, c) => void (c.attempt = 2)],
  ['another type', (r, c) => void (c.type = r.pick(['Plan', 'Apply', 'Observe', 'History', 'Drop']))],
  ['no snapshot', (_r, c) => void delete c.admissionSnapshot],
  ['a snapshot that does not hash to its digest', (_r, c) => void (c.admissionSnapshot = { ...c.admissionSnapshot, serviceAccount: 'root' })],
  ['a valid snapshot of another template', (_r, c, input) => {
    const template = structuredClone(buildOperationJob(input).spec!.template);
    template.spec!.containers[0]!.image = 'registry.example/other:1';
    c.admissionSnapshot = resolveSnapshot(template);
  }],
  ['another plan', (r, c) => void (c.planRef = r.pick([undefined, { name: 'other', uid: 'other' }]))],
  ['no input fingerprint', (_r, c) => void delete c.inputFingerprint],
];

const OWNER_MUTATIONS: [name: string, apply: (r: Random, owner: Tree) => void][] = [
  ['another kind', (r, o) => void (o.kind = r.pick(['ConfigMap', 'PtahMigration', 'PtahSchema']))],
  ['no UID', (_r, o) => void (o.uid = '')],
  ['another name', (_r, o) => void (o.name = 'inventory')],
];

interface Mutated {
  names: string[];
  effects: Effect[];
}

function mutate(r: Random, s: Scenario, input: OperationJobInput): Mutated {
  const names: string[] = [];
  const effects: Effect[] = [];
  const apply = (effect: Effect, name: string, f: () => void) => {
    try {
      f();
    } catch {
      return; // a mutation that does not fit this Job (no resources, no env) is skipped
    }
    names.push(name);
    effects.push(effect);
  };
  for (let n = r.pick([0, 1, 1, 1, 2, 2, 3]); n > 0; n--) {
    const target = r.int(10);
    if (target < 6) {
      const [name, effect, f] = r.pick(JOB_MUTATIONS);
      apply(effect, `job: ${name}`, () => f(r, s.job));
    } else if (target < 8 && s.rebuilt) {
      // A rebuild that differs in what the template or the spec binds is refused; the rest may be either.
      const [name, effect, f] = r.pick(JOB_MUTATIONS);
      const bindsSpec = effect === 'refuse' && !/owner|name|namespace/.test(name);
      apply(effect === 'neutral' ? 'neutral' : bindsSpec ? 'refuse' : 'any', `rebuilt: ${name}`, () => f(r, s.rebuilt!));
    } else if (target < 8 && s.owner) {
      const [name, f] = r.pick(OWNER_MUTATIONS);
      apply('any', `owner: ${name}`, () => f(r, s.owner!));
    } else {
      const [name, f] = r.pick(CLAIM_MUTATIONS);
      apply('any', `claim: ${name}`, () => f(r, s.claim, input));
    }
  }
  return { names, effects };
}

function copyScenario(s: Scenario): Scenario {
  const job = copyTree(s.job);
  const claim = copyTree(s.claim);
  if (s.mode.kind === 'rebuild') {
    const rebuilt = copyTree(s.rebuilt!);
    return { job, claim, binding: s.binding, rebuilt, mode: { kind: 'rebuild', rebuilt: rebuilt as V1Job, submitted: s.mode.submitted } };
  }
  const owner = copyTree(s.owner!);
  return { job, claim, binding: s.binding, owner, mode: { kind: 'claim-fixed', owner: owner as ClaimOwner } };
}

const judge = (s: Scenario) => () => match(s.job as V1Job, s.claim as JobClaim, s.mode, s.binding);
const referenceJudge = (s: Scenario) => () => reference.referenceMatch(s.job as V1Job, s.claim as JobClaim, s.mode, s.binding);

// ---- the properties ----

t.test(`jobclaim.match decides as the reference on ${CASES_PER_PROPERTY} random Jobs, claims and mutations (seed ${SEED})`, async (t) => {
  const r = generator(SEED);
  const disagreements: string[] = [];
  const oracleFailures: string[] = [];
  const reasons = new Set<string>();
  const tally = { ok: 0, refused: 0, threw: 0, neutral: 0, refuse: 0 };
  let inputs: { input: OperationJobInput; built: V1Job } | undefined;
  for (let i = 0; i < CASES_PER_PROPERTY; i++) {
    if (!inputs || r.chance(0.2)) {
      const input = randomInput(r);
      inputs = { input, built: buildOperationJob(input) };
    }
    const base = scenario(r, inputs.input, inputs.built);
    const mutated = copyScenario(base);
    const { names, effects } = mutate(r, mutated, inputs.input);
    const before = fingerprint([mutated.job, mutated.claim, mutated.rebuilt, mutated.owner]);
    const fast = outcome(judge(mutated));
    const slow = outcome(referenceJudge(mutated));
    const what = `case ${i} (${mutated.mode.kind}${mutated.mode.kind === 'rebuild' && mutated.mode.submitted ? ', submitted' : ''}): ${names.join('; ') || 'no mutation'}`;
    if (fingerprint([mutated.job, mutated.claim, mutated.rebuilt, mutated.owner]) !== before) disagreements.push(`${what}: the judge wrote to its inputs`);
    if (!same(fast, slow)) disagreements.push(`${what}: ${JSON.stringify(fast)} vs reference ${JSON.stringify(slow)}`);

    if ('threw' in fast) tally.threw++;
    else if (isOk(fast)) tally.ok++;
    else {
      tally.refused++;
      reasons.add(String((fast.verdict as { reason: string }).reason).replace(/[0-9a-f]{16,}/g, '…'));
    }
    if (effects.includes('any')) continue;
    const unmutated = outcome(judge(base));
    const refusing = effects.filter((e) => e === 'refuse').length;
    if (refusing === 0 && effects.length > 0) {
      tally.neutral++;
      if (isOk(unmutated) !== isOk(fast)) oracleFailures.push(`${what}: a mutation nothing binds changed ${JSON.stringify(unmutated)} to ${JSON.stringify(fast)}`);
    } else if (refusing === 1 && isOk(unmutated)) {
      // Exactly one: two could undo each other (an env entry added, then one removed).
      tally.refuse++;
      if (isOk(fast)) oracleFailures.push(`${what}: admitted`);
    }
  }
  t.same(disagreements.slice(0, 5), [], `no disagreement with the reference (${disagreements.length} in all)`);
  t.same(oracleFailures.slice(0, 5), [], `neutral mutations keep the answer, binding ones are refused (${oracleFailures.length} failures)`);
  // The run must have reached both answers and many distinct refusals, or it proves little.
  t.ok(tally.ok >= CASES_PER_PROPERTY / 10, `admitted: ${tally.ok}`);
  t.ok(tally.refused >= CASES_PER_PROPERTY / 3, `refused: ${tally.refused}`);
  t.ok(tally.threw > 0, `refused as having no canonical form: ${tally.threw}`);
  t.ok(reasons.size >= 30, `distinct refusal reasons: ${reasons.size}`);
  t.ok(tally.neutral >= CASES_PER_PROPERTY / 40 && tally.refuse >= CASES_PER_PROPERTY / 20, `oracle cases: ${tally.neutral} neutral, ${tally.refuse} that must be refused`);
});

t.test(`toPlain gives what the JSON round trip gives, on ${CASES_PER_PROPERTY} random values`, async (t) => {
  const r = generator(SEED ^ 0x5eed);
  const wrong: string[] = [];
  for (let i = 0; i < CASES_PER_PROPERTY; i++) {
    const value = randomValue(r, 0, true);
    const fast = outcome(() => shape(toPlain(value)));
    const slow = outcome(() => shape(reference.toPlain(value)));
    if (!same(fast, slow)) wrong.push(`case ${i}: ${fingerprint(value)?.slice(0, 200)}: ${JSON.stringify(fast).slice(0, 200)} vs ${JSON.stringify(slow).slice(0, 200)}`);
  }
  t.same(wrong.slice(0, 5), [], `no difference (${wrong.length} in all)`);
});

/** Pairs on the edges of canonical JSON's rules, each a way a structural comparison could go wrong. */
const EDGE_PAIRS = (): [unknown, unknown][] => [
  [JSON.parse('{"__proto__":{}}'), { b: 2 }], // an own `__proto__` is not the inherited one
  [{ constructor: 'x' }, { b: 2 }],
  [{ a: undefined, b: 1 }, { b: 1 }],
  [{ b: 1 }, { b: 1, c: undefined }],
  [[, 1], [undefined, 1]],
  [[, 1], [, 1]],
  [{ a: -0 }, { a: 0 }],
  [Number.NaN, Number.NaN],
  ['\uD800', '\uD800'],
  [{ '\uDC00': 1 }, { '\uDC00': 1 }],
  [Object.assign(Object.create(null) as object, { a: 1 }), { a: 1 }],
  [new Date(0), new Date(0)],
  [nested(MAX_CANONICAL_DEPTH, 1, true), nested(MAX_CANONICAL_DEPTH, 1, true)],
  [nested(MAX_CANONICAL_DEPTH + 1, 1, false), nested(MAX_CANONICAL_DEPTH + 1, 1, false)],
  [{ a: [1, 2] }, { a: { 0: 1, 1: 2 } }],
  [undefined, undefined],
];

t.test(`jsonEqual answers and throws as comparing canonical JSON does, on ${CASES_PER_PROPERTY} random pairs`, async (t) => {
  const r = generator(SEED ^ 0xe9a1);
  const wrong: string[] = [];
  let equal = 0;
  for (const [i, [x, y]] of EDGE_PAIRS().entries()) {
    for (const [p, q] of [[x, y], [y, x]]) {
      const fast = outcome(() => jsonEqual(p, q));
      const slow = outcome(() => reference.jsonEqual(p, q));
      if (!same(fast, slow)) wrong.push(`edge pair ${i}: ${JSON.stringify(fast)} vs ${JSON.stringify(slow)}`);
    }
  }
  for (let i = 0; i < CASES_PER_PROPERTY; i++) {
    const a = randomValue(r, 0, true);
    // Mostly a copy of a, so equal pairs (the case the fast walk decides alone) are common; sometimes changed.
    const b = r.chance(0.3) ? randomValue(r, 0, true) : copyTree(a);
    if (r.chance(0.3)) {
      const objects = objectsIn(b);
      if (objects.length > 0) r.pick(objects)[r.pick(['a', 'b', 'x'])] = randomValue(r, 3);
    }
    const [x, y] = r.chance(0.5) ? [a, b] : [b, a];
    const fast = outcome(() => jsonEqual(x, y));
    const slow = outcome(() => reference.jsonEqual(x, y));
    if (!same(fast, slow)) wrong.push(`case ${i}: ${fingerprint(x)?.slice(0, 120)} / ${fingerprint(y)?.slice(0, 120)}: ${JSON.stringify(fast)} vs ${JSON.stringify(slow)}`);
    if ('verdict' in fast && fast.verdict === true) equal++;
  }
  t.same(wrong.slice(0, 5), [], `no difference (${wrong.length} in all)`);
  t.ok(equal >= CASES_PER_PROPERTY / 5, `equal pairs: ${equal}`);
});

t.test(`normalised Pod specs and template digests are the reference's, on ${CASES_PER_PROPERTY / 3} random templates`, async (t) => {
  const r = generator(SEED ^ 0x7e3a);
  const wrong: string[] = [];
  for (let i = 0; i < CASES_PER_PROPERTY / 3; i++) {
    const input = randomInput(r);
    const job = r.chance(0.5) ? (stored(buildOperationJob(input)) as Tree) : (JSON.parse(JSON.stringify(buildOperationJob(input))) as Tree);
    const s: Scenario = { job, claim: {}, mode: { kind: 'claim-fixed', owner: {} as ClaimOwner } };
    mutate(r, s, input);
    const template = s.job.spec?.template;
    const plainSpec = plainObject(template?.spec); // as match hands it over: an object, whatever the Job held
    const before = fingerprint([template, plainSpec]);
    const specs = [outcome(() => normalizedPodSpec(plainSpec)), outcome(() => reference.normalizedPodSpec(structuredClone(plainSpec)))];
    const quantities = [outcome(() => withQuantityValues(plainSpec)), outcome(() => reference.withQuantityValues(structuredClone(plainSpec)))];
    const digests = [outcome(() => templateDigestOf(template)), outcome(() => reference.templateDigestOf(template))];
    if (!same(specs[0]!, specs[1]!) || !same(quantities[0]!, quantities[1]!) || !same(digests[0]!, digests[1]!)) wrong.push(`case ${i}: ${JSON.stringify([specs, digests]).slice(0, 300)}`);
    if (fingerprint([template, plainSpec]) !== before) wrong.push(`case ${i}: the normalisation wrote to its input`);
  }
  t.same(wrong.slice(0, 5), [], `no difference (${wrong.length} in all)`);
  // The digest is canonical JSON's: a template and its JSON round trip hash alike.
  const template = buildOperationJob(randomInput(r)).spec!.template;
  t.equal(templateDigestOf(template), templateDigestOf(JSON.parse(JSON.stringify(template))), 'a template and its JSON hash alike');
  t.match(digest({}), /^sha256:/, 'sanity: digests are sha256');
  t.equal(canonicalJson(toPlain({ b: 1, a: [null, undefined] })), '{"a":[null,null],"b":1}', 'sanity: undefined array items become null');
});

t.test('the digest memo holds only what hashes to its key: a refused template stays refused, before and after the right one', async (t) => {
  // A deadline no other case uses, so this template's digest is new to the memo.
  const input = snapshotted({ ...inputFor(CASES[2]!), execution: { ...inputFor(CASES[2]!).execution, activeDeadlineSeconds: 4321 } });
  const built = buildOperationJob(input);
  const live = stored(built);
  const tampered = structuredClone(live);
  tampered.spec!.template.spec!.containers[0]!.image = 'registry.example/evil:latest';
  const fixed: MatchMode = { kind: 'claim-fixed', owner: { kind: input.owner.kind, name: input.owner.name, namespace: input.owner.namespace, uid: input.owner.uid } };
  const refusal = { ok: false, reason: 'the Job\'s Pod template is not the one the admission snapshot recorded' };
  t.same(match(tampered, input.claim as JobClaim, fixed), refusal, 'the tampered template first');
  t.same(match(tampered, input.claim as JobClaim, fixed), refusal, 'and again');
  t.same(match(live, input.claim as JobClaim, fixed), { ok: true }, 'the recorded template');
  t.same(match(tampered, input.claim as JobClaim, fixed), refusal, 'the tampered one after it');
  const snapshot = input.claim.admissionSnapshot!;
  const forged = { ...input.claim, admissionSnapshot: { ...snapshot, serviceAccount: 'root' } } as ClaimedOperation;
  t.match(match(live, forged as JobClaim, fixed), { ok: false, reason: /does not hash to its recorded digest/ }, 'a snapshot body that does not hash to its digest, after the right one');
});

/** Spellings a Job may hold: quantities, near misses, numbers, and spellings longer than the parser keeps answers for. */
function randomSpelling(r: Random): string | number {
  const digits = (n: number) => Array.from({ length: n }, () => String(r.int(10))).join('');
  return r.pick<() => string | number>([
    () => r.pick(Object.keys(ALT_QUANTITY)),
    () => r.pick(Object.values(ALT_QUANTITY).flat()),
    () => `${r.pick(['', '+', '-'])}${digits(1 + r.int(4))}${r.pick(['', '.', `.${digits(2)}`])}${r.pick(['', 'm', 'Ki', 'Mi', 'Gi', 'k', 'M', 'e3', 'E-2', 'x', ' '])}`,
    () => r.pick(['', ' 1 ', '1 Gi', '1KiB', '1e', '--1', '1.2.3', '.5', '5.', 'NaN']),
    () => randomNumber(r),
    // Past the longest spelling whose answer is kept (64), and near it.
    () => `${digits(60 + r.int(10))}${r.pick(['', 'm', 'Mi'])}`,
  ])();
}

t.test(`quantityValue gives the uncached parser's answer, on ${CASES_PER_PROPERTY * 2} random spellings (repeats, long ones, past the kept 256)`, async (t) => {
  const r = generator(SEED ^ 0x9a17);
  const seen: (string | number)[] = [];
  const wrong: string[] = [];
  let kept = 0;
  for (let i = 0; i < CASES_PER_PROPERTY * 2; i++) {
    // Half of the calls repeat an earlier spelling, near or far back, so answers are read both kept and forgotten.
    const spelling = seen.length > 0 && r.chance(0.5) ? seen[seen.length - 1 - r.int(Math.min(seen.length, r.chance(0.5) ? 16 : 600))]! : randomSpelling(r);
    seen.push(spelling);
    const fast = outcome(() => quantityValue(spelling));
    const slow = outcome(() => reference.quantityValue(spelling));
    if (!same(fast, slow)) wrong.push(`case ${i}: ${JSON.stringify(String(spelling))}: ${JSON.stringify(fast)} vs ${JSON.stringify(slow)}`);
    if ('verdict' in fast && fast.verdict !== undefined) kept++;
  }
  t.same(wrong.slice(0, 5), [], `no difference (${wrong.length} in all)`);
  t.ok(kept >= CASES_PER_PROPERTY / 2, `spellings that are quantities: ${kept}`);
  // A number and the string it is written as are one spelling; a spelling is read after trimming, whatever is kept.
  t.equal(quantityValue(0.25), reference.quantityValue('0.25'));
  t.equal(quantityValue(' 250m '), quantityValue('250m'));
  t.equal(quantityValue(`${'1'.repeat(70)}m`), reference.quantityValue(`${'1'.repeat(70)}m`), 'a spelling too long to keep');
});

t.test(`the kept hashes of Job names and operation-ID labels are hashing's, on ${CASES_PER_PROPERTY} random inputs`, async (t) => {
  const r = generator(SEED ^ 0x4a5e);
  const wrong: string[] = [];
  const seen: string[] = [];
  for (let i = 0; i < CASES_PER_PROPERTY; i++) {
    const text = seen.length > 0 && r.chance(0.5)
      ? seen[seen.length - 1 - r.int(Math.min(seen.length, r.chance(0.5) ? 8 : 600))]!
      : r.pick([() => randomString(r), () => digest(i), () => `${digest(i)}\0${r.int(3)}`, () => 'y'.repeat(1020 + r.int(10))])();
    seen.push(text);
    if (recentSha256Hex(text) !== sha256Hex(text)) wrong.push(`case ${i}: ${JSON.stringify(text.slice(0, 80))}`);
    if (operationIdLabelValue(text) !== sha256Hex(text).slice(0, 16)) wrong.push(`case ${i}: the label of ${JSON.stringify(text.slice(0, 80))}`);
  }
  // Names that differ in one input each, and in an input a separator could shift into another: all distinct,
  // each the hash of its own seed, whether it was kept or not.
  const base: JobNameInput = { family: 'schema', ownerName: 'orders', ownerUid: 'uid-1', operationType: 'Apply', operationId: digest('op'), executionBindingId: EPOCH, inputFingerprint: digest('in'), attempt: 1 };
  const variants: JobNameInput[] = [base, { ...base, ownerUid: 'uid-2' }, { ...base, operationId: digest('op2') }, { ...base, executionBindingId: OTHER_EPOCH },
    { ...base, inputFingerprint: digest('in2') }, { ...base, attempt: 2 }, { ...base, operationType: 'Plan' }, { ...base, ownerUid: 'uid-1\0Apply' }];
  const names = new Set<string>();
  for (let round = 0; round < 2; round++) {
    for (const input of variants) {
      const name = jobNameFor(input);
      const seed = [input.ownerUid, input.operationType, input.operationId, input.executionBindingId, input.inputFingerprint, String(input.attempt)].join('\0');
      if (!name.endsWith(`-${sha256Hex(seed).slice(0, 16)}`)) wrong.push(`the name of ${JSON.stringify(input)} is not its seed's hash`);
      names.add(name);
    }
  }
  t.same(wrong.slice(0, 5), [], `no difference (${wrong.length} in all)`);
  t.equal(names.size, variants.length, 'each input names its own Job, the second time as the first');
});

t.test(`a rebuild reads lockTimeout as parsing it afresh does, on ${CASES_PER_PROPERTY / 3} random spellings (repeats, refused and long ones)`, async (t) => {
  const r = generator(SEED ^ 0x10c7);
  const apply = CASES.find((c) => c.family === 'migration' && c.type === 'Apply')!;
  const base = inputFor(apply);
  const seen: string[] = [];
  const wrong: string[] = [];
  let refused = 0;
  for (let i = 0; i < CASES_PER_PROPERTY / 3; i++) {
    const spelling = seen.length > 0 && r.chance(0.5)
      ? seen[seen.length - 1 - r.int(Math.min(seen.length, r.chance(0.5) ? 4 : 200))]!
      : r.pick([() => `${1 + r.int(90)}${r.pick(['s', 'm', 'ms', 'h', 'us'])}`, () => `${r.int(3)}m${r.int(60)}s`, () => r.pick(['', '5', '1.5s', '-1s', 'soon', '30 s', '0s', '1h1h']), () => `${'1'.repeat(60 + r.int(10))}ms`])();
    seen.push(spelling);
    let expected: string;
    try {
      const ms = Math.ceil(parseDuration(spelling));
      expected = ms >= 1 && ms <= MAX_LOCK_TIMEOUT_MS ? String(ms) : 'out of range';
    } catch (e) {
      if (!(e instanceof DurationError)) throw e;
      expected = `spec.policy.lockTimeout: ${e.message}`;
    }
    let got: string;
    try {
      const job = buildOperationJob({ ...base, policy: { lockTimeout: spelling } });
      got = job.spec!.template.spec!.containers[0]!.env!.find((v) => v.name === 'PTAH_LOCK_TIMEOUT_MS')!.value!;
    } catch (e) {
      if (!(e instanceof JobBuildError)) throw e;
      got = e.message.startsWith('spec.policy.lockTimeout: ') ? e.message : 'out of range';
      refused++;
    }
    if (got !== expected) wrong.push(`case ${i}: ${JSON.stringify(spelling)}: ${got} vs ${expected}`);
  }
  t.same(wrong.slice(0, 5), [], `no difference (${wrong.length} in all)`);
  t.ok(refused > 0 && refused < CASES_PER_PROPERTY / 3, `refused spellings: ${refused}`);
});
