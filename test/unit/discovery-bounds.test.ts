// Bounds on the discovery documents: the pure rules (tables), then the service's schedule with a
// stubbed fetch and a fake clock — a bad document costs 304s, full downloads back off, readiness
// is probed every round, bloated documents are warned of once.
import t from 'tap';
import { pino, type Logger } from 'pino';
import { type FetchLike, type FetchResponseLike, countedResponse } from '../../src/kube/transport.js';
import { bloatChange, bloatThreshold, downloadBackoffMs } from '../../src/discovery/core/document-bounds.js';
import { contentLength, tooLargeMessage } from '../../src/kube/core/bounds.js';
import { type DiscoveryConfig } from '../../src/discovery/options.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import { type DiscoveryRoundEvent } from '../../src/discovery/core/events.js';
import { MEDIA_AGGREGATED_V2 } from '../../src/constants.js';
import { installFakeClock } from '../helpers/fake-clock.js';

t.test('downloadBackoffMs: the first failure is free, then the interval doubling, at most the maximum', async (t) => {
  const cases: [failures: number, interval: number, max: number, want: number][] = [
    [0, 1000, 30_000, 0],
    [1, 1000, 30_000, 0],
    [2, 1000, 30_000, 1000],
    [3, 1000, 30_000, 2000],
    [4, 1000, 30_000, 4000],
    [6, 1000, 30_000, 16_000],
    [7, 1000, 30_000, 30_000],
    [1000, 1000, 30_000, 30_000],
    // A maximum below the interval: never less than the interval.
    [2, 60_000, 30_000, 60_000],
    [9, 60_000, 30_000, 60_000],
    [3, 100, 800, 200],
    [5, 100, 800, 800],
  ];
  for (const [f, interval, max, want] of cases)
    t.equal(downloadBackoffMs(f, interval, max), want, `f=${f} interval=${interval} max=${max}`);
});

t.test('contentLength reads a plain decimal only', async (t) => {
  const cases: [string | null, number | null][] = [
    [null, null],
    ['0', 0],
    ['52428800', 52_428_800],
    [' 12 ', 12],
    ['-1', null],
    ['1e6', null],
    ['12, 12', null],
    ['', null],
    ['99999999999999999999', null],
  ];
  for (const [header, want] of cases) t.equal(contentLength(header), want, JSON.stringify(header));
});

t.test('tooLargeMessage names the URL, the key and the cap, and what showed it', async (t) => {
  t.equal(
    tooLargeMessage('GET', 'https://10.0.0.1:6443/apis', 33_554_432, { contentLength: 52_428_800 }),
    'GET https://10.0.0.1:6443/apis: the body is larger than discovery.maxDocumentBytes (33554432 bytes): ' +
      'its Content-Length is 52428800 bytes, not read; raise discovery.maxDocumentBytes if the document is genuine',
  );
  t.match(tooLargeMessage('GET', 'https://h/api', 100, { read: 164 }), /: the download was stopped after 164 bytes; raise/);
});

t.test('bloatThreshold and bloatChange: a flag changes only on a known size crossing half the cap', async (t) => {
  t.equal(bloatThreshold(32 * 1024 * 1024), 16 * 1024 * 1024);
  t.equal(bloatThreshold(101), 50);
  const none: ReadonlySet<string> = new Set();
  const a = bloatChange(
    none,
    new Map([
      ['/apis', 60],
      ['/api', 10],
    ]),
    50,
  );
  t.same([...a.flagged], ['/apis']);
  t.same(a.grew, [['/apis', 60]]);
  t.same(a.shrank, []);
  const b = bloatChange(
    a.flagged,
    new Map([
      ['/apis', 70],
      ['/api', 10],
    ]),
    50,
  );
  t.equal(b.flagged, a.flagged, 'still bloated: the same set, nothing to say');
  t.same([b.grew, b.shrank], [[], []]);
  const c = bloatChange(a.flagged, new Map([['/api', 10]]), 50);
  t.equal(c.flagged, a.flagged, 'a document not read keeps its flag');
  const d = bloatChange(a.flagged, new Map([['/apis', 50]]), 50);
  t.same([...d.flagged], [], 'at the threshold: not bloated');
  t.same(d.shrank, [['/apis', 50]]);
});

