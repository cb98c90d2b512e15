// What defines a kind (its names, spec and status schemas, whole-object rules, printer columns) and the
// TypeScript type of one of its objects. src/shared/api/crd.ts turns a definition into a CRD.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { API_VERSION, KINDS, type KindName } from './names.js';
import { SchemaDefinitionError, type AnySchema, type Schema, type Static, type ValidationRule } from './schema.js';

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  /** 1 hides the column unless `-o wide`. */
  priority?: number;
}

export interface KindDefinition<K extends KindName = KindName, Spec extends AnySchema = AnySchema, Status extends AnySchema | undefined = AnySchema | undefined> {
  names: (typeof KINDS)[K];
  description: string;
  spec: Spec;
  status: Status;
  /** `self == oldSelf` on spec, with this sentence telling the writer what to do instead. */
  immutableSpec?: string;
  /** Rules on the whole object (CEL may read metadata.name there). */
  rootRules?: ValidationRule[];
  /** Columns besides Age, which every kind gets last. */
  printerColumns: PrinterColumn[];
}

export function defineKind<K extends KindName, Spec extends AnySchema, Status extends AnySchema | undefined>(
  kind: K,
  definition: Omit<KindDefinition<K, Spec, Status>, 'names'>,
): KindDefinition<K, Spec, Status> {
  const names = KINDS[kind];
  if (names.status !== (definition.status !== undefined)) {
    throw new SchemaDefinitionError(`${kind}: a status schema must be given exactly when the kind has a status subresource`);
  }
  return { names, ...definition };
}

/** An object of a kind as the API server returns it. */
export type Resource<K extends KindName, Spec extends AnySchema, Status extends AnySchema | undefined> = {
  apiVersion: typeof API_VERSION;
  kind: K;
  metadata: V1ObjectMeta;
  spec: Static<Spec>;
} & (Status extends Schema<infer S, unknown, 'required'> ? { status?: S } : unknown);

/** The object type a definition describes. */
export type ResourceOf<D> = D extends KindDefinition<infer K, infer Spec, infer Status> ? Resource<K, Spec, Status> : never;

/** Rule for kinds whose name is carried whole in the labels of the Jobs they dispatch. */
export const NAME_AT_MOST_63: ValidationRule = {
  rule: 'self.metadata.name.size() <= 63',
  message: 'metadata.name must be at most 63 characters: it is carried whole in the labels of the Jobs this resource dispatches',
};

export const conditionStatus = (type: string) => `.status.conditions[?(@.type=="${type}")].status`;
export const conditionReason = (type: string) => `.status.conditions[?(@.type=="${type}")].reason`;
