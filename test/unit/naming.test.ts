// Deterministic Job names: every identifying value folds into the suffix, the name always fits a label, and a
// name that trims to nothing is an error.
import t from 'tap';
import { createHash } from 'node:crypto';
import { jobNameFor, JobNameError, type JobNameInput } from '../../src/shared/naming.js';

const base: JobNameInput = {
  family: 'migration',
  ownerName: 'orders',
  ownerUid: '7d0c7b8e-1111-2222-3333-444455556666',
  operationType: 'Apply',
  operationId: `sha256:${'a'.repeat(64)}`,
  executionBindingId: `v1-${'b'.repeat(32)}`,
  inputFingerprint: `sha256:${'c'.repeat(64)}`,
  attempt: 1,
};

/** The suffix as the contract states it, computed independently of the implementation. */
const suffixOf = (i: JobNameInput) =>
  createHash('sha256').update([i.ownerUid, i.operationType, i.operationId, i.executionBindingId, i.inputFingerprint, `${i.attempt}`].join('\u0000')).digest('hex').slice(0, 16);

t.test('layout: prefix per family and operation, the owner name, the 16-hex suffix', async (t) => {
  t.equal(jobNameFor(base), `ptah-m-apply-orders-${suffixOf(base)}`);
  t.equal(jobNameFor({ ...base, family: 'schema', operationType: 'Observe' }), `ptah-observe-orders-${suffixOf({ ...base, operationType: 'Observe' })}`);
  t.equal(jobNameFor(base), jobNameFor({ ...base }), 'deterministic');
});

t.test('every identifying value changes the name; the owner name only its readable part', async (t) => {
  const variations: [keyof JobNameInput, JobNameInput[keyof JobNameInput]][] = [
    ['ownerUid', 'another-uid'],
    ['operationType', 'History'],
    ['operationId', `sha256:${'d'.repeat(64)}`],
    ['executionBindingId', `v1-${'e'.repeat(32)}`],
    ['inputFingerprint', `sha256:${'f'.repeat(64)}`],
    ['attempt', 2],
  ];
  const names = new Set([jobNameFor(base)]);
  for (const [field, value] of variations) {
    const name = jobNameFor({ ...base, [field]: value });
    t.notOk(names.has(name), `${field} changes the name`);
    names.add(name);
  }
  t.equal(jobNameFor({ ...base, ownerName: 'billing' }).slice(-16), suffixOf(base), 'the owner name is not part of the suffix');
  t.equal(jobNameFor({ ...base, attempt: 10 }).slice(-16), suffixOf({ ...base, attempt: 10 }), 'the attempt is written in decimal');
});

t.test('names fit in 63 characters: trimmed, cut, and trimmed again', async (t) => {
  const long = 'a'.repeat(40) + '-' + 'b'.repeat(40);
  const name = jobNameFor({ ...base, ownerName: long });
  t.ok(name.length <= 63, `${name.length} ≤ 63`);
  t.equal(name, `ptah-m-apply-${long.slice(0, 63 - 'ptah-m-apply-'.length - 17)}-${suffixOf(base)}`, 'the owner name is cut to the room left');
  const room = 63 - 'ptah-m-apply-'.length - 17;
  const dashAtCut = 'x'.repeat(room - 1) + '-' + 'y'.repeat(10);
  t.equal(jobNameFor({ ...base, ownerName: dashAtCut }), `ptah-m-apply-${'x'.repeat(room - 1)}-${suffixOf(base)}`, 'a dash left at the cut is trimmed');
  t.equal(jobNameFor({ ...base, ownerName: '--orders--' }), `ptah-m-apply-orders-${suffixOf(base)}`, 'leading and trailing dashes are trimmed');
  t.equal(jobNameFor({ ...base, family: 'schema', ownerName: 'z'.repeat(63) }).length, 63, 'a maximal schema name is exactly 63');
});

t.test('refusals', async (t) => {
  const cases: [string, Partial<JobNameInput>, RegExp][] = [
    ['an owner name of dashes only', { ownerName: '---' }, /leaves nothing/],
    ['an empty owner name', { ownerName: '' }, /leaves nothing/],
    ['attempt 0', { attempt: 0 }, /attempt must be a positive integer/],
    ['a fractional attempt', { attempt: 1.5 }, /attempt must be a positive integer/],
    ['an empty operation type', { operationType: '' }, /operation type is empty/],
    ['an unknown family', { family: 'other' as JobNameInput['family'] }, /unknown family/],
  ];
  for (const [name, change, message] of cases) t.throws(() => jobNameFor({ ...base, ...change }), { name: 'JobNameError', message }, name);
  t.ok(new JobNameError('x') instanceof Error);
});
