// Whether a Pod is its Job's Pod inside the claim's admission envelope: the one judgement every family makes before
// a Pod's log or termination message may speak for a run (the seed: a result is "read from exactly one Pod that
// the persisted admission envelope accepts"). A controller reference and two annotations are not that: anyone who
// may create a Pod can write them.
//
// The Job controller creates the Pod from the Job's template, and the API server, admission and the scheduler add
// to it: nodeName, DefaultTolerationSeconds' tolerations, the priority a PriorityClass resolves to, a RuntimeClass's
// overhead and node selector, LimitRanger's and the Pod-only defaults' resource requests, the job-tracking
// finalizer. So the Pod is held to the template, not compared with it:
//   - what decides which code runs in the Pod and what it reads is the template's exactly: the containers and init
//     containers by name, every field but resources (image, command, args, env, envFrom, volumeMounts,
//     securityContext, probes, lifecycle hooks, termination message); no ephemeral container (a debugging
//     container shares the Pod and can write where the runner writes); the volumes by name; the Pod's
//     security context;
//   - every other field the template sets holds on the Pod (an object: each of its fields; a list: item for item),
//     and tolerations and container resources may only gain entries;
//   - the ServiceAccount, RuntimeClass and PriorityClass are the snapshot's, whatever admission resolved;
//   - the Pod's labels and annotations include the template's, and its snapshot annotation is the snapshot's;
//   - its one controller is the Job, by UID, in the Job's namespace.
// The Job itself is held to the snapshot by jobclaim.match; the template digest is checked here again so this
// judgement does not depend on the caller having asked first.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { JOB_ANNOTATIONS } from './job/metadata.js';
import { firstDifference, isPlainObject, jsonEqual, OK, plainObject, refuse, type PlainObject, type PlainValue, type Verdict } from './job/plain.js';
import { normalizedPodSpec, snapshotProblem, templateDigestOf, type AdmissionSnapshot } from './podintent.js';

export type { Verdict } from './job/plain.js';

/** What of the admission snapshot the Pod is judged by (status.activeOperation.admissionSnapshot of either family fits). */
export type PodAdmission = Pick<AdmissionSnapshot, 'version' | 'digest' | 'templateDigest' | 'serviceAccount' | 'runtimeClass' | 'priorityClass'>;

/** Pod spec fields judged on their own terms below rather than by `holds`. */
const OWN_RULES = new Set([
  'containers', 'initContainers', 'ephemeralContainers', 'volumes', 'securityContext', 'tolerations',
  'serviceAccountName', 'serviceAccount', 'runtimeClassName', 'priorityClassName',
]);

/** Whether `pod` is `job`'s Pod inside the envelope `snapshot` records; a refusal names the first field that is not, never its value. */
export function podEnvelopeVerdict(pod: V1Pod, job: V1Job, snapshot: PodAdmission): Verdict {
  const invalid = snapshotProblem(snapshot);
  if (invalid) return refuse(`the admission snapshot cannot judge a Pod: ${invalid}`);
  const plainPod = plainObject(pod);
  const plainJob = plainObject(job);
  const podMetadata = plainObject(plainPod.metadata);
  const jobMetadata = plainObject(plainJob.metadata);

  const owner = controllerProblem(podMetadata, jobMetadata);
  if (owner) return refuse(owner);
  const template = plainObject(plainObject(plainJob.spec).template);
  if (templateDigestOf(template) !== snapshot.templateDigest) return refuse('the Job\'s Pod template is not the one the admission snapshot recorded');

  const templateMetadata = plainObject(template.metadata);
  for (const field of ['labels', 'annotations'] as const) {
    const missing = firstMissingEntry(plainObject(templateMetadata[field]), plainObject(podMetadata[field]));
    if (missing) return refuse(`the Pod's ${field} do not include the template's ${missing}`);
  }
  if (plainObject(podMetadata.annotations)[JOB_ANNOTATIONS.admissionSnapshotDigest] !== snapshot.digest) {
    return refuse(`the Pod's ${JOB_ANNOTATIONS.admissionSnapshotDigest} annotation is not the claim's snapshot`);
  }
  const problem = podSpecProblem(normalizedPodSpec(plainObject(template.spec)), normalizedPodSpec(plainObject(plainPod.spec)), snapshot);
  return problem ? refuse(problem) : OK;
}

function controllerProblem(pod: PlainObject, job: PlainObject): string | undefined {
  if (pod.namespace !== job.namespace) return 'the Pod is not in its Job\'s namespace';
  const references = Array.isArray(pod.ownerReferences) ? pod.ownerReferences.filter((r) => isPlainObject(r) && r.controller === true) : [];
  const reference = references.length === 1 ? plainObject(references[0]) : undefined;
  if (!reference) return 'the Pod does not have exactly one controller';
  if (typeof job.uid !== 'string' || job.uid === '' || reference.uid !== job.uid || reference.kind !== 'Job' || reference.apiVersion !== 'batch/v1' || reference.name !== job.name) {
    return `the Pod's controller is not Job ${String(job.name)} (by UID)`;
  }
  return undefined;
}

/** The first key of `wanted` whose value `actual` does not hold, named for a person (never its value). */
function firstMissingEntry(wanted: PlainObject, actual: PlainObject): string | undefined {
  const key = Object.keys(wanted).sort().find((k) => actual[k] !== wanted[k]);
  return key === undefined ? undefined : JSON.stringify(key);
}

