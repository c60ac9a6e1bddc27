// What a new config changes against the running one, and whether a running skewgate can take it
// without a restart (src/app/reload.ts acts on the answer). Pure: two configs in, a plan out.
import type { Config } from './schema.js';

export type ReloadPlan =
  | { readonly kind: 'unchanged' }
  /** Every change can be applied at run time; `changed` names the sections (and `log.level`). */
  | { readonly kind: 'swap'; readonly changed: readonly string[] }
  /** Some change needs a restart: the dotted paths that differ there (`extproc.listen`). Nothing is applied. */
  | { readonly kind: 'restart_required'; readonly fields: readonly string[] };

/**
 * Sections rebuilt on a reload: discovery and routing are built anew from them. `membership` is
 * not in Config yet; when it arrives it is swapped the same way.
 */
const SWAPPED_SECTIONS: ReadonlySet<string> = new Set(['apiservers', 'discovery', 'routing', 'membership', 'gate']);
/** Parts of a swapped section built once, at start: a change there needs a restart (a listener). */
const RESTART_IN_SWAPPED: ReadonlySet<string> = new Set(['gate.runtimeExtension']);
/** Single fields applied in place in a section that otherwise needs a restart. */
const SWAPPED_FIELDS: ReadonlySet<string> = new Set(['log.level']);
/** Not configuration: the file it came from. */
const IGNORED: ReadonlySet<string> = new Set(['source']);

/**
 * Compares two validated configs. The listener (`extproc`), the telemetry SDK and whatever feeds
 * Envoy's bootstrap (`envoy`) are built once, at start; any other top-level key a later version
 * adds is treated the same until it is listed above. One field that needs a restart refuses the
 * whole reload, so a half-applied config never runs.
 */
export function reloadPlan(running: Config, next: Config): ReloadPlan {
  const a = running as unknown as Readonly<Record<string, unknown>>;
  const b = next as unknown as Readonly<Record<string, unknown>>;
  const changed: string[] = [];
  const restart: string[] = [];
  for (const key of unionKeys(a, b)) {
    if (IGNORED.has(key)) continue;
    if (SWAPPED_SECTIONS.has(key)) {
      const pinned = differingPaths(a[key], b[key], key).filter((p) =>
        [...RESTART_IN_SWAPPED].some((r) => p === r || p.startsWith(`${r}.`)),
      );
      restart.push(...pinned);
      if (pinned.length === 0 && !sameValue(a[key], b[key])) changed.push(key);
      continue;
    }
    for (const path of differingPaths(a[key], b[key], key)) (SWAPPED_FIELDS.has(path) ? changed : restart).push(path);
  }
  if (restart.length > 0) return { kind: 'restart_required', fields: restart.sort() };
  if (changed.length > 0) return { kind: 'swap', changed: changed.sort() };
  return { kind: 'unchanged' };
}

/**
 * Whether the apiservers as Envoy's bootstrap holds them (name, URL, serverName, caFile: its
 * clusters and routes) differ. Envoy does not reload its bootstrap, so such a swap leaves it
 * behind until it is rendered again and Envoy restarted.
 */
export function changesEnvoyUpstreams(running: Config, next: Config): boolean {
  const upstreams = (c: Config): unknown[] => c.apiservers.map((s) => [s.name, s.url, s.serverName, s.caFile]);
  return !sameValue(upstreams(running), upstreams(next));
}

/** The leaf paths where a and b differ, written as config problems are (`apiservers[0].url`). */
export function differingPaths(a: unknown, b: unknown, path: string): string[] {
  if (sameValue(a, b)) return [];
  if (isRecord(a) && isRecord(b)) return unionKeys(a, b).flatMap((k) => differingPaths(a[k], b[k], `${path}.${k}`));
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    return a.flatMap((v: unknown, i) => differingPaths(v, b[i], `${path}[${i}]`));
  }
  return [path];
}

/** Structural equality of JSON-like values; a key holding undefined counts as absent, as in the YAML. */
export function sameValue(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v: unknown, i) => sameValue(v, b[i]));
  }
  if (isRecord(a) && isRecord(b)) return unionKeys(a, b).every((k) => sameValue(a[k], b[k]));
  return false;
}

function isRecord(v: unknown): v is Readonly<Record<string, unknown>> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Keys of either object that hold a value, sorted so that every plan lists its paths in one order. */
function unionKeys(a: Readonly<Record<string, unknown>>, b: Readonly<Record<string, unknown>>): string[] {
  const keys = new Set<string>();
  for (const o of [a, b]) for (const [k, v] of Object.entries(o)) if (v !== undefined) keys.add(k);
  return [...keys].sort();
}
