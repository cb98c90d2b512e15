// Whether a Job is the one its claim built (the seed's jobclaim.Match): the one judge every reader asks. The
// controller asks on read-back after the create, on adoption, on every supervising pass and before cleanup; the
// controller-write webhook asks when it admits the create and the cleanup TTL. So the webhook never admits a Job
// the controller would not recognise as its claim's, and the controller never touches one the webhook would refuse.
//
// Every Job is held to what the claim fixes in any case: name, namespace, the UID the claim recorded, exactly one
// controller owner, the epoch, and the Pod template the admission snapshot recorded. The rest is held either to a
// rebuild (a caller whose inputs still hold) or, once the inputs may have moved, to the labels and annotations
// the claim fixes.
//
// The Job and the rebuild are each copied to plain JSON once; every later step reads those copies (asObject, never
// another round trip) and builds what it changes by copying only the objects on the way, so nothing is written to
// a shared part. The Pod template is normalised once, for the spec comparison and its digest alike.
import type { V1Job } from '@kubernetes/client-node';
import { isDigest } from './canonical.js';
import { CLEANUP_TTL_SECONDS, type ObjectRef } from './job/build.js';
import {
  declaredMetadataProblem,
  familyOfKind,
  generatedIdentityLabels,
  JOB_ANNOTATIONS,
  operatorLabels,
  OWNER_API_VERSION,
} from './job/metadata.js';
import { isMutatingOperation, runnerOperationFor } from './job/operations.js';
import { asObject, firstDifference, isPlainObject, jsonEqual, OK, plainObject, refuse, type PlainObject, type Verdict } from './job/plain.js';
import { claimJobName, type Family } from './naming.js';
import { normalizedPodSpec, snapshotProblem, templateHasDigest, type SnapshotLike } from './podintent.js';

export type { Verdict } from './job/plain.js';
export { CLEANUP_TTL_SECONDS } from './job/build.js';

/** The resource whose claim it is: the Job's one controller owner. */
export interface ClaimOwner {
  kind: string;
  name: string;
  namespace: string;
  uid: string;
}

/** What a claim fixes about its Job (status.activeOperation of either family fits). */
export interface JobClaim {
  type: string;
  id: string;
  jobName: string;
  jobUID?: string;
  executionBindingID: string;
  /** Absent on a record that kept none: the Job's own is read, and the template digest pins which it was. */
  inputFingerprint?: string;
  attempt?: number;
  admissionSnapshot?: SnapshotLike;
  /** The plan an Apply claim runs. */
  planRef?: ObjectRef;
}

/** What a schema's pending observation keeps of the Apply claim it outlives. */
export interface RecordedApply {
  applyOperationID: string;
  applyJobName: string;
  applyJobUID?: string;
  executionBindingID: string;
  admissionSnapshot?: SnapshotLike;
  plan: ObjectRef;
}

/**
 * The claim an Apply's record fixes, once the claim itself is gone: what the controller holds the Apply's Job to
 * (adopting its UID, giving it its cleanup TTL) and what the controller-write webhook admits the TTL by. It keeps no
 * input fingerprint, so the Job's own is read; the template digest pins it.
 */
export function recordedApplyClaim(record: RecordedApply): JobClaim {
  return {
    type: 'Apply',
    id: record.applyOperationID,
    jobName: record.applyJobName,
    jobUID: record.applyJobUID,
    executionBindingID: record.executionBindingID,
    admissionSnapshot: record.admissionSnapshot,
    planRef: { name: record.plan.name, uid: record.plan.uid },
  };
}

/**
 * `rebuild`: the caller rebuilt the Job from the claim's unchanged inputs (the owner reference comes from it);
 * `submitted` when the Job is a create not yet read back. `claim-fixed`: the inputs may have moved since the
 * dispatch, so the Job is held to what the claim fixes, and the caller names the owner.
 */
export type MatchMode = { kind: 'rebuild'; rebuilt: V1Job; submitted?: boolean } | { kind: 'claim-fixed'; owner: ClaimOwner };

/** The execution binding in force (status.executionBinding fits). */
export interface BindingInForce {
  epoch: string;
  controllerStateVersion?: number;
}