t.test('countedResponse reports the bytes once, however the body ends', async (t) => {
  const res = (parts: string[]): FetchResponseLike => ({
    status: 200,
    statusText: '',
    headers: { get: () => null },
    body: (async function* () {
      for (const p of parts) yield new TextEncoder().encode(p);
    })(),
    text: async () => parts.join(''),
  });
  const seen: number[] = [];
  const whole = countedResponse(res(['ab', 'cde']), (n) => seen.push(n));
  for await (const chunk of whole.body ?? []) void chunk;
  t.same(seen, [5], 'read to the end');
  seen.length = 0;
  const early = countedResponse(res(['ab', 'cde', 'fgh']), (n) => seen.push(n));
  for await (const chunk of early.body ?? []) if (chunk.byteLength === 3) break;
  t.same(seen, [5], 'left early: what was read');
  seen.length = 0;
  const unread = countedResponse(res(['ab']), (n) => seen.push(n));
  await unread.body?.[Symbol.asyncIterator]().return?.();
  await unread.body?.[Symbol.asyncIterator]().return?.();
  t.same(seen, [0], 'never read, told twice: once, 0 bytes');
  seen.length = 0;
  t.equal(await countedResponse(res(['é', 'x']), (n) => seen.push(n)).text(), 'éx');
  t.same(seen, [3], 'text(): its UTF-8 bytes');
});

// ------------------------------------------------------------------------------------------------
// The service, with a stubbed fetch.

const enc = new TextEncoder();
const EMPTY_LIST = JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items: [] });

interface Answer {
  status: number;
  body?: string;
  etag?: string;
  contentType?: string;
  contentLength?: boolean;
}

/** One stubbed response; `onRead` is called when its body is first pulled (a download began). */
function respond(a: Answer, onRead: () => void): FetchResponseLike {
  const h: Record<string, string> = { 'content-type': a.contentType ?? MEDIA_AGGREGATED_V2 };
  if (a.etag) h['etag'] = a.etag;
  if (a.contentLength) h['content-length'] = String(Buffer.byteLength(a.body ?? ''));
  const body = a.body ?? '';
  return {
    status: a.status,
    statusText: '',
    headers: { get: (n: string) => h[n.toLowerCase()] ?? null },
    body: (async function* () {
      onRead();
      // Several chunks, as a real body comes.
      const bytes = enc.encode(body);
      for (let i = 0; i < bytes.length; i += 16 * 1024) yield bytes.subarray(i, i + 16 * 1024);
    })(),
    text: async () => body,
  };
}

interface Log {
  readonly level: number;
  readonly msg: string;
  readonly [k: string]: unknown;
}

function capture(): { logger: Logger; lines: Log[] } {
  const lines: Log[] = [];
  const logger: Logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Log) });
  return { logger, lines };
}

function config(d: Partial<DiscoveryConfig['discovery']> = {}): DiscoveryConfig {
  return {
    apiservers: [{ name: 's', url: 'https://127.0.0.1:6443' }],
    discovery: { interval: 1000, timeout: 500, watch: false, staleAfter: 3000, identityLeaseLiveness: 60_000, ...d },
  };
}

interface Seen {
  readonly at: number;
  readonly path: string;
  readonly ifNoneMatch: string | null;
}

