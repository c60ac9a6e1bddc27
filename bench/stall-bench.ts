// (f) The request path while a large discovery change is absorbed: three apiservers (static HTTPS
// fakes in this process) each list ~36,000 resources; skewgate's discovery service and ext_proc
// server run in a child process; this process probes the ext_proc server at a fixed rate and
// measures each answer from its due time, while one or all three documents change. Two arms side
// by side: the parsing and snapshot building in one slice (as before slicing) and in 5 ms slices.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPki, type Pki } from '../harness/fake/index.js';
import { MEDIA_AGGREGATED_V2 } from '../src/constants.js';
import { DEFAULT_SLICE_BUDGET_MS } from '../src/util/slice-runner.js';
import { createExtProcClient, requestHeadersMessage, type ExtProcTestClient } from '../test/helpers/extproc-client.js';
import { forkChild } from './child-ipc.js';
import type { StallChildStart, StallChildStatus } from './protocol.js';
import type { Section } from './report.js';
import { countInto, fmt, formatCounts, nowNs, summarise } from './stats.js';

const GROUPS = 1800;
const PER_GROUP = 20;
const PROBE_RATE = 500;
/** Envoy's ext_proc message timeout in the shipped config: an answer later than this fails open. */
const MESSAGE_TIMEOUT_MS = 500;
const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

/** An aggregated /apis of GROUPS CRD-like groups; variant 1 adds a resource to every 7th group. */
function apisDocument(variant: 0 | 1): string {
  const items = [];
  for (let g = 0; g < GROUPS; g++) {
    const resources = [];
    for (let r = 0; r < PER_GROUP + (variant === 1 && g % 7 === 0 ? 1 : 0); r++) {
      const kind = `Kind${g}x${r}`;
      resources.push({
        resource: `kind${g}x${r}s`,
        responseKind: { group: '', version: '', kind },
        scope: 'Namespaced',
        singularResource: `kind${g}x${r}`,
        verbs: VERBS,
        categories: ['all'],
        subresources: [{ subresource: 'status', responseKind: { group: '', version: '', kind }, verbs: ['get', 'patch', 'update'] }],
      });
    }
    items.push({ metadata: { name: `g${g}.example.com` }, versions: [{ version: 'v1', resources, freshness: 'Current' }] });
  }
  return JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items });
}

const CORE = JSON.stringify({
  kind: 'APIGroupDiscoveryList',
  apiVersion: 'apidiscovery.k8s.io/v2',
  metadata: {},
  items: [
    {
      metadata: {},
      versions: [
        {
          version: 'v1',
          resources: [{ resource: 'pods', responseKind: { group: '', version: 'v1', kind: 'Pod' }, scope: 'Namespaced', verbs: VERBS }],
          freshness: 'Current',
        },
      ],
    },
  ],
});

interface Doc {
  readonly body: Buffer;
  readonly etag: string;
}

/** Resources in a view of each variant: the core group's pods, and every 7th group's extra one in variant 1. */
const RESOURCES = [1 + GROUPS * PER_GROUP, 1 + GROUPS * PER_GROUP + Math.ceil(GROUPS / 7)] as const;

const doc = (text: string): Doc => ({ body: Buffer.from(text), etag: `"${createHash('sha1').update(text).digest('hex')}"` });

