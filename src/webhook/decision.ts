// /validate/decision: an approval or a run acknowledgment is admitted only when the mutating pass stamped it for
// exactly this caller, and only while what it names is current, read straight from the API server. Afterwards
// its spec never changes: a different decision is a new object.
import { API_VERSION, KINDS } from '../shared/api/names.js';
import type { PtahMigration, PtahMigrationPlan } from '../shared/api/migration-kinds.js';
import type { PtahSchema, PtahSchemaPlan } from '../shared/api/schema-kinds.js';
import type { ObjectRef } from '../shared/api/shapes.js';
import { CanonicalJsonError, canonicalJson, isDigest } from '../shared/canonical.js';
import { allow, refuse, rejectRequest, subjectOf, type AdmissionRequest, type Verdict } from './admission.js';
import { MUTATION_REQUEST_UID, decisionKindOf, decisionObjectOf, type DecisionKind, type DecisionObject } from './decision-kinds.js';
import { authorOf, sameIdentity } from './identity.js';
import { describeRef, readAll, readObject } from './reads.js';
import { WEBHOOK_PATHS } from '../shared/api/webhooks.js';
import type { AdmissionContext } from './judge.js';

const ROUTE = WEBHOOK_PATHS.decision;

export async function judgeDecision(request: AdmissionRequest, ctx: AdmissionContext): Promise<Verdict> {
  const kind = decisionKindOf(request, ROUTE);
  if (request.operation === 'UPDATE') return judgeUpdate(request, kind);
  if (request.operation !== 'CREATE') rejectRequest(`${ROUTE} judges creates and updates of a ${kind.kind}, not ${request.operation}`);
  const decision = decisionObjectOf(request, kind, 'object');
  checkStamp(request, decision);
  const namespace = request.namespace ?? decision.metadata.namespace;
  if (!namespace) rejectRequest(`the ${kind.kind} ${subjectOf(request)} has no namespace`);
  await BINDINGS[kind.kind](decision.spec, namespace, ctx);
  return allow(`${kind.noun} names the current state and is stamped for its author`);
}

function judgeUpdate(request: AdmissionRequest, kind: DecisionKind): Verdict {
  const before = decisionObjectOf(request, kind, 'oldObject');
  const after = decisionObjectOf(request, kind, 'object');
  // Canonical JSON keeps an absent field apart from an empty one, so "unchanged" means exactly unchanged.
  if (canonicalSpec(before, 'oldObject') !== canonicalSpec(after, 'object')) {
    refuse(`a ${kind.kind}'s spec is immutable; create a new ${kind.noun} instead of changing ${subjectOf(request)}`);
  }
  return allow();
}

/**
 * The most values a decision's spec holds: its schema allows about twenty (refs, a digest, the stamp with at most
 * 64 groups), so a thousand is room for any the API server admits, and a wide body costs little before its refusal.
 */
export const MAX_DECISION_SPEC_VALUES = 1000;

/**
 * A spec's canonical JSON; a spec that has none (1e400, a lone surrogate, absurd nesting, more values than any
 * decision holds) is a malformed request.
 */
function canonicalSpec(decision: DecisionObject, which: 'object' | 'oldObject'): string {
  try {
    return canonicalJson(decision.spec, `${which}.spec`, { maxValues: MAX_DECISION_SPEC_VALUES });
  } catch (e) {
    if (e instanceof CanonicalJsonError) rejectRequest(`the ${which}'s spec cannot be compared: ${e.message}`);
    throw e;
  }
}

/**
 * The mutating pass ran and stamped this caller: the proof the author is who it says. The stamped request UID is
 * only required, not compared: the API server gives every webhook call its own AdmissionReview uid.
 */
