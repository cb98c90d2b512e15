// The commands of `kubectl ptah`, each on a KubeClient built from the caller's own kubeconfig: every read and every
// create is made as the person who typed the command, so RBAC decides what they may see (a plan's SQL lives in its
// chunks, which need their own `get`) and admission stamps them as the approver.
import { stringify } from 'yaml';
import type { PtahMigration, PtahMigrationApproval, PtahMigrationPlan, PtahMigrationRunAcknowledgment } from '../shared/api/migration-kinds.js';
import type { PtahSchema, PtahSchemaApproval, PtahSchemaPlan, PtahSchemaPlanChunk, PtahSchemaRunAcknowledgment } from '../shared/api/schema-kinds.js';
import { API_VERSION, KINDS } from '../shared/api/names.js';
import { ApiError, isNotFound, type KubeClient } from '../shared/kube-client.js';
import { reconstructPlanBytes } from '../shared/planstore.js';
import { CliError } from './errors.js';
import { repairText, type MigrationRepair } from '../shared/migration-repair.js';
import { formatExplanation, formatTable, statusRow, type PtahResource, type ResourceKind } from './explain.js';
import { migrationPlanSummary, parsePlanDocument, planSql, schemaPlanSummary } from './plan-format.js';

export interface Context {
  client: KubeClient;
  namespace: string;
  out: (line: string) => void;
  now?: () => Date;
}

const KIND_ALIASES: Record<string, ResourceKind> = {
  schema: 'PtahSchema',
  ptahschema: 'PtahSchema',
  ptahschemas: 'PtahSchema',
  ptahs: 'PtahSchema',
  migration: 'PtahMigration',
  ptahmigration: 'PtahMigration',
  ptahmigrations: 'PtahMigration',
  ptahm: 'PtahMigration',
};

/** The kind a `--kind` value or a `kind/` prefix names; a usage error for anything else. */
export function kindOf(word: string): ResourceKind {
  const kind = KIND_ALIASES[word.toLowerCase().replace(/\..*$/, '')];
  if (!kind) throw new CliError(`${JSON.stringify(word)} is not a kind kubectl ptah knows; use ptahschema or ptahmigration`, 2);
  return kind;
}

/** Splits `kind/name` (or a bare name with `--kind`). */
export function parseTarget(target: string, kindFlag: string | undefined): { kind: ResourceKind | undefined; name: string } {
  const slash = target.indexOf('/');
  if (slash < 0) return { kind: kindFlag === undefined ? undefined : kindOf(kindFlag), name: target };
  const kind = kindOf(target.slice(0, slash));
  if (kindFlag !== undefined && kindOf(kindFlag) !== kind) throw new CliError(`${target} contradicts --kind ${kindFlag}`, 2);
  const name = target.slice(slash + 1);
  if (!name) throw new CliError(`${target} names no resource`, 2);
  return { kind, name };
}

const ref = (ctx: Context, kind: keyof typeof KINDS, name: string) => ({ apiVersion: API_VERSION, kind: KINDS[kind].kind, namespace: ctx.namespace, name });

/** Reads a resource; a missing kind is refused by name so a person sees what was looked for and where. */
async function read<K extends ResourceKind>(ctx: Context, kind: K, name: string): Promise<PtahResource | undefined> {
  const obj = await ctx.client.tryGet<PtahSchema | PtahMigration>(ref(ctx, kind, name));
  return obj ? ({ ...obj, kind } as PtahResource) : undefined;
}

/** The resource `target` names: with a kind, that one; without, whichever of the two kinds exists under the name. */
async function resolve(ctx: Context, target: string, kindFlag: string | undefined): Promise<PtahResource> {
  const { kind, name } = parseTarget(target, kindFlag);
  if (kind) {
    const found = await read(ctx, kind, name);
    if (!found) throw new CliError(`${kind.toLowerCase()}/${name} not found in namespace ${ctx.namespace}`);
    return found;
  }
  const [schema, migration] = await Promise.all([read(ctx, 'PtahSchema', name), read(ctx, 'PtahMigration', name)]);
  if (schema && migration) throw new CliError(`both ptahschema/${name} and ptahmigration/${name} exist in namespace ${ctx.namespace}; say which with --kind`, 2);
  const found = schema ?? migration;
  if (!found) throw new CliError(`no ptahschema or ptahmigration named ${name} in namespace ${ctx.namespace}`);
  return found;
}

