// Which operators a plan drops and makes, and the CREATE OPERATOR that makes one. An operator's commutator and
// negator are links both operators of a pair record, and PostgreSQL 15 sets them only when an operator is created
// (naming the other, which it makes as a shell when it does not exist yet) and clears them when one is dropped. So
// an operator whose links alone differ stays when the plan's own creations and drops give it the desired links, and
// is made again otherwise.
import type { ModelDiff } from './diff.js';
import type { Operator, SchemaModel } from './model.js';

export interface OperatorChanges {
  /** Operators of the target dropped before their routines change and made again. */
  recreated: Operator[];
  /** Operators made by the plan, in their desired form: the new ones and the recreated ones. */
  created: Operator[];
}

type Link = 'commutator' | 'negator';
const LINKS: readonly Link[] = ['commutator', 'negator'];
const sameCore = (a: Operator, b: Operator) => a.name === b.name && a.options === b.options && a.routine === b.routine;

/** `routinesGoing`: routines the plan drops (for good or to make again); an operator running one goes with it. */
export function planOperators(actual: SchemaModel, desired: SchemaModel, diff: ModelDiff, routinesGoing: ReadonlySet<string>): OperatorChanges {
  const desiredByKey = new Map(desired.operators.map((o) => [o.key, o]));
  const recreate = new Map<string, Change>(diff.operators.changed.filter((x) => !sameCore(x.from, x.to)).map((x) => [x.to.key, x]));
  for (const from of actual.operators) {
    const to = desiredByKey.get(from.key);
    if (to !== undefined && routinesGoing.has(from.routine)) recreate.set(to.key, { from, to });
  }
  // Making one operator again changes its partners' links in turn: one at a time, until none needs making again.
  for (let next = unexplainedLinks(diff, recreate); next !== undefined; next = unexplainedLinks(diff, recreate)) recreate.set(next.to.key, next);
  const recreated = [...recreate.values()].map((x) => x.from);
  const created = [...diff.operators.added, ...[...recreate.keys()].map((k) => desiredByKey.get(k)!)];
  return { recreated, created };
}

type Change = { from: Operator; to: Operator };

/** The first changed operator, not yet made again, whose links the plan's drops and creations leave other than desired. */
function unexplainedLinks(diff: ModelDiff, recreate: ReadonlyMap<string, Change>): Change | undefined {
  const gone = new Set([...diff.operators.removed.map((o) => o.key), ...recreate.keys()]);
  const made = [...diff.operators.added, ...[...recreate.values()].map((x) => x.to)];
  return diff.operators.changed.find(({ from, to }) => !recreate.has(to.key) && LINKS.some((link) => linkAfter(from, link, gone, made) !== to[link]));
}

/** An operator's link once the plan has dropped `gone` and made `made`, each naming its partners. */
function linkAfter(o: Operator, link: Link, gone: ReadonlySet<string>, made: readonly Operator[]): string | null {
  const partner = made.find((m) => m[link] === o.key);
  if (partner !== undefined) return partner.key;
  return o[link] !== null && gone.has(o[link]!) ? null : o[link];
}

/** CREATE OPERATOR with its links: a partner not yet made is made a shell, which its own CREATE fills in. */
export function createOperator(o: Operator, byKey: ReadonlyMap<string, Operator>): string {
  const links = LINKS.flatMap((link) => {
    const partner = o[link] === null ? undefined : byKey.get(o[link]!);
    return partner ? [`${link.toUpperCase()} = OPERATOR(${partner.name})`] : [];
  });
  return `CREATE OPERATOR ${o.name} (${[o.options, ...links].join(', ')})`;
}

/** DROP OPERATOR takes the signature as regoperator prints it. */
export const dropOperator = (o: Operator) => `DROP OPERATOR ${o.key}`;