t.test('service: an invalid /apis with an ETag costs a 304 per round; /readyz every round; a fix is read at once', async (t) => {
  const clock = installFakeClock(t);
  const seen: Seen[] = [];
  const reads: Seen[] = [];
  let apis: Answer = { status: 200, body: EMPTY_LIST, etag: '"good-1"' };
  let ready = true;
  const fetchImpl: FetchLike = async (url, init) => {
    const path = new URL(url).pathname;
    const s = { at: clock.now(), path, ifNoneMatch: init.headers['if-none-match'] ?? null };
    seen.push(s);
    const read = (): void => void reads.push(s);
    if (path === '/readyz') return respond({ status: ready ? 200 : 500, body: 'ok', contentType: 'text/plain' }, () => undefined);
    if (path === '/openapi/v3') return respond({ status: 404, body: '{}', contentType: 'application/json' }, () => undefined);
    const a = path === '/api' ? { status: 200, body: EMPTY_LIST, etag: '"api-1"' } : apis;
    if (a.etag && s.ifNoneMatch === a.etag) return respond({ status: 304, etag: a.etag }, () => undefined);
    return respond(a, read);
  };
  const { logger, lines } = capture();
  const svc = new DiscoveryService(config(), { fetchImpl, now: clock.now, logger });
  t.teardown(() => svc.close());
  await svc.start();
  const good = svc.current().servers[0]?.view;
  t.ok(good, 'a first good view');

  apis = { status: 200, body: EMPTY_LIST.slice(0, 20), etag: '"bad-1"' };
  seen.length = 0;
  reads.length = 0;
  await clock.advance(10_000);
  const st = svc.current().servers[0];
  t.equal(st?.view, good, 'the last good view is kept');
  t.match(st?.lastError, /malformed discovery document \/apis: not valid JSON/);
  const rounds = seen.filter((s) => s.path === '/readyz').length;
  t.ok(rounds >= 10, `still a round at least every interval: ${rounds} in 10 s`);
  t.equal(st?.consecutiveFailures, rounds, 'every round since failed');
  t.same(
    reads.filter((r) => r.path === '/apis').map((r) => r.at),
    [1000],
    'the bad /apis was downloaded once, at the first round after it changed',
  );
  const later = seen.filter((s) => s.path === '/apis' && s.at > 1000);
  t.equal(later.length, rounds - 1, 'asked every later round…');
  t.ok(
    later.every((s) => s.ifNoneMatch === '"bad-1"'),
    '…with the bad ETag (never the good one): a 304 re-states the failure',
  );
  t.equal(lines.filter((l) => l.msg === 'discovery failing').length, 1, 'logged once, not per round');

  // Readiness is followed while it fails.
  ready = false;
  await clock.advance(1000);
  t.equal(svc.current().servers[0]?.ready, false, 'a failing readiness is seen within a round');
  ready = true;

  // A watch event's refresh() still goes through at once: a 304, no download.
  seen.length = 0;
  svc.refresh();
  await clock.flush();
  t.same(
    seen.filter((s) => s.path === '/apis').map((s) => [s.at, s.ifNoneMatch]),
    [[clock.now(), '"bad-1"']],
    'refresh(): asked at once',
  );

  // Fixed: the next round (within the retry pace) downloads and recovers.
  const fixedAt = clock.now();
  apis = { status: 200, body: EMPTY_LIST, etag: '"good-2"' };
  await clock.advance(1000);
  const back = svc.current().servers[0];
  t.equal(back?.consecutiveFailures, 0, 'recovered');
  t.ok((back?.lastSuccessAt ?? 0) - fixedAt <= 1000, `within the interval of the fix (${(back?.lastSuccessAt ?? 0) - fixedAt} ms)`);
  t.equal(lines.filter((l) => l.msg === 'discovery recovered').length, 1);
});

