// (b) How the benchmark drives an ext_proc server as Envoy does (test/helpers/extproc-client.ts):
// closed-loop at a concurrency, or open-loop at a rate, with what each exchange got back.
import { randomUUID } from 'node:crypto';
import { UPSTREAM_HEADER } from '../src/constants.js';
import { replyHeader, type EnvoyRequest, type ExtProcTestClient, type ProcessExchange } from '../test/helpers/extproc-client.js';
import { openLoop } from './open-loop.js';
import { countInto, nowNs } from './stats.js';
import { NO_FAILURES, type Failures } from './verdict.js';
import { requestMix, syntheticPlane } from './synthetic.js';

/** Exchanges that got no reply (a gRPC error, or still open when the phase ended): failures of the phase. */
export function phaseFailures(r: DriveResult, total: number): Failures {
  let failed = 0;
  for (const n of r.failures.values()) failed += n;
  let answered = 0;
  for (const n of r.replies.values()) answered += n;
  return { ...NO_FAILURES, errors: failed, unanswered: Math.max(0, total - answered - failed) };
}

/** Several DriveResults as one. */
export function merge(rs: readonly DriveResult[]): DriveResult {
  const replies = new Map<string, number>();
  const failures = new Map<string, number>();
  for (const r of rs) {
    for (const [k, n] of r.replies) countInto(replies, k, n);
    for (const [k, n] of r.failures) countInto(failures, k, n);
  }
  const rtt = new Float64Array(rs.reduce((a, r) => a + r.rttNs.length, 0));
  let at = 0;
  for (const r of rs) {
    rtt.set(r.rttNs, at);
    at += r.rttNs.length;
  }
  return { rttNs: rtt, replies, failures, wallNs: rs.reduce((a, r) => a + r.wallNs, 0) };
}

/** The headers Envoy forwards for a kubectl request, after skewgate's sanitiser filter. */
export function envoyRequests(): EnvoyRequest[] {
  const token = `eyJhbGciOiJSUzI1NiIsImtpZCI6IkJlbmNoIn0.${'e'.repeat(700)}.${'s'.repeat(342)}`;
  const session = randomUUID();
  return requestMix(syntheticPlane()).map((r) => ({
    method: r.method,
    path: r.path,
    authority: '127.0.0.1:6443',
    headers: {
      'user-agent': 'kubectl/v1.34.1 (linux/amd64) kubernetes/93248f9',
      accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json',
      'accept-encoding': 'gzip',
      authorization: `Bearer ${token}`,
      'kubectl-command': 'kubectl get',
      'kubectl-session': session,
      'x-forwarded-proto': 'https',
      'x-request-id': randomUUID(),
      ...(r.method === 'GET' || r.method === 'DELETE'
        ? {}
        : {
            'content-type': r.method === 'PATCH' ? 'application/strategic-merge-patch+json' : 'application/json',
            'content-length': '412',
          }),
    },
  }));
}

export interface DriveResult {
  readonly rttNs: Float64Array;
  readonly replies: Map<string, number>;
  readonly failures: Map<string, number>;
  readonly wallNs: number;
}

/** N exchanges, `concurrency` streams at a time, each: open, request_headers, the reply, half-close. */
export async function drive(
  client: ExtProcTestClient,
  reqs: readonly EnvoyRequest[],
  total: number,
  concurrency: number,
  offset: number,
): Promise<DriveResult> {
  const rttNs = new Float64Array(total);
  const replies = new Map<string, number>();
  const failures = new Map<string, number>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      const t0 = nowNs();
      const ex = await client.process(reqs[(offset + i) % reqs.length] as EnvoyRequest, { close: 'half-close' });
      rttNs[i] = nowNs() - t0;
      tally(ex, replies, failures);
    }
  };
  const t0 = nowNs();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { rttNs, replies, failures, wallNs: nowNs() - t0 };
}

/** N exchanges started open-loop at `rate` per second; round trip from the due time. */
export async function pace(client: ExtProcTestClient, reqs: readonly EnvoyRequest[], total: number, rate: number): Promise<DriveResult> {
  const rttNs = new Float64Array(total);
  const replies = new Map<string, number>();
  const failures = new Map<string, number>();
  const t0 = nowNs();
  await openLoop(total, rate, async (i, due) => {
    const ex = await client.process(reqs[i % reqs.length] as EnvoyRequest, { close: 'half-close' });
    rttNs[i] = nowNs() - due;
    tally(ex, replies, failures);
  });
  return { rttNs, replies, failures, wallNs: nowNs() - t0 };
}

function tally(ex: ProcessExchange, replies: Map<string, number>, failures: Map<string, number>): void {
  const res = ex.response;
  if (res === null) {
    countInto(failures, `no reply (gRPC ${ex.status.code}: ${ex.status.details})`);
  } else if (res.immediate_response) {
    countInto(replies, `immediate ${String(res.immediate_response.status?.code ?? '?')}`);
  } else if (replyHeader(res, UPSTREAM_HEADER)) {
    countInto(replies, `routed (${UPSTREAM_HEADER} set)`);
  } else {
    countInto(replies, 'continue unchanged');
  }
}
