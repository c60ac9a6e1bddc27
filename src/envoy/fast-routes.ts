// The fast path's Envoy routes (docs/design.md, "The fast path"): a compiled table
// (routing/fast-path.ts) as routes that send what they match straight to the table's pool with
// the ext_proc filter disabled (ExtProcPerRoute), tagged with the decision they stand for. Pure.
//
// One route per group of methods that share kube-apiserver's verbs, each matching a single
// regular expression over every fast group/version: the resources (by scope), objects and
// subresources whose listed verbs include the verb that method and shape give, and a watch route
// for collections whose resources list `watch`. A route also requires what keeps a request out of
// judgement: no Upgrade, no query parameter whose name is %-escaped, no `watch` parameter but on
// the watch route (watch=true or 1 only), and no client certificate — or, on its twin, one whose
// identity Envoy's Lua stated (cert-identity.ts) — so any other watch or certificate meets skewgate.
import { fastPathDecision, fastVerb, type FastGroupVersion, type FastResource, type FastShape, type FastTable } from '../routing/fast-path.js';
import { fastClusterName, FRONT_PROXY_SUFFIX } from './clusters.js';
import { ENVOY_IDENTITY_HEADER, ENVOY_IDENTITY_VALUE, UPSTREAM_HEADER } from '../constants.js';
import { duration, type JsonObject } from './json.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../util/core/sliced.js';
import { balancedRetry, EXTPROC_FILTER } from './routes.js';
import { LUA_FILTER } from './cert-identity.js';

/** Route names start with this; the access log and tests tell a fast-path request by it. */
export const FAST_PATH_ROUTE_PREFIX = 'fast-path-';
/** Route metadata namespace (access log: %METADATA(ROUTE:skewgate:reason)%). */
export const FAST_PATH_METADATA = 'skewgate';
/**
 * Envoy refuses a regular expression whose RE2 program exceeds re2.max_program_size.error_level
 * (100 by default); a table of every built-in group/version is tens of thousands. The bootstrap
 * raises the limit to this (bootstrap.ts).
 */
export const FAST_PATH_RE2_PROGRAM_LIMIT = 4_000_000;

/**
 * Methods matched by one route: they give the same verb on every shape (routing/fast-path.ts). The
 * watch route takes a GET of a collection with watch=true or watch=1 — the values every client
 * sends and kube-apiserver reads as a watch whatever else the query holds — unbounded, as
 * kube-apiserver leaves a watch (its timeoutSeconds ends it); any other watch value, and every
 * other route, requires no watch parameter at all.
 */
interface MethodGroup {
  readonly name: string;
  readonly methods: readonly string[];
  readonly read: boolean;
  readonly watch?: true;
}
const METHOD_GROUPS: readonly MethodGroup[] = [
  { name: 'read', methods: ['GET', 'HEAD'], read: true },
  { name: 'watch', methods: ['GET'], read: true, watch: true },
  { name: 'create', methods: ['POST'], read: false },
  { name: 'update', methods: ['PUT'], read: false },
  { name: 'patch', methods: ['PATCH'], read: false },
  { name: 'delete', methods: ['DELETE'], read: false },
];

/** The watch values the watch route takes (Envoy matches the parameter's first value, as Go reads it). */
export const FAST_WATCH_VALUES: readonly string[] = ['true', '1'];

/** A path segment as kube-apiserver splits it; no %-escape (skewgate judges those). */
const SEGMENT = '[^/%]+';

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, (c) => `\\${c}`);
}

function prefixOf(gv: FastGroupVersion): string {
  return gv.group === '' ? `api/${escapeRegex(gv.version)}` : `apis/${escapeRegex(gv.group)}/${escapeRegex(gv.version)}`;
}

/** How a method reaches one resource: its collection, its objects, which subresources. */
function reach(r: FastResource, method: string, watch: boolean): { collection: boolean; object: boolean; subs: string[] } {
  const has = (verbs: readonly string[], shape: FastShape): boolean => {
    const verb = fastVerb(method, shape, watch);
    return verb !== undefined && verbs.includes(verb);
  };
  return {
    collection: has(r.verbs, 'collection'),
    object: has(r.verbs, 'object'),
    subs: r.subresources.filter((s) => has(s.verbs, 'subresource')).map((s) => escapeRegex(s.name)),
  };
}

