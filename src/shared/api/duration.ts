// Go-style duration strings (`30s`, `5m`, `1h30m`) as the spec carries them: the API server checks the form by
// pattern and the range by CEL (which parses them the way Go does); the controller reads them with
// parseDuration. Signs and the bare `0` that Go also accepts are refused, so every value means a real interval.
import { string, type Schema } from './schema.js';

export const DURATION_PATTERN = '^([0-9]{1,9}(\\.[0-9]{1,9})?(ns|us|ms|s|m|h))+$';
const DURATION = new RegExp(DURATION_PATTERN);
const PART = /([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)/g;
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export class DurationError extends Error {
  override name = 'DurationError';
}

/** Milliseconds in a duration string; throws a DurationError naming the value when it is not one. */
export function parseDuration(text: string): number {
  if (typeof text !== 'string' || text.length > 64 || !DURATION.test(text)) {
    throw new DurationError(`${JSON.stringify(text)} is not a duration such as "30s", "5m" or "1h30m"`);
  }
  let ms = 0;
  for (const [, amount, unit] of text.matchAll(PART)) ms += Number(amount) * UNIT_MS[unit!]!;
  return ms;
}

export interface DurationRange {
  min: string;
  max: string;
  description?: string;
}

/** A duration field refused by the API server outside [min, max]. */
export function duration({ min, max, description }: DurationRange): Schema<string> {
  if (parseDuration(min) > parseDuration(max)) throw new DurationError(`duration range ${min}..${max} is empty`);
  return string({
    description: `${description ? `${description} ` : ''}A duration such as "30s" or "1h30m", ${min} to ${max}.`,
    maxLength: 32,
    pattern: DURATION_PATTERN,
    rules: [
      {
        rule: `duration(self) >= duration('${min}') && duration(self) <= duration('${max}')`,
        message: `must be between ${min} and ${max}`,
      },
    ],
  });
}
