// A small schema builder: every value holds an OpenAPI v3 fragment (as a CRD writes it) and, in its type, the
// TypeScript shape of the data it accepts. The CRDs and the types the code uses are therefore one definition.
//
// Two static shapes come out of a schema: `Static<S>` is an object as the API server returns it (defaults
// applied, so a defaulted field is always present), `Input<S>` is what a client may write (defaulted fields
// may be left out).

/** A CEL rule in `x-kubernetes-validations`. */
export interface ValidationRule {
  rule: string;
  message: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
  fieldPath?: string;
}

/** The OpenAPI v3 subset a structural CRD schema uses, with the Kubernetes extensions, in wire spelling. */
export interface OpenApiSchema {
  type?: 'string' | 'integer' | 'number' | 'boolean' | 'object' | 'array';
  description?: string;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  enum?: readonly string[];
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  maxProperties?: number;
  items?: OpenApiSchema;
  properties?: Record<string, OpenApiSchema>;
  required?: string[];
  additionalProperties?: OpenApiSchema;
  default?: unknown;
  'x-kubernetes-validations'?: ValidationRule[];
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-preserve-unknown-fields'?: true;
}

/** How a property sits in its object: must be there, may be absent, or is filled in by the API server. */
export type Presence = 'required' | 'optional' | 'defaulted';

// Type-only key: the phantom property is never set at run time.
declare const shape: unique symbol;

export interface Schema<Stored, Written = Stored, P extends Presence = 'required'> {
  readonly openapi: OpenApiSchema;
  readonly presence: P;
  readonly [shape]?: { readonly stored: Stored; readonly written: Written };
}

/** Any schema, whatever it holds; the bound for generic parameters. */
export type AnySchema = Schema<unknown, unknown, Presence>;

export type Static<S extends AnySchema> = NonNullable<S[typeof shape]>['stored'];
export type Input<S extends AnySchema> = NonNullable<S[typeof shape]>['written'];

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type KeysWith<P extends Record<string, AnySchema>, Q extends Presence> = {
  [K in keyof P]: P[K]['presence'] extends Q ? K : never;
}[keyof P];

type StoredObject<P extends Record<string, AnySchema>> = Simplify<
  { [K in KeysWith<P, 'required' | 'defaulted'>]: Static<P[K]> } & { [K in KeysWith<P, 'optional'>]?: Static<P[K]> }
>;
type WrittenObject<P extends Record<string, AnySchema>> = Simplify<
  { [K in KeysWith<P, 'required'>]: Input<P[K]> } & { [K in KeysWith<P, 'optional' | 'defaulted'>]?: Input<P[K]> }
>;

export class SchemaDefinitionError extends Error {
  override name = 'SchemaDefinitionError';
}

function make<S, W = S>(openapi: OpenApiSchema): Schema<S, W> {
  return { openapi, presence: 'required' };
}

interface Common {
  description?: string;
  rules?: ValidationRule[];
}

/** `{type, description, …fields, x-kubernetes-validations}`, in the order a reader of the CRD expects. */
function node(type: OpenApiSchema['type'], opts: Common, fields: OpenApiSchema): OpenApiSchema {
  const out: OpenApiSchema = { type };
  if (opts.description !== undefined) out.description = opts.description;
  Object.assign(out, fields);
  if (opts.rules !== undefined && opts.rules.length > 0) out['x-kubernetes-validations'] = opts.rules;
  return out;
}

export interface StringOptions extends Common {
  /** Required: CEL cost estimates multiply by it, and an unbounded string makes every rule above it costly. */
  maxLength: number;
  minLength?: number;
  pattern?: string;
  format?: 'date-time' | 'byte';
}

export function string(opts: StringOptions): Schema<string> {
  if (opts.minLength !== undefined && opts.minLength > opts.maxLength) {
    throw new SchemaDefinitionError(`minLength ${opts.minLength} exceeds maxLength ${opts.maxLength}`);
  }
  const { description, rules, ...limits } = opts;
  return make(node('string', { description, rules }, limits));
}