/** `R`, `R/<name>`, `R/<name>/<sub>` as one expression (null: none of them). */
function shapes(name: string, collection: boolean, object: boolean, subs: readonly string[]): string | null {
  const sub = subs.length === 0 ? '' : `/(?:${subs.join('|')})`;
  const below = object && sub !== '' ? `/${SEGMENT}(?:${sub})?` : object ? `/${SEGMENT}` : sub !== '' ? `/${SEGMENT}${sub}` : '';
  if (below === '') return collection ? name : null;
  return collection ? `${name}(?:${below})?` : `${name}${below}`;
}

/** The path expression below one group/version, or null when the method reaches nothing there. */
function groupVersionRegex(gv: FastGroupVersion, method: string, watch: boolean): string | null {
  // Cluster-scoped resources, and namespaced collections listed across namespaces, sit right
  // below the group/version; namespaced resources also below namespaces/<ns>/ (kube-apiserver's
  // rule, k8s/classify.ts). One shared prefix keeps the expression small.
  const top: string[] = [];
  const inNamespace: string[] = [];
  for (const r of gv.resources) {
    const { collection, object, subs } = reach(r, method, watch);
    const name = escapeRegex(r.resource);
    if (!r.namespaced) {
      const x = shapes(name, collection, object, subs);
      if (x !== null) top.push(x);
      continue;
    }
    if (collection) top.push(name);
    const x = shapes(name, collection, object, subs);
    if (x !== null) inNamespace.push(x);
  }
  const alternatives = [...(inNamespace.length > 0 ? [`namespaces/${SEGMENT}/(?:${inNamespace.join('|')})`] : []), ...top];
  return alternatives.length === 0 ? null : `${prefixOf(gv)}/(?:${alternatives.join('|')})`;
}

/** The path expression a method's route matches (watch: the watch route's), or null when no fast path shape takes it. */
export function fastPathRegex(table: FastTable, method: string, watch = false): string | null {
  return runToEnd(fastPathRegexSteps(table, method, watch));
}

function* fastPathRegexSteps(table: FastTable, method: string, watch: boolean): Sliced<string | null> {
  const perGv: string[] = [];
  let n = 0;
  for (const gv of table.groupVersions) {
    n += gv.resources.length;
    if (n > STEP_EVERY) {
      n = 0;
      yield;
    }
    const x = groupVersionRegex(gv, method, watch);
    if (x !== null) perGv.push(x);
  }
  return perGv.length === 0 ? null : `^/(?:${perGv.join('|')})$`;
}

/** What Envoy records for a fast-path request: the ladder's literals and the table's generation. */
function decisionTags(table: FastTable): { readonly metadata: JsonObject; readonly tags: JsonObject[] } {
  const values: Record<string, string> = {
    ...fastPathDecision(table),
    generation: String(table.generation),
    path: 'fast',
  };
  return {
    metadata: { filter_metadata: { [FAST_PATH_METADATA]: values } },
    tags: Object.entries(values).map(([k, v]) => ({ tag: `skewgate.${k}`, literal: { value: v } })),
  };
}

/**
 * The routes for a table (none for an empty one), to sit after the routes skewgate's own headers
 * select and before the balanced default: a request skewgate judged `default` that one of them
 * matches goes to the table's pool, every member of which the ladder holds able to serve it,
 * bounded and retried as the default routes would (requestTimeoutMs: envoy.requestTimeout; none
 * of them is long-running).
 */
export function fastPathRoutes(table: FastTable | null, requestTimeoutMs: number, certificates = false): JsonObject[] {
  return runToEnd(fastPathRoutesSteps(table, requestTimeoutMs, certificates));
}

/** Route names of the twins for certificates Envoy stated: `fast-path-x509-read`, …. */
export const FAST_PATH_X509 = 'x509-';

/**
 * fastPathRoutes as a sliced computation (util/core/sliced.ts): it pauses between group/versions.
 * With `certificates` (cert-identity.ts), each route has a twin for a request whose client
 * certificate Envoy's Lua stated, to the pool's front-proxy cluster.
 */
