// How `kubectl ptah plan` prints a published plan: the summary an approver decides on, and for a PtahSchemaPlan the
// exact statements its chunks reassemble to. The plan document is checked with the runner protocol's own validator,
// so the CLI never prints SQL from a document the Apply would refuse.
import type { PtahMigrationPlan } from '../shared/api/migration-kinds.js';
import type { PtahSchemaPlan } from '../shared/api/schema-kinds.js';
import { schemaPlanProblem } from '../shared/runner-protocol.js';
import { repairText } from '../shared/migration-repair.js';

interface ClassifiedStatement {
  index: number;
  reason: string;
}

/** The parts of a plan document (runner-protocol's format, version 1) the CLI prints. */
export interface PlanDocument {
  statements: string[];
  destructiveStatements: ClassifiedStatement[];
  lockingStatements: ClassifiedStatement[];
  privilegeStatements: number[];
  transactional: boolean;
}

export class PlanFormatError extends Error {
  override name = 'PlanFormatError';
}

/** Parses the reassembled plan bytes; refuses anything that is not a well-formed plan document. */
export function parsePlanDocument(bytes: Uint8Array): PlanDocument {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (e) {
    throw new PlanFormatError(`the plan document is not JSON: ${(e as Error).message}`);
  }
  const problem = schemaPlanProblem(value);
  if (problem) throw new PlanFormatError(`the plan document is not well formed: ${problem}`);
  return value as PlanDocument;
}

export function schemaPlanSummary(plan: PtahSchemaPlan): string[] {
  const s = plan.spec;
  return [
    `ptahschemaplan/${plan.metadata.name} for ptahschema/${s.schemaRef.name}`,
    `fingerprint:          ${s.fingerprint}`,
    `statements:           ${s.statementCount}`,
    `destructive:          ${s.destructive}`,
    `privilege changes:    ${s.privilegeChanging}`,
    `locking statements:   ${s.lockingStatementCount}`,
    `transactional:        ${s.transactional}`,
    `created:              ${s.createdAt}`,
  ];
}

/** The statements, in order, each annotated with why it is destructive, locking or privilege-changing. */
export function planSql(doc: PlanDocument): string {
  const notes = new Map<number, string[]>();
  const note = (index: number, text: string) => notes.set(index, [...(notes.get(index) ?? []), text]);
  for (const d of doc.destructiveStatements) note(d.index, `destructive: ${d.reason}`);
  for (const l of doc.lockingStatements) note(l.index, `locking: ${l.reason}`);
  for (const p of doc.privilegeStatements) note(p, 'changes privileges');
  const head = doc.transactional ? [] : ['-- not transactional: these statements run outside a transaction'];
  const body = doc.statements.map((statement, i) => {
    const text = statement.trimEnd();
    const comments = (notes.get(i) ?? []).map((n) => `-- ${n}\n`).join('');
    return `${comments}${text}${text.endsWith(';') ? '' : ';'}`;
  });
  return [...head, ...body].join('\n\n') + '\n';
}

export function migrationPlanSummary(plan: PtahMigrationPlan): string[] {
  const s = plan.spec;
  const width = Math.max(7, ...s.migrations.map((m) => m.version.length));
  return [
    `ptahmigrationplan/${plan.metadata.name} for ptahmigration/${s.migrationRef.name}`,
    `fingerprint:  ${s.fingerprint}`,
    `from version: ${s.currentVersion || '(nothing applied)'}`,
    ...(s.adopted ? [`adopts:       ${s.adopted.count} file(s), ${s.adopted.firstVersion} … ${s.adopted.lastVersion}, as applied by ${s.adopted.from} ` +
      '(recorded in the history by this Apply, never run)'] : []),
    ...(s.repair ? [`repairs:      migration ${s.repair.version} (checksum ${s.repair.checksum}): ${s.repair.resolution}; the Apply ` +
      `${repairText(s.repair)}, and records it in ptah_migrations.repairs; it runs no migration`] : []),
    `migrations:   ${s.migrations.length}`,
    `${'VERSION'.padEnd(width)}   CHECKSUM${' '.repeat(63)}   NAME`,
    ...s.migrations.map((m) => `${m.version.padEnd(width)}   ${m.checksum.padEnd(71)}   ${m.name}`),
  ];
}
