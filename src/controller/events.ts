// Kubernetes Events (events.k8s.io/v1) about the objects the controller reconciles. Recording an Event is
// telemetry: it never throws into the reconcile that asked for it and never holds it up (writes run in the
// background; a failed write is logged and dropped). Repeats of one event within a window become one Event whose
// series.count grows, so a key that fails on every pass does not flood the namespace.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isNotFound, type KubeClient, type KubeObject } from '../shared/kube-client.js';
import { systemClock, type Clock } from '../shared/clock.js';
import { toMicroTime } from './clock.js';

export type EventType = 'Normal' | 'Warning';

export interface EventInput {
  type: EventType;
  /** Machine-readable, UpperCamelCase (e.g. `PlanPublished`); at most 128 characters. */
  reason: string;
  /** Human-readable; URLs and credentials are removed and it is cut to 1 KiB before it is written. */
  note: string;
  /** What was done or failed (e.g. `Dispatch`); at most 128 characters. Default `Reconcile`. */
  action?: string;
}

interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

interface EventsV1Event extends KubeObject {
  eventTime: string;
  series?: { count: number; lastObservedTime: string };
  reportingController: string;
  reportingInstance: string;
  action: string;
  reason: string;
  type: EventType;
  note: string;
  regarding: ObjectReference;
}

const NOTE_LIMIT_BYTES = 1024;
const FIELD_LIMIT = 128;
const REASON = /^[A-Z][A-Za-z0-9]*$/;
export const REDACTED_URL = '[REDACTED-URL]';
const REDACTED = '[REDACTED]';

// Any scheme://… run: database URLs carry credentials and host names an Event reader has no business seeing.
const URL = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi;
// key=value / key: value pairs whose value is a credential (libpq keyword strings, env dumps, JSON-ish text).
const SECRET_PAIR =
  /\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|sslpassword|sslkey|credentials?)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)/gi;
const AUTH_SCHEME = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi;

/** The note as it may appear in an Event: no URLs, no credentials, at most 1 KiB of UTF-8. */
export function redactNote(note: string): string {
  const scrubbed = note
    .replace(URL, REDACTED_URL)
    // A quoted value keeps its quotes, so JSON-ish text stays readable.
    .replace(SECRET_PAIR, (_m, key: string, sep: string, value: string) => {
      const quote = value[0] === '"' || value[0] === "'" ? value[0] : '';
      return `${key}${sep}${quote}${REDACTED}${quote}`;
    })
    .replace(AUTH_SCHEME, `$1 ${REDACTED}`);
  return truncateUtf8(scrubbed, NOTE_LIMIT_BYTES);
}

function truncateUtf8(text: string, limit: number): string {
  if (Buffer.byteLength(text) <= limit) return text;
  const ellipsis = '…';
  let cut = text.slice(0, limit);
  while (Buffer.byteLength(cut) + Buffer.byteLength(ellipsis) > limit) cut = cut.slice(0, -1);
  // Never leave half a surrogate pair behind.
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return cut + ellipsis;
}

export interface EventRecorderOptions {
  client: Pick<KubeClient, 'create' | 'patch'>;
  /** reportingController, e.g. `operator.ptah.run/manager`. */
  controller: string;
  /** reportingInstance: this process (the leader-election identity). */
  instance: string;
  logger: Logger;
  clock?: Clock;
  /** Repeats within this long of the last occurrence join its series; default 10 minutes. */
  aggregationWindowMs?: number;
  /** Distinct events remembered for aggregation (oldest forgotten first); default 4096. */
  maxTracked?: number;
}

interface Tracked {
  name: string;
  namespace: string;
  body: EventsV1Event;
  count: number;
  lastSeenMs: number;
  lastSeen: Date;
  /** The Event exists in the API server (created, and not found missing since). */
  created: boolean;
  writing?: Promise<void>;
  /** Occurrences arrived while a write was in flight: write again after it. */
  stale: boolean;
}

