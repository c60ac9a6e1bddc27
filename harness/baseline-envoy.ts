// The baseline gateway: skewgate's Envoy bootstrap with the ext_proc filter taken out, so that Envoy
// balances over every apiserver on its own. The lab, the demo stack and the compose demo run one
// beside the skewgate gateway, to compare against.
import { EXTPROC_FILTER, type JsonObject } from '../src/envoy/bootstrap.js';

/** The same bootstrap with the ext_proc filter taken out: Envoy balancing alone. */
export function withoutExtProc(bootstrap: JsonObject): JsonObject {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v))
      return v.filter((f) => !(f && typeof f === 'object' && (f as { name?: unknown }).name === EXTPROC_FILTER)).map(strip);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, strip(x)]));
    return v;
  };
  return strip(bootstrap) as JsonObject;
}
