// What the gate reads from the local Envoy's admin (/stats and /clusters, JSON): the counters that
// say a client met a failure skewgate did not decide — ext_proc streams that failed, timed out or
// were passed over (failure_mode_allow), 503s from an apiserver, "no healthy upstream" — and how
// many requests each apiserver was sent. Parsed here, pure; fetched by ../envoy-sampler.ts. The
// gate compares two readings a window apart.

/** The ext_proc counters (under http.<prefix>.ext_proc.) that mean a request went without a decision, or failed. */
export const EXTPROC_FAILURE_COUNTERS: readonly string[] = Object.freeze(['streams_failed', 'failure_mode_allowed', 'message_timeouts']);
/** Cluster counters that mean a 503 skewgate did not answer: an apiserver's own, or Envoy's "no healthy upstream". */
export const UNEXPLAINED_503_COUNTERS: readonly string[] = Object.freeze(['upstream_rq_503', 'upstream_cx_none_healthy']);

/** The /stats?filter= that reads only these counters. */
export const STATS_FILTER = `(\\.ext_proc\\.(${EXTPROC_FAILURE_COUNTERS.join('|')})|\\.(${UNEXPLAINED_503_COUNTERS.join('|')}))$`;

export interface EnvoyCounters {
  /** Epoch ms of the reading. */
  readonly at: number;
  /** counter name (the ext_proc ones short: "failure_mode_allowed") → total over every listener prefix. */
  readonly extproc: ReadonlyMap<string, number>;
  /** counter name → total over the apiserver clusters (the ext_proc cluster left out). */
  readonly unexplained503: ReadonlyMap<string, number>;
  /** "host:port" (as Envoy names the host, and its hostname when it has one) → requests sent, over every cluster. */
  readonly hostRequests: ReadonlyMap<string, number>;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : 0);

/**
 * The counters from /stats?format=json&filter=STATS_FILTER and /clusters?format=json; a field of
 * another shape counts as 0 (an Envoy that says less is read as having seen less, never more).
 * `extprocCluster` is left out of the 503s: it speaks gRPC.
 */
export function parseEnvoyCounters(at: number, stats: unknown, clusters: unknown, extprocCluster: string): EnvoyCounters {
  const extproc = new Map<string, number>(EXTPROC_FAILURE_COUNTERS.map((c) => [c, 0]));
  const unexplained503 = new Map<string, number>(UNEXPLAINED_503_COUNTERS.map((c) => [c, 0]));
  const list = (stats as { stats?: unknown } | null)?.stats;
  for (const s of Array.isArray(list) ? list : []) {
    const name = (s as { name?: unknown }).name;
    if (typeof name !== 'string') continue;
    const value = num((s as { value?: unknown }).value);
    const ext = /\.ext_proc\.([a-z_]+)$/.exec(name);
    if (ext !== null && extproc.has(ext[1] as string)) {
      extproc.set(ext[1] as string, (extproc.get(ext[1] as string) ?? 0) + value);
      continue;
    }
    const cl = /^cluster\.(.+)\.([a-z0-9_]+)$/.exec(name);
    if (cl !== null && cl[1] !== extprocCluster && unexplained503.has(cl[2] as string))
      unexplained503.set(cl[2] as string, (unexplained503.get(cl[2] as string) ?? 0) + value);
  }
  const hostRequests = new Map<string, number>();
  const statuses = (clusters as { cluster_statuses?: unknown } | null)?.cluster_statuses;
  for (const c of Array.isArray(statuses) ? statuses : []) {
    if ((c as { name?: unknown }).name === extprocCluster) continue;
    const hosts = (c as { host_statuses?: unknown }).host_statuses;
    for (const h of Array.isArray(hosts) ? hosts : []) {
      const sa = (h as { address?: { socket_address?: { address?: unknown; port_value?: unknown } } }).address?.socket_address;
      const port = num(sa?.port_value);
      const hostStats = (h as { stats?: unknown }).stats;
      const total = (Array.isArray(hostStats) ? hostStats : []).find((x) => (x as { name?: unknown }).name === 'rq_total');
      const n = num((total as { value?: unknown } | undefined)?.value);
      const names = [sa?.address, (h as { hostname?: unknown }).hostname].filter((x): x is string => typeof x === 'string' && x !== '');
      for (const host of new Set(names)) {
        const key = `${host}:${port}`;
        hostRequests.set(key, (hostRequests.get(key) ?? 0) + n);
      }
    }
  }
  return { at, extproc, unexplained503, hostRequests };
}

/** What happened between two readings (counters that went back — Envoy restarted — count from 0). */
export function countersSince(before: EnvoyCounters, after: EnvoyCounters): EnvoyCounters {
  const diff = (a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): Map<string, number> =>
    new Map([...b].map(([k, v]) => [k, v >= (a.get(k) ?? 0) ? v - (a.get(k) ?? 0) : v]));
  return {
    at: after.at,
    extproc: diff(before.extproc, after.extproc),
    unexplained503: diff(before.unexplained503, after.unexplained503),
    hostRequests: diff(before.hostRequests, after.hostRequests),
  };
}

export function total(m: ReadonlyMap<string, number>): number {
  let n = 0;
  for (const v of m.values()) n += v;
  return n;
}
