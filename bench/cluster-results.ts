// The real-control-plane results (test/cluster/*) as a section of bench/RESULTS.md. Each cluster
// test owns one part between its own markers inside the cluster section, so a test rewrites only
// its part, and bench/run.ts (which regenerates the rest of the file) must carry the whole
// section over verbatim: see extractClusterSection.
import { createHash } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withMachineLock } from '../harness/lab/machine-lock.js';
import { packageRoot } from '../src/util/package-root.js';
import { NO_ANSWER, type Accounting } from '../test/load/accounting.js';
import type { ClientCheck } from '../test/load/clients.js';
import type { FaultRow } from '../test/load/faults.js';
import type { LatencySummary } from '../test/load/latency.js';
import type { Timeline } from '../test/load/timeline.js';
import { renderTable, type Table } from './report.js';

export const CLUSTER_START = '<!-- cluster:start -->';
export const CLUSTER_END = '<!-- cluster:end -->';
const partStart = (id: string): string => `<!-- cluster:${id}:start -->`;
const partEnd = (id: string): string => `<!-- cluster:${id}:end -->`;

const CLUSTER_HEADER = [
  '## Real control plane (test/cluster)',
  '',
  'Written by the cluster tests (`npm run test:cluster`), each into its own part below; `bench/run.ts` keeps this section as it is.',
].join('\n');

/** The cluster section with its markers, or null; what bench/run.ts must append to the file it regenerates. Pure. */
export function extractClusterSection(doc: string): string | null {
  const a = doc.indexOf(CLUSTER_START);
  const b = doc.indexOf(CLUSTER_END, a);
  return a >= 0 && b > a ? doc.slice(a, b + CLUSTER_END.length) : null;
}

/** Replaces (or appends) the part `id` inside the cluster section (created at the end when missing). Pure. */
export function spliceClusterPart(doc: string, id: string, body: string): string {
  if (!/^[a-z0-9-]+$/.test(id)) throw new Error(`cluster part id "${id}" must be lower-case letters, digits and dashes`);
  let text = doc;
  if (extractClusterSection(text) === null) {
    text = `${text.trimEnd()}${text.trim() === '' ? '' : '\n\n'}${CLUSTER_START}\n${CLUSTER_HEADER}\n${CLUSTER_END}\n`;
  }
  const part = `${partStart(id)}\n${body.trim()}\n${partEnd(id)}`;
  const s = text.indexOf(partStart(id));
  const e = text.indexOf(partEnd(id), s);
  if (s >= 0 && e > s) return text.slice(0, s) + part + text.slice(e + partEnd(id).length);
  const end = text.indexOf(CLUSTER_END);
  return `${text.slice(0, end).trimEnd()}\n\n${part}\n${text.slice(end)}`;
}

export function resultsFile(): string {
  return join(packageRoot(), 'bench', 'RESULTS.md');
}

/**
 * Rewrites part `id` of `file`. Cluster files run side by side (.ci/run), so the read, splice and
 * rename happen under a machine-wide lock: without it, two writers would each keep only their part.
 */
export async function writeClusterPart(id: string, body: string, file = resultsFile()): Promise<void> {
  const lock = join(tmpdir(), `skewgate-results-${createHash('sha256').update(file).digest('hex').slice(0, 16)}.lock`);
  await withMachineLock(lock, async () => {
    const doc = await readFile(file, 'utf8').catch(() => '# skewgate benchmark results\n');
    const tmp = `${file}.tmp-${process.pid}`;
    await writeFile(tmp, spliceClusterPart(doc, id, body));
    await rename(tmp, file);
  });
}

// ---- tables --------------------------------------------------------------------------------

const n = (v: number): string => v.toLocaleString('en-US');
const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
/** Milliseconds below a second, seconds above. */
const dur = (ms: number): string => (ms < 1000 ? `${Math.round(ms)} ms` : sec(ms));

export function statusCounts(m: ReadonlyMap<string, number>): string {
  if (m.size === 0) return '—';
  return [...m]
    .sort((a, b) => (a[0] === NO_ANSWER ? 1 : b[0] === NO_ANSWER ? -1 : a[0] < b[0] ? -1 : 1))
    .map(([k, c]) => `${k}×${n(c)}`)
    .join(' ');
}

export function phaseTable(a: Accounting, caption?: string): Table {
  return {
    ...(caption === undefined ? {} : { caption }),
    headers: [
      'phase',
      'arm',
      'requests',
      'status codes',
      'skewed ok',
      'common ok',
      'false 404s',
      'true 404s',
      'no answer',
      '5xx',
      'creates acked',
      'lost writes',
      'duplicated writes',
      'watch events',
      'watch interruptions',
    ],
    rows: a.rows.map((r) => [
      r.phase,
      r.arm,
      n(r.requests),
      statusCounts(r.statuses),
      `${n(r.skewedOk)}/${n(r.skewedRequests)}`,
      `${n(r.commonOk)}/${n(r.commonRequests)}`,
      r.false404s === 0 ? '0' : `**${n(r.false404s)}**`,
      n(r.true404s),
      n(r.noAnswer),
      n(r.server5xx),
      n(r.createsAcked),
      r.lostWrites === 0 ? '0' : `**${n(r.lostWrites)}**`,
      r.duplicatedWrites === 0 ? '0' : `**${n(r.duplicatedWrites)}**`,
      n(r.watchEvents),
      n(r.watchInterruptions),
    ]),
  };
}