/** An apiserver that serves prepared bytes (no per-request encoding in this process). */
class StaticApiServer {
  apis: Doc;
  private server: Server | null = null;
  url = '';
  constructor(
    readonly name: string,
    private readonly pki: Pki,
    initial: Doc,
  ) {
    this.apis = initial;
  }
  async start(): Promise<void> {
    const core = doc(CORE);
    const server = createServer({ cert: readFileSync(this.pki.serverCertFile), key: readFileSync(this.pki.serverKeyFile) }, (req, res) => {
      const path = (req.url ?? '').split('?', 1)[0];
      const d = path === '/api' ? core : path === '/apis' ? this.apis : null;
      if (path === '/readyz') return void res.end('ok');
      if (d === null) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end('{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}');
      }
      if (req.headers['if-none-match'] === d.etag) {
        res.writeHead(304, { etag: d.etag });
        return void res.end();
      }
      res.writeHead(200, { 'content-type': MEDIA_AGGREGATED_V2, etag: d.etag, 'content-length': d.body.length });
      res.end(d.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address();
    this.url = `https://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    this.server = server;
  }
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server?.closeAllConnections();
      this.server?.close(() => resolve());
    });
  }
}

interface Window {
  readonly arm: string;
  readonly change: string;
  readonly probes: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly overTimeout: number;
  /** Probes without a reply (a gRPC error or a rejected call): failures, not latencies. */
  readonly failed: number;
  /** Why, by gRPC status. */
  readonly failures: ReadonlyMap<string, number>;
  readonly absorbMs: number;
  readonly loopDelayMaxMs: number;
}

const PROBE_REQUEST = { method: 'GET', path: '/api/v1/namespaces/default/pods', headers: { authorization: 'Bearer probe' } };

/**
 * One exchange as Envoy has it: request_headers, the reply — the time that counts, Envoy acts on
 * it — then a half-close, as Envoy does with the bootstrap skewgate renders (a reset per stream
 * trips Node's HTTP/2 rapid-reset protection, which closes the session every ~1,000 streams, see
 * (b): those probes would fail for a reason of the probe's own). No reply before the stream ends: a failure.
 */
function probeOnce(client: ExtProcTestClient, dueNs: number): Promise<{ replyMs: number | null; status: string }> {
  return new Promise((resolve) => {
    const call = client.open();
    let replyMs: number | null = null;
    call.on('data', () => {
      if (replyMs !== null) return;
      replyMs = (nowNs() - dueNs) / 1e6;
      call.end();
    });
    call.on('error', () => undefined); // the status event carries the outcome
    call.on('status', (st: { code: number; details: string }) => resolve({ replyMs, status: `gRPC ${st.code}: ${st.details}` }));
    call.write(requestHeadersMessage(PROBE_REQUEST));
  });
}

/** Probes at PROBE_RATE until stopped; latencies (ms) from each probe's due time. */
function probe(port: number): { stop(): Promise<{ latencies: number[]; failures: Map<string, number> }> } {
  const client = createExtProcClient(`127.0.0.1:${port}`);
  const latencies: number[] = [];
  const failures = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    const intervalNs = 1e9 / PROBE_RATE;
    const start = nowNs();
    const inflight = new Set<Promise<void>>();
    for (let i = 0; running; i++) {
      const due = start + i * intervalNs;
      const wait = Math.floor((due - nowNs()) / 1e6);
      if (wait > 0) await sleep(wait);
      const p: Promise<void> = probeOnce(client, due)
        .then((r) => {
          if (r.replyMs === null) countInto(failures, r.status);
          else latencies.push(r.replyMs);
        })
        .catch((err: unknown) => countInto(failures, String(err)))
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await Promise.all(inflight);
    client.close();
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { latencies, failures };
    },
  };
}

async function measureChange(
  arm: string,
  change: string,
  port: number,
  child: { call<T>(type: string): Promise<T> },
  apply: () => readonly number[],
): Promise<Window> {
  const p = probe(port);
  await sleep(1000);
  await child.call('resetLoopDelay');
  const t0 = performance.now();
  const expected = apply();
  let absorbMs = Number.NaN;
  for (const deadline = t0 + 60_000; performance.now() < deadline;) {
    await sleep(50);
    const s = await child.call<StallChildStatus>('status');
    if (s.perServer.every((n, i) => n === expected[i])) {
      absorbMs = performance.now() - t0;
      break;
    }
  }
  await sleep(1000);
  const loopDelayMaxMs = (await child.call<StallChildStatus>('status')).loopDelayMaxMs;
  const { latencies: lat, failures } = await p.stop();
  if (Number.isNaN(absorbMs)) throw new Error(`${arm}/${change}: the change was not absorbed within 60 s`);
  const sorted = Float64Array.from(lat).sort();
  const s = summarise(sorted);
  return {
    arm,
    change,
    probes: lat.length,
    p50: s.p50,
    p99: s.p99,
    max: s.max,
    overTimeout: lat.filter((v) => v > MESSAGE_TIMEOUT_MS).length,
    failed: [...failures.values()].reduce((a, n) => a + n, 0),
    failures,
    absorbMs,
    loopDelayMaxMs,
  };
}

export async function benchStall(progress: (msg: string) => void): Promise<Section> {
  const pki = await createPki(join(tmpdir(), 'skewgate-bench-pki-stall'));
  progress(`(f) encoding three ${fmt(GROUPS * PER_GROUP)}-resource documents`);
  const docs = [doc(apisDocument(0)), doc(apisDocument(1))] as const;
  const servers = ['apiserver-a', 'apiserver-b', 'apiserver-c'].map((n) => new StaticApiServer(n, pki, docs[0]));
  await Promise.all(servers.map((s) => s.start()));
  const counts = [RESOURCES[0], RESOURCES[1]] as const;
  /** Serves document variant vs[i] on server i; the view sizes the child will show once it has them. */
  const serve = (vs: readonly (0 | 1)[]): number[] =>
    servers.map((s, i) => {
      const v = vs[i] ?? 0;
      s.apis = docs[v];
      return counts[v];
    });
  const windows: Window[] = [];
  const rss: string[] = [];
  try {
    for (const [arm, budget] of [
      ['one slice (no slicing)', null],
      [`${DEFAULT_SLICE_BUDGET_MS} ms slices (shipped)`, DEFAULT_SLICE_BUDGET_MS],
    ] as const) {
      for (const s of servers) s.apis = docs[0];
      // STALL_CHILD_ARGS (e.g. "--cpu-prof --trace-gc") and STALL_CHILD_LOG (a file for its debug log) help find what stalls.
      const child = await forkChild<Record<string, never>>('./stall-child.js', {
        readyTimeoutMs: 10_000,
        execArgv: (process.env.STALL_CHILD_ARGS ?? '').split(' ').filter(Boolean),
      });
      try {
        const start: StallChildStart = {
          apiservers: servers.map((s) => ({ name: s.name, url: s.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } })),
          sliceBudgetMs: budget,
        };
        const { port } = await child.call<{ port: number }>('start', start);
        progress(`(f) ${arm}: synced; one apiserver's document changes`);
        windows.push(await measureChange(arm, 'one apiserver', port, child, () => serve([1, 0, 0])));
        progress(`(f) ${arm}: all three documents change at once`);
        windows.push(await measureChange(arm, 'all three at once', port, child, () => serve([0, 1, 1])));
        rss.push(`${arm}: ${fmt((await child.call<StallChildStatus>('status')).rssBytes / 2 ** 20)} MiB`);
      } finally {
        await child.stop();
      }
    }
  } finally {
    await Promise.all(servers.map((s) => s.close()));
  }
  const shipped = windows.filter((w) => !w.arm.startsWith('one slice'));
  const worst = Math.max(...shipped.map((w) => w.max));
  const shippedFailed = shipped.reduce((a, w) => a + w.failed, 0);
  return {
    id: 'f',
    title: 'the request path while a large discovery change is absorbed',
    method:
      `Three apiservers (static HTTPS fakes in the bench process) each list ${fmt(GROUPS * PER_GROUP)} resources (${fmt(docs[0].body.length / 2 ** 20)} MiB of aggregated /apis). ` +
      `skewgate's discovery service (1 s polls), its skew tracking and its ext_proc server run in a child process; the bench sends ${PROBE_RATE} ext_proc requests/s and measures each answer from its due time to the reply (then half-closes, as Envoy does), ` +
      `from 1 s before a change of the documents (every 7th group gains a resource: each changed document is parsed, merged and indexed in full) to 1 s after the child's snapshot shows it. ` +
      'Both arms run the same code in one run, the first with an unbounded slice (the whole computation at once, as before slicing).',
    targets: [
      {
        metric: 'worst ext_proc answer while a 36k-resource change is absorbed (shipped slices)',
        target: `far below the ${MESSAGE_TIMEOUT_MS} ms message timeout`,
        measured: `${fmt(worst)} ms (the worst single answer over ${shipped.length} changes, one measurement each); ${shippedFailed === 0 ? 'no probe without a reply' : `${shippedFailed} probes without a reply`}`,
        met: worst < MESSAGE_TIMEOUT_MS / 5 && shippedFailed === 0,
      },
    ],
    tables: [
      {
        headers: [
          'arm',
          'change',
          'probes',
          'p50 ms',
          'p99 ms',
          'max ms',
          `> ${MESSAGE_TIMEOUT_MS} ms`,
          'no reply',
          "child's event-loop delay max ms",
          'absorbed after ms',
        ],
        rows: windows.map((w) => [
          w.arm,
          w.change,
          String(w.probes),
          fmt(w.p50),
          fmt(w.p99),
          fmt(w.max),
          String(w.overTimeout),
          w.failed === 0 ? '0' : `${w.failed} (${formatCounts(w.failures)})`,
          fmt(w.loopDelayMaxMs),
          fmt(w.absorbMs),
        ]),
      },
    ],
    notes: [`Child RSS after both changes: ${rss.join('; ')}.`, 'Target: the worst answer below a fifth of the message timeout.'],
  };
}
