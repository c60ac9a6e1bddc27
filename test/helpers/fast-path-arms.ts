// The two skewgate arms of a cluster test, one per fast-path mode (docs/design.md, "The fast
// path"), and the evidence that each ran in its mode: the requests its Envoy's access log shows on
// fast-path routes (src/envoy/listener.ts writes the route's name; fast-routes.ts names the fast
// path's `fast-path-<method group>`).
import { readFile } from 'node:fs/promises';
import { FAST_PATH_ROUTE_PREFIX } from '../../src/envoy/fast-routes.js';
import type { GatewayOptions } from '../../harness/lab/lab.js';
import { phaseAt, type Timeline } from '../load/timeline.js';

/** Arm (and gateway) names: fast path on (envoy.xds, routing.fastPath default) and off (routing.fastPath false). */
export const FAST_ON = 'skewgate-fp-on';
export const FAST_OFF = 'skewgate-fp-off';
export const SKEWGATE_ARMS = [FAST_ON, FAST_OFF] as const;
export type SkewgateArm = (typeof SKEWGATE_ARMS)[number];

/**
 * The lab gateway options of each arm. offXds: the off arm with envoy.xds as well (the fast path
 * is then off only by routing.fastPath: false); without, the static routes and the same flag.
 */
export function skewgateArmOptions(arm: SkewgateArm, port: number, offXds = false): GatewayOptions {
  // Every decision logged: a false 404's report names skewgate's decision for it (test/helpers/false-404s.ts).
  return arm === FAST_ON
    ? { name: arm, withSkewgate: true, port, xds: true, logEveryDecision: true }
    : { name: arm, withSkewgate: true, port, fastPath: false, logEveryDecision: true, ...(offXds ? { xds: true } : {}) };
}

/** How a results table names an arm's mode. */
export function modeText(arm: SkewgateArm, offXds = false): string {
  return arm === FAST_ON
    ? 'fast path on (`envoy.xds`, `routing.fastPath` default)'
    : `fast path off (\`routing.fastPath: false\`${offXds ? ', with `envoy.xds`' : ', static routes'}: ext_proc on every request)`;
}

export interface RouteCounts {
  /** Access-log lines (requests Envoy answered or forwarded) since the given time. */
  readonly requests: number;
  /** Of them, on a fast-path route: ext_proc never called. */
  readonly fast: number;
  /** Fast-path requests and all requests per group (the key function's; default one group, "all"). */
  readonly fastByPhase: ReadonlyMap<string, number>;
  readonly byPhase: ReadonlyMap<string, number>;
}

/** Groups requests by the timeline phase they started in. */
export function byTimelinePhase(tl: Timeline): (atMs: number) => string {
  return (atMs) => phaseAt(tl, atMs);
}

/**
 * The routes of the requests in an Envoy's access log (the lab's `envoy-<gateway>` log file) that
 * started at or after sinceMs, grouped by `key` (a phase, a kind of request).
 */
export async function accessLogRoutes(
  logFile: string,
  sinceMs: number,
  key: (atMs: number, path: string) => string = () => 'all',
): Promise<RouteCounts> {
  const text = await readFile(logFile, 'utf8');
  let requests = 0;
  let fast = 0;
  const fastByPhase = new Map<string, number>();
  const byPhase = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    let o: { start?: string; route?: string; path?: string };
    try {
      o = JSON.parse(line) as typeof o;
    } catch {
      continue;
    }
    if (o.start === undefined) continue;
    const at = Date.parse(o.start);
    if (!Number.isFinite(at) || at < sinceMs) continue;
    requests++;
    const phase = key(at, o.path ?? '');
    byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
    if (o.route?.startsWith(FAST_PATH_ROUTE_PREFIX) === true) {
      fast++;
      fastByPhase.set(phase, (fastByPhase.get(phase) ?? 0) + 1);
    }
  }
  return { requests, fast, fastByPhase, byPhase };
}

/** "P0 312/540, P1 0/498, …": fast-path requests of all, per phase. */
export function fastByPhaseText(c: RouteCounts): string {
  return [...c.byPhase].map(([p, n]) => `${p} ${c.fastByPhase.get(p) ?? 0}/${n}`).join(', ');
}

/**
 * The evidence that each arm ran in its mode: the on arm had requests on fast-path routes, the off
 * arm none. `onDetail` says how many (default: fast of all requests).
 */
export function checkFastPathModes(
  t: { ok(v: unknown, msg: string): unknown; equal(a: unknown, b: unknown, msg: string): unknown },
  routes: Readonly<Record<SkewgateArm, RouteCounts>>,
  onDetail = `${routes[FAST_ON].fast}/${routes[FAST_ON].requests}`,
): void {
  t.ok(routes[FAST_ON].fast > 0, `${FAST_ON}: the fast path was in effect (${onDetail} requests on fast-path routes)`);
  t.equal(routes[FAST_OFF].fast, 0, `${FAST_OFF}: no request on a fast-path route (${routes[FAST_OFF].requests} requests)`);
}

/** accessLogRoutes of both arms' Envoys (`logFileOf(arm)`), from sinceMs on, grouped by `key`. */
export async function armRoutes(
  logFileOf: (arm: SkewgateArm) => string,
  sinceMs: number,
  key?: (atMs: number, path: string) => string,
): Promise<Record<SkewgateArm, RouteCounts>> {
  return {
    [FAST_ON]: await accessLogRoutes(logFileOf(FAST_ON), sinceMs, key),
    [FAST_OFF]: await accessLogRoutes(logFileOf(FAST_OFF), sinceMs, key),
  };
}

/** "skewgate-fp-on 180/362, skewgate-fp-off 0/360": requests on fast-path routes, of all, per arm. */
export function fastShareText(routes: Readonly<Record<SkewgateArm, RouteCounts>>): string {
  return SKEWGATE_ARMS.map((arm) => `${arm} ${routes[arm].fast}/${routes[arm].requests}`).join(', ');
}
