import t from 'tap';
import { duration, DURATION_PATTERN, DurationError, parseDuration } from '../../src/shared/api/duration.js';
import {
  array,
  boolean,
  integer,
  object,
  oneOf,
  optional,
  passThrough,
  SchemaDefinitionError,
  string,
  stringMap,
  withDefault,
  withRules,
  type Input,
  type Static,
} from '../../src/shared/api/schema.js';

t.test('object: presence decides required, and a default lands in the schema', async (t) => {
  const s = object(
    {
      a: string({ maxLength: 8 }),
      b: optional(integer({ minimum: 1 })),
      c: withDefault(boolean(), false),
      d: withDefault(oneOf(['X', 'Y']), 'Y'),
    },
    { description: 'demo', rules: [{ rule: 'true', message: 'never' }] },
  );
  t.strictSame(s.openapi, {
    type: 'object',
    description: 'demo',
    properties: {
      a: { type: 'string', maxLength: 8 },
      b: { type: 'integer', minimum: 1 },
      c: { type: 'boolean', default: false },
      d: { type: 'string', enum: ['X', 'Y'], default: 'Y' },
    },
    required: ['a'],
    'x-kubernetes-validations': [{ rule: 'true', message: 'never' }],
  });
  t.strictSame(object({ x: optional(boolean()) }).openapi, { type: 'object', properties: { x: { type: 'boolean' } } }, 'no empty required list');

  // Stored: a defaulted field is always there. Written: it may be left out. tsc checks these lines.
  const stored: Static<typeof s> = { a: 'x', c: true, d: 'X' };
  const written: Input<typeof s> = { a: 'x' };
  // @ts-expect-error a stored object always carries its defaulted fields
  const missing: Static<typeof s> = { a: 'x' };
  // @ts-expect-error an enum takes only its values
  const wrongEnum: Input<typeof s> = { a: 'x', d: 'Z' };
  t.ok(stored && written && missing && wrongEnum);
});

t.test('arrays, maps and pass-through shapes', async (t) => {
  t.strictSame(array(string({ maxLength: 3 }), { maxItems: 4, minItems: 1, listType: 'set' }).openapi, {
    type: 'array',
    items: { type: 'string', maxLength: 3 },
    maxItems: 4,
    minItems: 1,
    'x-kubernetes-list-type': 'set',
  });
  t.strictSame(
    array(object({ type: string({ maxLength: 9 }) }), { maxItems: 2, listType: 'map', listMapKeys: ['type'] }).openapi['x-kubernetes-list-map-keys'],
    ['type'],
  );
  t.strictSame(stringMap(string({ maxLength: 5 }), { maxProperties: 3 }).openapi, {
    type: 'object',
    additionalProperties: { type: 'string', maxLength: 5 },
    maxProperties: 3,
  });
  t.strictSame(passThrough('core shape').openapi, { type: 'object', description: 'core shape', 'x-kubernetes-preserve-unknown-fields': true });
  const ruled = withRules(optional(string({ maxLength: 2, rules: [{ rule: 'a', message: 'a' }] })), [{ rule: 'b', message: 'b' }]);
  t.equal(ruled.presence, 'optional', 'withRules keeps the presence');
  t.strictSame(ruled.openapi['x-kubernetes-validations'], [{ rule: 'a', message: 'a' }, { rule: 'b', message: 'b' }]);
});

t.test('definitions that cannot be right are refused when they are made', async (t) => {
  t.throws(() => string({ maxLength: 2, minLength: 3 }), SchemaDefinitionError);
  t.throws(() => array(string({ maxLength: 1 }), { maxItems: 1, listType: 'map' }), SchemaDefinitionError, 'map without keys');
  t.throws(() => array(string({ maxLength: 1 }), { maxItems: 1, listMapKeys: ['k'] }), SchemaDefinitionError, 'keys without map');
  t.throws(() => duration({ min: '1h', max: '1m' }), DurationError, 'an empty range');
  t.throws(() => duration({ min: 'soon', max: '1m' }), DurationError, 'a bound that is no duration');
});

t.test('parseDuration', async (t) => {
  const good: [string, number][] = [
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['1h0m0s', 3_600_000],
    ['1.5h', 5_400_000],
    ['250ms', 250],
    ['1500us', 1.5],
    ['2000000ns', 2],
    ['1m1ms', 60_001],
    ['0s', 0],
    ['24h', 86_400_000],
  ];
  for (const [text, ms] of good) t.equal(parseDuration(text), ms, text);
  const bad = ['', '0', '30', 's', '-5s', '+5s', '5 s', '5S', '5sec', '1d', '1w', '1h 30m', '.5s', '5.s', 'µs', '1e3s', '30s ', ' 30s', '1234567890s'];
  for (const text of bad) t.throws(() => parseDuration(text), { name: 'DurationError', message: `${JSON.stringify(text)} is not a duration such as "30s", "5m" or "1h30m"` }, JSON.stringify(text));
  t.throws(() => parseDuration(7 as unknown as string), DurationError, 'not a string');
  t.throws(() => parseDuration('1s'.repeat(40)), DurationError, 'absurdly long');
});

t.test('the duration pattern is the one parseDuration applies', async (t) => {
  const re = new RegExp(DURATION_PATTERN);
  for (const text of ['30s', '1h30m', '250ms', '1.5h']) t.ok(re.test(text), text);
  for (const text of ['30', '-5s', '1d', '5 s']) t.notOk(re.test(text), text);
});

t.test('duration(): pattern plus a CEL range rule', async (t) => {
  const s = duration({ min: '5s', max: '1h', description: 'Wait.' });
  t.equal(s.openapi.pattern, DURATION_PATTERN);
  t.equal(s.openapi.maxLength, 32);
  t.equal(s.openapi.description, 'Wait. A duration such as "30s" or "1h30m", 5s to 1h.');
  t.strictSame(s.openapi['x-kubernetes-validations'], [
    { rule: "duration(self) >= duration('5s') && duration(self) <= duration('1h')", message: 'must be between 5s and 1h' },
  ]);
});