t.test('service: a document that changes and fails every time is downloaded at growing gaps, at most the maximum', async (t) => {
  const clock = installFakeClock(t);
  const downloads: number[] = [];
  const probes: number[] = [];
  let n = 0;
  const fetchImpl: FetchLike = async (url, init) => {
    const path = new URL(url).pathname;
    if (path === '/readyz') {
      probes.push(clock.now());
      return respond({ status: 200, body: 'ok', contentType: 'text/plain' }, () => undefined);
    }
    if (path === '/openapi/v3' || path === '/version')
      return respond({ status: 404, body: '{}', contentType: 'application/json' }, () => undefined);
    if (path === '/api') {
      if (init.headers['if-none-match'] === '"api-1"') return respond({ status: 304, etag: '"api-1"' }, () => undefined);
      return respond({ status: 200, body: EMPTY_LIST, etag: '"api-1"' }, () => undefined);
    }
    // A hostile /apis: a new ETag on every answer, never valid.
    n++;
    return respond({ status: 200, body: `{"items": [${n}`, etag: `"r${n}"` }, () => void downloads.push(clock.now()));
  };
  const svc = new DiscoveryService(config({ maxDownloadBackoff: 30_000 }), { fetchImpl, now: clock.now });
  t.teardown(() => svc.close());
  await svc.start();
  await clock.advance(70_000);
  // Rounds go on at the retry pace (250, 500, then every 1000 ms); the downloads do not: the
  // second failure waits 1 s, then 2, 4, 8, 16, then 30 s (the maximum).
  t.same(downloads, [0, 250, 1750, 3750, 7750, 15_750, 31_750, 61_750], `downloads at ${downloads.join(', ')} ms`);
  const gaps = probes.slice(1).map((p, i) => p - (probes[i] ?? 0));
  t.ok(
    gaps.every((g) => g <= 1000),
    `/readyz probed every round, at most an interval apart (${probes.length} probes)`,
  );
  t.ok(probes.length >= 70, `${probes.length} probes in 70 s`);
});

t.test('service: a bloated document is warned of once, gauged per round, and a document past the cap fails the round', async (t) => {
  const clock = installFakeClock(t);
  // A valid list padded with whitespace to a size.
  const padded = (bytes: number): string => EMPTY_LIST.slice(0, -1) + ' '.repeat(bytes - EMPTY_LIST.length) + '}';
  let apis = padded(60_000);
  let etag = '"a"';
  const fetchImpl: FetchLike = async (url, init) => {
    const path = new URL(url).pathname;
    if (path === '/readyz') return respond({ status: 200, body: 'ok', contentType: 'text/plain' }, () => undefined);
    if (path === '/openapi/v3') return respond({ status: 404, body: '{}', contentType: 'application/json' }, () => undefined);
    const a = path === '/api' ? { body: EMPTY_LIST, etag: '"api-1"' } : { body: apis, etag };
    if (init.headers['if-none-match'] === a.etag) return respond({ status: 304, etag: a.etag }, () => undefined);
    return respond({ status: 200, body: a.body, etag: a.etag, contentLength: true }, () => undefined);
  };
  const { logger, lines } = capture();
  const events: DiscoveryRoundEvent[] = [];
  const svc = new DiscoveryService(config({ maxDocumentBytes: 100_000 }), { fetchImpl, now: clock.now, logger });
  t.teardown(() => svc.close());
  svc.onRound((e) => events.push(e));
  await svc.start();
  const bloatWarnings = (): Log[] => lines.filter((l) => l.msg.startsWith('discovery document bloated'));
  t.match(bloatWarnings(), [{ server: 's', document: '/apis', bytes: 60_000, warnBytes: 50_000, maxDocumentBytes: 100_000 }]);
  t.match(bloatWarnings()[0]?.msg, /more than half of discovery\.maxDocumentBytes/);
  t.same([...(events.at(-1)?.documentBytes ?? [])].sort(), [
    ['/api', EMPTY_LIST.length],
    ['/apis', 60_000],
  ]);
  await clock.advance(3000);
  apis = padded(70_000);
  etag = '"b"';
  await clock.advance(3000);
  t.equal(bloatWarnings().length, 1, 'once while it stays bloated: 304s and a bigger document alike');
  t.equal(events.at(-1)?.documentBytes?.get('/apis'), 70_000, 'the gauge follows the size');

  apis = padded(1000);
  etag = '"c"';
  await clock.advance(1000);
  t.match(
    lines.filter((l) => l.msg === 'discovery document no longer bloated'),
    [{ document: '/apis', bytes: 1000 }],
  );

  apis = padded(150_000);
  etag = '"d"';
  await clock.advance(1000);
  const st = svc.current().servers[0];
  t.match(
    st?.lastError,
    /^GET https:\/\/127\.0\.0\.1:6443\/apis: the body is larger than discovery\.maxDocumentBytes \(100000 bytes\): its Content-Length is 150000 bytes, not read/,
  );
  t.ok(st?.view, 'the last good view is kept');
  t.equal(events.at(-1)?.documentBytes?.get('/apis'), 150_000, 'a too large document is gauged at its declared size');
  t.equal(bloatWarnings().length, 2, 'and flagged');
  t.equal(lines.filter((l) => l.msg === 'discovery failing').length, 1);
});