function podSpecProblem(template: PlainObject, pod: PlainObject, snapshot: PodAdmission): string | undefined {
  for (const field of ['containers', 'initContainers'] as const) {
    const problem = containersProblem(field, template[field], pod[field]);
    if (problem) return problem;
  }
  if (pod.ephemeralContainers !== undefined) return 'the Pod runs an ephemeral container, which its template cannot have';
  const volumes = byName(template.volumes);
  const podVolumes = byName(pod.volumes);
  if (!volumes || !podVolumes) return 'the Pod\'s or the template\'s volumes are not named uniquely';
  for (const name of new Set([...volumes.keys(), ...podVolumes.keys()])) {
    if (!jsonEqual(volumes.get(name) ?? null, podVolumes.get(name) ?? null)) return `the Pod's volume ${JSON.stringify(name)} is not the template's`;
  }
  const security = firstDifference(template.securityContext, pod.securityContext, 'spec.securityContext');
  if (security) return `the Pod's security context is not the template's (first at ${security})`;
  const tolerations = Array.isArray(pod.tolerations) ? pod.tolerations : [];
  if (Array.isArray(template.tolerations) && !template.tolerations.every((t) => tolerations.some((p) => jsonEqual(p, t)))) {
    return 'the Pod does not carry every toleration of its template';
  }
  const admittedUnder: [string, unknown, string | undefined][] = [
    ['ServiceAccount', pod.serviceAccountName, snapshot.serviceAccount],
    ['RuntimeClass', pod.runtimeClassName, snapshot.runtimeClass],
    ['PriorityClass', pod.priorityClassName, snapshot.priorityClass],
  ];
  for (const [what, actual, recorded] of admittedUnder) {
    if (actual === recorded) continue;
    return actual === undefined
      ? `the Pod names no ${what}, where the admission snapshot recorded one`
      : `the Pod runs under another ${what} than the admission snapshot recorded`;
  }
  // normalizedPodSpec dropped the deprecated alias where it repeats serviceAccountName; any left names another.
  if (pod.serviceAccount !== undefined) return 'the Pod\'s deprecated serviceAccount names another ServiceAccount than its serviceAccountName';
  for (const [field, value] of Object.entries(template)) {
    if (OWN_RULES.has(field)) continue;
    const at = holds(value, pod[field], `spec.${field}`);
    if (at) return `the Pod does not hold its template's ${at}`;
  }
  return undefined;
}

/** The containers (or init containers) are the template's by name, every field exactly but resources, which may only gain. */
function containersProblem(field: string, template: PlainValue | undefined, pod: PlainValue | undefined): string | undefined {
  const wanted = byName(template);
  const actual = byName(pod);
  if (!wanted || !actual) return `the Pod's or the template's ${field} are not named uniquely`;
  for (const name of new Set([...wanted.keys(), ...actual.keys()])) {
    const want = wanted.get(name);
    const have = actual.get(name);
    if (!want || !have) return `the Pod ${want ? 'lacks' : 'adds'} the ${field} entry ${JSON.stringify(name)}`;
    const { resources: wantResources, ...wantRest } = want;
    const { resources: haveResources, ...haveRest } = have;
    const difference = firstDifference(wantRest, haveRest, `spec.${field}[${JSON.stringify(name)}]`);
    if (difference) return `the Pod's ${field} entry ${JSON.stringify(name)} is not the template's (first at ${difference})`;
    const at = wantResources === undefined ? undefined : holds(wantResources, haveResources, `spec.${field}[${JSON.stringify(name)}].resources`);
    if (at) return `the Pod's ${field} entry ${JSON.stringify(name)} does not hold its template's ${at}`;
  }
  return undefined;
}

/** Entries of a list by their name; undefined when one has no name or two share one. An absent list is empty. */
function byName(list: PlainValue | undefined): Map<string, PlainObject> | undefined {
  const entries = new Map<string, PlainObject>();
  if (list === undefined) return entries;
  if (!Array.isArray(list)) return undefined;
  for (const item of list) {
    if (!isPlainObject(item) || typeof item.name !== 'string' || entries.has(item.name)) return undefined;
    entries.set(item.name, item);
  }
  return entries;
}

/**
 * The path where `actual` does not hold `wanted`, if anywhere: an object holds every field `wanted` sets (more is
 * allowed), a list holds `wanted` item for item (no more, no fewer), anything else is equal.
 */
function holds(wanted: PlainValue, actual: PlainValue | undefined, path: string): string | undefined {
  if (isPlainObject(wanted)) {
    if (!isPlainObject(actual)) return path;
    for (const [key, value] of Object.entries(wanted)) {
      const at = holds(value, actual[key], `${path}.${key}`);
      if (at) return at;
    }
    return undefined;
  }
  if (Array.isArray(wanted)) {
    if (!Array.isArray(actual) || actual.length !== wanted.length) return path;
    for (let i = 0; i < wanted.length; i++) {
      const at = holds(wanted[i]!, actual[i], `${path}[${i}]`);
      if (at) return at;
    }
    return undefined;
  }
  return wanted === actual ? undefined : path;
}