/** A string with a closed set of values; its TypeScript type is the union of the values. */
export function oneOf<const V extends readonly [string, ...string[]]>(values: V, opts: Common = {}): Schema<V[number]> {
  return make(node('string', opts, { enum: values }));
}

export interface IntegerOptions extends Common {
  minimum?: number;
  maximum?: number;
  format?: 'int32' | 'int64';
}

export function integer(opts: IntegerOptions = {}): Schema<number> {
  const { description, rules, ...limits } = opts;
  return make(node('integer', { description, rules }, limits));
}

export function boolean(opts: Common = {}): Schema<boolean> {
  return make(node('boolean', opts, {}));
}

export interface ArrayOptions extends Common {
  /** Required for the same reason as a string's maxLength. */
  maxItems: number;
  minItems?: number;
  listType?: 'atomic' | 'set' | 'map';
  listMapKeys?: string[];
}

export function array<S, W>(items: Schema<S, W, 'required'>, opts: ArrayOptions): Schema<S[], W[]> {
  if ((opts.listType === 'map') !== (opts.listMapKeys !== undefined)) {
    throw new SchemaDefinitionError('listMapKeys goes with listType "map" and only with it');
  }
  const fields: OpenApiSchema = { items: items.openapi, maxItems: opts.maxItems };
  if (opts.minItems !== undefined) fields.minItems = opts.minItems;
  if (opts.listType !== undefined) fields['x-kubernetes-list-type'] = opts.listType;
  if (opts.listMapKeys !== undefined) fields['x-kubernetes-list-map-keys'] = opts.listMapKeys;
  return make(node('array', opts, fields));
}

export function object<P extends Record<string, AnySchema>>(
  properties: P,
  opts: Common = {},
): Schema<StoredObject<P>, WrittenObject<P>> {
  const props: Record<string, OpenApiSchema> = {};
  const required: string[] = [];
  for (const [name, prop] of Object.entries(properties)) {
    props[name] = prop.openapi;
    if (prop.presence === 'required') required.push(name);
  }
  return make(node('object', opts, required.length > 0 ? { properties: props, required } : { properties: props }));
}

export interface MapOptions extends Common {
  maxProperties: number;
}

/** A map from string keys to values of one schema (`additionalProperties`). */
export function stringMap<S, W>(values: Schema<S, W, 'required'>, opts: MapOptions): Schema<Record<string, S>, Record<string, W>> {
  return make(node('object', opts, { additionalProperties: values.openapi, maxProperties: opts.maxProperties }));
}

/**
 * A core Kubernetes shape (resources, affinity, a toleration) passed through to the Job unchanged: the API
 * server keeps its fields without checking them, and the Pod's own validation judges it when the Job is made.
 */
export function passThrough<T>(description: string): Schema<T> {
  return make(node('object', { description }, { 'x-kubernetes-preserve-unknown-fields': true }));
}

export function optional<S, W>(schema: Schema<S, W, 'required'>): Schema<S, W, 'optional'> {
  return { openapi: schema.openapi, presence: 'optional' };
}

/** The API server fills `value` in when the field is absent. */
export function withDefault<S, W>(schema: Schema<S, W, 'required'>, value: W): Schema<S, W, 'defaulted'> {
  return { openapi: { ...schema.openapi, default: value }, presence: 'defaulted' };
}

/** Adds CEL rules to a schema (e.g. to an object built elsewhere). */
export function withRules<S, W, P extends Presence>(schema: Schema<S, W, P>, rules: ValidationRule[]): Schema<S, W, P> {
  const existing = schema.openapi['x-kubernetes-validations'] ?? [];
  return { openapi: { ...schema.openapi, 'x-kubernetes-validations': [...existing, ...rules] }, presence: schema.presence };
}