/** Answers other than 2xx/404 and requests without an answer, by phase, arm and cause. */
export function problemsTable(a: Accounting): Table {
  const rows: string[][] = [];
  for (const r of a.rows) for (const [cause, c] of [...r.problems].sort((x, y) => y[1] - x[1])) rows.push([r.phase, r.arm, cause, n(c)]);
  return {
    caption: 'Answers other than 2xx and 404 (and requests without an answer), by cause:',
    headers: ['phase', 'arm', 'cause', 'requests'],
    rows: rows.length > 0 ? rows : [['—', '—', 'none', '0']],
  };
}

export function timelineTable(tl: Timeline, originMs: number): Table {
  const rows: string[][] = [];
  for (const p of tl.phases) rows.push([sec(p.atMs - originMs), `phase ${p.phase} begins`, '', '']);
  for (const e of tl.servers) rows.push([sec(e.atMs - originMs), e.what, e.server, e.version]);
  rows.sort((x, y) => parseFloat(x[0] as string) - parseFloat(y[0] as string));
  return { headers: ['t', 'event', 'apiserver', 'version'], rows };
}

export function clientChecksTable(byPhase: readonly { readonly phase: string; readonly checks: readonly ClientCheck[] }[]): Table {
  const rows: string[][] = [];
  for (const p of byPhase) {
    for (const c of p.checks) rows.push([p.phase, c.client, c.what, c.ok ? 'ok' : '**failed**', `${Math.round(c.ms)} ms`, c.detail]);
  }
  return { headers: ['phase', 'client', 'what', 'result', 'time', 'detail'], rows };
}

/** `answeredBy`: the apiservers whose audit log holds an Audit-ID (see test/load/audit.ts). */
export function false404Table(a: Accounting, originMs: number, limit = 10, answeredBy?: ReadonlyMap<string, ReadonlySet<string>>): Table {
  const by = (id: string | undefined): string =>
    id === undefined ? 'skewgate or Envoy' : [...(answeredBy?.get(id) ?? [])].sort().join(' → ') || '?';
  return {
    caption: `False 404s (first ${limit} per arm):`,
    headers: [
      't',
      'arm',
      'phase',
      'kind',
      'op',
      'why',
      'capable apiserver ready for',
      'skewgate reason',
      '404 from',
      'object (created on)',
    ],
    rows: a.arms
      .flatMap((arm) => a.false404s.filter((f) => f.arm === arm).slice(0, limit))
      .map((f) => [
        sec(f.atMs - originMs),
        f.arm,
        f.phase,
        f.kind,
        f.op,
        f.why,
        Number.isFinite(f.capableReadyForMs) ? sec(f.capableReadyForMs) : '—',
        f.reason ?? '—',
        by(f.auditId),
        f.name === undefined ? '—' : `${f.name}${f.createdAuditId !== undefined ? ` (${by(f.createdAuditId)})` : ''}`,
      ]),
  };
}

/** One row per fault phase and arm (test/load/faults.ts): the numbers issue 14 asks of every fault test. */
export function faultTable(rows: readonly FaultRow[], a: Accounting): Table {
  const of = (phase: string, arm: string): Accounting['rows'][number] | undefined => a.rows.find((r) => r.phase === phase && r.arm === arm);
  const bold = (v: number): string => (v === 0 ? '0' : `**${n(v)}**`);
  return {
    headers: [
      'fault',
      'arm',
      'requests',
      'failed',
      'in flight at the fault (failed)',
      'failed after the fault',
      'failed, by cause',
      'false 404s',
      'lost writes',
      'duplicated writes',
      'max request',
      'new requests failing for',
      'after the repair',
    ],
    rows: rows.map((r) => {
      const acc = of(r.phase, r.arm);
      return [
        r.phase,
        r.arm,
        n(r.requests),
        n(r.failed),
        `${n(r.inFlightAtFault)} (${n(r.failedInFlight)})`,
        n(r.failedAfterFault),
        statusCounts(r.failedBy),
        bold(acc?.false404s ?? 0),
        bold(acc?.lostWrites ?? 0),
        bold(acc?.duplicatedWrites ?? 0),
        `${dur(r.maxMs)} (${r.maxWhat})`,
        dur(r.recoverMs),
        r.recoverAfterRepairMs === null ? '—' : dur(r.recoverAfterRepairMs),
      ];
    }),
  };
}

export function latencyRow(label: string, s: LatencySummary, extra: readonly string[] = []): string[] {
  const ms = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)} ms` : 'n/a');
  return [label, n(s.count), ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), ...extra];
}

export const render = renderTable;