const EPOCH = /^v1-[0-9a-f]{32}$/;
const CANONICAL_POSITIVE = /^[1-9][0-9]{0,9}$/;

export function match(job: V1Job, claim: JobClaim, mode: MatchMode, binding?: BindingInForce): Verdict {
  const owner = mode.kind === 'rebuild' ? ownerOfRebuilt(mode.rebuilt) : mode.owner;
  if (typeof owner === 'string') return refuse(owner);
  const family = familyOfKind(owner.kind);
  const invalid = claimProblem(claim, family, owner);
  if (invalid) return refuse(`the claim is not valid: ${invalid}`);
  const snapshot = claim.admissionSnapshot!;

  const plain = plainObject(job);
  const metadata = asObject(plain.metadata);
  const uid = typeof metadata.uid === 'string' && metadata.uid !== '' ? metadata.uid : undefined;
  const submitted = mode.kind === 'rebuild' && mode.submitted === true;
  if (!uid && !submitted) return refuse('the Job has no UID: only a Job not yet stored may lack one');
  if (metadata.namespace !== owner.namespace || metadata.name !== claim.jobName) {
    return refuse(`the Job ${String(metadata.namespace)}/${String(metadata.name)} is not ${owner.namespace}/${claim.jobName}, the one the claim reserved`);
  }
  if (claim.jobUID && uid !== claim.jobUID) return refuse('the Job\'s UID is not the one the claim recorded');
  const ownerProblem = controllerOwnerProblem(metadata.ownerReferences, owner);
  if (ownerProblem) return refuse(ownerProblem);
  if (binding && claim.executionBindingID !== binding.epoch) return refuse('the claim was made under an execution epoch that is no longer in force');
  if (asObject(metadata.annotations)[JOB_ANNOTATIONS.executionBindingId] !== claim.executionBindingID) {
    return refuse('the Job runs under another execution epoch than its claim');
  }
  const normalized = withoutGeneratedIdentity(plain, uid, claim.jobName);
  if (typeof normalized === 'string') return refuse(normalized);
  const template = asObject(asObject(normalized.spec).template);
  const podSpec = normalizedPodSpec(asObject(template.spec));

  const verdict = mode.kind === 'rebuild'
    ? matchRebuilt(plain, normalized, podSpec, mode.rebuilt, submitted)
    : matchClaimFixed(plain, normalized, claim, family!, owner, binding);
  if (!verdict.ok) return verdict;

  if (!templateHasDigest(template, snapshot.templateDigest, podSpec)) return refuse('the Job\'s Pod template is not the one the admission snapshot recorded');
  return OK;
}

/** The owner a rebuilt Job names: the builder writes exactly one controller reference. */
function ownerOfRebuilt(rebuilt: V1Job): ClaimOwner | string {
  const references = rebuilt.metadata?.ownerReferences ?? [];
  const reference = references[0];
  if (references.length !== 1 || !reference || reference.controller !== true) return 'the rebuilt Job names no single controller owner';
  return { kind: reference.kind, name: reference.name, namespace: rebuilt.metadata?.namespace ?? '', uid: reference.uid };
}