export async function statusCommand(ctx: Context, allNamespaces: boolean): Promise<void> {
  const ns = allNamespaces ? undefined : ctx.namespace;
  const [schemas, migrations] = await Promise.all([
    ctx.client.list<PtahSchema>(API_VERSION, KINDS.PtahSchema.kind, ns),
    ctx.client.list<PtahMigration>(API_VERSION, KINDS.PtahMigration.kind, ns),
  ]);
  const now = ctx.now?.() ?? new Date();
  const resources: PtahResource[] = [
    ...schemas.map((s): PtahResource => ({ ...s, kind: 'PtahSchema' })),
    ...migrations.map((m): PtahResource => ({ ...m, kind: 'PtahMigration' })),
  ].sort((a, b) => `${a.metadata?.namespace}/${a.kind}/${a.metadata?.name}`.localeCompare(`${b.metadata?.namespace}/${b.kind}/${b.metadata?.name}`));
  if (resources.length === 0) {
    ctx.out(allNamespaces ? 'No PtahSchema or PtahMigration found.' : `No PtahSchema or PtahMigration found in namespace ${ctx.namespace}.`);
    return;
  }
  for (const line of formatTable(resources.map((r) => statusRow(r, now)), allNamespaces)) ctx.out(line);
}

export async function explainCommand(ctx: Context, target: string, kindFlag: string | undefined): Promise<void> {
  if (!target.includes('/') && kindFlag === undefined) throw new CliError('explain takes <kind>/<name>, e.g. ptahschema/catalog', 2);
  const resource = await resolve(ctx, target, kindFlag);
  for (const line of formatExplanation(resource, ctx.now?.() ?? new Date())) ctx.out(line);
}

/** The plan the resource's status names now, read and held to the uid the status records. */
async function currentPlan(ctx: Context, resource: PtahResource): Promise<PtahSchemaPlan | PtahMigrationPlan> {
  const named = resource.status?.plan;
  const what = `${resource.kind.toLowerCase()}/${resource.metadata.name}`;
  if (!named) throw new CliError(`${what} has no current plan (phase ${resource.status?.phase ?? 'none yet'})`);
  const planKind = resource.kind === 'PtahSchema' ? 'PtahSchemaPlan' : 'PtahMigrationPlan';
  const plan = await ctx.client.tryGet<PtahSchemaPlan | PtahMigrationPlan>(ref(ctx, planKind, named.name));
  // A plan replaced under the same name is another plan: approving or printing it would not be what status names.
  if (!plan || plan.metadata.uid !== named.uid) throw new CliError(`${what} names plan ${named.name}, which no longer exists as named; run the command again`);
  return plan;
}

export async function planCommand(ctx: Context, target: string, kindFlag: string | undefined, output: string | undefined): Promise<void> {
  if (output !== undefined && output !== 'yaml' && output !== 'sql') throw new CliError(`-o ${output} is not an output kubectl ptah plan knows; use yaml or sql`, 2);
  const resource = await resolve(ctx, target, kindFlag);
  const plan = await currentPlan(ctx, resource);
  if (output === 'yaml') {
    ctx.out(stringify(plan).trimEnd());
    return;
  }
  if (resource.kind === 'PtahMigration') {
    // A migration plan holds versions and checksums only; its SQL is the artifact's files.
    if (output === 'sql') ctx.out('-- a PtahMigrationPlan holds no SQL: the files it names are the artifact ConfigMap\'s keys');
    for (const line of migrationPlanSummary(plan as PtahMigrationPlan)) ctx.out(line);
    return;
  }
  const schemaPlan = plan as PtahSchemaPlan;
  if (output !== 'sql') {
    for (const line of schemaPlanSummary(schemaPlan)) ctx.out(line);
    return;
  }
  const chunks = await Promise.all(schemaPlan.spec.chunks.map(async (name) => {
    try {
      return await ctx.client.get<PtahSchemaPlanChunk>(ref(ctx, 'PtahSchemaPlanChunk', name));
    } catch (e) {
      if (e instanceof ApiError && e.code === 403) throw new CliError(`you may not read plan chunk ${name} in namespace ${ctx.namespace} (the ptah-approver role grants get on ptahschemaplanchunks)`);
      if (isNotFound(e)) throw new CliError(`plan chunk ${name} of ${schemaPlan.metadata.name} does not exist`);
      throw e;
    }
  }));
  let bytes: Uint8Array;
  try {
    bytes = reconstructPlanBytes(chunks, schemaPlan.spec);
  } catch (e) {
    throw new CliError(`the chunks of plan ${schemaPlan.metadata.name} do not reassemble it: ${(e as Error).message}`);
  }
  ctx.out(planSql(parsePlanDocument(bytes)).trimEnd());
}

export async function approveCommand(ctx: Context, target: string, kindFlag: string | undefined): Promise<void> {
  const resource = await resolve(ctx, target, kindFlag);
  const plan = await currentPlan(ctx, resource);
  const name = resource.metadata.name!;
  const resourceRef = { name, uid: resource.metadata.uid! };
  const planRef = { name: plan.metadata.name!, uid: plan.metadata.uid! };
  const metadata = { generateName: `${name}-approval-`, namespace: ctx.namespace };
  const created = resource.kind === 'PtahSchema'
    ? await ctx.client.create<PtahSchemaApproval>({
      apiVersion: API_VERSION, kind: KINDS.PtahSchemaApproval.kind, metadata,
      spec: { schemaRef: resourceRef, planRef, planFingerprint: plan.spec.fingerprint },
    } as PtahSchemaApproval)
    : await ctx.client.create<PtahMigrationApproval>({
      apiVersion: API_VERSION, kind: KINDS.PtahMigrationApproval.kind, metadata,
      spec: { migrationRef: resourceRef, planRef, planFingerprint: plan.spec.fingerprint },
    } as PtahMigrationApproval);
  const approver = (created.spec as { approver?: { username?: string } }).approver?.username;
  ctx.out(`${created.kind!.toLowerCase()}/${created.metadata.name} created: approves plan ${planRef.name} (${plan.spec.fingerprint})${approver ? ` as ${approver}` : ''}`);
}