export class EventRecorder {
  private readonly client: Pick<KubeClient, 'create' | 'patch'>;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly windowMs: number;
  private readonly maxTracked: number;
  private readonly tracked = new Map<string, Tracked>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly options: EventRecorderOptions) {
    if (!options.controller || !options.instance) throw new Error('an event recorder needs a reporting controller and instance');
    this.client = options.client;
    this.log = options.logger.child({ component: 'events' });
    this.clock = options.clock ?? systemClock;
    this.windowMs = options.aggregationWindowMs ?? 10 * 60_000;
    this.maxTracked = options.maxTracked ?? 4096;
  }

  /** Records an event about `regarding`. Returns at once; never throws. */
  record(regarding: KubeObject, event: EventInput): void {
    try {
      this.recordOrThrow(regarding, event);
    } catch (err) {
      this.log.error({ err, reason: event?.reason }, 'event not recorded');
    }
  }

  /** Resolves when every write started so far has finished (for shutdown and tests). */
  async flush(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private recordOrThrow(regarding: KubeObject, event: EventInput): void {
    const action = event.action ?? 'Reconcile';
    if (!REASON.test(event.reason) || event.reason.length > FIELD_LIMIT) {
      throw new Error(`event reason ${JSON.stringify(event.reason)} must be UpperCamelCase, at most ${FIELD_LIMIT} characters`);
    }
    if (!action || action.length > FIELD_LIMIT) throw new Error(`event action must be 1..${FIELD_LIMIT} characters`);
    if (event.type !== 'Normal' && event.type !== 'Warning') throw new Error(`event type ${JSON.stringify(event.type)} is not Normal or Warning`);
    const { apiVersion, kind, metadata } = regarding;
    if (!apiVersion || !kind || !metadata?.name) throw new Error('the regarding object lacks apiVersion, kind or metadata.name');
    const ref: ObjectReference = { apiVersion, kind, name: metadata.name };
    if (metadata.namespace) ref.namespace = metadata.namespace;
    if (metadata.uid) ref.uid = metadata.uid;
    if (metadata.resourceVersion) ref.resourceVersion = metadata.resourceVersion;
    const note = redactNote(event.note);
    const identity = JSON.stringify([ref.uid ?? `${ref.apiVersion}/${ref.kind}/${ref.namespace ?? ''}/${ref.name}`, event.type, event.reason, action, note]);

    const nowMs = this.clock.monotonicMs();
    const now = this.clock.now();
    const previous = this.tracked.get(identity);
    if (previous && nowMs - previous.lastSeenMs < this.windowMs) {
      previous.count++;
      previous.lastSeenMs = nowMs;
      previous.lastSeen = now;
      // Most recently seen last, so the oldest is evicted first.
      this.tracked.delete(identity);
      this.tracked.set(identity, previous);
      this.write(previous);
      return;
    }
    const namespace = ref.namespace ?? 'default';
    const name = eventName(ref.name);
    const entry: Tracked = {
      name,
      namespace,
      count: 1,
      lastSeenMs: nowMs,
      lastSeen: now,
      created: false,
      stale: false,
      body: {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name, namespace },
        eventTime: toMicroTime(now),
        reportingController: this.options.controller,
        reportingInstance: this.options.instance,
        action,
        reason: event.reason,
        type: event.type,
        note,
        regarding: ref,
      },
    };
    this.tracked.delete(identity);
    this.tracked.set(identity, entry);
    while (this.tracked.size > this.maxTracked) this.tracked.delete(this.tracked.keys().next().value as string);
    this.write(entry);
  }

  /** One write per event at a time; occurrences during a write are folded into the next one. */
  private write(entry: Tracked): void {
    if (entry.writing) {
      entry.stale = true;
      return;
    }
    const run: Promise<void> = this.writeUntilCurrent(entry).finally(() => {
      entry.writing = undefined;
      this.inFlight.delete(run);
    });
    entry.writing = run;
    this.inFlight.add(run);
  }

  private async writeUntilCurrent(entry: Tracked): Promise<void> {
    try {
      do {
        entry.stale = false;
        await this.writeOnce(entry);
      } while (entry.stale);
    } catch (err) {
      this.log.warn({ err, reason: entry.body.reason, namespace: entry.namespace, event: entry.name }, 'cannot write an Event');
    }
  }

  private async writeOnce(entry: Tracked): Promise<void> {
    const series = entry.count > 1 ? { count: entry.count, lastObservedTime: toMicroTime(entry.lastSeen) } : undefined;
    if (entry.created && series) {
      try {
        await this.client.patch({ apiVersion: 'events.k8s.io/v1', kind: 'Event', namespace: entry.namespace, name: entry.name }, { series }, 'merge');
        return;
      } catch (err) {
        // Expired or deleted: start a new Event carrying the series so far.
        if (!isNotFound(err)) throw err;
        entry.name = eventName(entry.body.regarding.name);
        entry.body = { ...entry.body, metadata: { name: entry.name, namespace: entry.namespace } };
        entry.created = false;
      }
    }
    if (entry.created) return;
    await this.client.create<EventsV1Event>(series ? { ...entry.body, series } : entry.body);
    entry.created = true;
  }
}

/** `<regarding>.<random>`, within the 253 characters of a DNS subdomain. */
function eventName(regardingName: string): string {
  return `${regardingName.slice(0, 253 - 17)}.${randomBytes(8).toString('hex')}`;
}
