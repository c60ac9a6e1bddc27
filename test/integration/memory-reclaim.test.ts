// src/memory/ for real: a discovery service (its fetch stubbed, its timers real) whose one
// apiserver's /apis drops from a large view to a small one, followed as serve follows it
// (reclaimOnChange), with V8's own full collection: collected twice, logged, the heap in use down.
import t from 'tap';
import { pino } from 'pino';
import type { FetchLike, FetchResponseLike } from '../../src/kube/transport.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import { MEDIA_AGGREGATED_V2 } from '../../src/constants.js';
import { RECLAIM_MIN_DROP } from '../../src/memory/core/reclaim.js';
import { reclaimOnChange } from '../../src/memory/reclaimer.js';
import { eventually } from '../helpers/http.js';

const LARGE = 3 * RECLAIM_MIN_DROP;
const SMALL = 40;

/** An aggregated /apis of `n` CRD-like resources, 50 to a group. */
function apisOf(n: number, tag: string): string {
  const groups = Array.from({ length: Math.ceil(n / 50) }, (_, g) => ({
    metadata: { name: `g${g}.${tag}.example.com` },
    versions: [
      {
        version: 'v1',
        freshness: 'Current',
        resources: Array.from({ length: Math.min(50, n - g * 50) }, (_, r) => ({
          resource: `kind${g}x${r}s`,
          responseKind: { group: '', version: '', kind: `Kind${g}x${r}` },
          scope: 'Namespaced',
          singularResource: `kind${g}x${r}`,
          verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
        })),
      },
    ],
  }));
  return JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items: groups });
}

function respond(status: number, body: string, etag: string | null, type = MEDIA_AGGREGATED_V2): FetchResponseLike {
  const h: Record<string, string> = { 'content-type': type, ...(etag ? { etag } : {}) };
  const bytes = new TextEncoder().encode(body);
  return {
    status,
    statusText: '',
    headers: { get: (n: string) => h[n.toLowerCase()] ?? null },
    body: (async function* () {
      for (let i = 0; i < bytes.length; i += 16 * 1024) yield bytes.subarray(i, i + 16 * 1024);
    })(),
    text: async () => body,
  };
}

t.test('a large view dropped: two real collections, logged, and the heap in use falls', async (t) => {
  const EMPTY = JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items: [] });
  let apis = { body: apisOf(LARGE, 'a'), etag: '"large"' };
  const fetchImpl: FetchLike = async (url, init) => {
    const path = new URL(url).pathname;
    if (path === '/readyz') return respond(200, 'ok', null, 'text/plain');
    if (path === '/openapi/v3') return respond(404, '{}', null, 'application/json');
    const a = path === '/api' ? { body: EMPTY, etag: '"api"' } : apis;
    if (init.headers['if-none-match'] === a.etag) return respond(304, '', a.etag);
    return respond(200, a.body, a.etag);
  };
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  const svc = new DiscoveryService(
    {
      apiservers: [{ name: 's', url: 'https://127.0.0.1:6443' }],
      discovery: { interval: 200, timeout: 5000, watch: false, staleAfter: 60_000, identityLeaseLiveness: 60_000 },
    },
    { fetchImpl, logger },
  );
  const reclaim = reclaimOnChange(svc, { logger, delayMs: 100 });
  t.teardown(async () => {
    reclaim.close();
    await svc.close();
  });
  await svc.start();
  t.equal(svc.current().servers[0]?.view?.resources.size, LARGE, 'the large view is held');

  apis = { body: apisOf(SMALL, 'b'), etag: '"small"' };
  await eventually('the small view', () => svc.current().servers[0]?.view?.resources.size === SMALL, 30_000);
  await eventually('the collections', () => lines.some((l) => l.msg === 'memory given back: the views shrank'), 30_000);
  const line = lines.find((l) => l.msg === 'memory given back: the views shrank')!;
  t.match(line, { reason: 'shrank', from: LARGE, to: SMALL });
  t.equal((line.pausesMs as number[]).length, 2, 'two collections');
  const before = line.heapUsedBefore as number;
  const after = line.heapUsedAfter as number;
  t.ok(
    before - after > 5 * 2 ** 20,
    `the heap in use fell by more than 5 MiB: ${(before / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MiB`,
  );
  t.equal(lines.filter((l) => l.msg === 'memory given back: the views shrank').length, 1, 'once for one drop');
});
