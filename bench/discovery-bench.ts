// (d) The peer-aggregated GET /apis: what a merge costs (once per change of the healthy servers'
// views) and what answering costs per request (a cached lookup). Real documents: the nopeer /apis
// of three lab kube-apiservers (v1.35.4 and two v1.36.3, test/fixtures/peer-discovery); and the
// same with 250 CRD-like groups each (~5,000 resources), as a large cluster has.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MEDIA_AGGREGATED_V2 } from '../src/constants.js';
import { packageRoot } from '../src/util/package-root.js';
import { computeEtag, discoveryBody, encodeItems, mergePeerDiscovery, type ServerDocument } from '../src/discovery/core/merge.js';
import { deepFreezeJson } from '../src/discovery/core/freeze.js';
import { parseAggregatedDiscovery } from '../src/discovery/core/parse.js';
import { buildDocumentIndex } from '../src/discovery/core/document-index.js';
import { buildSnapshot } from '../src/discovery/core/snapshot.js';
import type { ServerState, Snapshot } from '../src/discovery/core/types.js';
import { responseFor } from '../src/extproc/core/responses.js';
import { createRouter } from '../src/routing/router.js';
import type { Section } from './report.js';
import { fmt, nowNs, percentile } from './stats.js';
import { seededRandom } from './synthetic.js';

/** Folded into so that the JIT cannot drop the timed work. */
export let sink = 0;

type Doc = { kind: string; apiVersion: string; metadata: object; items: { metadata: { name: string }; versions: unknown[] }[] };

function labDocuments(): ServerDocument[] {
  const file = join(packageRoot(), 'test', 'fixtures', 'peer-discovery', 'cases.json');
  const cases = JSON.parse(readFileSync(file, 'utf8')) as Record<string, { servers: { id: string; document: unknown }[] }>;
  const lab = Object.entries(cases).find(([name]) => name.startsWith('lab:'));
  if (!lab) throw new Error(`${file}: no lab case`);
  return lab[1].servers.map((s) => ({ serverId: s.id, document: s.document }));
}

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

/** 250 CRD-like groups of ~20 resources; server `skew` adds a version to every 10th group and a resource to every 7th. */
function withCrds(doc: unknown, skew: number): unknown {
  const rnd = seededRandom(42);
  const base = doc as Doc;
  const groups = [];
  for (let g = 0; g < 250; g++) {
    const n = 12 + Math.floor(rnd() * 16);
    const resources = [];
    for (let r = 0; r < n + (g % 7 === 0 && skew === 2 ? 1 : 0); r++) {
      const kind = `Kind${g}x${r}`;
      resources.push({
        resource: `kind${g}x${r}s`,
        responseKind: { group: '', version: '', kind },
        scope: r % 3 === 0 ? 'Cluster' : 'Namespaced',
        singularResource: `kind${g}x${r}`,
        verbs: VERBS,
        ...(r % 4 === 0 ? { shortNames: [`k${g}x${r}`] } : {}),
        categories: ['all'],
        subresources: [{ subresource: 'status', responseKind: { group: '', version: '', kind }, verbs: ['get', 'patch', 'update'] }],
      });
    }
    const versions = [{ version: 'v1', resources, freshness: 'Current' }];
    if (g % 10 === 0 && skew >= 1) versions.push({ version: 'v1beta1', resources: resources.slice(0, 5), freshness: 'Current' });
    groups.push({ metadata: { name: `g${String(g).padStart(3, '0')}.example.com` }, versions });
  }
  return { ...base, items: [...base.items, ...groups] };
}

const CORE = { kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items: [] };

function snapshotOf(docs: readonly ServerDocument[], now: number): Snapshot {
  const states: ServerState[] = docs.map((d, i) => ({
    name: `apiserver-${i}`,
    url: `https://127.0.0.${i + 1}`,
    view: parseAggregatedDiscovery(CORE, d.document),
    lastSuccessAt: now,
    consecutiveFailures: 0,
    lastError: null,
    ready: true,
  }));
  return buildSnapshot(states, 1);
}

