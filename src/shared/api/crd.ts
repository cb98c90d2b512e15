// Kind definitions → CustomResourceDefinitions (apiextensions.k8s.io/v1), written to manifests/crds by
// `npm run generate` and registered by the test harness.
import type { KindDefinition, PrinterColumn } from './kind.js';
import {
  ptahMigrationApprovalKind,
  ptahMigrationKind,
  ptahMigrationPlanKind,
  ptahMigrationRunAcknowledgmentKind,
} from './migration-kinds.js';
import { GROUP, VERSION } from './names.js';
import { ptahRealmKind } from './realm-kinds.js';
import type { OpenApiSchema } from './schema.js';
import {
  ptahSchemaApprovalKind,
  ptahSchemaKind,
  ptahSchemaPlanChunkKind,
  ptahSchemaPlanKind,
  ptahSchemaRunAcknowledgmentKind,
} from './schema-kinds.js';

export const KIND_DEFINITIONS: readonly KindDefinition[] = [
  ptahSchemaKind,
  ptahSchemaPlanKind,
  ptahSchemaPlanChunkKind,
  ptahSchemaApprovalKind,
  ptahSchemaRunAcknowledgmentKind,
  ptahMigrationKind,
  ptahMigrationPlanKind,
  ptahMigrationApprovalKind,
  ptahMigrationRunAcknowledgmentKind,
  ptahRealmKind,
];

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: {
    group: string;
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames: string[]; categories: string[] };
    scope: 'Namespaced' | 'Cluster';
    versions: {
      name: string;
      served: true;
      storage: true;
      subresources?: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      schema: { openAPIV3Schema: OpenApiSchema };
    }[];
  };
}

/** `kubectl get ptah` lists every Ptah object. */
export const CATEGORY = 'ptah';

/** The whole-object schema of a kind, as the CRD carries it. */
export function openApiSchemaFor(definition: KindDefinition): OpenApiSchema {
  const spec: OpenApiSchema = { ...definition.spec.openapi };
  if (definition.immutableSpec !== undefined) {
    spec['x-kubernetes-validations'] = [...(spec['x-kubernetes-validations'] ?? []), { rule: 'self == oldSelf', message: definition.immutableSpec }];
  }
  const root: OpenApiSchema = {
    type: 'object',
    description: definition.description,
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec,
      ...(definition.status !== undefined ? { status: definition.status.openapi } : {}),
    },
    // A transition rule on spec only holds if spec cannot be dropped instead.
    required: ['spec'],
  };
  if (definition.rootRules !== undefined) root['x-kubernetes-validations'] = definition.rootRules;
  return root;
}

export function customResourceDefinition(definition: KindDefinition): CustomResourceDefinition {
  const { names } = definition;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${names.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: names.kind,
        listKind: names.listKind,
        plural: names.plural,
        singular: names.singular,
        shortNames: [...names.shortNames],
        categories: [CATEGORY],
      },
      scope: names.namespaced ? 'Namespaced' : 'Cluster',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          ...(names.status ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: [...definition.printerColumns, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
          schema: { openAPIV3Schema: openApiSchemaFor(definition) },
        },
      ],
    },
  };
}

export function customResourceDefinitions(): CustomResourceDefinition[] {
  return KIND_DEFINITIONS.map(customResourceDefinition);
}