function checkStamp(request: AdmissionRequest, decision: DecisionObject): void {
  const { kind, spec } = decision;
  const caller = authorOf(request.userInfo, kind.noun);
  const stamped = spec[kind.identityField];
  if (stamped === undefined || typeof spec[MUTATION_REQUEST_UID] !== 'string' || spec[MUTATION_REQUEST_UID] === '') {
    refuse(`spec.${kind.identityField} was not stamped by the mutating admission webhook (/mutate/stamp); check that the operator's MutatingWebhookConfiguration is installed`);
  }
  if (!sameIdentity(caller, stamped)) {
    refuse(`spec.${kind.identityField} does not match the authenticated request; it is reserved for the identity admission stamps`);
  }
  const at = spec[kind.timeField];
  if (typeof at !== 'string' || Number.isNaN(Date.parse(at))) refuse(`spec.${kind.timeField} was not stamped by the admission webhook`);
}

type Binding = (spec: Record<string, unknown>, namespace: string, ctx: AdmissionContext) => Promise<void>;

function requireRef(value: unknown, field: string, noun: string): ObjectRef {
  const ref = value as Partial<ObjectRef> | undefined;
  if (!ref || typeof ref.name !== 'string' || ref.name === '' || typeof ref.uid !== 'string' || ref.uid === '') {
    refuse(`the ${noun} must name ${field} by name and uid`);
  }
  return { name: ref.name, uid: ref.uid };
}

function requireDigest(value: unknown, field: string, noun: string): string {
  if (!isDigest(value)) refuse(`the ${noun} must carry ${field} as a sha256: digest`);
  return value;
}

const ref = (kind: string, namespace: string, name: string) => ({ apiVersion: API_VERSION, kind, namespace, name });

/** The owner exists as the very object the decision names (same UID) and is not being deleted. */
function checkOwner(owner: { metadata: { uid?: string; deletionTimestamp?: unknown } }, wanted: ObjectRef, what: string, noun: string): void {
  if (owner.metadata.uid !== wanted.uid) {
    refuse(`${what} is not the object the ${noun} names: its uid is ${owner.metadata.uid ?? 'unset'}, not ${wanted.uid} (it was deleted and created again)`);
  }
  if (owner.metadata.deletionTimestamp) refuse(`${what} is being deleted`);
}

function checkPlan(plan: { metadata: { uid?: string }; spec: { fingerprint: string } }, planRef: ObjectRef, fingerprint: string, what: string): void {
  if (plan.metadata.uid !== planRef.uid) refuse(`${what} was replaced: its uid is ${plan.metadata.uid ?? 'unset'}, not ${planRef.uid}`);
  if (plan.spec.fingerprint !== fingerprint) refuse(`${what} has fingerprint ${plan.spec.fingerprint}, not the planFingerprint ${fingerprint} the approval names`);
}

function checkAwaitingApproval(activeType: string | undefined, operationID: string | undefined, what: string): void {
  if (activeType === 'Apply') refuse(`${what} is already applying (operation ${operationID ?? 'unknown'}); it is not waiting for an approval`);
}

const schemaApproval: Binding = async (spec, namespace, ctx) => {
  const noun = 'approval';
  const schemaRef = requireRef(spec.schemaRef, 'spec.schemaRef', noun);
  const planRef = requireRef(spec.planRef, 'spec.planRef', noun);
  const fingerprint = requireDigest(spec.planFingerprint, 'spec.planFingerprint', noun);
  const refs = [ref(KINDS.PtahSchema.kind, namespace, schemaRef.name), ref(KINDS.PtahSchemaPlan.kind, namespace, planRef.name)];
  const [schema, plan] = await readAll<[PtahSchema, PtahSchemaPlan]>(ctx.reader, [refs[0]!, refs[1]!]);
  const schemaWhat = describeRef(refs[0]!);
  const planWhat = describeRef(refs[1]!);
  checkOwner(schema, schemaRef, schemaWhat, noun);
  checkPlan(plan, planRef, fingerprint, planWhat);
  if (plan.spec.schemaRef.name !== schemaRef.name || plan.spec.schemaRef.uid !== schemaRef.uid) refuse(`${planWhat} belongs to another PtahSchema`);
  const current = schema.status?.plan;
  if (!current || current.name !== planRef.name || current.uid !== planRef.uid || current.fingerprint !== fingerprint) {
    refuse(`${schemaWhat}'s current plan is ${current ? `${current.name} (uid ${current.uid})` : 'none'}, not ${planRef.name} (uid ${planRef.uid}); approve the plan it names now`);
  }
  checkAwaitingApproval(schema.status?.activeOperation?.type, schema.status?.activeOperation?.id, schemaWhat);
};

