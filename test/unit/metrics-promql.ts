// The metric names a PromQL expression selects, for the tests that hold the alert rules to the series the manager
// serves (test/unit/metrics-rules.test.ts against the registry, test/integration/metrics.test.ts against a scrape).

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects: identifiers that are not in a string, a label matcher, a range,
 * a grouping list, a function or aggregation call, or a keyword. A lexical reading, not a parser (promtool checks
 * the syntax, in metrics-rules.test.ts).
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = [...bare.matchAll(/(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*(?![A-Za-z0-9_:])(?!\s*\()/g)].map((m) => m[0]);
  return [...new Set(names.filter((n) => !KEYWORDS.has(n)))];
}