t.test(
  'service: a view past discovery.maxResources fails the round as too large, the last good view kept; back under it, taken',
  async (t) => {
    const clock = installFakeClock(t);
    const resources = (n: number): unknown[] =>
      Array.from({ length: n }, (_, i) => ({ resource: `r${i}s`, scope: 'Cluster', verbs: ['get'] }));
    const listOf = (n: number): string =>
      JSON.stringify({
        kind: 'APIGroupDiscoveryList',
        apiVersion: 'apidiscovery.k8s.io/v2',
        metadata: {},
        items: [{ metadata: { name: 'x.io' }, versions: [{ version: 'v1', resources: resources(n) }] }],
      });
    let apis = { body: listOf(900), etag: '"small"' };
    const seen: string[] = [];
    const fetchImpl: FetchLike = async (url, init) => {
      const path = new URL(url).pathname;
      if (path === '/readyz') return respond({ status: 200, body: 'ok', contentType: 'text/plain' }, () => undefined);
      if (path === '/openapi/v3') return respond({ status: 404, body: '{}', contentType: 'application/json' }, () => undefined);
      const a = path === '/api' ? { body: EMPTY_LIST, etag: '"api-1"' } : apis;
      if (init.headers['if-none-match'] === a.etag) {
        seen.push(`${path} 304`);
        return respond({ status: 304, etag: a.etag }, () => undefined);
      }
      return respond({ status: 200, body: a.body, etag: a.etag }, () => seen.push(`${path} 200`));
    };
    const { logger } = capture();
    const events: DiscoveryRoundEvent[] = [];
    const svc = new DiscoveryService(config({ maxResources: 1000 }), { fetchImpl, now: clock.now, logger });
    t.teardown(() => svc.close());
    svc.onRound((e) => events.push(e));
    await svc.start();
    t.equal(svc.current().servers[0]?.view?.resources.size, 900, '901 entries: taken');

    apis = { body: listOf(1000), etag: '"big"' };
    await clock.advance(1000);
    const st = svc.current().servers[0];
    t.match(st, { lastErrorCode: 'SKEWGATE_ERR_DISCOVERY_DOCUMENT', lastErrorKind: 'too_large', consecutiveFailures: 1 });
    t.match(
      st?.lastError,
      /\/apis.*lists more than 1,000 resources and group\/versions \(discovery\.maxResources\); raise it if the cluster is genuine/,
    );
    t.equal(st?.view?.resources.size, 900, 'the last good view is kept');
    seen.length = 0;
    await clock.advance(1000);
    t.ok(seen.includes('/apis 304'), 'unchanged, it costs a 304 that re-states the refusal');
    t.notOk(seen.includes('/apis 200'), 'and is not downloaded again');
    t.equal(svc.current().servers[0]?.lastErrorKind, 'too_large');

    apis = { body: listOf(998), etag: '"fits"' };
    await clock.advance(3000);
    t.match(svc.current().servers[0], { consecutiveFailures: 0, lastError: null });
    t.equal(svc.current().servers[0]?.view?.resources.size, 998, '999 entries: under the bound again, taken');
  },
);
