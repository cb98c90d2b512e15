// Conditions as metav1.Condition has them, for both families: one per type, whose transition time moves only when
// its status does. They summarize for a person; no decision reads them back.
import type { Condition } from '../shared/api/shapes.js';

/** `list` with the condition of `type` set; its transition time moves only when its status does. */
export function withCondition(list: readonly Condition[] | undefined, type: string, status: Condition['status'], reason: string, message: string, generation: number, now: string): Condition[] {
  const previous = list?.find((c) => c.type === type);
  const next: Condition = {
    type,
    status,
    reason,
    message,
    lastTransitionTime: previous && previous.status === status ? previous.lastTransitionTime : now,
    observedGeneration: generation,
  };
  return [...(list ?? []).filter((c) => c.type !== type), next];
}
