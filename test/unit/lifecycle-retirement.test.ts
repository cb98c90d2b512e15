import t from 'tap';
import {
  DISPOSITIONS,
  realmHeldBy,
  retirement,
  RetirementInputError,
  type Release,
  type RetirementInput,
} from '../../src/shared/lifecycle/retirement.js';

// An oracle written from the seed's prose as a decision list, independently of the implementation's shape.
function oracle(input: RetirementInput): Release {
  const { mutating, servesProof, locked, proofOutstanding } = input.claim;
  // A reading that serves an outstanding proof runs under the Apply's epoch: only the write ending the proof returns it.
  if (proofOutstanding && servesProof) return input.endsProof ? 'proof' : 'none';
  // Otherwise the claim itself holds the realm only when it took a Lease and needed one.
  const claimHoldsIt = locked && (mutating || servesProof);
  if (!claimHoldsIt) return 'none';
  // A read-only claim changed nothing: it gives its realm back.
  if (!mutating) return 'claim';
  // A mutating claim discarded before anything ran gives it back too.
  if (input.disposition === 'discard') return 'claim';
  // A schema's pending observation inherits the realm for the proof.
  if (input.recordHoldsRealm) return 'none';
  // A migration run whose executor may still write keeps it until the Lease expires.
  if (input.mayStillWrite) return 'none';
  return 'claim';
}

const bools = [false, true] as const;

function* everyInput(): Generator<RetirementInput> {
  for (const mutating of bools)
    for (const servesProof of bools)
      for (const locked of bools)
        for (const proofOutstanding of bools)
          for (const disposition of DISPOSITIONS)
            for (const recordHoldsRealm of bools)
              for (const mayStillWrite of bools)
                for (const endsProof of bools) {
                  yield { claim: { mutating, servesProof, locked, proofOutstanding }, disposition, recordHoldsRealm, mayStillWrite, endsProof };
                }
}

t.test('every input combination agrees with the oracle', async (t) => {
  let n = 0;
  const seen = new Set<Release>();
  for (const input of everyInput()) {
    const got = retirement(input);
    seen.add(got);
    if (got !== oracle(input)) t.fail(`retirement(${JSON.stringify(input)}) = ${got}, oracle says ${oracle(input)}`);
    n++;
  }
  t.equal(n, 2 ** 4 * 3 * 2 ** 3, 'all 384 combinations were tried');
  t.strictSame([...seen].sort(), ['claim', 'none', 'proof'], 'every answer occurs');
});

// Named cases from the seed and reference/architecture.md §7.5.
const schemaApply = { mutating: true, servesProof: false, locked: true, proofOutstanding: false };
const migrationApply = schemaApply;
const provingPlan = { mutating: false, servesProof: true, locked: true, proofOutstanding: true };
const provingObserve = provingPlan;
const schema = { recordHoldsRealm: true };
const migration = { recordHoldsRealm: false };
const quiet = { mayStillWrite: false, endsProof: false };

const named: { name: string; input: RetirementInput; want: Release }[] = [
  { name: 'schema Apply accounted: the proof inherits the epoch', input: { claim: schemaApply, disposition: 'accounted', ...schema, ...quiet }, want: 'none' },
  { name: 'schema Apply unaccounted: the proof inherits the epoch', input: { claim: schemaApply, disposition: 'unaccounted', ...schema, ...quiet }, want: 'none' },
  { name: 'schema Apply discarded before dispatch', input: { claim: schemaApply, disposition: 'discard', ...schema, ...quiet }, want: 'claim' },
  { name: 'migration run accounted for', input: { claim: migrationApply, disposition: 'accounted', ...migration, ...quiet }, want: 'claim' },
  {
    name: 'migration run unaccounted while its Pod may still write: the Lease is left to expire',
    input: { claim: migrationApply, disposition: 'unaccounted', ...migration, mayStillWrite: true, endsProof: false },
    want: 'none',
  },
  { name: 'migration run unaccounted, nothing can still write', input: { claim: migrationApply, disposition: 'unaccounted', ...migration, ...quiet }, want: 'claim' },
  {
    name: 'migration Apply discarded before dispatch, even if something is reported writing',
    input: { claim: migrationApply, disposition: 'discard', ...migration, mayStillWrite: true, endsProof: false },
    want: 'claim',
  },
  { name: 'Plan settling the proof', input: { claim: provingPlan, disposition: 'accounted', ...schema, mayStillWrite: false, endsProof: true }, want: 'proof' },
  { name: 'Observe finishing within a proof', input: { claim: provingObserve, disposition: 'accounted', ...schema, ...quiet }, want: 'none' },
  { name: 'proof reading discarded mid-proof keeps the realm', input: { claim: provingPlan, disposition: 'discard', ...schema, ...quiet }, want: 'none' },
  {
    name: 'ordinary Plan (no proof outstanding) releases its own realm',
    input: { claim: { mutating: false, servesProof: true, locked: true, proofOutstanding: false }, disposition: 'accounted', ...schema, ...quiet },
    want: 'claim',
  },
  {
    name: 'ordinary Observe took no Lease',
    input: { claim: { mutating: false, servesProof: true, locked: false, proofOutstanding: false }, disposition: 'accounted', ...schema, ...quiet },
    want: 'none',
  },
  {
    name: 'migration History holds nothing',
    input: { claim: { mutating: false, servesProof: false, locked: false, proofOutstanding: false }, disposition: 'accounted', ...migration, ...quiet },
    want: 'none',
  },
  {
    name: 'mutating claim retired before its Lease was taken',
    input: { claim: { ...schemaApply, locked: false }, disposition: 'discard', ...schema, ...quiet },
    want: 'none',
  },
  {
    name: 'an Apply claimed while a proof is outstanding does not serve it: its own Lease is what it holds',
    input: { claim: { ...schemaApply, proofOutstanding: true }, disposition: 'discard', ...schema, mayStillWrite: false, endsProof: true },
    want: 'claim',
  },
];

t.test('named cases', async (t) => {
  for (const { name, input, want } of named) t.equal(retirement(input), want, name);
});

t.test('realmHeldBy', async (t) => {
  t.equal(realmHeldBy(provingPlan), 'proof');
  t.equal(realmHeldBy(schemaApply), 'claim');
  t.equal(realmHeldBy({ ...schemaApply, locked: false }), 'none');
  t.equal(realmHeldBy({ mutating: false, servesProof: false, locked: true, proofOutstanding: true }), 'none', 'a locked read-only claim that serves no proof holds nothing');
  t.equal(realmHeldBy({ mutating: false, servesProof: true, locked: false, proofOutstanding: true }), 'proof', 'the proof holds it whether or not the reading has an epoch of its own');
});

t.test('a disposition outside the three is refused, naming it', async (t) => {
  for (const disposition of ['retry', 'Accounted', '', undefined]) {
    t.throws(
      () => retirement({ claim: schemaApply, disposition: disposition as unknown as 'accounted', ...schema, ...quiet }),
      new RetirementInputError(`disposition ${JSON.stringify(disposition)} is none of discard, unaccounted, accounted`),
      `disposition ${JSON.stringify(disposition)}`,
    );
  }
});