/** Median and p99 of `runs` timings of fn, in ms, after a warm-up. */
function timeMs(fn: () => number, runs: number, warmup = 5): { med: number; p99: number } {
  for (let i = 0; i < warmup; i++) sink ^= fn();
  const t: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = nowNs();
    sink ^= fn();
    t.push((nowNs() - t0) / 1e6);
  }
  const sorted = Float64Array.from(t).sort();
  return { med: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

/** Per-call ns over batches of `size` calls: median and p99 over the batches. */
function timeNs(fn: () => number, size: number, batches: number): { med: number; p99: number } {
  for (let i = 0; i < 50; i++) for (let j = 0; j < size; j++) sink ^= fn();
  const t: number[] = [];
  for (let b = 0; b < batches; b++) {
    const t0 = nowNs();
    for (let j = 0; j < size; j++) sink ^= fn();
    t.push((nowNs() - t0) / size);
  }
  const sorted = Float64Array.from(t).sort();
  return { med: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

export function benchDiscovery(progress: (msg: string) => void): Section {
  const now = Date.now();
  const labDocs = labDocuments();
  const sets = [
    { label: '3 lab apiservers (v1.35.4 + 2 × v1.36.3)', docs: labDocs, runs: 100 },
    {
      label: 'the same + 250 CRD groups each',
      docs: labDocs.map((d, i) => ({ serverId: d.serverId, document: withCrds(d.document, i) })),
      runs: 12,
    },
  ];
  // Frozen copies, as ServerViews hold them; a fresh set per run so that none is decoded yet.
  const frozenCopies = (docs: readonly ServerDocument[]): ServerDocument[] =>
    docs.map((d) => ({ serverId: d.serverId, document: deepFreezeJson(structuredClone(d.document)) }));
  const build = (docs: readonly ServerDocument[]): number => {
    const enc = encodeItems(mergePeerDiscovery(docs));
    return computeEtag(enc).length + Buffer.from(discoveryBody(enc), 'utf8').length;
  };

  const mergeRows: string[][] = [];
  const indexRows: string[][] = [];
  const targets: Section['targets'][number][] = [];
  let realDocs: ServerDocument[] = [];
  for (const set of sets) {
    const bytes = set.docs.reduce((n, d) => n + JSON.stringify(d.document).length, 0);
    const items = mergePeerDiscovery(frozenCopies(set.docs));
    const resources = items.reduce((n, g) => n + (g.versions ?? []).reduce((m, v) => m + (v.resources?.length ?? 0), 0), 0);
    const body = discoveryBody(items).length;
    progress(`(d) merging ${set.label}: ${set.runs} fresh document sets`);
    const fresh = Array.from({ length: set.runs + 3 }, () => frozenCopies(set.docs));
    let i = 0;
    const whole = timeMs(() => build(fresh[i++] as ServerDocument[]), set.runs, 3);
    const one = fresh[0] as ServerDocument[];
    const again = timeMs(() => build(one), set.runs, 3);
    const encode = timeMs(
      () => {
        const enc = encodeItems(items);
        return computeEtag(enc).length + discoveryBody(enc).length;
      },
      set.runs,
      3,
    );
    if (set.docs === labDocs) realDocs = one;
    // The index of whole documents (legacy discovery, OpenAPI) is built in the same change.
    const states = snapshotOf(set.docs, now).servers;
    const index = timeMs(() => buildDocumentIndex(states).scopes.size, set.runs, 3);
    indexRows.push([set.label, String(resources), `${fmt(index.med)} ms`, `${fmt(index.p99)} ms`]);
    mergeRows.push([
      set.label,
      `${(bytes / 1024).toFixed(0)} KiB`,
      String(resources),
      `${(body / 1024).toFixed(0)} KiB`,
      `${fmt(whole.med)} ms`,
      `${fmt(whole.p99)} ms`,
      `${fmt(again.med)} ms`,
      `${fmt(encode.med)} ms`,
    ]);
    targets.push({
      metric: `merge + ETag + body, ${set.label}, all documents new (median)`,
      target: '—',
      measured: `${fmt(whole.med)} ms`,
      met: null,
    });
  }

  progress('(d) timing the request path');
  const snap = snapshotOf(realDocs, now);
  const router = createRouter({ current: () => snap }, { staleAfterMs: 180_000, retryAfterSeconds: 1, now: () => now });
  const headers = new Map([
    ['authorization', 'Bearer x'],
    ['accept', `${MEDIA_AGGREGATED_V2},application/json`],
  ]);
  const first = router.route('GET', '/apis', headers);
  if (first.decision.outcome !== 'discovery')
    throw new Error(`expected the discovery outcome, got ${first.decision.outcome}/${first.decision.reason}`);
  const etag = first.decision.document.quotedEtag;
  const revalidate = new Map([...headers, ['if-none-match', etag]]);
  const resourceHeaders = new Map([
    ['authorization', 'Bearer x'],
    ['accept', 'application/json'],
  ]);
  const served = timeNs(
    () => {
      const r = router.route('GET', '/apis', headers);
      const reply = responseFor(r, 1);
      return 'immediate_response' in reply ? 1 : 0;
    },
    1000,
    300,
  );
  const notModified = timeNs(
    () => {
      const r = router.route('GET', '/apis', revalidate);
      return r.decision.reason.length + ('immediate_response' in responseFor(r, 1) ? 1 : 0);
    },
    1000,
    300,
  );
  const legacyDocument = timeNs(() => router.route('GET', '/apis/apps/v1', resourceHeaders).decision.candidates.length, 1000, 300);
  const resource = timeNs(
    () => router.route('GET', '/apis/apps/v1/namespaces/default/deployments', resourceHeaders).decision.candidates.length,
    1000,
    300,
  );
  // A new snapshot with the same views (the usual 304 poll): buildSnapshot compares, does not merge.
  const polls = Array.from({ length: 64 }, (_, i) => snap.servers.map((s) => ({ ...s, lastSuccessAt: now + i })));
  let p = 0;
  const samePoll = timeNs(
    () => (buildSnapshot(polls[p++ % polls.length] as ServerState[], p + 2, snap).peerDiscovery === snap.peerDiscovery ? 1 : 0),
    64,
    500,
  );
  if (buildSnapshot(polls[0] as ServerState[], 2, snap).peerDiscovery !== snap.peerDiscovery)
    throw new Error('a poll with unchanged views rebuilt the document');

  const us = (ns: number): string => `${fmt(ns / 1000)} µs`;
  targets.push(
    {
      metric: 'GET /apis answered (route + ImmediateResponse), median',
      target: '≤ 2 µs, no merge, no I/O',
      measured: us(served.med),
      met: served.med <= 2000,
    },
    { metric: 'GET /apis with a matching If-None-Match (304), median', target: '—', measured: us(notModified.med), met: null },
  );
  return {
    id: 'd',
    title: 'peer-aggregated /apis: merge cost and per-request cost',
    method:
      'The whole build of the cached document (`mergePeerDiscovery`, the Go-compatible encoding, the SHA-512 ETag, the body Buffer) is timed in-process on the real nopeer `/apis` documents of three lab kube-apiservers ' +
      '(test/fixtures/peer-discovery/cases.json) and on the same documents with 250 CRD-like groups added to each (every 10th with an extra version on two servers, every 7th with an extra resource on one), frozen as ServerViews hold them; ' +
      '"all new" uses a fresh copy of every document per run, "decoded" the same documents again. ' +
      "The request path is the real `createRouter(...).route()` plus `responseFor()` (the ImmediateResponse) for `GET /apis` with kubectl's Accept, the document having been built when the snapshot was published; timed in batches of 1,000 calls.",
    targets,
    tables: [
      {
        caption:
          "Once per change of a healthy server's view or of readiness: the whole build (merge, Go-compatible encoding, SHA-512 ETag, body Buffer) with every document new, and with the documents already decoded (a readiness change; an unchanged view's document is decoded once):",
        headers: [
          'Servers',
          'input JSON',
          'merged resources',
          'body',
          'all new: median',
          'all new: p99',
          'decoded: median',
          'encode + ETag only',
        ],
        rows: mergeRows,
      },
      {
        caption:
          'In the same change, the index of whole documents that routes legacy discovery and OpenAPI (`buildDocumentIndex`: every scope, which server holds which):',
        headers: ['Servers', 'resources', 'median', 'p99'],
        rows: indexRows,
      },
      {
        caption: 'Per request (batch time / 1,000; median and p99 over batches):',
        headers: ['Call', 'median', 'p99'],
        rows: [
          ['route() + responseFor(): GET /apis → 200 with the cached body', us(served.med), us(served.p99)],
          ['route() + responseFor(): GET /apis, If-None-Match → 304', us(notModified.med), us(notModified.p99)],
          [
            'route(): GET /apis/apps/v1, a legacy discovery document (which apiserver holds it whole)',
            us(legacyDocument.med),
            us(legacyDocument.p99),
          ],
          ['route(): a resource request, for comparison', us(resource.med), us(resource.p99)],
          ['buildSnapshot on a poll with unchanged views (each discovery poll: the merge is reused)', us(samePoll.med), us(samePoll.p99)],
        ],
      },
    ],
    notes: [
      "The document is merged when discovery publishes a snapshot in which a view object or a readiness changed (the router subscribes to snapshot changes); a poll answered 304 by every apiserver only compares the servers' views and readiness with the last build.",
      'Serving hands Envoy the same Buffer every time; the body is never re-serialised per request.',
    ],
  };
}