export function* fastPathRoutesSteps(table: FastTable | null, requestTimeoutMs: number, certificates = false): Sliced<JsonObject[]> {
  if (table === null || table.members.length === 0) return [];
  const { metadata, tags } = decisionTags(table);
  const routes: JsonObject[] = [];
  for (const g of METHOD_GROUPS) {
    const first = g.methods[0] as string;
    const regex = yield* fastPathRegexSteps(table, first, g.watch === true);
    if (regex === null) continue;
    const route = (name: string, tls: JsonObject, identity: readonly JsonObject[], cluster: string): JsonObject => ({
      name: `${FAST_PATH_ROUTE_PREFIX}${name}`,
      match: {
        safe_regex: { regex },
        headers: [
          { name: ':method', string_match: g.methods.length === 1 ? { exact: first } : { safe_regex: { regex: `^(${g.methods.join('|')})$` } } },
          { name: 'upgrade', present_match: true, invert_match: true },
          // A query parameter whose name is %-escaped might spell `watch` once decoded.
          { name: ':path', string_match: { safe_regex: { regex: '.*[?&][^=&]*%.*' } }, invert_match: true },
          // Never a request skewgate routed (the routes it selects stand before these).
          { name: UPSTREAM_HEADER, present_match: true, invert_match: true },
          ...identity,
        ],
        query_parameters: [
          g.watch === true
            ? { name: 'watch', string_match: { safe_regex: { regex: FAST_WATCH_VALUES.join('|') } } }
            : // present_match false: the parameter is absent (a watch is the watch route's, or skewgate's).
              { name: 'watch', present_match: false },
        ],
        tls_context: tls,
      },
      route: {
        cluster,
        // A watch is as long as the client asked for (timeoutSeconds); everything else is bounded.
        timeout: duration(g.watch === true ? 0 : requestTimeoutMs),
        idle_timeout: '0s',
        retry_policy: balancedRetry(g.read),
      },
      metadata,
      // Envoy's span for the request is named for the decision; nothing is sent upstream.
      decorator: { operation: 'skewgate fast path', propagate: false },
      tracing: { custom_tags: tags },
      typed_per_filter_config: filtersOff(identity.length > 0, certificates),
    });
    const pool = fastClusterName(table.members);
    // Without a client certificate: whatever credential the request carries goes on as it is.
    routes.push(route(g.name, { presented: false }, [], pool));
    // With one, only as Envoy's Lua stated it; every other certificate is skewgate's to state.
    if (certificates)
      routes.push(
        route(
          `${FAST_PATH_X509}${g.name}`,
          { presented: true },
          [{ name: ENVOY_IDENTITY_HEADER, string_match: { exact: ENVOY_IDENTITY_VALUE } }],
          `${pool}${FRONT_PROXY_SUFFIX}`,
        ),
      );
  }
  return routes;
}

/**
 * The filters a fast route leaves out. A request without a certificate selects its fast route
 * first, before any filter runs: Envoy then builds the request's filter chain without ext_proc and
 * the Lua at all (a FilterConfig that disables them), which costs nothing. A request whose
 * certificate the Lua stated reaches its fast route only after the Lua ran and cleared the route
 * cache, with its filter chain built for the route it selected first: there ext_proc is told by
 * its own per-route config to stand aside.
 */
function filtersOff(stated: boolean, lua: boolean): JsonObject {
  const off = { '@type': 'type.googleapis.com/envoy.config.route.v3.FilterConfig', disabled: true };
  if (stated) return { [EXTPROC_FILTER]: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute', disabled: true } };
  return lua ? { [EXTPROC_FILTER]: off, [LUA_FILTER]: off } : { [EXTPROC_FILTER]: off };
}

/** A request as the fast-path routes see it. */
export interface FastPathRequest {
  readonly method: string;
  /** The path with its query, as Envoy has it after normalisation. */
  readonly path: string;
  /** Header names lower case. */
  readonly headers: ReadonlyMap<string, string>;
  /** Whether the client presented a certificate. */
  readonly clientCertificate: boolean;
}

/**
 * Whether the fast-path routes of this table take the request (for `skewgate explain`): the same
 * matchers the rendered routes carry, evaluated here (test/unit/fast-path.test.ts holds the two
 * to the same answer over thousands of requests).
 */
export function fastPathTakes(table: FastTable | null, req: FastPathRequest): boolean {
  if (table === null || req.clientCertificate || req.headers.has('upgrade')) return false;
  const q = req.path.indexOf('?');
  const params =
    q < 0
      ? []
      : req.path
          .slice(q + 1)
          .split('&')
          .map((kv) => {
            const eq = kv.indexOf('=');
            return eq < 0 ? { name: kv, value: '' } : { name: kv.slice(0, eq), value: kv.slice(eq + 1) };
          });
  if (params.some((p) => p.name.includes('%'))) return false;
  const watch = params.find((p) => p.name === 'watch');
  const group = METHOD_GROUPS.find((g) => g.methods.includes(req.method) && (g.watch === true) === (watch !== undefined));
  if (group === undefined || (watch !== undefined && !FAST_WATCH_VALUES.includes(watch.value))) return false;
  const regex = fastPathRegex(table, group.methods[0] as string, group.watch === true);
  return regex !== null && new RegExp(regex).test(q < 0 ? req.path : req.path.slice(0, q));
}
