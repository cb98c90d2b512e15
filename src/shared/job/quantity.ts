// Kubernetes resource quantities compared by value. The API server stores a quantity in its canonical spelling
// ("0.5" comes back as "500m", "1024Mi" as "1Gi"), so a rebuilt Job and its stored copy may spell one amount two
// ways; both the template digest and the spec comparison read it as an exact fraction instead.
import { recentAnswers } from '../canonical.js';
import { isPlainObject, type PlainObject, type PlainValue } from './plain.js';

const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|(n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d{1,3}))?$/;
const BINARY_EXPONENT: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_EXPONENT: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** The exact value of a quantity as a reduced fraction (`"1/2"` for "500m"), or undefined when it is not one. */
export function quantityValue(quantity: string | number): string | undefined {
  return recentValue(String(quantity));
}

// Every Job judged spells the same few amounts; the answer depends on the spelling alone.
const recentValue = recentAnswers(valueOfSpelling, 256, 64);

/** quantityValue of `String(quantity)` worked out afresh, every time: what the kept answers are held to. */
export function valueOfSpelling(spelling: string): string | undefined {
  const match = QUANTITY.exec(spelling.trim());
  if (!match) return undefined;
  const [, sign, number, binary, decimal, exponent] = match;
  const [whole = '', fraction = ''] = number!.split('.');
  let power10 = -fraction.length;
  if (decimal) power10 += DECIMAL_EXPONENT[decimal]!;
  if (exponent) power10 += Number(exponent);
  const power2 = binary ? BINARY_EXPONENT[binary]! : 0;
  let numerator = BigInt(`${whole}${fraction}` || '0') * 2n ** BigInt(power2);
  let denominator = 1n;
  if (power10 >= 0) numerator *= 10n ** BigInt(power10);
  else denominator = 10n ** BigInt(-power10);
  if (numerator === 0n) return '0';
  const divisor = gcd(numerator, denominator);
  numerator /= divisor;
  denominator /= divisor;
  return `${sign === '-' ? '-' : ''}${numerator}/${denominator}`;
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

/**
 * A plain Pod spec with every quantity it can hold (container resources, emptyDir size limits, Pod overhead)
 * replaced by its value. A string that is no quantity is left as it is, so it only equals itself. Only the objects
 * on the way to a quantity are copied; the rest is shared with `podSpec`, so neither is written afterwards.
 */
export function withQuantityValues(podSpec: PlainObject): PlainObject {
  const spec = { ...podSpec };
  for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
    const containers = spec[list];
    if (!Array.isArray(containers)) continue;
    spec[list] = containers.map((container) => {
      if (!isPlainObject(container) || !isPlainObject(container.resources)) return container;
      const resources = { ...container.resources };
      for (const kind of ['limits', 'requests']) {
        const amounts = resources[kind];
        if (isPlainObject(amounts)) resources[kind] = withValues(amounts);
      }
      return { ...container, resources };
    });
  }
  if (Array.isArray(spec.volumes)) {
    spec.volumes = spec.volumes.map((volume) =>
      isPlainObject(volume) && isPlainObject(volume.emptyDir) && volume.emptyDir.sizeLimit !== undefined
        ? { ...volume, emptyDir: { ...volume.emptyDir, sizeLimit: valueOf(volume.emptyDir.sizeLimit) } }
        : volume);
  }
  if (isPlainObject(spec.overhead)) spec.overhead = withValues(spec.overhead);
  return spec;
}

function withValues(amounts: PlainObject): PlainObject {
  const out: PlainObject = {};
  for (const [name, quantity] of Object.entries(amounts)) out[name] = valueOf(quantity);
  return out;
}

function valueOf(quantity: PlainValue): PlainValue {
  if (typeof quantity !== 'string' && typeof quantity !== 'number') return quantity;
  const value = quantityValue(quantity);
  return value === undefined ? quantity : `quantity:${value}`;
}
