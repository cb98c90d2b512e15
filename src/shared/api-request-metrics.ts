// Every request the process sends to the API server, counted as client-go's rest_client_requests_total counts them,
// but by the verb and resource the API server would name (apiserver_request_total's words), so a reader can hold
// the controller's traffic to the minimum its lifecycle needs. Counted where requests leave: restClient's send()
// and the informers' LIST and WATCH. Labels are words derived from the path: never a name, namespace or query.
import { Counter } from 'prom-client';
import { registry } from './metrics.js';

export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'other';

export interface ApiRequestLabels {
  verb: ApiVerb;
  /** The plural, with its subresource (`pods/log`, `ptahmigrations/status`); `nonresource` for /version and the like. */
  resource: string;
}

/** Requests counted since the start, by `verb resource code`; published to the counter when it is scraped. */
const tallies = new Map<string, { labels: ApiRequestLabels & { code: string }; count: number; published: number }>();

export const apiRequestMetrics = {
  requests: new Counter({
    name: 'ptah_operator_api_requests_total',
    help: 'Requests sent to the API server, by verb, resource (plural/subresource) and code (the HTTP status, or error when no answer came).',
    labelNames: ['verb', 'resource', 'code'] as const,
    registers: [registry],
    // A request adds one to a plain tally; prom-client's inc (which validates and hashes its labels) runs only here,
    // once per label set and scrape.
    collect() {
      for (const tally of tallies.values()) {
        if (tally.count > tally.published) this.inc(tally.labels, tally.count - tally.published);
        tally.published = tally.count;
      }
    },
  }),
};

const NON_RESOURCE: ApiRequestLabels = { verb: 'other', resource: 'nonresource' };
const SEGMENT = /^[a-z0-9][a-z0-9.-]*$/;
const NAMESPACE_SUBRESOURCES: ReadonlySet<string> = new Set(['status', 'finalize']);

/** `watch=true` (or 1) in a query string. */
function isWatch(query: string): boolean {
  if (!query.includes('watch')) return false;
  const value = new URLSearchParams(query).get('watch');
  return value === 'true' || value === '1';
}

function verbOf(method: string, named: boolean, watch: boolean): ApiVerb {
  switch (method.toUpperCase()) {
    case 'GET':
      return watch ? 'watch' : named ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return named ? 'delete' : 'deletecollection';
    default:
      return 'other';
  }
}

/**
 * The verb and resource of a request to `path` (query included) with `method`: /api/v1/... and
 * /apis/<group>/<version>/..., namespaced or not, with a subresource or not (and the legacy /watch/ prefix).
 */
export function apiRequestLabels(method: string, path: string): ApiRequestLabels {
  const at = path.indexOf('?');
  const pathname = at < 0 ? path : path.slice(0, at);
  const query = at < 0 ? '' : path.slice(at + 1);
  const segments = pathname.split('/').filter((s) => s !== '');
  let rest: string[];
  if (segments[0] === 'api' && segments.length >= 3) rest = segments.slice(2);
  else if (segments[0] === 'apis' && segments.length >= 4) rest = segments.slice(3);
  else return NON_RESOURCE;
  let watch = isWatch(query);
  if (rest[0] === 'watch') {
    watch = true;
    rest = rest.slice(1);
  }
  // namespaces/<ns>/<plural>/... addresses a namespaced kind; namespaces[/<name>[/status|finalize]] the Namespace itself.
  if (rest[0] === 'namespaces' && rest.length >= 3 && !(rest.length === 3 && NAMESPACE_SUBRESOURCES.has(rest[2]!))) rest = rest.slice(2);
  const [plural, name, subresource] = rest;
  if (!plural || !SEGMENT.test(plural) || rest.length > 3 || (subresource !== undefined && !SEGMENT.test(subresource))) return NON_RESOURCE;
  return { verb: verbOf(method, name !== undefined, watch), resource: subresource ? `${plural}/${subresource}` : plural };
}

/** Counts one request: `code` is the HTTP status the API server answered, or undefined when no answer came. */
export function countApiRequest(method: string, path: string, code: number | undefined): void {
  const { verb, resource } = apiRequestLabels(method, path);
  const status = code === undefined ? 'error' : String(code);
  const key = `${verb} ${resource} ${status}`;
  const tally = tallies.get(key);
  if (tally) tally.count += 1;
  else tallies.set(key, { labels: { verb, resource, code: status }, count: 1, published: 0 });
}