function claimProblem(claim: JobClaim, family: Family | undefined, owner: ClaimOwner): string | undefined {
  if (!family) return `${JSON.stringify(owner.kind)} is not a kind that dispatches Jobs`;
  if (!owner.name || !owner.namespace || !owner.uid) return 'it names no owner name, namespace and UID';
  if (!runnerOperationFor(family, claim.type)) return `operation type ${JSON.stringify(claim.type)} is not a ${family} operation this manager knows`;
  if (!isDigest(claim.id)) return 'its operation ID is not a sha256 digest';
  if (!claim.jobName) return 'it reserves no Job name';
  if (!EPOCH.test(claim.executionBindingID)) return 'it names no execution-binding epoch';
  if (claim.inputFingerprint !== undefined && !isDigest(claim.inputFingerprint)) return 'its input fingerprint is not a sha256 digest';
  if (claim.inputFingerprint !== undefined && claim.attempt !== undefined) {
    let expected: string;
    try {
      expected = claimJobName(family, owner, { ...claim, inputFingerprint: claim.inputFingerprint, attempt: claim.attempt });
    } catch (e) {
      return `it names no Job: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (claim.jobName !== expected) return `it reserves ${claim.jobName}, but its own fields name ${expected}`;
  }
  const snapshot = snapshotProblem(claim.admissionSnapshot);
  if (snapshot) return snapshot;
  return undefined;
}

function controllerOwnerProblem(references: unknown, owner: ClaimOwner): string | undefined {
  if (!Array.isArray(references) || references.length !== 1) return 'the Job does not have exactly one owner';
  const expected = { apiVersion: OWNER_API_VERSION, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: true };
  if (!jsonEqual(references[0], expected)) return `the Job's controller owner is not ${owner.kind} ${owner.namespace}/${owner.name}`;
  return undefined;
}

/**
 * The Job without what the API server generates when it stores it (the selector bound to its UID, the template
 * labels that repeat UID and name), each value held to the Job's own UID and name first. A Job without a UID
 * (submitted, not stored) may carry none of it. Its spec, template, template metadata and labels are copies
 * (always objects); the rest is shared with `job`.
 */
function withoutGeneratedIdentity(job: PlainObject, uid: string | undefined, name: string): PlainObject | string {
  const spec = { ...asObject(job.spec) };
  const generated = generatedIdentityLabels(uid ?? '', name);
  if (spec.selector !== undefined) {
    const selector = spec.selector;
    if (!uid || !isPlainObject(selector) || !isPlainObject(selector.matchLabels)) return 'the Job\'s selector is not the one the API server generates';
    const expressions = selector.matchExpressions;
    const labels = Object.entries(selector.matchLabels);
    if ((Array.isArray(expressions) && expressions.length > 0) || labels.length === 0 || Object.keys(selector).some((k) => k !== 'matchLabels' && k !== 'matchExpressions')) {
      return 'the Job\'s selector is not the one the API server generates';
    }
    for (const [key, value] of labels) {
      if (!key.includes('controller-uid') || generated[key] !== value) return 'the Job\'s selector is not bound to its own UID';
    }
    delete spec.selector;
  }
  const template = { ...asObject(spec.template) };
  spec.template = template;
  const metadata = { ...asObject(template.metadata) };
  template.metadata = metadata;
  if (isPlainObject(metadata.labels)) {
    const labels = { ...metadata.labels };
    for (const [key, expected] of Object.entries(generated)) {
      if (!(key in labels)) continue;
      if (!uid || labels[key] !== expected) return `the Job's Pod template carries a generated identity label ${key} that is not its own`;
      delete labels[key];
    }
    metadata.labels = labels;
  }
  return { ...job, spec };
}

/** Holds the Job to the one its claim rebuilds, apart from what the API server generates; `podSpec` is its normalised Pod spec. */
function matchRebuilt(job: PlainObject, normalized: PlainObject, podSpec: PlainObject, rebuiltJob: V1Job, submitted: boolean): Verdict {
  const rebuilt = plainObject(rebuiltJob);
  const metadata = asObject(job.metadata);
  const want = asObject(rebuilt.metadata);
  if (!jsonEqual(metadata.labels ?? null, want.labels ?? null)) {
    return refuse(`the Job's labels are not the ones its claim builds (first at metadata.labels${firstDifference(metadata.labels, want.labels)})`);
  }
  if (!jsonEqual(metadata.annotations ?? null, want.annotations ?? null)) {
    return refuse(`the Job's annotations are not the ones its claim builds (first at metadata.annotations${firstDifference(metadata.annotations, want.annotations)})`);
  }
  if (submitted) {
    // Labels and annotations are equal by now, and firstDifference passes over equal fields: left out, the answer is the same.
    const difference = firstDifference(withoutAssignedMetadata(metadata), withoutAssignedMetadata(want), 'metadata');
    if (difference) return refuse(`the submitted Job's metadata is not the metadata its claim builds (first at ${difference})`);
  }
  const actual = comparableSpec(normalized, podSpec);
  const expected = comparableSpec(rebuilt);
  // A stored Job may have been given its cleanup TTL where the rebuild has none.
  if (!submitted && actual.ttlSecondsAfterFinished === CLEANUP_TTL_SECONDS && expected.ttlSecondsAfterFinished === undefined) {
    delete actual.ttlSecondsAfterFinished;
  }
  const difference = firstDifference(actual, expected, 'spec');
  if (difference) return refuse(`the Job's spec is not the one its claim builds (first at ${difference})`);
  return OK;
}

/** The Job's spec with its Pod spec normalised (`podSpec` when the caller has it); only the top level is a copy. */
function comparableSpec(job: PlainObject, podSpec?: PlainObject): PlainObject {
  const spec = { ...asObject(job.spec) };
  const template = asObject(spec.template);
  spec.template = { ...template, spec: podSpec ?? normalizedPodSpec(asObject(template.spec)) };
  return spec;
}

/** Metadata the API server assigns on create, which a submitted Job may or may not carry yet, and the labels and annotations, compared already. */
function withoutAssignedMetadata(metadata: PlainObject): PlainObject {
  const { uid: _uid, resourceVersion: _rv, generation: _generation, creationTimestamp: _created, managedFields: _fields, labels: _labels, annotations: _annotations, ...rest } = metadata;
  return rest;
}

/**
 * Holds the Job to what its claim fixes without rebuilding it: the operator's labels and annotations exactly, and
 * beside them only what spec.execution.podMetadata may declare (which keys those were is pinned by the template
 * digest). The manager that dispatched the Job is read from the Job, since a later manager of the same binding
 * may have dispatched it; the template digest pins it too.
 */
function matchClaimFixed(job: PlainObject, normalized: PlainObject, claim: JobClaim, family: Family, owner: ClaimOwner, binding?: BindingInForce): Verdict {
  const metadata = asObject(job.metadata);
  const labels = stringMap(metadata.labels);
  const annotations = stringMap(metadata.annotations);
  const labelProblem = fixedWithDeclaredExtras('label', labels, operatorLabels(family, owner.name, claim.type, claim.id));
  if (labelProblem) return refuse(`the Job's labels are not its claim's: ${labelProblem}`);

  const record = {
    [JOB_ANNOTATIONS.controllerImage]: annotations[JOB_ANNOTATIONS.controllerImage],
    [JOB_ANNOTATIONS.controllerRevision]: annotations[JOB_ANNOTATIONS.controllerRevision],
    [JOB_ANNOTATIONS.runnerImage]: annotations[JOB_ANNOTATIONS.runnerImage],
  };
  for (const [key, value] of Object.entries(record)) {
    if (!value || /\s/.test(value)) return refuse(`the Job's ${key} annotation is missing or ambiguous`);
  }
  const stateVersion = annotations[JOB_ANNOTATIONS.controllerStateVersion];
  if (!stateVersion || !CANONICAL_POSITIVE.test(stateVersion)) return refuse('the Job\'s controller state version is not a canonical positive integer');
  if (binding?.controllerStateVersion !== undefined && stateVersion !== String(binding.controllerStateVersion)) {
    return refuse('the Job does not carry the controller state version of the execution binding in force');
  }
  const inputFingerprint = claim.inputFingerprint ?? annotations[JOB_ANNOTATIONS.inputFingerprint];
  if (!isDigest(inputFingerprint)) return refuse('the Job\'s input fingerprint is not a sha256 digest');

  const fixed: Record<string, string> = {
    ...(record as Record<string, string>),
    [JOB_ANNOTATIONS.operationId]: claim.id,
    [JOB_ANNOTATIONS.inputFingerprint]: inputFingerprint,
    [JOB_ANNOTATIONS.executionBindingId]: claim.executionBindingID,
    [JOB_ANNOTATIONS.admissionSnapshotDigest]: claim.admissionSnapshot!.digest,
    [JOB_ANNOTATIONS.controllerStateVersion]: stateVersion,
  };
  if (isMutatingOperation(family, claim.type)) {
    const planName = claim.planRef?.name ?? annotations[JOB_ANNOTATIONS.planName];
    const planUid = claim.planRef?.uid ?? annotations[JOB_ANNOTATIONS.planUid];
    if (!planName || !planUid) return refuse('the Job names no plan for its Apply');
    fixed[JOB_ANNOTATIONS.planName] = planName;
    fixed[JOB_ANNOTATIONS.planUid] = planUid;
    fixed[JOB_ANNOTATIONS.safeToEvict] = 'false';
  }
  if (runnerOperationFor(family, claim.type) === 'apply') {
    const contentDigest = annotations[JOB_ANNOTATIONS.planContentDigest];
    if (!isDigest(contentDigest)) return refuse('the Job\'s plan content digest is not a sha256 digest');
    fixed[JOB_ANNOTATIONS.planContentDigest] = contentDigest;
  }
  const annotationProblem = fixedWithDeclaredExtras('annotation', annotations, fixed);
  if (annotationProblem) return refuse(`the Job's annotations are not its claim's: ${annotationProblem}`);

  // The template carries what the Job carries; the template digest then pins both.
  const templateMetadata = asObject(asObject(asObject(normalized.spec).template).metadata);
  if (!jsonEqual(templateMetadata.annotations ?? null, metadata.annotations ?? null)) return refuse('the Job\'s Pod template annotations differ from the Job\'s');
  if (!jsonEqual(templateMetadata.labels ?? null, metadata.labels ?? null)) return refuse('the Job\'s Pod template labels differ from the Job\'s');
  return jobEnvelopeVerdict(asObject(normalized.spec));
}

/** The Job-level fields every operation Job fixes, which the Pod template digest does not cover. */
function jobEnvelopeVerdict(spec: PlainObject): Verdict {
  const fixed: PlainObject = { backoffLimit: 0, completionMode: 'NonIndexed', completions: 1, manualSelector: false, parallelism: 1, podReplacementPolicy: 'Failed', suspend: false };
  for (const [field, value] of Object.entries(fixed)) {
    if (spec[field] !== value) return refuse(`the Job's spec.${field} is not the one every operation Job has`);
  }
  if (spec.ttlSecondsAfterFinished !== undefined && spec.ttlSecondsAfterFinished !== CLEANUP_TTL_SECONDS) {
    return refuse(`the Job's ttlSecondsAfterFinished is neither absent nor the cleanup TTL ${CLEANUP_TTL_SECONDS}`);
  }
  const podSpec = asObject(asObject(spec.template).spec);
  if (typeof spec.activeDeadlineSeconds !== 'number' || spec.activeDeadlineSeconds !== podSpec.activeDeadlineSeconds) {
    return refuse('the Job\'s activeDeadlineSeconds is not its Pod\'s');
  }
  return OK;
}

function stringMap(value: unknown): Record<string, string> {
  if (!isPlainObject(value)) return {};
  const out: Record<string, string> = {};
  for (const [key, entry] of Object.entries(value)) if (typeof entry === 'string') out[key] = entry;
  return out;
}

/** `actual` holds every `fixed` entry exactly, and beside them only entries podMetadata could declare. */
function fixedWithDeclaredExtras(what: 'label' | 'annotation', actual: Record<string, string>, fixed: Record<string, string>): string | undefined {
  for (const [key, value] of Object.entries(fixed)) {
    if (actual[key] !== value) return `${key} is ${actual[key] === undefined ? 'missing' : 'not the claim\'s'}`;
  }
  const extras = Object.fromEntries(Object.entries(actual).filter(([key]) => !Object.hasOwn(fixed, key)));
  return declaredMetadataProblem(what, extras);
}

/**
 * True only when `newJob` is `oldJob` with ttlSecondsAfterFinished moved from absent to CLEANUP_TTL_SECONDS,
 * and nothing else changed but what the API server manages itself (status, resourceVersion, managedFields,
 * generation). This is the one change the manager ever makes to a Job it created.
 */
export function isCleanupTtlUpdate(oldJob: V1Job, newJob: V1Job): boolean {
  const before = withoutServerManaged(oldJob);
  const after = withoutServerManaged(newJob);
  return before.ttl === undefined && after.ttl === CLEANUP_TTL_SECONDS && jsonEqual(before.rest, after.rest);
}

function withoutServerManaged(job: V1Job): { rest: PlainObject; ttl: unknown } {
  const { status: _status, metadata, spec, ...rest } = plainObject(job);
  const { resourceVersion: _rv, managedFields: _fields, generation: _generation, ...meta } = asObject(metadata);
  const { ttlSecondsAfterFinished: ttl, ...specRest } = asObject(spec);
  return { rest: { ...rest, metadata: meta, spec: specRest }, ttl };
}
