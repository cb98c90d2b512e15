// The soak's safety counts, from what the databases and the API server recorded (bench/soak.ts reads them; these
// functions only count, so test/unit/soak-count.test.ts can feed them a fabricated history).
//
// An execution is one operation's writes to one database: a migration Apply spans its history rows (each file's
// started_at to finished_at, in seq order), a schema Apply its schema_applies row (started_at, taken under the
// writer locks, to applied_at). A run that wrote nothing records nothing and is not counted.

export interface MigrationRow {
  seq: number;
  version: string;
  operationId: string;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface SchemaApplyRow {
  seq: number;
  operationId: string;
  /** NULL only in a table an executor without the column wrote. */
  startedAt: Date | null;
  appliedAt: Date;
}

export interface DatabaseRecord {
  database: string;
  /** The coordination key every resource on the database shares. */
  realm: string;
  history: MigrationRow[];
  schemaApplies: SchemaApplyRow[];
}

export interface Execution {
  database: string;
  realm: string;
  operationId: string;
  start: Date;
  end: Date;
}

export interface AppliedTwice {
  operationId: string;
  why: string;
}

export interface Overlap {
  database: string;
  realm: string;
  first: Execution;
  second: Execution;
}

/** The executions one database records, and the operations it shows applied more than once. */
export function executionsOf(db: DatabaseRecord): { executions: Execution[]; appliedTwice: AppliedTwice[] } {
  const executions: Execution[] = [];
  const appliedTwice: AppliedTwice[] = [];
  // Consecutive rows of one operation are one execution; the same operation again after another's rows is a second.
  const rows = [...db.history].sort((a, b) => a.seq - b.seq);
  const runs: MigrationRow[][] = [];
  for (const row of rows) {
    const last = runs.at(-1);
    if (last && last[0]!.operationId === row.operationId) last.push(row);
    else runs.push([row]);
  }
  const seen = new Set<string>();
  for (const run of runs) {
    const id = run[0]!.operationId;
    if (seen.has(id)) appliedTwice.push({ operationId: id, why: `${db.database}: its history rows resume after another operation's` });
    seen.add(id);
    const ends = run.map((r) => (r.finishedAt ?? r.startedAt).getTime());
    executions.push({ database: db.database, realm: db.realm, operationId: id, start: run[0]!.startedAt, end: new Date(Math.max(...ends)) });
  }
  const versions = new Map<string, string>();
  for (const row of rows) {
    const before = versions.get(row.version);
    if (before !== undefined) appliedTwice.push({ operationId: row.operationId, why: `${db.database}: version ${row.version} recorded again (first by ${before})` });
    versions.set(row.version, row.operationId);
  }
  for (const row of [...db.schemaApplies].sort((a, b) => a.seq - b.seq)) {
    if (seen.has(row.operationId)) appliedTwice.push({ operationId: row.operationId, why: `${db.database}: schema_applies records it again` });
    seen.add(row.operationId);
    executions.push({ database: db.database, realm: db.realm, operationId: row.operationId, start: row.startedAt ?? row.appliedAt, end: row.appliedAt });
  }
  return { executions, appliedTwice };
}

/** Every operation some database shows applied twice, including one recorded in two databases. */
export function appliedTwice(databases: readonly DatabaseRecord[]): AppliedTwice[] {
  const found: AppliedTwice[] = [];
  const where = new Map<string, string>();
  for (const db of databases) {
    const { executions, appliedTwice: twice } = executionsOf(db);
    found.push(...twice);
    for (const id of new Set(executions.map((e) => e.operationId))) {
      const other = where.get(id);
      if (other !== undefined) found.push({ operationId: id, why: `recorded in ${other} and in ${db.database}` });
      where.set(id, db.database);
    }
  }
  return found;
}

/**
 * Pairs of executions of different operations on one database whose spans intersect. The writer lock is one per
 * database, so this is stricter than one realm: two realms on one database must not overlap either.
 */
export function overlaps(databases: readonly DatabaseRecord[]): Overlap[] {
  const found: Overlap[] = [];
  for (const db of databases) {
    const executions = executionsOf(db).executions.sort((a, b) => a.start.getTime() - b.start.getTime());
    for (const [i, first] of executions.entries()) {
      for (const second of executions.slice(i + 1)) {
        if (second.start.getTime() >= first.end.getTime()) break;
        if (second.operationId !== first.operationId) found.push({ database: db.database, realm: db.realm, first, second });
      }
    }
  }
  return found;
}

// ---- Leases released while a Pod of their claim ran ----

/** A stored write of a realm Lease, from the proxy's record: who held it before and after, at which revision. */
export interface LeaseWrite {
  lease: string;
  at: number;
  /** The resourceVersion the API server stored it under (etcd's revision, ordered across kinds). */
  revision: number;
  holderAfter: string | undefined;
  deleted: boolean;
}

/** One Pod's life in the API server's history: created at one revision, stopped (terminal phase or gone) at another. */
export interface PodLife {
  name: string;
  /** The holder identity of the claim whose Job created it. */
  holder: string;
  createdRevision: number;
  stoppedRevision: number | undefined;
}

export interface LeaseTransition {
  lease: string;
  at: number;
  revision: number;
  from: string;
  to: string | undefined;
  /** Pods of the claim that held the Lease before, running at the transition's revision. */
  runningPods: string[];
}

/**
 * Each write that took a Lease from a holder (a release: the holder removed or the Lease deleted; a takeover: another
 * holder), with the Pods of the previous holder's claim that were running at its revision.
 */
export function leaseTransitions(writes: readonly LeaseWrite[], pods: readonly PodLife[]): { releases: LeaseTransition[]; takeovers: LeaseTransition[] } {
  const releases: LeaseTransition[] = [];
  const takeovers: LeaseTransition[] = [];
  const holders = new Map<string, string | undefined>();
  for (const write of [...writes].sort((a, b) => a.revision - b.revision)) {
    const from = holders.get(write.lease);
    const to = write.deleted ? undefined : write.holderAfter || undefined;
    holders.set(write.lease, to);
    if (!from || from === to) continue;
    const runningPods = pods.filter((p) => p.holder === from && p.createdRevision < write.revision &&
      (p.stoppedRevision === undefined || p.stoppedRevision > write.revision)).map((p) => p.name);
    (to === undefined ? releases : takeovers).push({ lease: write.lease, at: write.at, revision: write.revision, from, to, runningPods });
  }
  return { releases, takeovers };
}
