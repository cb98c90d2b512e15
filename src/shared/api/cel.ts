// Values spliced into CEL expressions (admission policies, webhook match conditions) as string literals.

/** A CEL double-quoted string literal holding `value` exactly. */
export function celString(value: string): string {
  // JSON's escapes (\" \\ \n \uXXXX …) are all valid CEL escapes.
  return JSON.stringify(value);
}
