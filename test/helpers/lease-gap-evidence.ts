// What the gateways recorded while a node's Lease went unrenewed, for the failure message of the
// lease check: a gap longer than the lease then says, from a CI log alone, whether the kubelet's
// renewals reached Envoy and what they were answered (401 backstop, 503, nothing at all), and what
// skewgate warned of meanwhile — both the node's gateway and the control plane's (the
// kube-controller-manager that would mark the node NotReady goes through the latter).
import { readFile } from 'node:fs/promises';

interface AccessLine {
  readonly start?: string;
  readonly method?: string;
  readonly path?: string;
  readonly status?: string | number;
  readonly flags?: string;
  readonly details?: string;
}

const count = (m: Map<string, number>, k: string): void => {
  m.set(k, (m.get(k) ?? 0) + 1);
};
const text = (m: Map<string, number>): string => [...m].map(([k, n]) => `${k} ×${n}`).join(', ') || 'none';

async function lines(file: string): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const line of (await readFile(file, 'utf8').catch(() => '')).split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a torn line
    }
  }
  return out;
}

/** One line per source: the access log's answers in [fromMs, toMs], the lease path's apart; skewgate's warnings. */
export async function leaseGapEvidence(o: {
  readonly fromMs: number;
  readonly toMs: number;
  /** The node's Lease path (…/kube-node-lease/leases/<node>). */
  readonly leasePath: string;
  readonly envoyLog: string;
  readonly skewgateLogs: readonly { readonly name: string; readonly file: string }[];
}): Promise<string[]> {
  const within = (ms: number): boolean => ms >= o.fromMs && ms <= o.toMs;
  const all = new Map<string, number>();
  const lease = new Map<string, number>();
  for (const l of (await lines(o.envoyLog)) as AccessLine[]) {
    if (!within(Date.parse(l.start ?? ''))) continue;
    const answer = `${l.status ?? '?'}${l.flags !== undefined && l.flags !== '-' ? ` ${l.flags}` : ''}`;
    count(all, answer);
    if (l.path?.startsWith(o.leasePath) === true) count(lease, `${l.method ?? '?'} ${answer} ${l.details ?? ''}`.trim());
  }
  const out = [`envoy answers in the gap: ${text(all)}; to the Lease: ${text(lease)}`];
  for (const s of o.skewgateLogs) {
    const warned = new Map<string, number>();
    for (const l of (await lines(s.file)) as { time?: string; level?: number; msg?: string }[])
      if ((l.level ?? 0) >= 40 && within(Date.parse(l.time ?? ''))) count(warned, l.msg ?? '?');
    out.push(`${s.name} warned: ${text(warned)}`);
  }
  return out;
}