const migrationApproval: Binding = async (spec, namespace, ctx) => {
  const noun = 'approval';
  const migrationRef = requireRef(spec.migrationRef, 'spec.migrationRef', noun);
  const planRef = requireRef(spec.planRef, 'spec.planRef', noun);
  const fingerprint = requireDigest(spec.planFingerprint, 'spec.planFingerprint', noun);
  const refs = [ref(KINDS.PtahMigration.kind, namespace, migrationRef.name), ref(KINDS.PtahMigrationPlan.kind, namespace, planRef.name)];
  const [migration, plan] = await readAll<[PtahMigration, PtahMigrationPlan]>(ctx.reader, [refs[0]!, refs[1]!]);
  const migrationWhat = describeRef(refs[0]!);
  const planWhat = describeRef(refs[1]!);
  checkOwner(migration, migrationRef, migrationWhat, noun);
  checkPlan(plan, planRef, fingerprint, planWhat);
  if (plan.spec.migrationRef.name !== migrationRef.name || plan.spec.migrationRef.uid !== migrationRef.uid) refuse(`${planWhat} belongs to another PtahMigration`);
  const current = migration.status?.plan;
  if (!current || current.name !== planRef.name || current.uid !== planRef.uid) {
    refuse(`${migrationWhat}'s current plan is ${current ? `${current.name} (uid ${current.uid})` : 'none'}, not ${planRef.name} (uid ${planRef.uid}); approve the plan it names now`);
  }
  checkAwaitingApproval(migration.status?.activeOperation?.type, migration.status?.activeOperation?.id, migrationWhat);
};

/**
 * An acknowledgment binds to the run its resource waits on a person for: `waitingOn` reads it from the resource's
 * status, and `nothing` says why there is none to acknowledge.
 */
function runAcknowledgment<T extends PtahMigration | PtahSchema>(kind: T['kind'], refField: string, run: string, waitingOn: (resource: T) => string | undefined, nothing: string): Binding {
  return async (spec, namespace, ctx) => {
    const noun = 'acknowledgment';
    const resourceRef = requireRef(spec[refField], `spec.${refField}`, noun);
    const operationID = requireDigest(spec.operationID, 'spec.operationID', noun);
    const key = ref(kind, namespace, resourceRef.name);
    const resource = await readObject<T>(ctx.reader, key);
    const what = describeRef(key);
    checkOwner(resource, resourceRef, what, noun);
    const waiting = waitingOn(resource);
    if (!waiting) refuse(`${what} ${nothing}; there is nothing to acknowledge`);
    if (waiting !== operationID) refuse(`${what}'s ${run} is operation ${waiting}, not ${operationID} which this acknowledgment names`);
  };
}

const BINDINGS: Record<DecisionKind['kind'], Binding> = {
  PtahSchemaApproval: schemaApproval,
  PtahMigrationApproval: migrationApproval,
  PtahSchemaRunAcknowledgment: runAcknowledgment<PtahSchema>(KINDS.PtahSchema.kind, 'schemaRef', 'Apply owing a proof',
    (schema) => schema.status?.pendingObservation?.applyOperationID, 'owes no proof'),
  PtahMigrationRunAcknowledgment: runAcknowledgment<PtahMigration>(KINDS.PtahMigration.kind, 'migrationRef', 'unresolved run',
    (migration) => migration.status?.unresolvedRun?.operationID, 'records no unresolved run'),
};