/** What a resource waits on a person for, if anything: a migration's unresolved run, a schema's owed proof. */
function awaitedRun(resource: PtahResource): { operationID: string; outcome: string } | undefined {
  if (resource.kind === 'PtahMigration') return (resource as PtahMigration).status?.unresolvedRun;
  const pending = (resource as PtahSchema).status?.pendingObservation;
  return pending && { operationID: pending.applyOperationID, outcome: pending.outcome };
}

export async function acknowledgeCommand(ctx: Context, target: string, kindFlag: string | undefined): Promise<void> {
  const resource = await resolve(ctx, target, kindFlag);
  const name = resource.metadata.name!;
  const run = awaitedRun(resource);
  const schema = resource.kind === 'PtahSchema';
  const kind = schema ? KINDS.PtahSchemaRunAcknowledgment : KINDS.PtahMigrationRunAcknowledgment;
  if (!run) {
    throw new CliError(schema
      ? `ptahschema/${name} owes no proof (no status.pendingObservation); there is nothing to acknowledge`
      : `ptahmigration/${name} has nothing unresolved (no status.unresolvedRun); there is nothing to acknowledge`);
  }
  const resourceRef = { name, uid: resource.metadata.uid! };
  const created = await ctx.client.create<PtahMigrationRunAcknowledgment | PtahSchemaRunAcknowledgment>({
    apiVersion: API_VERSION,
    kind: kind.kind,
    metadata: { generateName: `${name}-ack-`, namespace: ctx.namespace },
    spec: { ...(schema ? { schemaRef: resourceRef } : { migrationRef: resourceRef }), operationID: run.operationID },
  } as PtahMigrationRunAcknowledgment | PtahSchemaRunAcknowledgment);
  const by = created.spec.acknowledgedBy?.username;
  ctx.out(`${kind.singular}/${created.metadata.name} created: acknowledges ${run.outcome} ${schema ? 'Apply' : 'run'} ${run.operationID}${by ? ` as ${by}` : ''}`);
}

/**
 * Sets spec.repair: what the database holds of a dirty row's file, once a person mended it. The next reading
 * publishes a repair plan, which runs only under an approval; the Apply records the repair in the database.
 */
export async function repairCommand(ctx: Context, target: string, kindFlag: string | undefined, repair: MigrationRepair): Promise<void> {
  // The patch is made against the version the check read. The manager writes status as it works, which moves that
  // version: a conflict is read again and checked again, a few times, rather than handed to the person.
  for (let attempt = 1; ; attempt++) {
    const migration = await repairable(ctx, target, kindFlag);
    try {
      await ctx.client.patch<PtahMigration>(
        { apiVersion: API_VERSION, kind: KINDS.PtahMigration.kind, namespace: ctx.namespace, name: migration.metadata.name! },
        { metadata: { resourceVersion: migration.metadata.resourceVersion }, spec: { repair } }, 'merge');
      return reportRepair(ctx, migration, repair);
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 409) || attempt >= REPAIR_ATTEMPTS) throw e;
    }
  }
}

const REPAIR_ATTEMPTS = 5;

/** The PtahMigration `target` names, when its last reading does not rule a repair out. */
async function repairable(ctx: Context, target: string, kindFlag: string | undefined): Promise<PtahMigration> {
  const resource = await resolve(ctx, target, kindFlag);
  const name = resource.metadata.name!;
  if (resource.kind !== 'PtahMigration') throw new CliError(`repair is for a PtahMigration's history; ptahschema/${name} keeps none`);
  const migration = resource as PtahMigration;
  if (migration.status?.history && !migration.status.history.dirty) {
    throw new CliError(`ptahmigration/${name}'s last reading (${migration.status.history.observedAt}) finds no dirty history row; there is nothing to repair`);
  }
  return migration;
}

function reportRepair(ctx: Context, migration: PtahMigration, repair: MigrationRepair): void {
  const name = migration.metadata.name!;
  const unresolved = migration.status?.unresolvedRun;
  ctx.out(`ptahmigration/${name} spec.repair set: the repair ${repairText(repair)}; the next reading publishes it as a repair plan, ` +
    `which runs only once you approve it (kubectl ptah approve ${name})` +
    (unresolved ? `; first acknowledge unresolved run ${unresolved.operationID} (kubectl ptah acknowledge ${name})` : ''));
}
