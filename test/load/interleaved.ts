// A closed-loop, interleaved latency run: one request at a time, each round sends the same request
// through every arm in a shuffled order, so that both arms see the same servers, the same moment
// and the same client. Records the Audit-ID of each answer (see audit.ts).
import type { Clock } from './clock.js';
import { errorCode, headerValue, type LoadHttp } from './http.js';
import type { ArmTarget } from './run.js';
import type { Op, RequestRecord, ResourceKind } from './types.js';
import { armSelector, collectionPath, objectManifest, objectPath, type Workload } from './workload.js';

/** One timed request of the interleaved run: the load generator's record, minus the write bookkeeping. */
export type TimedRequest = Pick<RequestRecord, 'arm' | 'kind' | 'op' | 'startMs' | 'endMs' | 'status' | 'error' | 'auditId'> & {
  /** The round it belongs to (0-based): the same request through every arm shares it (paired comparisons). */
  readonly round: number;
};

const ROUND: readonly { readonly kind: ResourceKind; readonly op: Op }[] = [
  { kind: 'skewed', op: 'get' },
  { kind: 'skewed', op: 'list' },
  { kind: 'skewed', op: 'create' },
  { kind: 'common', op: 'get' },
];

export async function interleavedRun(o: {
  readonly arms: readonly ArmTarget[];
  readonly http: LoadHttp;
  readonly workload: Workload;
  /** Rounds; each sends every ROUND entry once through every arm. */
  readonly rounds: number;
  readonly clock: Clock;
  readonly rng: () => number;
  /** An object of each kind that exists (for gets). */
  readonly existing: Readonly<Record<ResourceKind, string>>;
}): Promise<TimedRequest[]> {
  const out: TimedRequest[] = [];
  let seq = 0;
  for (let round = 0; round < o.rounds; round++) {
    for (const step of ROUND) {
      const order = [...o.arms].sort(() => o.rng() - 0.5);
      for (const arm of order) {
        const spec = step.kind === 'skewed' ? o.workload.skewed : o.workload.common;
        const ns = o.workload.namespace(arm.arm);
        let method = 'GET';
        let path: string;
        let body: unknown;
        if (step.op === 'get') path = objectPath(spec, ns, o.existing[step.kind]);
        else if (step.op === 'list')
          path = `${collectionPath(spec, ns)}?labelSelector=${encodeURIComponent(armSelector(arm.arm))}&limit=10`;
        else {
          method = 'POST';
          path = collectionPath(spec, ns);
          body = objectManifest(spec, { arm: arm.arm, token: `${arm.arm}-lat-${seq++}`, namespace: ns });
        }
        const startMs = o.clock();
        try {
          const res = await o.http.send(method, `${arm.baseUrl}${path}`, body);
          const auditId = headerValue(res.headers, 'audit-id');
          out.push({
            round,
            arm: arm.arm,
            kind: step.kind,
            op: step.op,
            startMs,
            endMs: o.clock(),
            status: res.status,
            ...(auditId !== undefined ? { auditId } : {}),
          });
        } catch (err) {
          out.push({ round, arm: arm.arm, kind: step.kind, op: step.op, startMs, endMs: o.clock(), status: null, error: errorCode(err) });
        }
      }
    }
  }
  return out;
}
